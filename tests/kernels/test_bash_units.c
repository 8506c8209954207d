/* tests/kernels/test_bash_units.c: the bash kernel's pure parts (UTF-8 sanitising, completion words, is_complete verdicts). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "wire/alloc.h"
#include "syntax.h"
#include "utf8.h"

/* Feeds `in` cut at every split point, as a pipe may, and checks the concatenated output. */
static void check_split(const char *in, size_t len, const char *expected)
{
    for (size_t cut = 0; cut <= len; ++cut) {
        unsigned char pending[64];
        char out[256], part[256];
        size_t plen = 0, olen = 0, n, used;

        memcpy(pending, in, cut);
        plen = cut;
        used = bk_utf8_sanitize(pending, plen, 0, part, &n);
        memcpy(out + olen, part, n);
        olen += n;
        memmove(pending, pending + used, plen - used);
        plen -= used;
        cr_assert_leq(plen, 3);
        memcpy(pending + plen, in + cut, len - cut);
        plen += len - cut;
        used = bk_utf8_sanitize(pending, plen, 1, part, &n);
        cr_assert_eq(used, plen);
        memcpy(out + olen, part, n);
        olen += n;
        cr_assert_eq(olen, strlen(expected), "cut %zu", cut);
        cr_assert(memcmp(out, expected, olen) == 0, "cut %zu", cut);
    }
}

Test(bash_units, utf8_valid_text_survives_every_split)
{
    static const char text[] = "a\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 z";
    check_split(text, sizeof(text) - 1, text);
}

Test(bash_units, utf8_invalid_bytes_become_replacement_characters)
{
    check_split("a\xff"
                "b",
                3,
                "a\xef\xbf\xbd"
                "b");
    check_split("\xc0\xaf", 2, "\xef\xbf\xbd\xef\xbf\xbd");                 /* overlong */
    check_split("\xed\xa0\x80", 3, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd"); /* surrogate */
    check_split("\xf4\x90\x80\x80", 4, "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    check_split("x\xe2\x82", 3, "x\xef\xbf\xbd\xef\xbf\xbd"); /* truncated at the very end */
}

Test(bash_units, utf8_keeps_an_incomplete_tail)
{
    char out[32];
    size_t n;
    cr_expect_eq(bk_utf8_sanitize((const unsigned char *)"ab\xf0\x9f\x98", 5, 0, out, &n), 2);
    cr_expect_eq(n, 2);
    cr_expect_eq(bk_utf8_count("a\xc3\xa9z", 4), 3);
    cr_expect_eq(bk_utf8_offset("a\xc3\xa9z", 4, 2), 3);
    cr_expect_eq(bk_utf8_offset("a\xc3\xa9z", 4, 9), 4);
}

Test(bash_units, completion_words)
{
    bk_complete_ctx_t ctx;

    bk_complete_find("ech", 3, 3, &ctx);
    cr_expect_eq(ctx.kind, BK_COMPLETE_COMMAND);
    cr_expect_eq(ctx.start, 0);
    bk_complete_find("ls /us", 6, 6, &ctx);
    cr_expect_eq(ctx.kind, BK_COMPLETE_FILE);
    cr_expect_eq(ctx.start, 3);
    bk_complete_find("ls fi", 5, 5, &ctx);
    cr_expect_eq(ctx.kind, BK_COMPLETE_FILE);
    bk_complete_find("true && gr", 10, 10, &ctx);
    cr_expect_eq(ctx.kind, BK_COMPLETE_COMMAND);
    cr_expect_eq(ctx.start, 8);
    bk_complete_find("echo ${HO", 9, 9, &ctx);
    cr_expect_eq(ctx.kind, BK_COMPLETE_VARIABLE);
    cr_expect_str_eq(ctx.sigil, "${");
    bk_complete_find("cat x | wc", 10, 3, &ctx); /* cursor inside the code */
    cr_expect_eq(ctx.start, 0);
    cr_expect_eq(ctx.end, 3);

    char *q = bk_shell_quote("it's", 4);
    cr_expect_str_eq(q, "'it'\\''s'");
    free(q);

    json_t *m = bk_complete_matches("a\nb\na\n\nc", 8, "$", 10);
    cr_expect_eq(json_array_size(m), 3);
    cr_expect_str_eq(json_string_value(json_array_get(m, 0)), "$a");
    cr_expect_str_eq(json_string_value(json_array_get(m, 2)), "$c");
    json_decref(m);
}

Test(bash_units, is_complete_verdicts)
{
    int ok = 0, fail = 2 << 8; /* wait statuses of exit 0 and exit 2 */

    cr_assert(WIFEXITED(ok) && WEXITSTATUS(fail) == 2);
    cr_expect_str_eq(bk_is_complete_classify(ok, "", "echo hi", 7), "complete");
    cr_expect_str_eq(bk_is_complete_classify(fail, "x: line 2: syntax error: unexpected end of file\n", "if x", 4), "incomplete");
    cr_expect_str_eq(bk_is_complete_classify(fail, "unexpected EOF while looking for matching `\"'", "\"", 1), "incomplete");
    cr_expect_str_eq(bk_is_complete_classify(fail, "syntax error near unexpected token `fi'", "fi", 2), "invalid");
    cr_expect_str_eq(bk_is_complete_classify(ok, "warning: here-document at line 1 delimited by end-of-file", "cat <<E", 7),
                     "incomplete");
    cr_expect_str_eq(bk_is_complete_classify(ok, "", "echo \\\n", 7), "incomplete");
    cr_expect_str_eq(bk_is_complete_classify(ok, "", "echo \\\\", 7), "complete");
}
