/* tests/e2e/test_runs.c: runs agents can trust: timeouts, the per-context queue, cancel, resumption, execution state. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_helpers.h"
#include "shared.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/stream.h"

static void fini(void)
{
    xh_gateways_stop_all();
    e2e_shared_cleanup();
}

TestSuite(runs, .fini = fini, .timeout = 240);

static unsigned short port(void)
{
    return e2e_shared()->port;
}

Test(runs, timeout_interrupts_a_busy_loop_and_the_context_survives)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    ts_events_t evs;
    xh_run_ok(port(), ctx, "kept = 7", &evs);
    ts_events_dispose(&evs);

    json_t *body = xh_body(ctx, "while True: pass");
    json_object_set_new(body, "timeout", json_integer(1000));
    int64_t t0 = ts_now_ms();
    xh_run(port(), body, t0 + 20000, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    xh_error_event(&evs, "TimeoutError");
    char sum[E2E_MSG_SIZE];
    cr_assert_eq(ts_events_count(&evs, "error"), 1, "expected TimeoutError alone (no KeyboardInterrupt besides); %s",
                 ts_events_summary(&evs, sum, sizeof(sum)));
    cr_assert_eq(xh_status_count(&evs, "restarting"), 0, "an interruptible loop must not restart the kernel; %s",
                 ts_events_summary(&evs, sum, sizeof(sum)));
    int64_t took = evs.end_ms - t0;
    cr_assert(took < 2000, "the run with timeout 1000 ms ended after %lld ms, expected < 2000 ms", (long long)took);
    json_t *ex = xh_execution(port(), xh_execution_id(&evs));
    cr_assert_str_eq(xh_str(ex, "outcome"), "timeout", "outcome after a timeout: %s", xh_str(ex, "outcome"));
    json_decref(ex);
    ts_events_dispose(&evs);

    /* Interrupted, not restarted: the state set before is still there. */
    xh_run_ok(port(), ctx, "print(kept * 6)", &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "42\n");
    ts_events_dispose(&evs);
    free(ctx);
}

