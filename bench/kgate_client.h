/* bench/kgate_client.h: kgate's HTTP API as the benchmark uses it (contexts, POST /code over SSE). */
#ifndef BENCH_KGATE_CLIENT_H
#define BENCH_KGATE_CLIENT_H

#include "common.h"
#include "http_client.h"

/**
 * POST /code/context {"language": `language`}. On success returns 0 and stores the new context
 * id in `*id` (the caller frees it). Errors: BENCH_ESTATUS (non-200; the body is in the detail),
 * BENCH_EPROTO (no id), or a transport error.
 */
int bench_kgate_create_context(bench_http_t *c, const char *language, char **id);

/** DELETE /code/contexts/{id}. Returns 0, BENCH_ESTATUS or a transport error. */
int bench_kgate_delete_context(bench_http_t *c, const char *id);

/**
 * GET `path` and returns its status in `*status` (the body is discarded). Returns 0 or a transport
 * error. Used to learn that kgate is listening.
 */
int bench_kgate_probe(bench_http_t *c, const char *path, int *status);

/**
 * POST /code {"context":{"id": `context_id`}, "code": `code`[, "output_limit": `output_limit`]}
 * (the limit is sent only when non-zero) and reads the SSE stream (standard
 * `data:` framing or execd's bare-JSON lines) up to the `execution_complete` event. `out->ms`
 * runs from just before the request is written to just after that event is parsed; the rest of
 * the stream is read afterwards, untimed, so that the connection can be reused. `out` is zeroed
 * first; its strings are owned by the caller (bench_outcome_dispose). A run that raises is not an
 * error here (see `out->error`). Returns 0, BENCH_ESTATUS, BENCH_EPROTO (stream ended without
 * execution_complete, or an event that is not JSON), BENCH_ETOOBIG (an event over 512 MiB), or a
 * transport error.
 */
int bench_kgate_execute(bench_http_t *c, const char *context_id, const char *code, size_t output_limit, bench_outcome_t *out);

#endif
