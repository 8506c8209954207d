/* wire_json_parse must accept what jansson accepts and build identical values (one documented exception). */
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "wire/json_in.h"
#include "wire/text.h"
#include "json_agree.h"

static void init(void)
{
    wire_global_init();
}

TestSuite(json_in, .init = init);

/* Both parsers agree on `len` bytes of `text` (json_agree.h says how, NUL bytes included). */
static int agree(const char *text, size_t len)
{
    return json_agree(text, len) == NULL;
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
    "[1.00000000000000000000000000000000000000000000000000000000000000000000000000000000001,-0.0,-0]",
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
    "[1234567890123456789012345678901234567890123456789012345678901234567890123456789012]",
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

/* ---- numbers: every length, against jansson ---- */

typedef enum { EXPECT_EITHER, EXPECT_ACCEPT, EXPECT_REFUSE } verdict_t;

/* Agreement with jansson, and (unless EITHER) the verdict worked out independently, so that a
 * case both parsers got wrong the same way would still show. */
static void check_number(const char *doc, size_t len, verdict_t expect)
{
    cr_expect(agree(doc, len), "differs from jansson on %zu bytes: %.60s%s", len, doc, len > 60 ? "..." : "");
    if (expect != EXPECT_EITHER) {
        json_t *got = wire_json_parse(doc, len);
        cr_expect((got != NULL) == (expect == EXPECT_ACCEPT), "%s %zu bytes: %.60s%s", got != NULL ? "accepted" : "refused", len,
                  doc, len > 60 ? "..." : "");
        json_decref(got);
    }
}

/* `n` digits, the first nonzero: 10^(n-1), all nines, or pseudo-random. */
static void digits(char *out, size_t n, int pattern, unsigned seed)
{
    for (size_t i = 0; i != n; ++i) {
        seed = seed * 1103515245u + 12345u;
        out[i] = pattern == 0 ? (i == 0 ? '1' : '0') : pattern == 1 ? '9' : (char)('0' + (seed >> 16) % 10);
    }
    if (out[0] == '0')
        out[0] = '7';
    out[n] = '\0';
}

/* An integer of `n` digits `d` fits json_int_t: jansson's strtoll limits, worked out by length. */
static verdict_t integer_verdict(const char *d, size_t n, int negative)
{
    if (n != 19)
        return n < 19 ? EXPECT_ACCEPT : EXPECT_REFUSE;
    return strcmp(d, negative ? "9223372036854775808" : "9223372036854775807") <= 0 ? EXPECT_ACCEPT : EXPECT_REFUSE;
}

#define MAX_SWEEP_DIGITS 330 /* past 309, where reals of that many integer digits overflow */

Test(json_in, numbers_of_every_length_agree_with_jansson, .timeout = 120)
{
    char d[MAX_SWEEP_DIGITS + 1], zeros[MAX_SWEEP_DIGITS + 1];
    size_t cap = 4 * MAX_SWEEP_DIGITS + 64;
    char *doc = malloc(cap);

    memset(zeros, '0', MAX_SWEEP_DIGITS);
    zeros[MAX_SWEEP_DIGITS] = '\0';
    for (size_t n = 1; n <= MAX_SWEEP_DIGITS; ++n) {
        for (int pattern = 0; pattern != 3; ++pattern) {
            digits(d, n, pattern, (unsigned)n);
            verdict_t big_real = n <= 308 ? EXPECT_ACCEPT : n >= 310 ? EXPECT_REFUSE : EXPECT_EITHER;
            verdict_t exp_real = n > 3 ? EXPECT_REFUSE : atoi(d) <= 308 ? EXPECT_ACCEPT : EXPECT_REFUSE;
            int len;
#define CHECK(expect, ...)                                                                                                         \
    do {                                                                                                                           \
        len = snprintf(doc, cap, __VA_ARGS__);                                                                                     \
        cr_assert(len > 0 && (size_t)len < cap);                                                                                   \
        check_number(doc, (size_t)len, expect);                                                                                    \
    } while (0)
            CHECK(integer_verdict(d, n, 0), "%s", d);
            CHECK(integer_verdict(d, n, 1), "-%s", d);
            CHECK(big_real, "%s.%s", d, d);
            CHECK(big_real, "-%s.0", d);
            CHECK(big_real, "%se0", d);
            CHECK(EXPECT_ACCEPT, "-0.%s", d);
            CHECK(EXPECT_ACCEPT, "%s.5e-%zu", d, n);                   /* between 0.1 and 1 */
            CHECK(EXPECT_ACCEPT, "%sE-%zu", d, 3 * n);                 /* subnormal, then zero, as n grows */
            CHECK(EXPECT_ACCEPT, "0.%.*s%se%zu", (int)n, zeros, d, n); /* leading zeros, scaled back */
            CHECK(exp_real, "1e%s", d);
            CHECK(exp_real, "-1.5E+%s", d);
            CHECK(EXPECT_ACCEPT, "1e-%s", d);
            CHECK(EXPECT_ACCEPT, "-0.0e%s", d);
            CHECK(EXPECT_ACCEPT, "1E+%.*s308", (int)n, zeros); /* leading zeros in the exponent */
            CHECK(EXPECT_REFUSE, "1e%.*s309", (int)n, zeros);
            CHECK(EXPECT_EITHER, " [%s, -0.%s, {\"k\": %s.%se-%zu}] ", d, d, d, d, n);
#undef CHECK
        }
    }
    free(doc);
}

Test(json_in, integers_at_the_limits_of_json_int_t)
{
    static const struct {
        const char *text;
        verdict_t expect;
    } cases[] = {
        {"9223372036854775807", EXPECT_ACCEPT},
        {"9223372036854775808", EXPECT_REFUSE},
        {"-9223372036854775808", EXPECT_ACCEPT},
        {"-9223372036854775809", EXPECT_REFUSE},
        {"18446744073709551615", EXPECT_REFUSE},
        {"18446744073709551616", EXPECT_REFUSE},
        {"99999999999999999999", EXPECT_REFUSE},
        {"-0", EXPECT_ACCEPT},
        {"0", EXPECT_ACCEPT},
        {"-", EXPECT_REFUSE},
        {"00", EXPECT_REFUSE},
        {"-01", EXPECT_REFUSE},
        {"+1", EXPECT_REFUSE},
        {"1.", EXPECT_REFUSE},
        {"1e+", EXPECT_REFUSE},
        {".1", EXPECT_REFUSE},
    };
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i)
        check_number(cases[i].text, strlen(cases[i].text), cases[i].expect);

    json_t *v = wire_json_parse("-9223372036854775808", 20);
    cr_assert_not_null(v);
    cr_expect(json_is_integer(v) && json_integer_value(v) == LLONG_MIN);
    json_decref(v);
    v = wire_json_parse("-0", 2);
    cr_assert_not_null(v);
    cr_expect(json_is_integer(v) && json_integer_value(v) == 0);
    json_decref(v);
}

