/* code/kernel_run.h: runs executed by a context's kernel, one at a time, in arrival order. */
#ifndef GW_KERNEL_RUN_H
#define GW_KERNEL_RUN_H

#include "code/context.h"
#include "code/tools.h"
#include "runs/run.h"

typedef struct st_gw_kernel_run_options_t {
    const char *code;          /* copied */
    unsigned timeout_ms;       /* > 0 */
    int allow_stdin;           /* input() becomes an input_request event, answered with gw_run_input */
    unsigned stdin_timeout_ms; /* an input request unanswered this long interrupts the run (StdinTimeout); 0: the config's */
    gw_run_limits_t limits;
    /* code mode: tools bound as functions for this run (a Python context only); taken by
     * gw_kernel_run_submit when it succeeds, the caller's to free otherwise. NULL: none */
    gw_toolset_t *tools;
    /* executed silently and kept out of the history (no execution_count, no execute_result): a
     * door's own code around a caller's run, such as E2B's env_vars set before and restored after */
    unsigned silent : 1;
    /* a door's own code (copied) run silently before the run's, as code mode's tools are (E2B's env_vars set); when the
     * kernel answers it with an error the run ends with `SetupFailed` and its code does not run. Ignored with `tools`. */
    const char *setup_code;
} gw_kernel_run_options_t;

/**
 * Queues a run on `ctx`: returns 0 and the run in `*out` (its `init` event, and a `status: queued`
 * one when it waits, already in its log), or GW_EKERNELDEAD (the kernel is dead) or GW_EQUEUEFULL
 * (config->max_queue runs already wait). Runs of one context execute one at a time in arrival
 * order. Past `timeout_ms` the run is interrupted; if the kernel is not idle timeout_grace_ms
 * later it is restarted (`status: restarting`). Either way the run ends with an `error` whose
 * ename is "TimeoutError" ("StdinTimeout" when an input request waited longer than its
 * stdin_timeout_ms: the run timeout counts from when the run's first request reaches the kernel
 * (kmgr_request_sent_at: not while a kernel still starts, whose start has its own bound), the stdin timeout from each
 * input request).
 *
 * With `tools` (code mode), a silent execute binds them as functions before the run's code runs
 * (code/tools_shim.py); each batch of calls the code makes arrives as a marked input_request and
 * becomes `tool_call` events, answered with gw_run_tool_result; once every call of the batch is
 * answered the kernel gets their results in one input_reply. Waiting for tool results is bounded
 * by the run's timeout, not by the stdin timeout (which is for a person typing). GW_ETOOLSUNSUPPORTED
 * when the context's language is not Python.
 */
int gw_kernel_run_submit(gw_context_t *ctx, const gw_kernel_run_options_t *opts, gw_run_t **out);

/** Runs queued or running on `ctx`. */
size_t gw_kernel_runs_count(const gw_context_t *ctx);

/**
 * Ends every run queued or running on `ctx` with an `error` event (`ename`, `evalue`) and
 * execution_complete (`outcome` recorded); their kernel requests are abandoned.
 */
void gw_kernel_runs_abort(gw_context_t *ctx, const char *ename, const char *evalue, const char *outcome);

/** Appends a `status` event with `text` ("restarting", "not answering", ...) to every run queued or running on `ctx`. */
void gw_kernel_runs_status(gw_context_t *ctx, const char *text);

/** Enforces run timeouts on every context (gw_contexts_tick). */
void gw_kernel_runs_tick(gw_contexts_t *contexts);

#endif
