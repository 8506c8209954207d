/* kernels/bash/src/syntax.c: is_complete via `bash -n`, and the word to complete under the cursor. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "proc.h"
#include "syntax.h"

const char *bk_is_complete_classify(int wstatus, const char *messages, const char *code, size_t len)
{
    size_t backslashes = 0, end = len;

    /* bash says "unexpected EOF while looking for matching ..." or "unexpected end of file". */
    if (strcasestr(messages, "unexpected EOF") != NULL || strcasestr(messages, "unexpected end of file") != NULL)
        return "incomplete";
    if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0)
        return "invalid";
    /* Only a warning for bash -n: "here-document at line N delimited by end-of-file". */
    if (strstr(messages, "here-document") != NULL)
        return "incomplete";
    /* A line continuation at the very end: bash -n accepts it, a user is not done typing. */
    if (end != 0 && code[end - 1] == '\n')
        --end;
    while (backslashes < end && code[end - 1 - backslashes] == '\\')
        ++backslashes;
    return backslashes % 2 == 1 ? "incomplete" : "complete";
}

const char *bk_is_complete(const char *path, const char *code, size_t len)
{
    char *argv[] = {(char *)bk_bash_path(), "-n", (char *)path, NULL};
    char *messages = NULL;
    const char *verdict = "unknown";
    int wstatus = 0;
    FILE *fp;

    if ((fp = fopen(path, "w")) == NULL)
        return "unknown";
    int ok = fwrite(code, 1, len, fp) == len;
    if (fclose(fp) != 0 || !ok)
        return "unknown";
    if (bk_run_capture(argv, 2000, 16384, &messages, &wstatus) == 0)
        verdict = bk_is_complete_classify(wstatus, messages, code, len);
    free(messages);
    unlink(path);
    return verdict;
}

/* Characters that end a word for completion (shell metacharacters, quotes, assignments). */
static int is_break(char c)
{
    return c == '\0' || strchr(" \t\n;|&()<>`\"'=", c) != NULL;
}

void bk_complete_find(const char *code, size_t len, size_t cursor, bk_complete_ctx_t *ctx)
{
    size_t start, before;

    if (cursor > len)
        cursor = len;
    start = cursor;
    while (start > 0 && !is_break(code[start - 1]))
        --start;
    ctx->start = start;
    ctx->end = cursor;
    ctx->sigil = "";
    if (start < cursor && code[start] == '$') {
        ctx->kind = BK_COMPLETE_VARIABLE;
        ctx->sigil = start + 1 < cursor && code[start + 1] == '{' ? "${" : "$";
        return;
    }
    if (memchr(code + start, '/', cursor - start) != NULL || (start < cursor && code[start] == '~')) {
        ctx->kind = BK_COMPLETE_FILE;
        return;
    }
    /* Command position: the first word of the code, of a line, or after an operator. */
    before = start;
    while (before > 0 && (code[before - 1] == ' ' || code[before - 1] == '\t'))
        --before;
    if (before == 0 || strchr(";|&(\n`", code[before - 1]) != NULL)
        ctx->kind = BK_COMPLETE_COMMAND;
    else
        ctx->kind = BK_COMPLETE_FILE;
}

char *bk_shell_quote(const char *s, size_t len)
{
    char *out = wire_malloc(len * 4 + 3), *p = out;

    *p++ = '\'';
    for (size_t i = 0; i != len; ++i) {
        if (s[i] == '\'') {
            memcpy(p, "'\\''", 4);
            p += 4;
        } else {
            *p++ = s[i];
        }
    }
    *p++ = '\'';
    *p = '\0';
    return out;
}

char *bk_complete_command(const bk_complete_ctx_t *ctx, const char *code, const char *outpath)
{
    size_t skip = strlen(ctx->sigil);
    char *word = bk_shell_quote(code + ctx->start + skip, ctx->end - ctx->start - skip);
    char *out = bk_shell_quote(outpath, strlen(outpath));
    char *line = NULL;
    int n = 0;

    /* The pipeline's loop runs in a subshell, so its variable never reaches the user's shell. */
    switch (ctx->kind) {
    case BK_COMPLETE_VARIABLE:
        n = asprintf(&line, "compgen -v -- %s >%s 2>/dev/null; __kgate_status \"$__kgate_rc\"", word, out);
        break;
    case BK_COMPLETE_COMMAND:
        n = asprintf(&line, "compgen -c -- %s >%s 2>/dev/null; __kgate_status \"$__kgate_rc\"", word, out);
        break;
    case BK_COMPLETE_FILE:
        n = asprintf(&line,
                     "compgen -f -- %s 2>/dev/null | while IFS= read -r __kgate_f; do "
                     "if [ -d \"$__kgate_f\" ]; then printf '%%s/\\n' \"$__kgate_f\"; "
                     "else printf '%%s\\n' \"$__kgate_f\"; fi; done >%s; __kgate_status \"$__kgate_rc\"",
                     word, out);
        break;
    }
    free(word);
    free(out);
    if (n < 0)
        abort(); /* out of memory aborts (STYLE.md 6) */
    return line;
}

json_t *bk_complete_matches(const char *data, size_t len, const char *sigil, size_t max)
{
    json_t *matches = json_array();
    size_t i = 0;

    while (i < len && json_array_size(matches) < max) {
        const char *nl = memchr(data + i, '\n', len - i);
        size_t n = (nl != NULL ? (size_t)(nl - data) : len) - i;
        if (n != 0 && !(n >= 7 && memcmp(data + i, "__kgate", 7) == 0)) { /* the kernel's own names */
            char *m = NULL;
            if (asprintf(&m, "%s%.*s", sigil, (int)n, data + i) < 0)
                abort();
            json_t *s = json_string(m);
            size_t j;
            if (s != NULL) {
                /* Linear: max is small, and compgen -c lists a name once per PATH directory. */
                for (j = 0; j != json_array_size(matches); ++j)
                    if (json_equal(json_array_get(matches, j), s))
                        break;
                if (j == json_array_size(matches))
                    json_array_append(matches, s);
                json_decref(s);
            }
            free(m);
        }
        i += n + 1;
    }
    return matches;
}
