/* tests/kernels/test_bash_units.c: the bash kernel's pure parts (code point offsets, completion words, is_complete verdicts). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "wire/alloc.h"
#include "syntax.h"
#include "utf8.h"

/* Stream sanitising is wire_utf8_sanitize (tests/wire/test_utf8.c); completion needs code point offsets. */
Test(bash_units, utf8_code_point_offsets)
{
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
