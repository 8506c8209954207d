/* gateway/kernel_run.h: runs executed by a context's kernel: kernel messages in, run events out. */
#ifndef GW_KERNEL_RUN_H
#define GW_KERNEL_RUN_H

#include "gateway/context.h"
#include "gateway/run.h"

/**
 * Sends `code` to the context's kernel and returns the run that streams its events (`init` text:
 * the context id). When the kernel cannot take it (dead), the run is returned already finished
 * with an `error` event saying why. Never NULL.
 */
gw_run_t *gw_kernel_run_start(gw_context_t *ctx, const char *code);

/**
 * Ends every run in progress on `ctx` with an `error` event (`ename`, `evalue`) and
 * execution_complete; their kernel requests are abandoned. Used when a context goes away.
 */
void gw_kernel_runs_abort(gw_context_t *ctx, const char *ename, const char *evalue);

#endif
