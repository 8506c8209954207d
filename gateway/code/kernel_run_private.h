/* code/kernel_run_private.h: a kernel run as code/kernel_run.c (its life) and code/kernel_run_tick.c (its timeouts) share it. */
#ifndef GW_KERNEL_RUN_PRIVATE_H
#define GW_KERNEL_RUN_PRIVATE_H

#include "kmgr/kernel.h"
#include "code/kernel_run.h"
#include "code/tool_calls.h"

/* A stop asked before the kernel said it runs the code is sent anyway after this long (a kernel without execute_input). */
#define STOP_WAIT_MS 1000
/*
 * A stopped run still running this long after its interrupt is interrupted again: one that lands in IPython's own work
 * before the code (its history, say) is swallowed there, and the code runs on. Longer than kernelmgr's window for
 * interrupts in flight, so the kernel is done with the first one.
 */
#define STOP_RETRY_MS 2500

typedef struct st_gw_kernel_run_t {
    gw_run_t *run;
    gw_context_t *ctx;
    kmgr_request_t *request; /* NULL while queued */
    char *code;              /* until sent */
    char *setup_code;        /* code mode: run silently first, until sent */
    gw_tool_calls_t tool_calls;
    int execution_count;
    int allow_stdin;
    unsigned timeout_ms;
    /* gw_now_ms clock (a wall-clock step must not time a run out); 0 until its first request reaches the kernel
     * (gw_kernel_run_arm_deadline): queued, or waiting for a kernel that is still starting */
    int64_t deadline_ms;
    int64_t grace_deadline_ms; /* after the timeout's interrupt, same clock */
    int64_t input_deadline_ms; /* while input_pending: an unanswered input() ends the run then; same clock */
    unsigned stdin_timeout_ms;
    json_t *reply_error; /* the error the shell reply implies, sent at DONE unless iopub carried one */
    char setup_error[256];
    unsigned timed_out : 1;
    unsigned stdin_timed_out : 1; /* the timeout was the stdin wait's */
    unsigned saw_error : 1;       /* an error event was relayed: the run's outcome is "error" */
    unsigned restarting : 1;
    unsigned stop_restarted : 1; /* its stop's interrupt went unheeded on a kernel whose interrupts may hang: restarted */
    unsigned input_pending : 1;
    unsigned setup_failed : 1; /* its reply said so: setup_error tells why */
    unsigned got_reply : 1;
    unsigned saw_oversized : 1; /* a kernel message over the cap was dropped meanwhile */
    unsigned executing : 1;     /* the kernel said it runs the code (execute_input): an interrupt now reaches the code */
    unsigned stop_wanted : 1;   /* gw_run_stop: interrupted once executing (see on_stop) */
    unsigned in_setup : 1;      /* the request in flight is the setup's (code mode), not the code's */
    unsigned silent : 1;        /* gw_kernel_run_options_t's */
    unsigned saw_output : 1;    /* its first output was timed (code/figures.h) */
    int64_t submitted_ms;       /* gw_now_ms clock: the figures' latencies start here */
    int64_t stop_wanted_ms;     /* when; gw_now_ms clock */
    int64_t interrupted_ms;     /* the last interrupt asked for it; same clock */
    int64_t first_interrupt_ms; /* the first one; 0 before it; same clock */
    h2o_linklist_t link;        /* in ctx->runs, arrival order: the head is the one sent to the kernel */
} gw_kernel_run_t;

/** The stop of a run whose code runs: kmgr_kernel_interrupt sends nothing while an interrupt is in flight. */
void gw_kernel_run_interrupt(gw_kernel_run_t *krun);

/**
 * Starts the run's timeout once its request has reached the kernel (kmgr_request_sent_at): not while the run waits for
 * a kernel still starting or restarting, whose start has its own bound (--kernel-start-timeout-ms) and fails as such
 * (KernelDied). No-op once started or while nothing was sent.
 */
static inline void gw_kernel_run_arm_deadline(gw_kernel_run_t *krun)
{
    uint64_t sent_at;

    if (krun->deadline_ms == 0 && krun->request != NULL && (sent_at = kmgr_request_sent_at(krun->request)) != 0)
        krun->deadline_ms = (int64_t)sent_at + krun->timeout_ms;
}

#endif