Test(runs, timeout_restarts_a_kernel_that_ignores_interrupts)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    ts_events_t evs;
    xh_run_ok(port(), ctx, "marker = 42", &evs);
    ts_events_dispose(&evs);

    json_t *body = xh_body(ctx, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: pass");
    json_object_set_new(body, "timeout", json_integer(1000));
    int64_t t0 = ts_now_ms();
    xh_run(port(), body, t0 + 60000, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    char sum[E2E_MSG_SIZE];
    cr_assert_eq(xh_status_count(&evs, "restarting"), 1, "expected one status `restarting` event; %s",
                 ts_events_summary(&evs, sum, sizeof(sum)));
    const ts_event_t *err = xh_error_event(&evs, "TimeoutError");
    long restarting = -1;
    for (size_t i = 0; i < evs.n && restarting < 0; i++)
        if (strcmp(evs.v[i].type, "status") == 0 && strcmp(xh_str(evs.v[i].json, "text"), "restarting") == 0)
            restarting = (long)i;
    cr_assert(&evs.v[restarting] < err, "status restarting should precede the TimeoutError; %s",
              ts_events_summary(&evs, sum, sizeof(sum)));
    cr_log_info("ignored interrupt: timeout 1000 ms, stream ended after %lld ms", (long long)(evs.end_ms - t0));
    json_t *ex = xh_execution(port(), xh_execution_id(&evs));
    cr_assert_str_eq(xh_str(ex, "outcome"), "timeout");
    json_decref(ex);
    ts_events_dispose(&evs);

    /* The context works again, on a fresh kernel: the variable set before is gone. */
    xh_run_ok(port(), ctx, "print('marker' in dir())", &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "False\n");
    ts_events_dispose(&evs);
    json_t *c = NULL;
    cr_assert_eq(xh_context_get(port(), ctx, &c), 200);
    cr_assert_str_eq(xh_str(c, "status"), "idle", "context status after the restart and a run: %s", xh_str(c, "status"));
    json_decref(c);
    free(ctx);
}

Test(runs, three_runs_posted_at_once_complete_in_order_without_interleaving)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    enum { RUNS = 3, LINES = 5 };
    ts_stream_t *s[RUNS];
    ts_events_t evs[RUNS];
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    for (int k = 0; k < RUNS; k++) {
        char code[256];
        snprintf(code, sizeof(code),
                 "import time\nfor i in range(%d):\n    print('run%d line', i, flush=True)\n    time.sleep(0.1)", LINES, k);
        json_t *body = xh_body(ctx, code);
        s[k] = xh_open(port(), body, deadline);
        json_decref(body);
        cr_assert_eq(ts_stream_response(s[k])->status, 200, "POST /code #%d: HTTP %d %.400s", k, ts_stream_response(s[k])->status,
                     ts_stream_response(s[k])->body);
        memset(&evs[k], 0, sizeof(evs[k]));
    }
    /* kgate keeps each run's events until read: reading the streams one after the other loses nothing. */
    for (int k = 0; k < RUNS; k++) {
        ts_stream_collect(s[k], deadline, 0, &evs[k]);
        ts_stream_close(s[k]);
    }
    char sum[E2E_MSG_SIZE];
    for (int k = 0; k < RUNS; k++) {
        E2E_ASSERT_RUN(&evs[k], ctx, E2E_FRAMING_SSE);
        cr_assert_eq(ts_events_count(&evs[k], "error"), 0, "run %d failed; %s", k, ts_events_summary(&evs[k], sum, sizeof(sum)));
        char expected[512];
        size_t len = 0;
        for (int i = 0; i < LINES; i++)
            len += (size_t)snprintf(expected + len, sizeof(expected) - len, "run%d line %d\n", k, i);
        E2E_ASSERT_TEXT(&evs[k], "stdout", expected);
        if (k > 0)
            cr_assert_eq(xh_status_count(&evs[k], "queued"), 1, "run %d was posted behind another: expected status queued; %s", k,
                         ts_events_summary(&evs[k], sum, sizeof(sum)));
    }
    /* One at a time, in posting order: each starts after the previous one completed. */
    for (int k = 1; k < RUNS; k++) {
        const ts_event_t *prev_done = &evs[k - 1].v[evs[k - 1].n - 1];
        long first_out = ts_events_find(&evs[k], "stdout", 0);
        long long done_ts = xh_int(prev_done->json, "timestamp");
        long long out_ts = xh_int(evs[k].v[first_out].json, "timestamp");
        cr_assert(out_ts >= done_ts, "run %d printed (t=%lld) before run %d completed (t=%lld)", k, out_ts, k - 1, done_ts);
        json_t *a = xh_execution(port(), xh_execution_id(&evs[k - 1]));
        json_t *b = xh_execution(port(), xh_execution_id(&evs[k]));
        cr_assert(xh_int(b, "started_at") >= xh_int(a, "finished_at"), "run %d started at %lld, before run %d finished at %lld", k,
                  xh_int(b, "started_at"), k - 1, xh_int(a, "finished_at"));
        cr_assert(xh_int(b, "finished_at") >= xh_int(a, "finished_at"), "completion order differs from posting order");
        json_decref(a);
        json_decref(b);
    }
    for (int k = 0; k < RUNS; k++)
        ts_events_dispose(&evs[k]);
    free(ctx);
}

/* Opens GET /code/executions/{id}/events with an optional extra header or query. */
static ts_stream_t *open_events(const char *exec_id, const char *header, const char *query, int64_t deadline)
{
    char path[512];
    snprintf(path, sizeof(path), "/code/executions/%s/events%s", exec_id, query != NULL ? query : "");
    const char *headers[] = {header, NULL};
    char err[256] = "";
    ts_stream_t *s = ts_stream_open(port(), "GET", path, header != NULL ? headers : NULL, NULL, deadline, err);
    cr_assert_not_null(s, "GET %s: %s", path, err);
    cr_assert_eq(ts_stream_response(s)->status, 200, "GET %s (%s): HTTP %d %.400s", path, header ? header : "",
                 ts_stream_response(s)->status, ts_stream_response(s)->body);
    return s;
}

