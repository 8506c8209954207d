/* tests/wire/test_utf8.c: process output -> valid UTF-8, with characters split across reads kept whole. */
#include <criterion/criterion.h>
#include "wire/text.h"
#include "wire_test.h"

TestSuite(utf8, .init = wire_test_init);

#define FFFD "\xef\xbf\xbd"

/* Sanitizes an exact-size copy of `in` (ASan sees any read past the end). */
static size_t sanitize(const char *in, size_t len, int final, char **out, size_t *out_len)
{
    char *copy = wire_test_exact_copy(in, len);
    size_t consumed = wire_utf8_sanitize(copy, len, final, out, out_len);

    free(copy);
    cr_assert_leq(consumed, len);
    cr_assert_eq((*out)[*out_len], '\0', "output must be NUL-terminated");
    return consumed;
}

static void check(const char *in, size_t len, int final, const char *expected, size_t expected_consumed)
{
    char *out;
    size_t out_len;
    size_t consumed = sanitize(in, len, final, &out, &out_len);

    cr_assert_eq(consumed, expected_consumed, "consumed %zu of %zu, expected %zu", consumed, len, expected_consumed);
    cr_assert_eq(out_len, strlen(expected), "output length %zu, expected %zu", out_len, strlen(expected));
    cr_assert(memcmp(out, expected, out_len) == 0, "got \"%s\", expected \"%s\"", out, expected);
    free(out);
}

/* Input given as a string literal, fully consumed, final. */
#define CHECK(in, expected) check(in, sizeof(in) - 1, 1, expected, sizeof(in) - 1)

