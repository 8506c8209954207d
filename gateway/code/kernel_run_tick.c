/*
 * A context's runs' timeouts: past its timeout a run is interrupted, past the grace after it the kernel is restarted. A
 * stopped run is interrupted again until it ends; on a kernel whose interrupts may hang, restarted past the grace too.
 */
#include "code/kernel_run_private.h"

/* The run did not stop when interrupted: the kernel is restarted (`why` counts it). */
static void restart_under(gw_kernel_run_t *krun, gw_stats_series_t *why)
{
    gw_context_t *ctx = krun->ctx;

    krun->restarting = 1;
    gw_stats_inc(why, 1);
    /* every run of the context learns that state is about to be lost, queued ones included */
    gw_kernel_runs_status(ctx, "restarting");
    ctx->execution_count = 0;
    /* the running request ends with FAILED, later, from the loop (kernelmgr never calls back inside restart) */
    if (kmgr_kernel_restart(ctx->kernel) != 0 && !h2o_linklist_is_empty(&ctx->runs))
        gw_kernel_runs_abort(ctx, "KernelDied", kmgr_kernel_exit_reason(ctx->kernel), "kernel_died");
}

void gw_kernel_runs_tick(gw_contexts_t *contexts)
{
    int64_t now = gw_now_ms();
    h2o_linklist_t *node, *next;

    for (node = contexts->list.next; node != &contexts->list; node = next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        gw_kernel_run_t *krun;
        next = node->next;
        if (h2o_linklist_is_empty(&ctx->runs))
            continue;
        krun = H2O_STRUCT_FROM_MEMBER(gw_kernel_run_t, link, ctx->runs.next);
        if (krun->request == NULL || krun->restarting)
            continue;
        gw_kernel_run_arm_deadline(krun);
        if (krun->stop_wanted && !krun->in_setup && !krun->got_reply && !krun->timed_out) {
            /* a kernel whose interrupts may hang (kmgr_kernelspec_t): unheeded past the grace, it would never end the run */
            if (ctx->spec->interrupt_may_hang && krun->first_interrupt_ms != 0 &&
                now - krun->first_interrupt_ms >= (int64_t)contexts->host->config->timeout_grace_ms) {
                krun->stop_restarted = 1;
                restart_under(krun, contexts->figures.restarts_stop);
                continue;
            }
            /* a stop that waited for execute_input in vain, or an interrupt the kernel swallowed */
            if (krun->executing ? now - krun->interrupted_ms >= STOP_RETRY_MS : now - krun->stop_wanted_ms >= STOP_WAIT_MS)
                gw_kernel_run_interrupt(krun);
        }
        if (krun->deadline_ms == 0)
            continue; /* its kernel is still starting: the run's time has not begun */
        if (!krun->timed_out) {
            int stdin_expired = krun->input_pending && now >= krun->input_deadline_ms;
            if (now < krun->deadline_ms && !stdin_expired)
                continue;
            /* an abandoned input() holds the context no longer than the stdin wait: interrupted like a timeout */
            krun->stdin_timed_out = now < krun->deadline_ms;
            krun->input_pending = 0;
            gw_tool_calls_close(&krun->tool_calls);
            krun->timed_out = 1;
            krun->grace_deadline_ms = now + contexts->host->config->timeout_grace_ms;
            kmgr_kernel_interrupt(ctx->kernel);
        } else if (now >= krun->grace_deadline_ms) {
            restart_under(krun, contexts->figures.restarts_timeout);
        }
    }
}
