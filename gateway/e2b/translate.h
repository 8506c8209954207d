/* e2b/translate.h: a run's events as E2B's NDJSON lines, and E2B's language names (pure). */
#ifndef GW_E2B_TRANSLATE_H
#define GW_E2B_TRANSLATE_H

#include <stddef.h>
#include <jansson.h>

/** What one stream has said so far: E2B sends at most one `error` per execution. */
typedef struct st_gw_e2b_xlate_t {
    unsigned error_sent : 1;
    unsigned truncation_said : 1;
} gw_e2b_xlate_t;

/** A growing buffer of NDJSON lines (wire_malloc; the caller frees `p`). */
typedef struct st_gw_e2b_lines_t {
    char *p;
    size_t len, cap;
} gw_e2b_lines_t;

/**
 * Appends to `out` the E2B lines (docs/e2b.md, the contract's section 3) of one run event (the JSON of
 * a frame, borrowed): `execution_count` -> `number_of_executions`; `stdout`/`stderr` -> the same with
 * `text` and an ISO 8601 `timestamp`; `result` -> `result` with its MIME bundle flattened (`text` from
 * text/plain with one pair of surrounding quotes removed, `html`, `png`, ..., other types in `extra`)
 * and `is_main_result` (false for what the code displayed: the event's `display`); the first `error`
 * -> `error` {name, value, traceback: the lines joined}; kgate's `output_truncated` status -> one
 * `stderr` line saying what was dropped. Every other event says nothing. Each line is one compact JSON
 * object and ends in "\n": never a blank line.
 */
void gw_e2b_translate(gw_e2b_xlate_t *state, const json_t *event, gw_e2b_lines_t *out);

/** Appends {"type": type} and "\n" (`keepalive`, `end_of_execution`). */
void gw_e2b_line_simple(gw_e2b_lines_t *out, const char *type);

/** Appends an `error` line {name, value, traceback} unless one was sent; marks it sent. */
void gw_e2b_line_error(gw_e2b_xlate_t *state, gw_e2b_lines_t *out, const char *name, const char *value, const char *traceback);

/**
 * E2B's name of a language (its server's normalize_language): trimmed, lower-cased, `js` ->
 * `javascript`, `ts` -> `typescript`, empty or NULL -> `python`. Writes at most `size` - 1 bytes
 * into `buf` and returns it.
 */
const char *gw_e2b_language(const char *language, char *buf, size_t size);

/**
 * The kernel language that runs E2B's `language` (normalised): `typescript` runs on JavaScript's
 * kernel, as E2B's does; others are themselves.
 */
const char *gw_e2b_kernel_language(const char *language);

/**
 * Code that sets `env` ({"K": "V"}, borrowed) in a kernel of `language` for one run, or restores the
 * values it replaced (`restore`): Python, JavaScript/TypeScript, R and bash. NULL for another
 * language (E2B's server sets no variable there either). A new string (wire_malloc).
 */
char *gw_e2b_env_code(const char *language, const json_t *env, int restore);

/**
 * Copies `len` bytes of `in` into `out` (`room` bytes, NUL-terminated) as a text/plain; charset=utf-8
 * body may carry bytes a caller sent (an id from a path or a body): valid UTF-8 stays, each control
 * character (C0, DEL) becomes '?', each invalid byte U+FFFD. Stops before a character that would not
 * fit whole. Returns the length written.
 */
size_t gw_e2b_plain_text(char *out, size_t room, const char *in, size_t len);

#endif
