/* gateway/translate.h: Jupyter messages of one run -> API events (pure: JSON in, JSON out). */
#ifndef GW_TRANSLATE_H
#define GW_TRANSLATE_H

#include <jansson.h>
#include "wire/message.h"
#include "core/event.h"

typedef struct st_gw_translate_opts_t {
    int compat_execd; /* send non-string MIME values of results as their JSON text (Go's SDK reads a map of strings) */
    int keep_ansi;    /* keep ANSI escape sequences in tracebacks */
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
