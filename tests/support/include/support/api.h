/* support/api.h: kgate's HTTP API as the tests and the benchmark call it: JSON requests, contexts, POST /code. */
#ifndef KGATE_SUPPORT_API_H
#define KGATE_SUPPORT_API_H

#include <jansson.h>
#include "support/events.h"
#include "support/http.h"

/** POSTs `body` (borrowed) serialised compactly, with Content-Type: application/json (ts_http_request). */
int ts_post_json(unsigned short port, const char *path, const char *const *headers, json_t *body, ts_response_t *out);

/**
 * POST /code/context {"language": language}, bounded by `deadline_ms`. On 200 with an "id" string,
 * *id is a copy (caller frees), else NULL; `id` may be NULL. Returns the status, or a negative
 * TS_E* on transport failure. `resp` (may be NULL) receives the response; dispose it.
 */
int ts_context_create_until(unsigned short port, const char *const *headers, const char *language, int64_t deadline_ms, char **id,
                            ts_response_t *resp);

/** ts_context_create_until bounded by TS_REQUEST_MS from now. */
int ts_context_create(unsigned short port, const char *const *headers, const char *language, char **id, ts_response_t *resp);

/** DELETE /code/contexts/{id} bounded by `deadline_ms`; returns the status or a negative TS_E*. `resp` as above. */
int ts_context_delete_until(unsigned short port, const char *const *headers, const char *id, int64_t deadline_ms,
                            ts_response_t *resp);

/** ts_context_delete_until bounded by TS_REQUEST_MS from now, without the response. */
int ts_context_delete(unsigned short port, const char *const *headers, const char *id);

/**
 * Builds the POST /code body: {"context": {"id"?, "language"?}, "code": code}; no "context" at
 * all when both are NULL. New reference.
 */
json_t *ts_code_body(const char *ctx_id, const char *language, const char *code);

/**
 * POST /code and collect the whole stream within `timeout_ms` (ts_stream_collect). Returns the
 * HTTP status, or a negative TS_E* on transport failure (message in out->error). When `resp` is
 * given it receives the head (and the body of a non-stream response); dispose it.
 */
int ts_run_code(unsigned short port, const char *const *headers, const char *ctx_id, const char *language, const char *code,
                int timeout_ms, ts_events_t *out, ts_response_t *resp);

#endif