/* `got` (several reads concatenated) is exactly `full`: same ids, same data, same order, nothing twice. */
static void assert_same_events(const ts_events_t *got, const ts_events_t *full, const char *what)
{
    char sa[E2E_MSG_SIZE / 2], sb[E2E_MSG_SIZE / 2];
    cr_assert_eq(got->n, full->n, "%s: %zu events, the uninterrupted read has %zu;\ngot %s\nfull %s", what, got->n, full->n,
                 ts_events_summary(got, sa, sizeof(sa)), ts_events_summary(full, sb, sizeof(sb)));
    for (size_t i = 0; i < got->n; i++) {
        cr_assert_eq(got->v[i].id, full->v[i].id, "%s: event %zu has id %lld, the uninterrupted read %lld", what, i, got->v[i].id,
                     full->v[i].id);
        cr_assert_str_eq(got->v[i].data, full->v[i].data, "%s: event %zu (id %lld) differs", what, i, got->v[i].id);
    }
}

static void append_events(ts_events_t *dst, ts_events_t *src)
{
    for (size_t i = 0; i < src->n; i++) {
        if (dst->n == dst->cap) {
            dst->cap = dst->cap ? dst->cap * 2 : 64;
            dst->v = realloc(dst->v, dst->cap * sizeof(*dst->v));
            cr_assert_not_null(dst->v);
        }
        dst->v[dst->n++] = src->v[i];
    }
    free(src->v);
    memset(src, 0, sizeof(*src));
}

Test(runs, reconnect_with_last_event_id_resumes_exactly_once)
{
    enum { LINES = 40 };
    char *ctx = xh_context_new(port(), NULL, NULL);
    char code[256];
    snprintf(code, sizeof(code), "import time\nfor i in range(%d):\n    print('line', i, flush=True)\n    time.sleep(0.05)", LINES);
    json_t *body = xh_body(ctx, code);
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    ts_stream_t *a = xh_open(port(), body, deadline);
    json_decref(body);
    cr_assert_eq(ts_stream_response(a)->status, 200);
    ts_events_t first = {0};
    xh_wait_event(a, &first, "init", 0, deadline);
    char exec_id[64];
    snprintf(exec_id, sizeof(exec_id), "%s", xh_execution_id(&first));

    /* An uninterrupted reader of the same run, attached from the start, is the reference. */
    ts_stream_t *full_s = open_events(exec_id, NULL, NULL, deadline);

    /* Read a few lines, then drop the connection mid-run. */
    while (ts_events_count(&first, "stdout") < 5)
        xh_wait_event(a, &first, "stdout", first.n, deadline);
    ts_stream_close(a);
    long long last_id = first.v[first.n - 1].id;
    ts_sleep_ms(500);
    json_t *ex = xh_execution(port(), exec_id);
    cr_assert_str_eq(xh_str(ex, "state"), "running", "the run should still be going when the client comes back");
    cr_assert(xh_int(ex, "last_event_id") > last_id, "no event was produced while the client was away (last %lld, mine %lld)",
              xh_int(ex, "last_event_id"), last_id);
    json_decref(ex);

    /* Resume with the SSE header: replay of what was missed, then live, to the end. */
    char header[64];
    snprintf(header, sizeof(header), "Last-Event-ID: %lld", last_id);
    ts_stream_t *b = open_events(exec_id, header, NULL, deadline);
    ts_events_t rest = {0};
    ts_stream_collect(b, deadline, 0, &rest);
    ts_stream_close(b);
    char sum[E2E_MSG_SIZE];
    cr_assert(rest.ended && rest.n > 0, "the resumed stream did not end cleanly; %s", ts_events_summary(&rest, sum, sizeof(sum)));
    cr_assert_eq(rest.v[0].id, last_id + 1, "the resumed stream starts at id %lld, expected %lld", rest.v[0].id, last_id + 1);
    cr_assert_eq(ts_events_count(&rest, "execution_complete"), 1);
    cr_assert_str_eq(rest.v[rest.n - 1].type, "execution_complete");

    ts_events_t full = {0};
    ts_stream_collect(full_s, deadline, 0, &full);
    ts_stream_close(full_s);
    E2E_ASSERT_RUN(&full, ctx, E2E_FRAMING_SSE);

    ts_events_t joined = {0};
    append_events(&joined, &first);
    append_events(&joined, &rest);
    joined.ended = 1;
    assert_same_events(&joined, &full, "first connection + Last-Event-ID resumption");
    char expected[1024];
    size_t len = 0;
    for (int i = 0; i < LINES; i++)
        len += (size_t)snprintf(expected + len, sizeof(expected) - len, "line %d\n", i);
    E2E_ASSERT_TEXT(&joined, "stdout", expected);

    /* The same from a finished run, with the query parameter instead of the header. */
    char query[64];
    snprintf(query, sizeof(query), "?last_event_id=%lld", last_id);
    ts_stream_t *c = open_events(exec_id, NULL, query, deadline);
    ts_events_t again = {0};
    ts_stream_collect(c, deadline, 0, &again);
    ts_stream_close(c);
    cr_assert(again.ended, "replay of a finished run did not end; %s", ts_events_summary(&again, sum, sizeof(sum)));
    cr_assert(again.n > 0 && again.v[0].id == last_id + 1, "?last_event_id=%lld replay starts wrong; %s", last_id,
              ts_events_summary(&again, sum, sizeof(sum)));
    cr_assert_eq(again.n, full.n - (size_t)last_id, "?last_event_id replay: %zu events, expected %zu", again.n,
                 full.n - (size_t)last_id);
    for (size_t i = 0; i < again.n; i++)
        cr_assert_str_eq(again.v[i].data, full.v[(size_t)last_id + i].data, "replay event %zu differs", i);

    ts_events_dispose(&joined);
    ts_events_dispose(&full);
    ts_events_dispose(&again);
    free(ctx);
}

