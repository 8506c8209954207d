/* tests/e2e/test_prometheus.c: GET /kgate/metrics on the real kgate, read by prometheus_client's parser (docs/operations.md). */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "exec_helpers.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/http.h"
#include "support/stream.h"

#define TOKEN "prom-e2e-token-3f9a"
#define PARSER KGATE_SOURCE_DIR "/tests/e2e/prom_parse.py"

static ts_gateway_t gw;
static const char *const auth[] = {"Authorization: Bearer " TOKEN, NULL};

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(prometheus, .fini = fini, .timeout = 300);

/* GET /kgate/metrics with the token, read by prometheus_client's parser: {"families": {name: type}, "samples": [...]}. */
static json_t *scrape(void)
{
    char path[] = "/tmp/kgate-prom-XXXXXX", cmd[512];
    ts_response_t r;
    json_error_t err;
    json_t *parsed;
    FILE *f;
    int fd;

    ts_http_request(gw.port, "GET", "/kgate/metrics", auth, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_str_eq(ts_response_header(&r, "content-type"), "text/plain; version=0.0.4; charset=utf-8");
    cr_assert_geq((fd = mkstemp(path)), 0);
    cr_assert_eq(write(fd, r.body, r.body_len), (ssize_t)r.body_len);
    close(fd);
    snprintf(cmd, sizeof(cmd), "/usr/bin/python3 %s < %s", PARSER, path);
    cr_assert_not_null((f = popen(cmd, "r")));
    parsed = json_loadf(f, 0, &err);
    cr_assert_eq(pclose(f), 0, "the parser refused kgate's exposition:\n%s", r.body);
    unlink(path);
    cr_assert_not_null(parsed, "the parser's output: %s", err.text);
    ts_response_dispose(&r);
    return parsed;
}

/* The value of sample `name` whose labels include `label`=`value` (label NULL: any), or -1 when there is none. */
static double sample(json_t *parsed, const char *name, const char *label, const char *value)
{
    size_t i;
    json_t *s;

    json_array_foreach(json_object_get(parsed, "samples"), i, s)
    {
        const char *got = label != NULL ? json_string_value(json_object_get(json_array_get(s, 1), label)) : NULL;
        if (strcmp(json_string_value(json_array_get(s, 0)), name) == 0 &&
            (label == NULL || (got != NULL && strcmp(got, value) == 0)))
            return json_number_value(json_array_get(s, 2));
    }
    return -1;
}

static char *run_stdout(const char *ctx, const char *code)
{
    ts_events_t evs = {0};
    cr_assert_eq(ts_run_code(gw.port, auth, ctx, NULL, code, 60000, &evs, NULL), 200, "`%s`", code);
    char *out = ts_events_text(&evs, "stdout");
    ts_events_dispose(&evs);
    cr_assert_not_null(out, "`%s` printed nothing", code);
    return out;
}

/*
 * A user's runs (two ok, one error, one whose kernel is killed under it), then a scrape: the runs by outcome, the death and
 * the automatic restart, the context by kernel, the latency histograms' counts, the execd door's bytes and durations.
 */
Test(prometheus, runs_deaths_and_histograms_as_prometheus_reads_them)
{
    /* their families, as prometheus_client names a counter's: without _total */
    static const char *const lost_output[] = {"kgate_kernel_late_messages", "kgate_kernel_unawaited_messages"};
    char total[64];
    char *ctx = NULL, *out, body[256], err[256] = "";
    ts_response_t r;
    ts_events_t evs = {0};
    json_t *parsed;
    pid_t pid;
    int64_t deadline;

    xh_gateway_start(&gw, (const char *const[]){"--access-token", TOKEN, NULL});
    /* under the token, like every route but the probes */
    ts_http_request(gw.port, "GET", "/kgate/metrics", NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 401);
    ts_response_dispose(&r);

    parsed = scrape();
    cr_assert_eq(sample(parsed, "kgate_kernel_deaths_total", NULL, NULL), 0, "a counter is there, at 0, before anything happened");
    for (size_t i = 0; i != 2; ++i)
        cr_assert_str_eq(json_string_value(json_object_get(json_object_get(parsed, "families"), lost_output[i])), "counter",
                         "%s is no counter in the exposition", lost_output[i]);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(parsed, "families"), "kgate_run_duration_seconds")),
                     "histogram");
    json_decref(parsed);

    cr_assert_eq(ts_context_create(gw.port, auth, "python", &ctx, &r), 200, "%s", r.body);
    ts_response_dispose(&r);
    /* a run of a known length, so that the execd door's durations below add up to more than a second on any machine (the
     * rest took 1.2 s in all on a fast one) */
    free(run_stdout(ctx, "import time; time.sleep(1.2); print('hello')"));
    out = run_stdout(ctx, "import os; print(os.getpid())");
    pid = (pid_t)atoi(out);
    free(out);
    cr_assert_gt(pid, 1);
    cr_assert_eq(ts_run_code(gw.port, auth, ctx, NULL, "1/0", 60000, &evs, NULL), 200);
    ts_events_dispose(&evs);

    /* a run in flight when its kernel is killed: it ends kernel_died, the kernel comes back (a death, an automatic restart) */
    snprintf(body, sizeof(body),
             "{\"context\": {\"id\": \"%s\"}, \"code\": \"import time; print('sleeping', flush=True); "
             "time.sleep(60)\"}",
             ctx);
    ts_stream_t *s = ts_stream_open(gw.port, "POST", "/code", auth, body, ts_now_ms() + 30000, err);
    cr_assert_not_null(s, "%s", err);
    xh_wait_event(s, &evs, "stdout", 0, ts_now_ms() + 30000);
    cr_assert_eq(kill(pid, SIGKILL), 0);
    cr_assert_eq(ts_stream_collect(s, ts_now_ms() + 30000, 1000, &evs), 0);
    cr_assert_not_null(xh_error_event(&evs, "KernelDied"));
    ts_stream_close(s);
    ts_events_dispose(&evs);
    deadline = ts_now_ms() + 60000;
    while (ts_run_code(gw.port, auth, ctx, NULL, "print('back')", 60000, &evs, NULL) != 200 ||
           ts_events_find(&evs, "stdout", 0) < 0) {
        ts_events_dispose(&evs);
        cr_assert_lt(ts_now_ms(), deadline, "the killed kernel never came back");
        usleep(200000);
    }
    ts_events_dispose(&evs);

    parsed = scrape();
    /* runs: hello, getpid, back (and any attempt while the kernel restarted, which ends otherwise), 1/0, the killed one */
    cr_expect_geq(sample(parsed, "kgate_runs_total", "outcome", "ok"), 3);
    cr_expect_eq(sample(parsed, "kgate_runs_total", "outcome", "error"), 1);
    cr_expect_eq(sample(parsed, "kgate_runs_total", "outcome", "kernel_died"), 1);
    cr_expect_eq(sample(parsed, "kgate_kernel_deaths_total", NULL, NULL), 1, "the kill -9 is a death");
    cr_expect_eq(sample(parsed, "kgate_kernel_restarts_total", "reason", "automatic"), 1);
    cr_expect_eq(sample(parsed, "kgate_kernel_restarts_total", "reason", "requested"), 0);
    cr_expect_eq(sample(parsed, "kgate_contexts", "kernel", "python3"), 1);
    cr_expect_eq(sample(parsed, "kgate_runs_in_flight", NULL, NULL), 0);
    /* every run ended is in the duration histogram; four printed something */
    double ended = 0;
    const char *outcomes[] = {"ok", "error", "timeout", "cancelled", "kernel_died"};
    for (size_t i = 0; i != 5; ++i)
        ended += sample(parsed, "kgate_runs_total", "outcome", outcomes[i]);
    cr_expect_eq(sample(parsed, "kgate_run_duration_seconds_count", NULL, NULL), ended);
    cr_expect_eq(sample(parsed, "kgate_run_duration_seconds_bucket", "le", "+Inf"), ended);
    cr_expect_geq(sample(parsed, "kgate_run_first_output_seconds_count", NULL, NULL), 5);
    cr_expect_gt(sample(parsed, "kgate_run_duration_seconds_sum", NULL, NULL), 0);
    /* the execd door answered the context and the runs: durations and bytes counted */
    cr_expect_geq(sample(parsed, "kgate_http_request_duration_seconds_count", "door", "execd"), 6);
    cr_expect_gt(sample(parsed, "kgate_http_request_duration_seconds_sum", "door", "execd"), 1.2, "the 1.2 s run is not counted");
    cr_expect_gt(sample(parsed, "kgate_sent_bytes_total", "door", "execd"), 1000);
    cr_expect_eq(sample(parsed, "kgate_http_requests_in_flight", "door", "execd"), 0);
    cr_expect_eq(sample(parsed, "kgate_kernel_start_queue", NULL, NULL), 0);
    /* no run's kernel published after its run ended, nor a big message nobody awaited (tests/e2e/test_runs.c shows one) */
    for (size_t i = 0; i != 2; ++i) {
        snprintf(total, sizeof(total), "%s_total", lost_output[i]);
        cr_expect_eq(sample(parsed, total, NULL, NULL), 0, "%s", total);
    }
    json_decref(parsed);
    free(ctx);
    xh_gateway_stop(&gw);
}

