/* gateway/editor.h: the text-editor tool's semantics on file contents in memory (pure), and its undo history. */
#ifndef GW_EDITOR_H
#define GW_EDITOR_H

#include "core/errors.h"

#include <stddef.h>

/** "Error: Found <n> matches for replacement text. Please provide more context to make a unique match." into buf. */
void gw_editor_multiple_matches_message(size_t n, char *buf, size_t size);

/** Lines of `len` bytes: 0 when empty; a final '\n' ends the last line rather than starting another. */
size_t gw_editor_count_lines(const char *s, size_t len);

/**
 * view: lines `start`..`end` (1-indexed, inclusive; end -1 = to the last line; the whole file is
 * 1, -1) rendered as "<n>: <line>" joined by '\n' (no newline after the last). An end past the last
 * line is clamped; an empty file has no lines and views as "" (start 1 only). Then at most `max_chars` characters (UTF-8 code
 * points; 0 = no limit) are kept, cut at a character boundary, and *truncated says whether anything was cut. Returns 0 with *out
 * (wire_malloc, NUL-terminated, caller frees) and *out_len, or GW_EEDITOR_INVALIDRANGE (start < 1, start past the last line, end
 * < start).
 */
int gw_editor_view(const char *s, size_t len, long start, long end, size_t max_chars, char **out, size_t *out_len, int *truncated);

/**
 * str_replace: replaces the only occurrence of `old` with `new_`. Occurrences are counted without
 * overlap. Returns 0 with the new contents in *out (caller frees), or GW_EEDITOR_EMPTYOLDSTR,
 * GW_EEDITOR_NOMATCH, GW_EEDITOR_MULTIPLEMATCHES (*matches = the count), GW_EEDITOR_TOOLARGE
 * (result longer than `max_len`). `*matches` is always set.
 */
int gw_editor_str_replace(const char *s, size_t len, const char *old, size_t old_len, const char *new_, size_t new_len,
                          size_t max_len, char **out, size_t *out_len, size_t *matches);

/**
 * insert: inserts `text` as whole lines after line `line` (0 = before the first line; the number of
 * lines = at the end). A '\n' is added after `text` when it lacks one and more lines follow, and
 * before it when the file's last line lacks one. Returns 0 with *out (caller frees), or
 * GW_EEDITOR_INVALIDLINE (line < 0 or past the last line), GW_EEDITOR_TOOLARGE.
 */
int gw_editor_insert(const char *s, size_t len, long line, const char *text, size_t text_len, size_t max_len, char **out,
                     size_t *out_len);

/**
 * Undo history: per file (keyed by a string, the path inside the workspace), the versions before
 * each edit, newest last. Bounded by `max_depth` versions per file and `max_bytes` for everything
 * (contents plus a per-entry overhead); beyond, the oldest versions of the least recently edited
 * files are dropped.
 */
typedef struct st_gw_editor_history_t gw_editor_history_t;

gw_editor_history_t *gw_editor_history_create(unsigned max_depth, size_t max_bytes);
/** NULL is fine. */
void gw_editor_history_destroy(gw_editor_history_t *h);

/**
 * Records the version of `key` before an edit: `content` (`len` bytes, copied) when the file existed,
 * or existed = 0 (the edit created it; undo deletes it). A version that alone exceeds the byte bound
 * cannot be kept: the file's whole history is then forgotten (an older version restored by undo
 * would silently drop the newer edits).
 */
void gw_editor_history_push(gw_editor_history_t *h, const char *key, const char *content, size_t len, int existed);

/**
 * Takes the newest recorded version of `key`: 0 with *content (caller frees; NULL when !*existed),
 * *len, *existed; or GW_EEDITOR_NOHISTORY.
 */
int gw_editor_history_pop(gw_editor_history_t *h, const char *key, char **content, size_t *len, int *existed);

/** Versions recorded for `key` (for tests). */
size_t gw_editor_history_depth(const gw_editor_history_t *h, const char *key);
/** Bytes accounted for everything (for tests). */
size_t gw_editor_history_bytes(const gw_editor_history_t *h);

#endif