static void delete_execution(const char *exec_id, int expect)
{
    char path[256];
    snprintf(path, sizeof(path), "/code/executions/%s", exec_id);
    ts_response_t r;
    int st = ts_http_request(port(), "DELETE", path, NULL, NULL, &r);
    cr_assert_eq(st, expect, "DELETE %s: HTTP %d (%s) %.400s", path, st, r.error, r.body);
    ts_response_dispose(&r);
}

Test(runs, delete_cancels_a_queued_run_and_interrupts_a_running_one)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    json_t *body = xh_body(ctx, "import time\ntime.sleep(2)\nprint('A done')");
    ts_stream_t *a = xh_open(port(), body, deadline);
    json_decref(body);
    body = xh_body(ctx, "print('B ran')");
    ts_stream_t *b = xh_open(port(), body, deadline);
    json_decref(body);
    cr_assert_eq(ts_stream_response(b)->status, 200, "POST /code behind a running one: HTTP %d %.400s",
                 ts_stream_response(b)->status, ts_stream_response(b)->body);

    ts_events_t bev = {0};
    xh_wait_event(b, &bev, "init", 0, deadline);
    char exec_b[64];
    snprintf(exec_b, sizeof(exec_b), "%s", xh_execution_id(&bev));
    json_t *ex = xh_execution(port(), exec_b);
    cr_assert_str_eq(xh_str(ex, "state"), "queued", "state of a run waiting behind another");
    cr_assert_str_eq(xh_str(ex, "context_id"), ctx);
    cr_assert(json_object_get(ex, "started_at") == NULL, "a queued run has no started_at yet");
    json_decref(ex);

    delete_execution(exec_b, 200);
    ts_stream_collect(b, deadline, 0, &bev);
    ts_stream_close(b);
    E2E_ASSERT_RUN(&bev, ctx, E2E_FRAMING_SSE);
    xh_error_event(&bev, "Cancelled");
    cr_assert_eq(ts_events_count(&bev, "stdout"), 0, "a cancelled queued run must not run");
    ex = xh_execution(port(), exec_b);
    cr_assert_str_eq(xh_str(ex, "state"), "finished");
    cr_assert_str_eq(xh_str(ex, "outcome"), "cancelled");
    json_decref(ex);
    ts_events_dispose(&bev);

    ts_events_t aev = {0};
    ts_stream_collect(a, deadline, 0, &aev);
    ts_stream_close(a);
    E2E_ASSERT_RUN(&aev, ctx, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&aev, "stdout", "A done\n");
    ts_events_dispose(&aev);

    /* A running one is interrupted: KeyboardInterrupt, and the context is kept. */
    body = xh_body(ctx, "import time\nprint('sleeping', flush=True)\ntime.sleep(30)");
    ts_stream_t *c = xh_open(port(), body, deadline);
    json_decref(body);
    ts_events_t cev = {0};
    xh_wait_event(c, &cev, "stdout", 0, deadline);
    int64_t t_delete = ts_now_ms();
    delete_execution(xh_execution_id(&cev), 200);
    ts_stream_collect(c, deadline, 0, &cev);
    ts_stream_close(c);
    E2E_ASSERT_RUN(&cev, ctx, E2E_FRAMING_SSE);
    xh_error_event(&cev, "KeyboardInterrupt");
    cr_assert(cev.end_ms - t_delete < 2000, "the interrupted run ended %lld ms after DELETE", (long long)(cev.end_ms - t_delete));
    ex = xh_execution(port(), xh_execution_id(&cev));
    cr_assert_str_eq(xh_str(ex, "state"), "finished");
    ts_events_dispose(&cev);
    json_decref(ex);

    ts_events_t after;
    xh_run_ok(port(), ctx, "print('still here')", &after);
    E2E_ASSERT_TEXT(&after, "stdout", "still here\n");
    ts_events_dispose(&after);
    free(ctx);
}