/* The access log so far (a new string), once it holds `until` or 10 s passed. */
static char *read_log(const char *path, const char *until)
{
    int64_t deadline = ts_now_ms() + 10000;
    char *text = NULL;

    for (;;) {
        FILE *f = fopen(path, "r");
        free(text);
        text = calloc(1, 1 << 16);
        if (f != NULL) {
            if (fread(text, 1, (1 << 16) - 1, f) == 0)
                text[0] = '\0';
            fclose(f);
        }
        if (strstr(text, until) != NULL || ts_now_ms() > deadline)
            return text;
        usleep(50000);
    }
}

/* --access-log: a line per request as it ends (not at exit), on every door, with the path cut at its query; the token of
 * the query or of a header is nowhere in it. */
Test(prometheus, access_log_has_each_request_and_never_the_token)
{
    char path[] = "/tmp/kgate-access-e2e-XXXXXX", *text;
    int fd = mkstemp(path);
    ts_response_t r;
    const char *const header_token[] = {"X-EXECD-ACCESS-TOKEN: " TOKEN, NULL};

    cr_assert_geq(fd, 0);
    close(fd);
    xh_gateway_start(&gw, (const char *const[]){"--access-token", TOKEN, "--access-log", path, NULL});
    ts_http_request(gw.port, "GET", "/code/contexts?access_token=" TOKEN "&x=1", NULL, NULL, &r);
    ts_response_dispose(&r);
    ts_http_request(gw.port, "GET", "/code/contexts", header_token, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
    ts_http_request(gw.port, "GET", "/api/kernelspecs", auth, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
    ts_http_request(gw.port, "GET", "/no/such/route", NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 401);
    ts_response_dispose(&r);

    text = read_log(path, " GET /no/such/route ");
    cr_expect_null(strstr(text, TOKEN), "the token is in the access log:\n%s", text);
    cr_expect_null(strstr(text, "access_token"), "the query is in the access log:\n%s", text);
    cr_expect_not_null(strstr(text, " 127.0.0.1:"), "the peer:\n%s", text);
    cr_expect_not_null(strstr(text, " GET /code/contexts 200 "), "%s", text);
    cr_expect_not_null(strstr(text, " GET /api/kernelspecs 200 "), "the Jupyter door:\n%s", text);
    cr_expect_not_null(strstr(text, " jupyter\n"), "%s", text);
    cr_expect_not_null(strstr(text, " GET /no/such/route 401 "), "%s", text);
    cr_expect_not_null(strstr(text, " none\n"), "%s", text);
    size_t n = 0; /* besides the start-up's polls of /healthz */
    for (char *line = text, *end; (end = strchr(line, '\n')) != NULL; line = end + 1) {
        *end = '\0';
        n += strstr(line, " GET /healthz ") == NULL;
        *end = '\n';
    }
    cr_expect_eq(n, 4, "one line per request:\n%s", text);
    free(text);
    xh_gateway_stop(&gw);
    unlink(path);
}

/* POST or DELETE /mcp with the token (session `sid`, "" for none); the status; the new session's id into `sid`. */
static int mcp_request(const char *method, char *sid, size_t sid_size, const char *body)
{
    char session[300];
    const char *headers[] = {auth[0], "Accept: application/json, text/event-stream", session, NULL};
    ts_response_t r = {0};
    int st;

    snprintf(session, sizeof(session), "Mcp-Session-Id: %s", sid);
    if (sid[0] == '\0')
        headers[2] = NULL;
    st = ts_http_request(gw.port, method, "/mcp", headers, body, &r);
    if (sid[0] == '\0' && ts_response_header(&r, "mcp-session-id") != NULL)
        snprintf(sid, sid_size, "%s", ts_response_header(&r, "mcp-session-id"));
    ts_response_dispose(&r);
    return st;
}

/* The MCP door's sessions in the exposition: one open after initialize, none and one ended (deleted) after DELETE /mcp. */
Test(prometheus, mcp_sessions_are_counted)
{
    char sid[256] = "";
    json_t *parsed;

    xh_gateway_start(&gw, (const char *const[]){"--access-token", TOKEN, NULL});
    parsed = scrape();
    cr_expect_eq(sample(parsed, "kgate_mcp_sessions", NULL, NULL), 0);
    cr_expect_eq(sample(parsed, "kgate_mcp_sessions_ended_total", "reason", "deleted"), 0);
    json_decref(parsed);

    cr_assert_eq(
        mcp_request("POST", sid, sizeof(sid),
                    "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\","
                    "\"capabilities\":{},\"clientInfo\":{\"name\":\"prom-e2e\",\"version\":\"1\"}}}"),
        200);
    cr_assert(sid[0] != '\0', "initialize gave no Mcp-Session-Id");
    parsed = scrape();
    cr_expect_eq(sample(parsed, "kgate_mcp_sessions", NULL, NULL), 1, "the session is open");
    cr_expect_eq(sample(parsed, "kgate_mcp_sessions_opened_total", NULL, NULL), 1);
    cr_expect_eq(sample(parsed, "kgate_mcp_named_contexts", NULL, NULL), 0);
    json_decref(parsed);

    cr_assert_eq(mcp_request("DELETE", sid, sizeof(sid), NULL), 200);
    parsed = scrape();
    cr_expect_eq(sample(parsed, "kgate_mcp_sessions", NULL, NULL), 0, "the session is gone");
    cr_expect_eq(sample(parsed, "kgate_mcp_sessions_ended_total", "reason", "deleted"), 1);
    cr_expect_eq(sample(parsed, "kgate_mcp_sessions_refused_total", NULL, NULL), 0);
    json_decref(parsed);
    xh_gateway_stop(&gw);
}
