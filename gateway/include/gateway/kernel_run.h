/* gateway/kernel_run.h: runs executed by a context's kernel, one at a time, in arrival order. */
#ifndef GW_KERNEL_RUN_H
#define GW_KERNEL_RUN_H

#include "gateway/context.h"
#include "gateway/run.h"

typedef struct st_gw_kernel_run_options_t {
    const char *code;    /* copied */
    unsigned timeout_ms; /* > 0 */
    int allow_stdin;     /* input() becomes an input_request event, answered by POST .../input */
    gw_run_limits_t limits;
} gw_kernel_run_options_t;

/**
 * Queues a run on `ctx` and returns it (its `init` event is already in its log). Runs of one
 * context execute one at a time in arrival order; the caller checks the queue bound first
 * (gw_kernel_runs_count). Past `timeout_ms` the run is interrupted; if the kernel is not idle
 * `timeout_grace_ms` later it is restarted (`status: restarting`). Either way the run ends with
 * an `error` whose ename is "TimeoutError". Never NULL.
 */
gw_run_t *gw_kernel_run_submit(gw_context_t *ctx, const gw_kernel_run_options_t *opts);

/** Runs queued or running on `ctx`. */
size_t gw_kernel_runs_count(const gw_context_t *ctx);

/**
 * Ends every run queued or running on `ctx` with an `error` event (`ename`, `evalue`) and
 * execution_complete (`outcome` recorded); their kernel requests are abandoned.
 */
void gw_kernel_runs_abort(gw_context_t *ctx, const char *ename, const char *evalue, const char *outcome);

/** Enforces run timeouts on every context (server tick). */
void gw_kernel_runs_tick(gw_server_t *server);

#endif