Test(runs, execution_state_through_its_life)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    json_t *body = xh_body(ctx, "import time\nprint('go', flush=True)\ntime.sleep(1)\n1/0");
    ts_stream_t *s = xh_open(port(), body, deadline);
    json_decref(body);
    ts_events_t evs = {0};
    xh_wait_event(s, &evs, "stdout", 0, deadline);
    const char *exec_id = xh_execution_id(&evs);

    json_t *ex = xh_execution(port(), exec_id);
    cr_assert_str_eq(xh_str(ex, "id"), exec_id);
    cr_assert_str_eq(xh_str(ex, "state"), "running");
    cr_assert_str_eq(xh_str(ex, "context_id"), ctx);
    cr_assert(json_object_get(ex, "outcome") == NULL || json_is_null(json_object_get(ex, "outcome")),
              "a running run has no outcome");
    cr_assert(xh_int(ex, "created_at") > 0 && xh_int(ex, "started_at") >= xh_int(ex, "created_at"), "created_at/started_at");
    cr_assert(xh_int(ex, "last_event_id") >= evs.v[evs.n - 1].id, "last_event_id %lld behind what was already read (%lld)",
              xh_int(ex, "last_event_id"), evs.v[evs.n - 1].id);
    json_decref(ex);

    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    xh_error_event(&evs, "ZeroDivisionError");
    ex = xh_execution(port(), exec_id);
    char *dump = json_dumps(ex, JSON_COMPACT);
    cr_assert_str_eq(xh_str(ex, "state"), "finished", "%s", dump);
    cr_assert_str_eq(xh_str(ex, "outcome"), "error", "%s", dump);
    cr_assert_eq(xh_int(ex, "last_event_id"), evs.v[evs.n - 1].id, "last_event_id is not the id of execution_complete: %s", dump);
    cr_assert_eq(xh_int(ex, "first_retained_event_id"), 1, "%s", dump);
    cr_assert(xh_int(ex, "finished_at") >= xh_int(ex, "started_at") + 900, "finished_at - started_at < the 1 s sleep: %s", dump);
    json_t *dropped = json_object_get(ex, "dropped");
    cr_assert(xh_int(dropped, "output_bytes") == 0 && xh_int(dropped, "results") == 0, "nothing was dropped: %s", dump);
    free(dump);
    json_decref(ex);
    ts_events_dispose(&evs);

    xh_run_ok(port(), ctx, "print('ok')", &evs);
    ex = xh_execution(port(), xh_execution_id(&evs));
    cr_assert_str_eq(xh_str(ex, "outcome"), "ok");
    json_decref(ex);
    ts_events_dispose(&evs);
    free(ctx);
}

