/* bench/kgate_client.h: kgate's HTTP API as the benchmark uses it (contexts, POST /code over SSE). */
#ifndef BENCH_KGATE_CLIENT_H
#define BENCH_KGATE_CLIENT_H

#include "common.h"
#include "support/http.h"

/*
 * Each call is bounded by `timeout_ms` from its start. Errors are the bench's (common.h) or the
 * test-support library's (TS_E*, support/base.h), with the detail set (bench_set_detail).
 */

/**
 * POST /code/context {"language": `language`} on a connection of its own. On success returns 0
 * and stores the new context id in `*id` (the caller frees it). Errors: BENCH_ESTATUS (non-200;
 * the body is in the detail), BENCH_EPROTO (no id), or a transport error.
 */
int bench_kgate_create_context(ts_http_t *c, unsigned timeout_ms, const char *language, char **id);

/**
 * DELETE /code/contexts/{id} on a connection of its own, as clean-up: a failure is a warning on
 * stderr, and the detail of an earlier error is kept. NULL `id` is fine.
 */
void bench_kgate_drop_context(ts_http_t *c, unsigned timeout_ms, const char *id);

/**
 * POST /api/kernels {"name": `name`} (the Jupyter Server kernels API) on a connection of its own.
 * On success returns 0 and stores the kernel id in `*id` (the caller frees it); the kernel is a
 * context too (one registry). Errors: BENCH_ESTATUS (non-201), BENCH_EPROTO (no id), or a transport
 * error.
 */
int bench_kgate_start_kernel(ts_http_t *c, unsigned timeout_ms, const char *name, char **id);

/** DELETE /api/kernels/{id}, as clean-up (a failure is a warning; an earlier detail is kept). NULL `id` is fine. */
void bench_kgate_shutdown_kernel(ts_http_t *c, unsigned timeout_ms, const char *id);

/**
 * POST /code {"context":{"id": `context_id`}, "code": `code`[, "output_limit": `output_limit`]}
 * (the limit is sent only when non-zero) and reads the SSE stream (standard `data:` framing or
 * execd's bare-JSON lines) up to the `execution_complete` event, each event parsed where it
 * arrives (ts_sse_reader_t). `out->ms` runs from just before the request is written to just after
 * that event is parsed; the rest of the stream is read afterwards, untimed, so that the connection
 * can be reused. `out` is zeroed first; its strings are owned by the caller (bench_outcome_dispose).
 * A run that raises is not an error here (see `out->error`). Returns 0, BENCH_ESTATUS,
 * BENCH_EPROTO (stream ended without execution_complete, or an event that is not JSON),
 * TS_ETOOBIG (an event over 512 MiB), or a transport error.
 */
int bench_kgate_execute(ts_http_t *c, unsigned timeout_ms, const char *context_id, const char *code, size_t output_limit,
                        bench_outcome_t *out);

#endif