/* Decimal digits of base^exp (base <= 10), most significant first. */
static char *decimal_power(unsigned base, unsigned exp)
{
    unsigned char *le = calloc(exp + 2, 1);
    size_t n = 1;
    char *out;

    le[0] = 1;
    for (unsigned e = 0; e != exp; ++e) {
        unsigned carry = 0;
        for (size_t i = 0; i != n; ++i) {
            unsigned v = le[i] * base + carry;
            le[i] = (unsigned char)(v % 10);
            carry = v / 10;
        }
        if (carry != 0)
            le[n++] = (unsigned char)carry;
    }
    out = malloc(n + 1);
    for (size_t i = 0; i != n; ++i)
        out[i] = (char)('0' + le[n - 1 - i]);
    out[n] = '\0';
    free(le);
    return out;
}

/* a - b, for decimal strings with a >= b. */
static char *decimal_sub(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b), skip = 0;
    char *out = malloc(na + 1);
    int borrow = 0;

    for (size_t i = 0; i != na; ++i) {
        int v = a[na - 1 - i] - '0' - borrow - (i < nb ? b[nb - 1 - i] - '0' : 0);
        borrow = v < 0;
        out[na - 1 - i] = (char)('0' + (v < 0 ? v + 10 : v));
    }
    out[na] = '\0';
    while (out[skip] == '0' && out[skip + 1] != '\0')
        ++skip;
    memmove(out, out + skip, na + 1 - skip);
    return out;
}