Test(utf8, valid_text_is_copied)
{
    CHECK("", "");
    CHECK("hello, world\n\t\x01\x7f", "hello, world\n\t\x01\x7f");
    CHECK("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe4\xb8\xad", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe4\xb8\xad");
    /* the edges of each range */
    CHECK("\xc2\x80\xdf\xbf", "\xc2\x80\xdf\xbf");
    CHECK("\xe0\xa0\x80\xef\xbf\xbf", "\xe0\xa0\x80\xef\xbf\xbf");
    CHECK("\xed\x9f\xbf\xee\x80\x80", "\xed\x9f\xbf\xee\x80\x80");
    CHECK("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", "\xf0\x90\x80\x80\xf4\x8f\xbf\xbf");
}

Test(utf8, embedded_nul_is_kept)
{
    char *out;
    size_t out_len;

    cr_assert_eq(sanitize("a\0b", 3, 1, &out, &out_len), 3);
    cr_assert_eq(out_len, 3);
    cr_assert(memcmp(out, "a\0b", 3) == 0);
    free(out);
}

Test(utf8, invalid_bytes_become_replacement_characters)
{
    CHECK("a\x80z", "a" FFFD "z");
    CHECK("\xbf\xbf", FFFD FFFD);
    CHECK("\xfe\xff", FFFD FFFD);
    CHECK("\xf5\x80\x80\x80", FFFD FFFD FFFD FFFD);
    CHECK("\xc3(", FFFD "(");
    CHECK("\xe2\x82(", FFFD FFFD "(");
    CHECK("latin-1 caf\xe9!", "latin-1 caf" FFFD "!");
}

Test(utf8, overlongs_are_rejected)
{
    CHECK("\xc0\xaf", FFFD FFFD);                   /* '/' in two bytes */
    CHECK("\xc1\xbf", FFFD FFFD);                   /* U+007F in two bytes */
    CHECK("\xe0\x80\xaf", FFFD FFFD FFFD);          /* '/' in three bytes */
    CHECK("\xe0\x9f\xbf", FFFD FFFD FFFD);          /* U+07FF in three bytes */
    CHECK("\xf0\x80\x80\xaf", FFFD FFFD FFFD FFFD); /* '/' in four bytes */
    CHECK("\xf0\x8f\xbf\xbf", FFFD FFFD FFFD FFFD); /* U+FFFF in four bytes */
    CHECK("\xc0\x80", FFFD FFFD);                   /* modified UTF-8 NUL */
}

Test(utf8, surrogates_and_beyond_u10ffff_are_rejected)
{
    CHECK("\xed\xa0\x80", FFFD FFFD FFFD);                            /* U+D800 */
    CHECK("\xed\xbf\xbf", FFFD FFFD FFFD);                            /* U+DFFF */
    CHECK("\xed\xa0\xbd\xed\xb8\x80", FFFD FFFD FFFD FFFD FFFD FFFD); /* CESU-8 pair */
    CHECK("\xf4\x90\x80\x80", FFFD FFFD FFFD FFFD);                   /* U+110000 */
}

Test(utf8, an_incomplete_tail_waits_for_more_unless_final)
{
    /* not final: the tail is left for the next read */
    check("ab\xe2\x82", 4, 0, "ab", 2);
    check("\xf0\x9f\x98", 3, 0, "", 0);
    check("x\xc3", 2, 0, "x", 1);
    /* final: the tail is invalid, byte by byte */
    check("ab\xe2\x82", 4, 1, "ab" FFFD FFFD, 4);
    check("x\xc3", 2, 1, "x" FFFD, 2);
    /* an invalid sequence is not incomplete: it is replaced at once */
    check("x\xe2(", 3, 0, "x" FFFD "(", 3);
    check("x\xc0", 2, 0, "x" FFFD, 2);
    check("x\xe0\x80", 3, 0, "x" FFFD FFFD, 3);
}

Test(utf8, a_character_split_across_two_reads_reassembles)
{
    static const char stream[] = "\xe2\x82\xac";
    char pending[8], *out1, *out2;
    size_t len1, len2, used;

    used = sanitize(stream, 1, 0, &out1, &len1);
    cr_assert_eq(used, 0);
    cr_assert_eq(len1, 0);
    /* the caller keeps the unconsumed byte and prepends it to the next read */
    memcpy(pending, stream, 1);
    memcpy(pending + 1, stream + 1, 2);
    used = sanitize(pending, 3, 1, &out2, &len2);
    cr_assert_eq(used, 3);
    cr_assert_eq(len2, 3);
    cr_assert(memcmp(out2, "\xe2\x82\xac", 3) == 0);
    free(out1);
    free(out2);
}

/* Feeds `text` in two reads split at every point, carrying the unconsumed tail, as a pipe reader does. */
static void check_every_split(const char *text, size_t len)
{
    size_t split;

    for (split = 0; split <= len; ++split) {
        char *buf = malloc(len + 1), *out;
        size_t used, out_len, carry;
        char *joined = malloc(len * 3 + 1);
        size_t joined_len = 0;

        used = sanitize(text, split, 0, &out, &out_len);
        memcpy(joined, out, out_len);
        joined_len = out_len;
        free(out);
        carry = split - used;
        cr_assert_lt(carry, 4, "at most a partial character is held back (split %zu)", split);
        memcpy(buf, text + used, carry + (len - split));
        used = sanitize(buf, carry + (len - split), 1, &out, &out_len);
        cr_assert_eq(used, carry + (len - split));
        memcpy(joined + joined_len, out, out_len);
        joined_len += out_len;
        free(out);
        cr_assert_eq(joined_len, len, "split at %zu changed the length", split);
        cr_assert(memcmp(joined, text, len) == 0, "split at %zu changed the text", split);
        free(joined);
        free(buf);
    }
}

Test(utf8, valid_text_survives_every_split_point)
{
    static const char text[] = "a\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80z\xe4\xb8\xad\xc2\x80\xf4\x8f\xbf\xbf";

    check_every_split(text, sizeof(text) - 1);
}

Test(utf8, many_reads_of_one_byte_reassemble)
{
    static const char text[] = "\xf0\x9f\x98\x80\xe2\x82\xac\xc3\xa9!";
    size_t len = sizeof(text) - 1, next = 0, held = 0;
    char carry[8], result[64];
    size_t result_len = 0;

    while (next < len) {
        char *out;
        size_t out_len, used;

        carry[held++] = text[next++];
        used = sanitize(carry, held, next == len, &out, &out_len);
        memcpy(result + result_len, out, out_len);
        result_len += out_len;
        free(out);
        memmove(carry, carry + used, held - used);
        held -= used;
    }
    cr_assert_eq(held, 0);
    cr_assert_eq(result_len, len);
    cr_assert(memcmp(result, text, len) == 0);
}

Test(utf8, output_is_always_valid)
{
    /* every single byte, then every byte pair after a lead byte: the result must re-sanitize to itself */
    unsigned a, b;

    for (a = 0; a < 256; ++a) {
        for (b = 0; b < 256; b += 15) {
            char in[3] = {(char)a, (char)b, '\xa9'}, *out, *again;
            size_t out_len, again_len;

            sanitize(in, 3, 1, &out, &out_len);
            cr_assert_eq(sanitize(out, out_len, 1, &again, &again_len), out_len);
            cr_assert(again_len == out_len && memcmp(again, out, out_len) == 0, "bytes %02x %02x a9 gave invalid UTF-8", a, b);
            free(again);
            free(out);
        }
    }
}

/* Strict decimals: what query parameters, ids and options are read with. */
Test(utf8, decimals_are_digits_only_and_bounded)
{
    uint64_t n = 7;

    cr_expect_eq(wire_parse_decimal("0", 10, &n), 0);
    cr_expect_eq(n, 0);
    cr_expect_eq(wire_parse_decimal("65535", 65535, &n), 0);
    cr_expect_eq(n, 65535);
    cr_expect_eq(wire_parse_decimal("18446744073709551615", UINT64_MAX, &n), 0);
    cr_expect_eq(n, UINT64_MAX);
    n = 7;
    static const char *const refused[] = {
        "", "-1", "+1", " 1", "1 ", "1x", "0x10", "65536", "18446744073709551616", "99999999999999999999"};
    for (size_t i = 0; i != sizeof(refused) / sizeof(refused[0]); ++i)
        cr_expect_eq(wire_parse_decimal(refused[i], 65535, &n), -1, "\"%s\" is refused", refused[i]);
    cr_expect_eq(wire_parse_decimal("5", 0, &n), -1, "beyond a maximum of 0");
    cr_expect_eq(wire_parse_decimal("18446744073709551616", UINT64_MAX, &n), -1, "2^64 overflows");
    cr_expect_eq(n, 7, "a refused number leaves the output alone");
}
