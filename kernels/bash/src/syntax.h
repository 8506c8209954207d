/* kernels/bash/src/syntax.h: is_complete classification and completion contexts for bash code. */
#ifndef BK_SYNTAX_H
#define BK_SYNTAX_H

#include <stddef.h>
#include <jansson.h>

/**
 * Classifies `code` for is_complete_request by running `bash -n` on `path` (where the caller wrote
 * the code) for at most 2 s: "complete", "incomplete" (bash reached the end of the input inside a
 * construct: an unclosed quote, `if` without `fi`, a here-document without its delimiter, a trailing
 * `|`, `&&` or backslash), "invalid" (another syntax error) or "unknown" (bash did not answer).
 */
const char *bk_is_complete(const char *path, const char *code, size_t len);

/** The pure part of bk_is_complete: the verdict from bash -n's wait status and messages. */
const char *bk_is_complete_classify(int wstatus, const char *messages, const char *code, size_t len);

typedef enum { BK_COMPLETE_COMMAND, BK_COMPLETE_FILE, BK_COMPLETE_VARIABLE } bk_complete_kind_t;

/** The word under the cursor: bytes [start, end) of the code, what to complete it as. */
typedef struct st_bk_complete_ctx_t {
    size_t start, end;
    bk_complete_kind_t kind;
    /** What bash must not see but every match gets back ("$" or "${" for variables). */
    const char *sigil;
} bk_complete_ctx_t;

/** Finds the word that ends at byte `cursor` of `code` (cursor is clamped to len). Pure. */
void bk_complete_find(const char *code, size_t len, size_t cursor, bk_complete_ctx_t *ctx);

/**
 * Builds the bash command line that writes the candidates for `ctx` to `outpath`, one a line
 * (directories with a trailing "/"), for the persistent bash to run, so that its functions,
 * aliases, variables and working directory count; it leaves the user's $? as it was. Returns a
 * wire_malloc'd string.
 */
char *bk_complete_command(const bk_complete_ctx_t *ctx, const char *code, const char *outpath);

/**
 * Parses the candidates file: unique lines in order (minus the kernel's own __kgate names), each
 * prefixed with the sigil, at most `max`.
 */
json_t *bk_complete_matches(const char *data, size_t len, const char *sigil, size_t max);

/** `s` single-quoted for bash ('it'\''s'); a wire_malloc'd string. */
char *bk_shell_quote(const char *s, size_t len);

#endif
