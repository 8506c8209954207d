/* gateway/translate.h: Jupyter messages of one run -> API events (pure: JSON in, JSON out). */
#ifndef GW_TRANSLATE_H
#define GW_TRANSLATE_H

#include <jansson.h>
#include "wire/message.h"
#include "wire/json_scan.h"
#include "core/event.h"

typedef struct st_gw_translate_opts_t {
    int compat_execd; /* send non-string MIME values of results as their JSON text (Go's SDK reads a map of strings) */
    int keep_ansi;    /* keep ANSI escape sequences in tracebacks and in results' text/plain */
} gw_translate_opts_t;

/**
 * Translates one iopub message whose parent is the run's request into an API event (a new JSON
 * object with `type` and `timestamp`), or NULL when the message is not forwarded:
 *   stream -> stdout / stderr {text}; execute_result, display_data -> result {results} (the MIME
 *   bundle, plus `text` beside a string `text/plain`);
 *   error -> error {error: {ename, evalue, traceback[]}}; execute_input -> execution_count;
 *   everything else (status, clear_output, comms) -> NULL: a run's `status: busy` is kgate's own,
 *   sent when the run reaches the kernel (code/kernel_run.c), not the kernel's status message.
 *   A message whose content could not be decoded (msg->content_undecodable) becomes a `status`
 *   event {text: "message_undecodable", msg_type, reason} instead of vanishing.
 */
json_t *gw_translate_iopub(const wire_msg_t *msg, const gw_translate_opts_t *opts);

/**
 * The `results` of a `result` event, as JSON text on one line (wire_malloc'd, `*len` bytes), from a
 * bundle that wire_json_scan_bundle found in an execute_result or display_data: every MIME value
 * copied as the kernel encoded it (white space taken out only where it held a line break), plus `text`
 * beside a string `text/plain`, both without ANSI escapes unless opts->keep_ansi; with
 * opts->compat_execd each non-string value becomes the JSON string of its text. A `text` member of
 * the bundle gives way to the copy of `text/plain`, as in gw_translate_iopub. Pure.
 */
char *gw_translate_raw_bundle(const wire_bundle_fields_t *bundle, const gw_translate_opts_t *opts, size_t *len);

/**
 * Translates the shell reply of an execute_request. Unless the reply says `ok` or an error event
 * was already seen (`saw_error`), it returns an `error` event: from the reply's content for
 * `error`, ename "ExecutionAborted" for `aborted` (ipykernel) or `abort` (tslab), ename
 * "ExecutionFailed" naming any other status; NULL otherwise. Stores the reply's execution_count in
 * `*execution_count` when present.
 */
json_t *gw_translate_execute_reply(const wire_msg_t *msg, int saw_error, const gw_translate_opts_t *opts, int *execution_count);

/**
 * Removes ANSI escape sequences (CSI `ESC [ ... final`, OSC `ESC ] ... BEL|ESC \`, and two-byte
 * `ESC x`) from `s`, returning a new string (wire_malloc). Pure; bounded by strlen(s).
 */
char *gw_strip_ansi(const char *s, size_t len, size_t *out_len);

#endif
