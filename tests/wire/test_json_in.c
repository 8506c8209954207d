/* wire_json_parse must accept exactly what jansson accepts and build equal values. */
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "wire/json_in.h"
#include "wire/text.h"

static void init(void)
{
    wire_global_init();
}

TestSuite(json_in, .init = init);

static json_t *jansson(const char *text, size_t len)
{
    return json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
}

/*
 * Both parsers agree on `len` bytes of `text`: both refuse, or both accept equal values. One
 * deliberate difference: jansson reads a raw NUL byte as the end of its input (and then accepts
 * "4\0junk" as 4); wire_json_parse refuses any raw NUL, which JSON never allows.
 */
static int agree(const char *text, size_t len)
{
    if (memchr(text, '\0', len) != NULL) {
        json_t *got = wire_json_parse(text, len);
        json_decref(got);
        return got == NULL;
    }
    char *exact = malloc(len != 0 ? len : 1); /* exact size: ASan catches a read past the end */
    json_t *want, *got;
    int same;

    memcpy(exact, text, len);
    want = jansson(exact, len);
    got = wire_json_parse(exact, len);
    same = (want == NULL) == (got == NULL) && (want == NULL || json_equal(want, got));
    json_decref(want);
    json_decref(got);
    free(exact);
    return same;
}

static const char *const valid[] = {
    "{}",
    "[]",
    " { \"a\" : [1, -2, 3.5, -0, 0.25e2, 1E-3, true, false, null, \"x\"] } ",
    "{\"header\":{\"msg_id\":\"1\",\"msg_type\":\"stream\"},\"n\":{}}",
    "{\"text\":\"line\\nnext\\ttab \\\"quoted\\\" back\\\\slash \\/ \\b\\f\\r\"}",
    "{\"u\":\"\\u00e9\\u20ac\\ud83d\\ude00\\u0000nul\"}",
    "{\"utf8\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80\"}",
    "{\"dup\":1,\"dup\":2}",
    "{\"big\":9223372036854775807,\"small\":-9223372036854775808}",
    "{\"r\":1e308,\"tiny\":1e-400}",
    "[[[[[[[[[[{}]]]]]]]]]]",
    "\"top-level string\"",
    "42",
};

static const char *const invalid[] = {
    "",
    "{",
    "{\"a\":}",
    "{\"a\" 1}",
    "{\"a\":1,}",
    "[1,]",
    "[01]",
    "[1.]",
    "[.5]",
    "[1e]",
    "[-]",
    "{\"a\":tru}",
    "{\"a\":\"unterminated}",
    "{\"a\":\"bad escape \\x\"}",
    "{\"a\":\"lone \\ud800 high\"}",
    "{\"a\":\"lone \\udc00 low\"}",
    "{\"a\":\"short \\u12\"}",
    "{\"a\":\"raw\ncontrol\"}",
    "{\"a\":\"bad utf8 \xc3\x28\"}",
    "{\"a\":\"overlong \xc0\xaf\"}",
    "{\"a\":\"surrogate \xed\xa0\x80\"}",
    "{\"too\":9223372036854775808}",
    "{\"r\":1e400}",
    "{\"k\\u0000ey\":1}",
    "{} trailing",
    "{}{}",
    "nul",
};

Test(json_in, valid_documents_parse_like_jansson)
{
    for (size_t i = 0; i != sizeof(valid) / sizeof(valid[0]); ++i) {
        json_t *got = wire_json_parse(valid[i], strlen(valid[i]));
        cr_expect_not_null(got, "refused valid JSON: %s", valid[i]);
        json_decref(got);
        cr_expect(agree(valid[i], strlen(valid[i])), "differs from jansson on: %s", valid[i]);
    }
}

Test(json_in, invalid_documents_are_refused)
{
    for (size_t i = 0; i != sizeof(invalid) / sizeof(invalid[0]); ++i) {
        json_t *got = wire_json_parse(invalid[i], strlen(invalid[i]));
        cr_expect_null(got, "accepted invalid JSON: %s", invalid[i]);
        json_decref(got);
        cr_expect(agree(invalid[i], strlen(invalid[i])), "differs from jansson on: %s", invalid[i]);
    }
}

Test(json_in, every_truncation_and_every_byte_flip_agrees_with_jansson)
{
    for (size_t i = 0; i != sizeof(valid) / sizeof(valid[0]); ++i) {
        size_t len = strlen(valid[i]);
        char *copy = malloc(len);
        for (size_t cut = 0; cut <= len; ++cut)
            cr_expect(agree(valid[i], cut), "truncation %zu of %s", cut, valid[i]);
        for (size_t at = 0; at != len; ++at) {
            static const unsigned char flips[] = {0x00, 0x01, '"', '\\', ',', ':', '}', ']', 'e', '-', 0x80, 0xc3, 0xff};
            for (size_t f = 0; f != sizeof(flips); ++f) {
                memcpy(copy, valid[i], len);
                copy[at] = (char)flips[f];
                cr_expect(agree(copy, len), "byte %zu set to 0x%02x in %s", at, flips[f], valid[i]);
            }
        }
        free(copy);
    }
}