/* Builds a document from printf-style pieces, any length. */
static char *docf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *docf(const char *fmt, ...)
{
    va_list ap, again;
    char *out;
    int n;

    va_start(ap, fmt);
    va_copy(again, ap);
    n = vsnprintf(NULL, 0, fmt, ap);
    out = malloc((size_t)n + 1);
    vsnprintf(out, (size_t)n + 1, fmt, again);
    va_end(again);
    va_end(ap);
    return out;
}

static char *repeat(char c, size_t n)
{
    char *out = malloc(n + 1);
    memset(out, c, n);
    out[n] = '\0';
    return out;
}

/* Accepted by both parsers as exactly `want` (bit for bit), or refused by both if `refuse`. */
static void check_real(char *doc, int refuse, double want)
{
    size_t len = strlen(doc);
    check_number(doc, len, refuse ? EXPECT_REFUSE : EXPECT_ACCEPT);
    if (!refuse) {
        json_t *got = wire_json_parse(doc, len);
        double v = got != NULL ? json_real_value(got) : NAN;
        cr_expect(got != NULL && json_is_real(got) && memcmp(&v, &want, sizeof(v)) == 0, "%.60s... (%zu bytes): got %a, want %a",
                  doc, len, v, want);
        json_decref(got);
    }
    free(doc);
}

/*
 * Rounding that depends on a digit far past the 800 the parser keeps: halfway cases between two
 * doubles (ties go to the even one), the overflow threshold and the underflow to zero, each with a
 * nonzero digit hundreds of digits further on.
 */
Test(json_in, long_reals_round_like_jansson)
{
    char *z100 = repeat('0', 100), *z1000 = repeat('0', 1000), *z2000 = repeat('0', 2000), *n1000 = repeat('9', 1000);

    /* 2^53 + 1 is halfway between 2^53 and 2^53 + 2 */
    check_real(docf("9007199254740993.0"), 0, 9007199254740992.0);
    check_real(docf("9007199254740993.%s1", z2000), 0, 9007199254740994.0);
    check_real(docf("9007199254740993%s1e-1001", z1000), 0, 9007199254740994.0);
    check_real(docf("-9007199254740992.%s1", z2000), 0, -9007199254740992.0);

    /* 2^-1075 = 5^1075 / 10^1075 (752 digits) is halfway between 0 and the smallest subnormal */
    char *half_min = decimal_power(5, 1075), *zeros323 = repeat('0', 1075 - strlen(half_min));
    cr_assert_eq(strlen(half_min), 752);
    check_real(docf("0.%s%s", zeros323, half_min), 0, 0.0);
    check_real(docf("-0.%s%s", zeros323, half_min), 0, -0.0);
    check_real(docf("0.%s%s%s1", zeros323, half_min, z100), 0, 0x1p-1074);
    check_real(docf("-0.%s%s%s1e0", zeros323, half_min, z100), 0, -0x1p-1074);
    check_real(docf("%s%s1e-%d", half_min, z100, 1075 + 101), 0, 0x1p-1074);

    /* (2^53 - 1) * 2^-1075, halfway between the largest subnormal and DBL_MIN, has 768 significant
     * digits, the most any rounding boundary of a double has: (5^1022 * 10^53 - 5^1075) / 10^1075 */
    char *p5_1022 = decimal_power(5, 1022), *scaled = docf("%s%.53d", p5_1022, 0), *tie = decimal_sub(scaled, half_min);
    char *under = decimal_sub(tie, "1");
    cr_assert_eq(strlen(tie), 768);
    check_real(docf("%se-1075", tie), 0, 0x1p-1022);
    check_real(docf("%se-1075", under), 0, 0x0.fffffffffffffp-1022);
    check_real(docf("0.%.307d%s%s1", 0, tie, z100), 0, 0x1p-1022);
    free(p5_1022);
    free(scaled);
    free(tie);
    free(under);

    /* 2^1024 - 2^970 is halfway between DBL_MAX and 2^1024: a tie rounds to 2^1024, an overflow */
    char *p1024 = decimal_power(2, 1024), *p970 = decimal_power(2, 970), *limit = decimal_sub(p1024, p970);
    char *below = decimal_sub(limit, "1");
    cr_assert_eq(strlen(limit), 309);
    check_real(docf("%s.0", limit), 1, 0);
    check_real(docf("-%se0", limit), 1, 0);
    check_real(docf("%s.%s1", limit, z1000), 1, 0);
    check_real(docf("%s.%s", below, n1000), 0, 0x1.fffffffffffffp+1023);
    check_real(docf("-%s.%s", below, n1000), 0, -0x1.fffffffffffffp+1023);
    check_real(docf("%s", limit), 1, 0); /* an integer: too big for json_int_t */

    free(half_min);
    free(zeros323);
    free(p1024);
    free(p970);
    free(limit);
    free(below);
    free(z100);
    free(z1000);
    free(z2000);
    free(n1000);
}

