/* gw_json_render must write exactly what jansson's JSON_COMPACT encoder writes, only faster. */
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "core/json_out.h"
#include "gw_test.h"

static void expect_same_as_jansson(json_t *value)
{
    char *want = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);
    size_t len = gw_json_render(value, NULL);
    char *got = malloc(len + 1);

    cr_assert_eq(gw_json_render(value, got), len);
    got[len] = '\0';
    cr_expect_eq(len, strlen(want), "length %zu, jansson %zu", len, strlen(want));
    cr_expect_str_eq(got, want);
    free(got);
    free(want);
    json_decref(value);
}

TestSuite(json_out, .init = gw_test_init);

Test(json_out, every_kind_of_value)
{
    expect_same_as_jansson(json_pack("{s:s, s:I, s:b, s:b, s:n, s:f, s:[i, s, {}], s:{}}", "type", "stdout", "timestamp",
                                     (json_int_t)1795323510458, "t", 1, "f", 0, "nothing", "real", 1.5, "list", -3, "x", "empty",
                                     "obj"));
    expect_same_as_jansson(json_integer(-9223372036854775807LL - 1));
    expect_same_as_jansson(json_real(0.1));
    expect_same_as_jansson(json_array());
}

Test(json_out, strings_escape_as_jansson_does)
{
    static const char every_control[] = "\x01\x02\x03\x04\x05\x06\x07\b\t\n\x0b\f\r\x0e\x0f\x10\x1f\x7f";
    expect_same_as_jansson(json_string("quote \" backslash \\ slash / tab \t newline \n"));
    expect_same_as_jansson(json_string(every_control));
    expect_same_as_jansson(json_string("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe2\x80\xa8"));
    expect_same_as_jansson(json_stringn("nul\0inside", 10));
    expect_same_as_jansson(json_pack("{s:s}", "key \"with\" \n escapes", "v"));
}

Test(json_out, a_large_stream_text)
{
    size_t n = 3 * 1024 * 1024;
    char *text = malloc(n);
    for (size_t i = 0; i != n; ++i)
        text[i] = i % 100 == 99 ? '\n' : (char)('a' + i % 26);
    expect_same_as_jansson(json_pack("{s:s, s:s%}", "type", "stdout", "text", text, n));
    free(text);
}

Test(json_out, escapes_at_every_offset_of_a_bulk_scan)
{
    static const char *const specials[] = {"\n", "\"", "\\", "\x01", "\x1f", "\x7f", "\xc3\xa9", "\xe2\x80\xa8"};
    char text[48];

    for (size_t k = 0; k != sizeof(specials) / sizeof(specials[0]); ++k) {
        size_t n = strlen(specials[k]);
        for (size_t at = 0; at + n <= sizeof(text); ++at) {
            memset(text, 'x', sizeof(text));
            memcpy(text + at, specials[k], n);
            expect_same_as_jansson(json_stringn(text, sizeof(text)));
        }
    }
}

/* Text quoted from a client: valid UTF-8 as is; a character cut by a printf precision, or bytes that are no UTF-8, become
 * U+FFFD. Never NULL: json_string's NULL for such text, sent as a message, crashed kgate. */
Test(json_out, text_that_is_no_utf8_becomes_a_string_with_replacement_characters)
{
    static const struct {
        const char *in;
        size_t len;
        const char *want;
    } cases[] = {
        {"caf\xc3\xa9", 5, "caf\xc3\xa9"},
        {"caf\xc3", 4, "caf\xef\xbf\xbd"},           /* "%.4s" of "café": its é cut in half */
        {"\xe2\x82", 2, "\xef\xbf\xbd\xef\xbf\xbd"}, /* two bytes of a three-byte character, each replaced */
        {"\xff\xfe ok", 5, "\xef\xbf\xbd\xef\xbf\xbd ok"},
        {"nul\0in", 6, NULL}, /* kept, as json_stringn keeps it */
        {"", 0, ""},
    };

    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        json_t *s = gw_json_text(cases[i].in, cases[i].len);
        cr_assert_not_null(s, "case %zu: NULL", i);
        if (cases[i].want != NULL)
            cr_expect_str_eq(json_string_value(s), cases[i].want, "case %zu", i);
        else
            cr_expect_eq(json_string_length(s), cases[i].len, "case %zu", i);
        json_decref(s);
    }
}

/* A key that is no UTF-8 (a path from a query) is set, made valid: json_object_set_new refused it and the member went missing. */
Test(json_out, a_key_that_is_no_utf8_is_set_with_replacement_characters)
{
    json_t *obj = json_object();

    gw_json_set_text_key(obj, "dir/caf\xe9.txt", 12, json_integer(1));
    gw_json_set_text_key(obj, "ok", 2, json_integer(2));
    cr_expect_eq(json_object_size(obj), 2);
    cr_expect_eq(json_integer_value(json_object_get(obj, "dir/caf\xef\xbf\xbd.txt")), 1);
    cr_expect_eq(json_integer_value(json_object_get(obj, "ok")), 2);
    json_decref(obj);
}

/* What gw_send_error quotes from a client: valid text as it is (NUL bytes too), a byte of no UTF-8 character as U+FFFD. */
Test(json_out, lossy_strings_are_never_null)
{
    json_t *s = gw_json_text("a\0\xc3\xa9", 4);

    cr_assert(json_string_length(s) == 4 && memcmp(json_string_value(s), "a\0\xc3\xa9", 4) == 0);
    json_decref(s);
    s = gw_json_text("x\xc3\"; \xff", 6);
    cr_assert_not_null(s);
    cr_assert_eq(json_string_length(s), 10);
    cr_assert_eq(memcmp(json_string_value(s), "x\xef\xbf\xbd\"; \xef\xbf\xbd", 10), 0);
    json_decref(s);
}