Test(json_in, nesting_is_bounded)
{
    size_t depth = WIRE_JSON_MAX_DEPTH + 1;
    char *deep = malloc(2 * depth);
    memset(deep, '[', depth);
    memset(deep + depth, ']', depth);
    json_t *max;
    cr_expect_null(wire_json_parse(deep, 2 * depth));
    cr_expect_not_null(max = wire_json_parse(deep + 1, 2 * depth - 2)); /* exactly the maximum */
    json_decref(max);
    free(deep);
}

Test(json_in, a_large_stream_message)
{
    size_t n = 4 * 1024 * 1024;
    json_t *msg = json_object(), *got;
    char *text = malloc(n), *dumped;
    for (size_t i = 0; i != n; ++i)
        text[i] = i % 64 == 63 ? '\n' : (char)('a' + i % 26);
    json_object_set_new(msg, "name", json_string("stdout"));
    json_object_set_new(msg, "text", json_stringn(text, n));
    dumped = json_dumps(msg, JSON_COMPACT);
    cr_assert_not_null(got = wire_json_parse(dumped, strlen(dumped)));
    cr_expect(json_equal(got, msg));
    json_decref(got);
    json_decref(msg);
    free(dumped);
    free(text);
}

/* The shared UTF-8 check the parser (and the gateway's output sanitiser) rely on. */
Test(json_in, utf8_sequences)
{
    static const struct {
        const char *bytes;
        size_t avail;
        int want;
    } cases[] = {
        {"a", 1, 1},
        {"\xc3\xa9", 2, 2},
        {"\xe2\x82\xac", 3, 3},
        {"\xf0\x9f\x98\x80", 4, 4},
        {"\xc3", 1, -1},
        {"\xf0\x9f\x98", 3, -1},
        {"\xc0\xaf", 2, 0},
        {"\xe0\x80\xaf", 3, 0},
        {"\xed\xa0\x80", 3, 0},
        {"\xf4\x90\x80\x80", 4, 0},
        {"\x80", 1, 0},
        {"\xff", 1, 0},
    };
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i)
        cr_expect_eq(wire_utf8_sequence((const unsigned char *)cases[i].bytes, cases[i].avail), cases[i].want, "case %zu", i);
}

/* The bulk scan both JSON codecs rely on, against a byte-at-a-time reference. */
static size_t plain_run_reference(const unsigned char *s, size_t len, int allow_non_ascii)
{
    size_t i = 0;
    while (i != len && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' && (allow_non_ascii || s[i] < 0x80))
        ++i;
    return i;
}

Test(json_in, plain_runs_stop_at_the_first_byte_that_needs_attention)
{
    static const unsigned char stops[] = {0x00, 0x01, 0x1f, '"', '\\', 0x80, 0xc3, 0xff};
    static const unsigned char passes[] = {0x20, 0x7f, '/', 'x', 0x7e, 0x21};
    unsigned char buf[80];

    for (size_t len = 0; len <= sizeof(buf); ++len) {
        for (size_t at = 0; at <= len; ++at) {
            for (size_t k = 0; k != sizeof(stops) + sizeof(passes); ++k) {
                unsigned char c = k < sizeof(stops) ? stops[k] : passes[k - sizeof(stops)];
                unsigned char *exact = malloc(len != 0 ? len : 1); /* ASan: no read past the end */
                memset(exact, 'a', len);
                if (at < len)
                    exact[at] = c;
                for (int allow = 0; allow != 2; ++allow)
                    cr_expect_eq(wire_json_plain_run(exact, len, allow), plain_run_reference(exact, len, allow),
                                 "byte 0x%02x at %zu of %zu (non-ASCII %s)", c, at, len, allow ? "allowed" : "stops");
                free(exact);
            }
        }
    }
}

Test(json_in, escapes_and_utf8_at_every_offset_agree_with_jansson)
{
    static const char *const specials[] = {"\\n", "\\\"", "\\\\", "\\u00e9", "\\ud83d\\ude00", "\xc3\xa9", "\xf0\x9f\x98\x80",
                                           "\x7f"};
    char doc[128];

    for (size_t s = 0; s != sizeof(specials) / sizeof(specials[0]); ++s) {
        for (size_t at = 0; at != 40; ++at) {
            int n = snprintf(doc, sizeof(doc), "{\"k%.*s%s\":\"%.*s%s%.*s\"}", (int)(at % 20), "aaaaaaaaaaaaaaaaaaaa", specials[s],
                             (int)at, "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", specials[s], (int)(39 - at),
                             "cccccccccccccccccccccccccccccccccccccccc");
            cr_expect(agree(doc, (size_t)n), "%s", doc);
        }
    }
}