Test(runs, unknown_executions_are_404_and_bad_resume_points_400)
{
    static const char *const unknown = "00000000-0000-4000-8000-000000000000";
    static const struct {
        const char *method, *suffix, *body;
    } routes[] = {
        {"GET", "", NULL},
        {"GET", "/events", NULL},
        {"DELETE", "", NULL},
        {"POST", "/input", "{\"value\":\"x\"}"},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        char path[256];
        snprintf(path, sizeof(path), "/code/executions/%s%s", unknown, routes[i].suffix);
        ts_response_t r;
        ts_http_request(port(), routes[i].method, path, NULL, routes[i].body, &r);
        E2E_ASSERT_ERROR(&r, 404, "EXECUTION_NOT_FOUND");
        ts_response_dispose(&r);
    }

    char *ctx = xh_context_new(port(), NULL, NULL);
    ts_events_t evs;
    xh_run_ok(port(), ctx, "print(1)", &evs);
    char path[256];
    snprintf(path, sizeof(path), "/code/executions/%s/events?last_event_id=abc", xh_execution_id(&evs));
    ts_response_t r;
    ts_http_request(port(), "GET", path, NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 400, NULL);
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "/code/executions/%s/events", xh_execution_id(&evs));
    const char *bad[] = {"Last-Event-ID: -3", NULL};
    ts_http_request(port(), "GET", path, bad, NULL, &r);
    E2E_ASSERT_ERROR(&r, 400, NULL);
    ts_response_dispose(&r);
    /* Nothing is pending on a finished run. */
    snprintf(path, sizeof(path), "/code/executions/%s/input", xh_execution_id(&evs));
    ts_http_request(port(), "POST", path, NULL, "{\"value\":\"x\"}", &r);
    E2E_ASSERT_ERROR(&r, 409, "NO_INPUT_PENDING");
    ts_response_dispose(&r);
    ts_events_dispose(&evs);
    free(ctx);
}

/* docs/API.md: a `ping` right after init, then every ping interval while the run lasts (they also reveal dead clients). */
Test(runs, pings_keep_coming_while_a_run_lasts)
{
    static ts_gateway_t gw;
    const char *args[] = {"--ping-interval-ms", "200", NULL};
    ts_events_t evs;
    size_t pings = 0, i;

    xh_gateway_start(&gw, args);
    char *ctx = xh_context_new(gw.port, NULL, NULL);
    xh_run_ok(gw.port, ctx, "import time; time.sleep(1.5)", &evs);
    for (i = 0; i != evs.n; ++i)
        if (strcmp(evs.v[i].type, "ping") == 0) {
            cr_assert_str_eq(xh_str(evs.v[i].json, "text"), "pong");
            ++pings;
        }
    /* one after init, then one per 200 ms of a 1.5 s run: at least 5 even on a slow machine */
    cr_assert_geq(pings, 5, "only %zu ping events during a 1.5 s run with --ping-interval-ms 200", pings);
    cr_assert_str_eq(evs.v[1].type, "ping", "the second event is a ping");
    ts_events_dispose(&evs);
    free(ctx);
    xh_gateway_stop(&gw);
}

#define LATE_TOTAL "kgate_kernel_late_messages_total"

/* `key` of the `dropped` object of GET /code/executions/{id}. */
static long long dropped_count(const char *exec_id, const char *key)
{
    json_t *ex = xh_execution(port(), exec_id);
    long long n = json_integer_value(json_object_get(json_object_get(ex, "dropped"), key));

    json_decref(ex);
    return n;
}