/* Integer parts, fractions and exponents of 100,000 digits (the parser keeps 800 of them at most). */
Test(json_in, very_long_numbers, .timeout = 120)
{
    size_t n = 100000;
    char *zeros = repeat('0', n), *nines = repeat('9', n), *mixed = malloc(n + 1);

    digits(mixed, n, 2, 42);
    check_real(docf("1%se-%zu", zeros, n), 0, 1.0);
    check_real(docf("0.%s1e%zu", zeros, n + 1), 0, 1.0);
    check_real(docf("1%s.5", zeros), 1, 0);
    check_real(docf("-0.%s1", zeros), 0, -0.0);
    check_real(docf("1e%s1", zeros), 0, 10.0);
    check_real(docf("1e%s", nines), 1, 0);
    check_real(docf("1e-%s", nines), 0, 0.0);
    check_real(docf("0e%s", nines), 0, 0.0);
    check_real(docf("0.%se-%s", nines, nines), 0, 0.0);
    check_real(docf("%s.%se-%s", zeros, nines, nines), 1, 0); /* a leading zero, then more digits */
    char *doc = docf("%se-%zu", mixed, n - 10);
    check_number(doc, strlen(doc), EXPECT_ACCEPT); /* about 10^10, rounded from 100,000 digits */
    free(doc);
    doc = docf("[%s]", mixed);
    check_number(doc, strlen(doc), EXPECT_REFUSE);
    free(doc);
    free(zeros);
    free(nines);
    free(mixed);
}

/* The documented difference (wire/json_in.h): jansson loses a NUL byte right after a number or a
 * bare word; wire_json_parse refuses it. If jansson stops doing so, the header must change. */
Test(json_in, a_nul_after_a_number_jansson_loses_is_refused)
{
    static const struct {
        const char *text;
        size_t len;
        const char *as; /* what jansson makes of it, or NULL if it refuses too */
    } cases[] = {
        {"1\0", 2, "1"},
        {"[1\0]", 4, "[1]"},
        {"{\"a\":-2.5e3\0}", 13, "{\"a\":-2500.0}"},
        {"true\0", 5, "true"},
        {"[false\0,null\0]", 14, "[false,null]"},
        {"1\0 ", 3, "1"},
        {"1\0\0", 3, NULL},
        {"4\0junk", 6, NULL},
        {"\"a\"\0", 4, NULL},
        {"[1,\0 2]", 7, NULL},
        {"\0", 1, NULL},
        {"1.\0", 3, NULL},
        {"tru\0", 4, NULL},
    };
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        json_t *want = json_agree_jansson(cases[i].text, cases[i].len), *got = wire_json_parse(cases[i].text, cases[i].len);
        json_t *as = cases[i].as != NULL ? json_loads(cases[i].as, JSON_DECODE_ANY, NULL) : NULL;

        cr_expect_null(got, "case %zu: wire_json_parse accepted a raw NUL", i);
        cr_expect(cases[i].as != NULL ? want != NULL && json_agree_identical(want, as) : want == NULL,
                  "case %zu: jansson 2.14 changed", i);
        cr_expect(agree(cases[i].text, cases[i].len), "case %zu", i);
        json_decref(want);
        json_decref(got);
        json_decref(as);
    }
}
