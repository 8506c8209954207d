/* tests/wire/test_json_bundle.c: wire_json_scan_bundle finds a MIME bundle's values as the kernel wrote them (numbers of any
 * size included), agrees with wire_json_parse wherever that parser accepts, and wire_json_compact makes them one line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "wire/json_in.h"
#include "wire/json_scan.h"
#include "bundle_agree.h"
#include "wire_test.h"

TestSuite(json_bundle, .init = wire_test_init);

static const char *const simple_cases[] = {
    "{\"data\":{\"text/plain\":\"2\"},\"metadata\":{},\"execution_count\":3}",
    "{\"data\": {\"application/json\": {\"n\": "
    "1000000000000000000000000000000000000000000000000000000000000000000000000000000000}}}",
    "{\"data\":{\"application/json\":{\"x\":1.5e+300,\"y\":[-0,0.1,1E-400,true,false,null,\"s\\u00e9\"]}},\"transient\":{}}",
    " \n{ \"metadata\" : {\"a\":[1,2]} ,\n \"data\" : {\n \"text/plain\" : \"a\\nb\" ,\n \"image/png\" : \"iVBORw0\"\n }\n}\n",
    "{\"data\":{\"text/plain\":\"old\"},\"data\":{\"text/html\":\"<b>new</b>\"}}",
    "{\"data\":{}}",
    "{\"data\":{\"application/vnd.vegalite.v4+json\":{\"a\":{\"b\":{\"c\":[[[]]]}},\"k\\\"q\":1}}}",
};

static const char *const declined_cases[] = {
    /* valid, not simple */
    "{\"metadata\":{}}",
    "{\"data\":[]}",
    "{\"data\":\"text\"}",
    "{\"data\":{\"text/plain\":\"a\",\"text/plain\":\"b\"}}",
    "{\"data\":{\"te\\u0078t/plain\":\"a\"}}",
    "{\"d\\u0061ta\":{\"text/plain\":\"a\"}}",
    "[{\"data\":{}}]",
    /* not JSON */
    "{\"data\":{\"a\":01}}",
    "{\"data\":{\"a\":1.}}",
    "{\"data\":{\"a\":.5}}",
    "{\"data\":{\"a\":1e}}",
    "{\"data\":{\"a\":-}}",
    "{\"data\":{\"a\":+1}}",
    "{\"data\":{\"a\":NaN}}",
    "{\"data\":{\"a\":Infinity}}",
    "{\"data\":{\"a\":tru}}",
    "{\"data\":{\"a\":[1,]}}",
    "{\"data\":{\"a\":{\"k\":1,}}}",
    "{\"data\":{\"a\":{\"k\" 1}}}",
    "{\"data\":{\"a\":\"\\ud800\"}}",
    "{\"data\":{\"a\":\"tab\tin\"}}",
    "{\"data\":{\"a\":1},}",
    "{\"data\":{\"a\":1}} x",
    "{\"data\":{\"a\":\"\xc3\"}}",
};

/* Where wire_json_parse accepts the content, every value the scan reports parses to the parsed bundle's member. */
static void assert_agrees(const char *json, size_t len, const wire_bundle_fields_t *f)
{
    json_t *v = wire_json_parse(json, len), *data = json_object_get(v, "data");

    if (v == NULL)
        return; /* beyond what the parser takes (a big integer): the scan alone decides */
    cr_assert(json_is_object(data), "%s", json);
    cr_assert_eq(json_object_size(data), f->count, "%s", json);
    for (size_t i = 0; i != f->count; ++i) {
        char key[64];
        json_t *value = wire_json_parse(f->entries[i].value, f->entries[i].value_len);
        snprintf(key, sizeof(key), "%.*s", (int)f->entries[i].key_len, f->entries[i].key);
        cr_assert_not_null(value, "%s: value %zu", json, i);
        cr_assert(json_equal(value, json_object_get(data, key)), "%s: %s", json, key);
        cr_assert_eq(f->entries[i].is_string, json_is_string(value));
        json_decref(value);
    }
    json_decref(v);
}

Test(json_bundle, simple_bundles_are_found_and_agree_with_the_parser)
{
    for (size_t i = 0; i != sizeof(simple_cases) / sizeof(simple_cases[0]); ++i) {
        size_t len = strlen(simple_cases[i]);
        char *copy = wire_test_exact_copy(simple_cases[i], len);
        wire_bundle_fields_t f;
        cr_assert_eq(wire_json_scan_bundle(copy, len, &f), 1, "case %zu: %s", i, simple_cases[i]);
        assert_agrees(copy, len, &f);
        const char *why = bundle_agree(copy, len);
        cr_assert_null(why, "case %zu: %s: %s", i, simple_cases[i], why);
        free(copy);
    }
}

