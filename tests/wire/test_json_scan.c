/* tests/wire/test_json_scan.c: wire_json_scan_stream finds stream text as wire_json_parse would decode it, or declines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "scan_agree.h"
#include "wire_test.h"

TestSuite(json_scan, .init = wire_test_init);

typedef struct st_scan_case_t {
    const char *json;
    size_t len;         /* 0: strlen(json) */
    int simple;         /* what the scan must say */
    size_t decoded_len; /* of "text", when simple */
    const char *name;   /* the scan's name when simple; NULL: none given (escaped) */
} scan_case_t;

/* A literal with a NUL inside, and its length */
#define WITH_NUL(s) s, sizeof(s) - 1

/* Hard cases: every escape, multi-byte and 4-byte characters, surrogates, control bytes, NUL, duplicates. */
static const scan_case_t cases[] = {
    {"{\"name\":\"stdout\",\"text\":\"hello\\n\"}", 0, 1, 6, "stdout"},
    {" \r\n\t{ \"text\" : \"\" , \"name\" : \"stderr\" } \n", 0, 1, 0, "stderr"},
    {"{\"name\":\"stdout\",\"text\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}", 0, 1, 14, "stdout"},
    {"{\"name\":\"stdout\",\"text\":\"\\\"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t\"}", 0, 1, 13, "stdout"},
    {"{\"name\":\"stdout\",\"text\":\"\\u001b[31mred\\u001b[0m\"}", 0, 1, 12, "stdout"},
    {"{\"name\":\"stdout\",\"text\":\"\\u0000nul\\u00e9\\u20AC\\u2028\\ud83d\\ude00\"}", 0, 1, 16, "stdout"},
    {"{\"name\":\"stdout\",\"text\":\"a\",\"name\":\"stderr\"}", 0, 1, 1, "stderr"},
    {"{\"name\":\"std\\u006fut\",\"text\":\"a\"}", 0, 1, 1, NULL},
    {"{\"name\":\"stdout\",\"text\":\"a\",\"extra\":\"b\"}", 0, 1, 1, "stdout"},
    /* valid JSON, but not simple: the slow path decides (a second text: wire_text_scan, which streams the first's head,
     * refuses it too; fuzz_text_scan found the two disagreeing) */
    {"{\"name\":\"stdout\",\"text\":\"a\",\"text\":\"bcd\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"a\",\"n\":1}", 0, 0, 0, NULL},
    /* a member that is no string, replaced by a later string one: the parsed object is all strings, the bytes are not
     * (fuzz_json_in, run long, found scan_agree wanting it simple) */
    {"{\"text\":\"\",\"name\":0,\"name\":\"\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"te\\u0078t\":\"a\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\"}", 0, 0, 0, NULL},
    {"{\"text\":\"a\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":[\"a\"]}", 0, 0, 0, NULL},
    {"{\"name\":null,\"text\":\"a\"}", 0, 0, 0, NULL},
    {"{}", 0, 0, 0, NULL},
    {"[\"name\",\"text\"]", 0, 0, 0, NULL},
    {"\"text\"", 0, 0, 0, NULL},
    /* refused by wire_json_parse: never simple */
    {"{\"name\":\"stdout\",\"text\":\"lone \\ud800 high\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"lone \\udc00 low\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"\\ud800\\u0041\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"\\ud800\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"\\u12\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"\\u12g4\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"\\x\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"\\\xc3\xa9\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"tab\tinside\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"line\nbreak\"}", 0, 0, 0, NULL},
    {WITH_NUL("{\"name\":\"stdout\",\"text\":\"raw\0nul\"}"), 0, 0, NULL},
    {WITH_NUL("{\"name\":\"stdout\",\"text\":\"x\"}\0"), 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"bad \xc3\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"overlong \xc0\xaf\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"surrogate \xed\xa0\x80\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"too big \xf4\x90\x80\x80\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"cut \xf0\x9f\x98\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"a\"", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"a\",}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\" \"text\":\"a\"}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"a\"} {}", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"a\\", 0, 0, 0, NULL},
    {"{\"name\":\"stdout\",\"text\":\"a\\\"}", 0, 0, 0, NULL},
    {"{\"na\xffme\":\"stdout\",\"text\":\"a\"}", 0, 0, 0, NULL},
};

static size_t case_len(const scan_case_t *c)
{
    return c->len != 0 ? c->len : strlen(c->json);
}

Test(json_scan, hard_cases_agree_with_the_parser)
{
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        const scan_case_t *c = &cases[i];
        size_t len = case_len(c);
        char *copy = wire_test_exact_copy(c->json, len);
        wire_stream_fields_t f;
        const char *why = scan_agree(copy, len, &f);
        cr_assert_null(why, "case %zu: %s", i, why);
        cr_assert_eq(wire_json_scan_stream(copy, len, &f), c->simple, "case %zu: %s", i, c->json);
        if (c->simple) {
            cr_assert_eq(f.text_decoded_len, c->decoded_len, "case %zu: decoded length %zu", i, f.text_decoded_len);
            if (c->name == NULL)
                cr_assert_null(f.name, "case %zu", i);
            else
                cr_assert(f.name != NULL && f.name_len == strlen(c->name) && memcmp(f.name, c->name, f.name_len) == 0, "case %zu",
                          i);
        }
        free(copy);
    }
}

/* Every prefix of every case, in a buffer of exactly its size (AddressSanitizer: no read past the end). */
Test(json_scan, every_prefix_agrees_and_reads_nothing_past_the_end)
{
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        size_t len = case_len(&cases[i]);
        for (size_t n = 0; n <= len; ++n) {
            char *copy = wire_test_exact_copy(cases[i].json, n);
            const char *why = scan_agree(copy, n, NULL);
            cr_assert_null(why, "case %zu, %zu bytes: %s", i, n, why);
            free(copy);
        }
    }
}

/* The token is the text as it came, escapes and all, and a long one is found whole. */
Test(json_scan, long_text_token_is_the_bytes_as_sent)
{
    size_t n = (1u << 20) + 3, len;
    char *json = malloc(n + 64), *p;
    wire_stream_fields_t f;

    p = json + sprintf(json, "{\"name\":\"stdout\",\"text\":\"");
    for (size_t i = 0; i != n; ++i)
        *p++ = i % 1000 == 999 ? '\\' : "abcdefghij"[i % 10];
    /* every 1000th byte became a backslash: make each an escaped one ("\\") */
    len = (size_t)(p - json);
    for (size_t i = 0; i != len; ++i)
        if (json[i] == '\\' && i + 1 < len)
            json[++i] = '\\';
    p += sprintf(p, "\"}");
    len = (size_t)(p - json);
    cr_assert_eq(wire_json_scan_stream(json, len, &f), 1);
    cr_assert_null(scan_agree(json, len, NULL));
    cr_assert_eq(f.text, json + strlen("{\"name\":\"stdout\",\"text\":"));
    cr_assert_eq(f.text_len, len - strlen("{\"name\":\"stdout\",\"text\":") - 1);
    cr_assert_lt(f.text_decoded_len, f.text_len - 2);
    free(json);
}
