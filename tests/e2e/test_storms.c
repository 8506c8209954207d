/* tests/e2e/test_storms.c: storms of interrupts against a real kernel: every run ends soon after it, and no kernel dies of it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_helpers.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/stream.h"

#define RUNS 8
#define BURST 50
/* a run ends this soon after the burst that interrupted it (the kernel is idle within milliseconds of an interrupt) */
#define END_MS 5000

static ts_gateway_t gw;

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(storms, .fini = fini, .timeout = 400);

/* This binary checks kgate, not itself. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

/* The kernel's PID, asked of the kernel itself (on the last line: IPython may have a word first after an interrupt). */
static int kernel_pid(const char *ctx)
{
    ts_events_t evs;
    char *out, *line;
    int pid;

    xh_run_ok(gw.port, ctx, "import os; print('pid', os.getpid())", &evs);
    out = ts_events_text(&evs, "stdout");
    line = strstr(out, "pid ");
    pid = line != NULL ? atoi(line + 4) : 0;
    free(out);
    ts_events_dispose(&evs);
    cr_assert_gt(pid, 1);
    return pid;
}

/* The ename of the run's first error event, or "" without one. */
static const char *error_name(const ts_events_t *evs)
{
    long i = ts_events_find(evs, "error", 0);
    const char *name = i >= 0 ? json_string_value(json_object_get(json_object_get(evs->v[i].json, "error"), "ename")) : NULL;
    return name != NULL ? name : "";
}

/* BURST DELETEs of `exec_id`, as fast as one connection each allows; every one is answered 200. */
static void burst(const char *exec_id)
{
    char path[256];

    snprintf(path, sizeof(path), "/code/executions/%s", exec_id);
    for (int i = 0; i != BURST; ++i) {
        ts_response_t r;
        int st = ts_http_request(gw.port, "DELETE", path, NULL, NULL, &r);
        cr_assert(st == 200 || st == 404, "DELETE %s: HTTP %d (%s) %.300s", path, st, r.error, r.body);
        ts_response_dispose(&r);
    }
}

/*
 * Eight runs, each hit by 50 interrupts at once: half of the bursts come as soon as the run exists (before or while the
 * kernel starts its code), half once the code is running. Signals that close together ended the kernel (KernelDied in four of
 * eight runs); one that landed around the code lost the run's reply, and the run stayed running until its timeout with
 * the kernel idle; one that came before the code was lost, and the code ran on.
 */
Test(storms, fifty_interrupts_per_run_end_every_run_and_kill_no_kernel)
{
    char *ctx;
    int pid;

    xh_gateway_start(&gw, NULL);
    ctx = xh_context_new(gw.port, NULL, NULL);
    pid = kernel_pid(ctx);
    for (int i = 0; i != RUNS; ++i) {
        int64_t deadline = ts_now_ms() + XH_RUN_MS, burst_end;
        json_t *body = xh_body(ctx, "import time\nprint('go', flush=True)\ntime.sleep(30)\nprint('not interrupted')");
        ts_stream_t *s = xh_open(gw.port, body, deadline);
        ts_events_t evs = {0};
        char exec_id[64];

        json_decref(body);
        xh_wait_event(s, &evs, i % 2 == 0 ? "init" : "stdout", 0, deadline);
        snprintf(exec_id, sizeof(exec_id), "%s", xh_execution_id(&evs));
        burst(exec_id);
        burst_end = ts_now_ms();
        ts_stream_collect(s, deadline, 0, &evs);
        ts_stream_close(s);
        cr_assert(evs.ended, "run %d: its stream did not end: %s", i, evs.error);
        cr_assert_str_neq(error_name(&evs), "KernelDied", "run %d: the kernel died of the interrupts", i);
        cr_assert_lt(evs.end_ms - burst_end, END_MS, "run %d ended %lld ms after the burst", i,
                     (long long)(evs.end_ms - burst_end));
        char *out = ts_events_text(&evs, "stdout"), sum[4096];
        /* interrupted before its print (a burst that came first) or after it, never at its end */
        cr_assert_null(strstr(out, "not interrupted"), "run %d was not interrupted: %s", i,
                       ts_events_summary(&evs, sum, sizeof(sum)));
        cr_assert_str_eq(error_name(&evs), "KeyboardInterrupt", "run %d: %s", i, ts_events_summary(&evs, sum, sizeof(sum)));
        free(out);
        ts_events_dispose(&evs);
    }
    /* the same kernel: none died, none was restarted */
    cr_assert_eq(kernel_pid(ctx), pid, "the context's kernel was replaced");
    free(ctx);
}