/*
 * docs/kernels.md, "Late output": output a kernel publishes for a run after the run ended (a Python thread's print, once the
 * test says so after the run's stream ended: ipykernel tags it with the cell that started the thread) cannot reach the run's
 * stream, which ended with execution_complete, but GET of the finished run counts it: dropped.messages, and its text in
 * dropped.output_bytes. A run with nothing late shows nothing dropped. Operators see the same messages in
 * kgate_kernel_late_messages_total (docs/operations.md), which does not move without late output and keeps its count once
 * the context (and its kernel) is deleted. The shared gateway's earlier tests may have counted some: the test reads its own.
 */
Test(runs, output_after_a_run_ended_is_counted_on_the_finished_run)
{
    char dir[] = "/tmp/kgate-late-XXXXXX", flag[64], code[1024], quiet_id[64], late_id[64];
    char *ctx = xh_context_new(port(), NULL, NULL);
    int64_t deadline;
    ts_events_t evs;
    double late_before = xh_metric(port(), LATE_TOTAL);

    cr_assert_geq(late_before, 0, "GET /kgate/metrics has no %s", LATE_TOTAL);
    cr_assert_not_null(mkdtemp(dir), "mkdtemp");
    snprintf(flag, sizeof(flag), "%s/go", dir);
    xh_run_ok(port(), ctx, "print('on time')", &evs);
    snprintf(quiet_id, sizeof(quiet_id), "%s", xh_execution_id(&evs));
    ts_events_dispose(&evs);

    snprintf(code, sizeof(code),
             "import os, threading, time\n"
             "def later():\n"
             "    while not os.path.exists(%s%s%s):\n"
             "        time.sleep(0.02)\n"
             "    print('too late')\n"
             "threading.Thread(target=later, daemon=True).start()\n"
             "print('on time')",
             "'", flag, "'");
    xh_run_ok(port(), ctx, code, &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "on time\n");
    snprintf(late_id, sizeof(late_id), "%s", xh_execution_id(&evs));
    ts_events_dispose(&evs);
    cr_assert_eq(dropped_count(late_id, "messages"), 0, "nothing was lost by the run's end");
    cr_assert_eq(xh_metric(port(), LATE_TOTAL), late_before, "no late output yet: %s did not move", LATE_TOTAL);

    FILE *f = fopen(flag, "w");
    cr_assert_not_null(f, "cannot create %s", flag);
    fclose(f);
    /* the thread prints within its next 20 ms sleep; ipykernel flushes within 200 ms: a bound, not a measure */
    deadline = ts_now_ms() + 30000;
    while (dropped_count(late_id, "output_bytes") < 9 && ts_now_ms() < deadline)
        ts_sleep_ms(50);
    cr_expect_eq(dropped_count(late_id, "output_bytes"), 9, "\"too late\\n\", printed after the run ended, counted as lost");
    long long messages = dropped_count(late_id, "messages");
    cr_expect(messages >= 1 && messages <= 2, "the message(s) that carried it counted: %lld", messages);
    json_t *ex = xh_execution(port(), late_id);
    cr_expect_str_eq(xh_str(ex, "state"), "finished");
    cr_expect_str_eq(xh_str(ex, "outcome"), "ok", "output after the end does not change how the run ended");
    json_decref(ex);
    cr_expect_eq(dropped_count(quiet_id, "messages"), 0, "the run with nothing late");
    cr_expect_eq(dropped_count(quiet_id, "output_bytes"), 0);
    cr_expect_eq(xh_metric(port(), LATE_TOTAL), late_before + (double)messages, "the late message(s), for operators too");
    cr_assert_eq(ts_context_delete(port(), NULL, ctx), 200);
    cr_expect_eq(xh_metric(port(), LATE_TOTAL), late_before + (double)messages, "a deleted context's kernel keeps its count");
    unlink(flag);
    rmdir(dir);
    free(ctx);
}