Test(json_bundle, numbers_keep_the_text_the_kernel_wrote)
{
    const char *json = simple_cases[1];
    wire_bundle_fields_t f;

    cr_assert_null(wire_json_parse(json, strlen(json)), "the parser refuses an integer beyond 64 bits");
    cr_assert_eq(wire_json_scan_bundle(json, strlen(json), &f), 1);
    cr_assert_eq(f.count, 1);
    cr_assert_eq(f.entries[0].key_len, strlen("application/json"));
    cr_assert_eq(f.entries[0].value_len, strlen("{\"n\": 1") + 81 + 1);
    cr_assert_eq(memcmp(f.entries[0].value, "{\"n\": 1000000000", 16), 0);
    cr_assert_eq(wire_json_scan_bundle(simple_cases[2], strlen(simple_cases[2]), &f), 1);
    cr_assert_not_null(memmem(f.entries[0].value, f.entries[0].value_len, "1.5e+300", 8));
    cr_assert_not_null(memmem(f.entries[0].value, f.entries[0].value_len, "1E-400", 6));
}

Test(json_bundle, the_last_data_member_counts_and_line_breaks_are_noted)
{
    wire_bundle_fields_t f;

    cr_assert_eq(wire_json_scan_bundle(simple_cases[4], strlen(simple_cases[4]), &f), 1);
    cr_assert_eq(f.count, 1);
    cr_assert_eq(memcmp(f.entries[0].key, "text/html", 9), 0);
    cr_assert_eq(wire_json_scan_bundle(simple_cases[3], strlen(simple_cases[3]), &f), 1);
    cr_assert_eq(f.count, 2);
    cr_assert(f.entries[0].is_string && !f.entries[0].has_newline, "a line break around a value is not in it");
    cr_assert_eq(wire_json_scan_bundle(simple_cases[2], strlen(simple_cases[2]), &f), 1);
    cr_assert(!f.entries[0].has_newline);
    const char *pretty = "{\"data\":{\"application/json\":{\n  \"a\": [1,\n 2]\n}}}";
    cr_assert_eq(wire_json_scan_bundle(pretty, strlen(pretty), &f), 1);
    cr_assert(f.entries[0].has_newline && !f.entries[0].is_string);
}

Test(json_bundle, what_is_not_simple_or_not_json_is_declined)
{
    for (size_t i = 0; i != sizeof(declined_cases) / sizeof(declined_cases[0]); ++i) {
        size_t len = strlen(declined_cases[i]);
        char *copy = wire_test_exact_copy(declined_cases[i], len);
        wire_bundle_fields_t f;
        cr_assert_eq(wire_json_scan_bundle(copy, len, &f), 0, "case %zu: %s", i, declined_cases[i]);
        free(copy);
    }
}

/* Every prefix in a buffer of exactly its size (AddressSanitizer: nothing read past the end); no proper prefix is simple. */
Test(json_bundle, every_prefix_is_declined_and_reads_nothing_past_the_end)
{
    for (size_t i = 0; i != sizeof(simple_cases) / sizeof(simple_cases[0]); ++i) {
        size_t len = strlen(simple_cases[i]);
        for (size_t n = 0; n < len; ++n) {
            char *copy = wire_test_exact_copy(simple_cases[i], n);
            wire_bundle_fields_t f;
            /* a prefix that only loses trailing white space is still the whole value */
            int whole = strspn(simple_cases[i] + n, " \n") == len - n;
            cr_assert_eq(wire_json_scan_bundle(copy, n, &f), whole, "case %zu, %zu bytes", i, n);
            free(copy);
        }
    }
}

Test(json_bundle, more_members_than_the_bound_are_declined)
{
    char json[WIRE_BUNDLE_MAX_ENTRIES * 16 + 64], *p = json;
    wire_bundle_fields_t f;

    p += sprintf(p, "{\"data\":{");
    for (int i = 0; i <= WIRE_BUNDLE_MAX_ENTRIES; ++i)
        p += sprintf(p, "%s\"k%d\":%d", i != 0 ? "," : "", i, i);
    p += sprintf(p, "}}");
    cr_assert_eq(wire_json_scan_bundle(json, (size_t)(p - json), &f), 0);
}

Test(json_bundle, compact_removes_white_space_outside_strings_only)
{
    const char *src = "{\n  \"a b\": [1, 2],\n  \"q\\\" x\": \"line\\n \\\\\" , \"t\":\ttrue\r\n}";
    const char *want = "{\"a b\":[1,2],\"q\\\" x\":\"line\\n \\\\\",\"t\":true}";
    char out[128];
    size_t n = wire_json_compact(out, src, strlen(src));

    cr_assert_eq(n, strlen(want));
    cr_assert_eq(wire_json_compact(NULL, src, strlen(src)), n);
    cr_assert_eq(memcmp(out, want, n), 0, "%.*s", (int)n, out);
}
