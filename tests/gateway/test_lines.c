/* tests/gateway/test_lines.c: process output -> lines, blank ones kept, partial lines carried across reads. */
#include <criterion/criterion.h>
#include <stdio.h>
#include "procs/lines.h"
#include "gw_test.h"

TestSuite(lines, .init = gw_test_init);

/* The lines seen so far, joined as "[line]" for easy comparison. */
typedef struct st_collected_t {
    char text[4096];
    size_t len;
    size_t count;
} collected_t;

static void on_line(void *data, const char *line, size_t len)
{
    collected_t *c = data;
    c->len += (size_t)snprintf(c->text + c->len, sizeof(c->text) - c->len, "[%.*s]", (int)len, line);
    ++c->count;
}

/* Splits an exact-size copy of `in` (ASan sees any read past the end). */
static size_t split(const char *in, size_t len, int final, size_t max_line, int *after_cr, collected_t *c)
{
    char *copy = gw_test_exact_copy(in, len);
    size_t consumed = gw_lines_split(copy, len, final, max_line, after_cr, on_line, c);

    free(copy);
    cr_assert_leq(consumed, len);
    return consumed;
}

static void check(const char *in, int final, const char *expected, size_t expected_consumed)
{
    collected_t c = {0};
    int after_cr = 0;
    size_t consumed = split(in, strlen(in), final, 1024, &after_cr, &c);

    cr_assert_str_eq(c.text, expected, "lines of \"%s\"", in);
    cr_assert_eq(consumed, expected_consumed, "consumed %zu of \"%s\", expected %zu", consumed, in, expected_consumed);
}

Test(lines, blank_lines_are_kept)
{
    check("a\n\nb\n", 0, "[a][][b]", 5);
    check("\n\n", 0, "[][]", 2);
    check("", 1, "", 0);
}

Test(lines, an_incomplete_line_waits_unless_final)
{
    check("abc", 0, "", 0);
    check("one\ntw", 0, "[one]", 4);
    check("one\ntw", 1, "[one][tw]", 6);
}

Test(lines, carriage_returns_end_lines_and_crlf_is_one_terminator)
{
    check("a\r\nb\r\n", 0, "[a][b]", 6);
    check("a\rb\n", 0, "[a][b]", 4);
    check("\r\r\n", 0, "[][]", 3);
}

Test(lines, crlf_split_between_reads_is_one_terminator)
{
    collected_t c = {0};
    int after_cr = 0;

    cr_assert_eq(split("a\r", 2, 0, 1024, &after_cr, &c), 2);
    cr_assert_eq(after_cr, 1);
    cr_assert_eq(split("\nb\n", 3, 0, 1024, &after_cr, &c), 3);
    cr_assert_str_eq(c.text, "[a][b]");
    cr_assert_eq(after_cr, 0);
}

Test(lines, a_carried_cr_survives_an_empty_read)
{
    collected_t c = {0};
    int after_cr = 1;

    cr_assert_eq(split("", 0, 0, 1024, &after_cr, &c), 0);
    cr_assert_eq(after_cr, 1);
    cr_assert_eq(split("\n", 1, 0, 1024, &after_cr, &c), 1);
    cr_assert_eq(c.count, 0, "the \\n of a \\r\\n split across reads is not a second line");
}

Test(lines, long_lines_come_in_bounded_pieces)
{
    collected_t c = {0};
    int after_cr = 0;

    cr_assert_eq(split("0123456789abcdefXY", 18, 0, 8, &after_cr, &c), 16);
    cr_assert_str_eq(c.text, "[01234567][89abcdef]");
}

Test(lines, pieces_never_split_a_utf8_character)
{
    collected_t c = {0};
    int after_cr = 0;

    /* "é" (c3 a9) straddles the 4-byte cut: the piece stops before it */
    cr_assert_eq(split("abc\xc3\xa9"
                       "d",
                       6, 0, 4, &after_cr, &c),
                 3);
    cr_assert_str_eq(c.text, "[abc]");
}

/* Feeds `in` in two reads split at every point, keeping the unconsumed rest as a pipe buffer does. */
Test(lines, every_split_point_gives_the_same_lines)
{
    static const char in[] = "one\n\ntwo\r\nthree\rfour\n\r\n tail";
    const size_t len = sizeof(in) - 1;
    collected_t whole = {0};
    int after_cr = 0;

    split(in, len, 1, 1024, &after_cr, &whole);
    for (size_t at = 0; at <= len; ++at) {
        collected_t c = {0};
        char buf[128];
        size_t kept, consumed;
        after_cr = 0;
        consumed = split(in, at, 0, 1024, &after_cr, &c);
        kept = at - consumed;
        memcpy(buf, in + consumed, kept);
        memcpy(buf + kept, in + at, len - at);
        split(buf, kept + len - at, 1, 1024, &after_cr, &c);
        cr_assert_str_eq(c.text, whole.text, "split at %zu", at);
    }
    cr_assert_str_eq(whole.text, "[one][][two][three][four][][ tail]");
}
