/* tests/e2e/test_lifecycle.c: stdin, kernel death and restart, stateless language runs, cwd/env, culling, context limits, ANSI. */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

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

TestSuite(lifecycle, .fini = fini, .timeout = 240);

static unsigned short port(void)
{
    return e2e_shared()->port;
}

static void post_input(unsigned short p, const char *exec_id, const char *value, int expect, const char *code)
{
    char path[256];
    snprintf(path, sizeof(path), "/code/executions/%s/input", exec_id);
    json_t *body = json_object();
    json_object_set_new(body, "value", json_string(value));
    ts_response_t r;
    ts_post_json(p, path, NULL, body, &r);
    json_decref(body);
    if (code != NULL)
        E2E_ASSERT_ERROR(&r, expect, code);
    else
        E2E_ASSERT_STATUS(&r, expect);
    ts_response_dispose(&r);
}

Test(lifecycle, input_round_trip_with_stdin)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = xh_body(ctx, "name = input('Your name? ')\nimport getpass\npw = getpass.getpass('Secret: ')\n"
                                "print('hello', name, len(pw))");
    json_object_set_new(body, "stdin", json_true());
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    ts_stream_t *s = xh_open(port(), body, deadline);
    json_decref(body);
    cr_assert_eq(ts_stream_response(s)->status, 200);
    ts_events_t evs = {0};
    size_t i = xh_wait_event(s, &evs, "input_request", 0, deadline);
    char exec_id[64];
    snprintf(exec_id, sizeof(exec_id), "%s", xh_execution_id(&evs));
    cr_assert_str_eq(xh_str(evs.v[i].json, "text"), "Your name? ", "input_request: %s", evs.v[i].data);
    cr_assert(json_is_false(json_object_get(evs.v[i].json, "password")), "input_request: %s", evs.v[i].data);
    json_t *ex = xh_execution(port(), exec_id);
    cr_assert_str_eq(xh_str(ex, "state"), "running");
    json_decref(ex);
    post_input(port(), exec_id, "kgate", 200, NULL);

    i = xh_wait_event(s, &evs, "input_request", i + 1, deadline);
    cr_assert_str_eq(xh_str(evs.v[i].json, "text"), "Secret: ", "input_request: %s", evs.v[i].data);
    cr_assert(json_is_true(json_object_get(evs.v[i].json, "password")), "getpass must ask with password true: %s", evs.v[i].data);
    post_input(port(), exec_id, "12345", 200, NULL);

    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&evs, "stdout", "hello kgate 5\n");
    post_input(port(), exec_id, "late", 409, "NO_INPUT_PENDING");
    ts_events_dispose(&evs);
    free(ctx);
}

/* An input() nobody answers holds its context only for the stdin timeout, then the context works again. */
Test(lifecycle, abandoned_input_frees_the_context)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = xh_body(ctx, "input('anyone there? ')");
    json_object_set_new(body, "stdin", json_true());
    json_object_set_new(body, "stdin_timeout", json_integer(1500));
    int64_t t0 = ts_now_ms();
    ts_events_t evs;
    xh_run(port(), body, t0 + XH_RUN_MS, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    cr_assert_eq(ts_events_count(&evs, "input_request"), 1);
    const ts_event_t *err = xh_error_event(&evs, "StdinTimeout");
    cr_assert(strstr(err->data, "1500 ms") != NULL, "the error names the stdin timeout: %s", err->data);
    cr_assert_eq(ts_events_count(&evs, "error"), 1, "one error: the interrupt kgate caused is not reported as a KeyboardInterrupt");
    cr_assert(evs.end_ms - t0 < 6000, "the abandoned input() held the context for %lld ms", (long long)(evs.end_ms - t0));
    ts_events_dispose(&evs);
    xh_run_ok(port(), ctx, "print('ok')", &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "ok\n");
    ts_events_dispose(&evs);
    free(ctx);
}

Test(lifecycle, input_without_opt_in_fails_fast)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = xh_body(ctx, "input('never answered? ')");
    int64_t t0 = ts_now_ms();
    ts_events_t evs;
    xh_run(port(), body, t0 + XH_RUN_MS, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    xh_error_event(&evs, "StdinNotImplementedError");
    cr_assert_eq(ts_events_count(&evs, "input_request"), 0, "no input_request without stdin: true");
    cr_assert(evs.end_ms - t0 < 2000, "input() without opt-in took %lld ms to fail, expected < 2000", (long long)(evs.end_ms - t0));
    ts_events_dispose(&evs);
    free(ctx);
}

/* --kernel-restart-limit 0: a kernel that died stays dead until someone restarts it (test_liveness.c: the default, which
 * brings it back on its own). */
Test(lifecycle, kernel_death_is_reported_and_restart_brings_the_context_back)
{
    static const char *const args[] = {"--kernel-restart-limit", "0", NULL};
    ts_gateway_t own;
    xh_gateway_start(&own, args);
    char *ctx = xh_context_new(own.port, NULL, NULL);
    ts_events_t evs;
    xh_run_ok(own.port, ctx, "state = 'before'", &evs);
    ts_events_dispose(&evs);

    int64_t t0 = ts_now_ms();
    int64_t deadline = t0 + XH_RUN_MS;
    json_t *body = xh_body(ctx, "import os, time\ntime.sleep(0.3)\nos.kill(os.getpid(), 9)");
    ts_stream_t *a = xh_open(own.port, body, deadline);
    json_decref(body);
    body = xh_body(ctx, "print('queued behind the dying run')");
    ts_stream_t *b = xh_open(own.port, body, deadline);
    json_decref(body);
    ts_events_t aev = {0}, bev = {0};
    ts_stream_collect(a, deadline, 0, &aev);
    ts_stream_close(a);
    ts_stream_collect(b, deadline, 0, &bev);
    ts_stream_close(b);

    E2E_ASSERT_RUN(&aev, ctx, E2E_FRAMING_SSE);
    const ts_event_t *err = xh_error_event(&aev, "KernelDied");
    const char *evalue = xh_str(json_object_get(err->json, "error"), "evalue");
    cr_assert(strstr(evalue, "SIGKILL") != NULL || strstr(evalue, "signal 9") != NULL, "KernelDied evalue names no signal: %s",
              evalue);
    /* 300 ms of sleep before the kill: the death must be reported within 2 s of it. */
    cr_assert(err->recv_ms - t0 < 2300, "KernelDied arrived %lld ms after POST (kill at ~300 ms), expected within 2 s of the kill",
              (long long)(err->recv_ms - t0));
    E2E_ASSERT_RUN(&bev, ctx, E2E_FRAMING_SSE);
    xh_error_event(&bev, "KernelDied");
    cr_assert_eq(ts_events_count(&bev, "stdout"), 0);
    json_t *ex = xh_execution(own.port, xh_execution_id(&aev));
    cr_assert_str_eq(xh_str(ex, "outcome"), "kernel_died");
    json_decref(ex);
    ts_events_dispose(&aev);
    ts_events_dispose(&bev);

    json_t *c = NULL;
    cr_assert_eq(xh_context_get(own.port, ctx, &c), 200);
    cr_assert_str_eq(xh_str(c, "status"), "dead", "context status after its kernel died");
    json_decref(c);

    body = xh_body(ctx, "print(1)");
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    ts_response_t r;
    ts_http_request(own.port, "POST", "/code", NULL, text, &r);
    free(text);
    E2E_ASSERT_ERROR(&r, 503, "KERNEL_UNAVAILABLE");
    ts_response_dispose(&r);

    char path[256];
    snprintf(path, sizeof(path), "/code/contexts/%s/restart", ctx);
    ts_http_request(own.port, "POST", path, NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_str_eq(xh_str(r.json, "id"), ctx, "restart answers the context object: %.400s", r.body);
    cr_assert(strcmp(xh_str(r.json, "status"), "dead") != 0, "status after restart: %.400s", r.body);
    ts_response_dispose(&r);

    xh_run_ok(own.port, ctx, "print('state' in dir(), 6 * 7)", &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "False 42\n");
    ts_events_dispose(&evs);
    free(ctx);
    xh_gateway_stop(&own);
}

/* The ids of the listed contexts, as one comma-separated string. */
static char *list_contexts(unsigned short p)
{
    ts_response_t r;
    int st = ts_http_request(p, "GET", "/code/contexts", NULL, NULL, &r);
    cr_assert_eq(st, 200, "GET /code/contexts: %d %.300s", st, r.body);
    cr_assert(json_is_array(r.json));
    size_t cap = 64 + json_array_size(r.json) * 40, len = 0;
    char *out = calloc(1, cap);
    size_t i;
    json_t *v;
    json_array_foreach(r.json, i, v)
    {
        len += (size_t)snprintf(out + len, cap - len, "%s,", xh_str(v, "id"));
    }
    ts_response_dispose(&r);
    return out;
}

Test(lifecycle, stateless_python_run_leaves_nothing_behind)
{
    char *before = list_contexts(port());
    json_t *body = ts_code_body(NULL, "python", "import os\nx = 6 * 7\nprint(os.getpid(), x)");
    json_object_set_new(body, "stateless", json_true());
    ts_events_t evs;
    xh_run(port(), body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, NULL, E2E_FRAMING_SSE);
    char *out = ts_events_text(&evs, "stdout");
    int pid = 0, x = 0;
    cr_assert(sscanf(out, "%d %d", &pid, &x) == 2 && pid > 1 && x == 42, "stdout: %s", out);
    free(out);
    const char *ephemeral = xh_str(evs.v[0].json, "text");

    char *after = list_contexts(port());
    cr_assert_str_eq(after, before, "GET /code/contexts changed after a stateless run (before: %s)", before);
    cr_assert_null(strstr(after, ephemeral));
    cr_assert_eq(xh_context_get(port(), ephemeral, NULL), 404, "the stateless run's context %s is still there", ephemeral);
    cr_assert(xh_pid_wait_gone((pid_t)pid, ts_now_ms() + 15000), "the stateless run's kernel (pid %d) still runs", pid);
    free(before);
    free(after);
    ts_events_dispose(&evs);

    /* Same timeout and bounds as any run. */
    body = ts_code_body(NULL, "python", "while True: pass");
    json_object_set_new(body, "stateless", json_true());
    json_object_set_new(body, "timeout", json_integer(1000));
    xh_run(port(), body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, NULL, E2E_FRAMING_SSE);
    xh_error_event(&evs, "TimeoutError");
    ts_events_dispose(&evs);

    body = ts_code_body(NULL, "python", "print('x' * 5000)");
    json_object_set_new(body, "stateless", json_true());
    json_object_set_new(body, "output_limit", json_integer(100));
    xh_run(port(), body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, NULL, E2E_FRAMING_SSE);
    char expected[101];
    memset(expected, 'x', 100);
    expected[100] = '\0';
    E2E_ASSERT_TEXT(&evs, "stdout", expected);
    cr_assert_eq(xh_status_count(&evs, "output_truncated"), 1);
    ts_events_dispose(&evs);
}

Test(lifecycle, cwd_and_env_reach_the_kernel)
{
    char dir[] = "/tmp/kgate-e2e-cwd-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char real[PATH_MAX];
    cr_assert_not_null(realpath(dir, real));
    json_t *env = json_pack("{s:s, s:s}", "KGATE_E2E_GREETING", "hello from e2e", "KGATE_E2E_EMPTY", "");
    char *ctx = xh_context_new(port(), real, env);
    json_decref(env);
    json_t *c = NULL;
    cr_assert_eq(xh_context_get(port(), ctx, &c), 200);
    cr_assert_str_eq(xh_str(c, "cwd"), real, "the context object's cwd");
    json_decref(c);
    ts_events_t evs;
    xh_run_ok(port(), ctx,
              "import os\nprint(os.getcwd())\nprint(os.environ.get('KGATE_E2E_GREETING'))\n"
              "print(repr(os.environ.get('KGATE_E2E_EMPTY')))",
              &evs);
    char expected[PATH_MAX + 64];
    snprintf(expected, sizeof(expected), "%s\nhello from e2e\n''\n", real);
    E2E_ASSERT_TEXT(&evs, "stdout", expected);
    ts_events_dispose(&evs);
    cr_assert_eq(ts_context_delete(port(), NULL, ctx), 200);
    free(ctx);

    /* A cwd that is not a directory is refused before any kernel starts. */
    json_t *body = json_pack("{s:s, s:s}", "language", "python", "cwd", "/nonexistent/kgate-e2e");
    ts_response_t r;
    ts_post_json(port(), "/code/context", NULL, body, &r);
    json_decref(body);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
    ts_response_dispose(&r);
    rmdir(dir);
}

/* The kernel's PID, asked of the kernel itself. */
static int kernel_pid(unsigned short p, const char *ctx)
{
    ts_events_t evs;
    xh_run_ok(p, ctx, "import os; print(os.getpid())", &evs);
    char *out = ts_events_text(&evs, "stdout");
    int pid = atoi(out);
    free(out);
    ts_events_dispose(&evs);
    cr_assert(pid > 1);
    return pid;
}

Test(lifecycle, idle_contexts_are_culled)
{
    static ts_gateway_t gw;
    const char *args[] = {"--context-idle-ms", "1500", NULL};
    xh_gateway_start(&gw, args);
    char *idle = xh_context_new(gw.port, NULL, NULL);
    int idle_pid = kernel_pid(gw.port, idle);
    int64_t idle_since = ts_now_ms();

    /* A run longer than the idle period keeps its context. */
    char *busy = xh_context_new(gw.port, NULL, NULL);
    ts_events_t evs;
    xh_run_ok(gw.port, busy, "import time; time.sleep(3); print('done')", &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "done\n");
    ts_events_dispose(&evs);
    cr_assert_eq(xh_context_get(gw.port, busy, NULL), 200, "a context was culled right after a 3 s run (idle limit 1.5 s)");

    int64_t deadline = idle_since + 1500 + 5000;
    while (xh_context_get(gw.port, idle, NULL) == 200 && ts_now_ms() < deadline)
        ts_sleep_ms(50);
    cr_assert_eq(xh_context_get(gw.port, idle, NULL), 404, "a context idle for %lld ms (limit 1500) is still there",
                 (long long)(ts_now_ms() - idle_since));
    cr_assert(xh_pid_wait_gone((pid_t)idle_pid, ts_now_ms() + 15000), "the culled context's kernel (pid %d) still runs", idle_pid);
    free(idle);
    free(busy);
    xh_gateway_stop(&gw);
}

/* The idle clock starts when the context is ready, not when it was asked for: a kernel start longer than the idle limit
 * (here a Python kernel whose spec sleeps 1.5 s first) must not cost the creator the context it was just given. */
Test(lifecycle, a_context_is_idle_from_when_it_is_ready)
{
    static ts_gateway_t gw;
    char dir[512], path[600];
    FILE *f;

    snprintf(dir, sizeof(dir), "%s/kgate-lifecycle-specs-%d", P_tmpdir, (int)getpid());
    snprintf(path, sizeof(path), "%s/slowpy", dir);
    cr_assert(mkdir(dir, 0700) == 0 && mkdir(path, 0700) == 0);
    snprintf(path, sizeof(path), "%s/slowpy/kernel.json", dir);
    cr_assert_not_null(f = fopen(path, "w"));
    fputs("{\"argv\": [\"/bin/sh\", \"-c\", \"sleep 1.5; exec /usr/bin/python3 -m ipykernel_launcher -f \\\"$0\\\"\", "
          "\"{connection_file}\"], \"display_name\": \"Slow Python\", \"language\": \"slowpy\"}\n",
          f);
    fclose(f);
    const char *args[] = {"--kernel-path", dir, "--pool", "none", "--context-idle-ms", "1000", NULL};
    xh_gateway_start(&gw, args);

    int64_t asked = ts_now_ms();
    char *ctx = NULL;
    ts_response_t r;
    cr_assert_eq(ts_context_create(gw.port, NULL, "slowpy", &ctx, &r), 200);
    ts_response_dispose(&r);
    int64_t ready = ts_now_ms();
    cr_assert_gt(ready - asked, 1000, "the kernel started in %lld ms: the test needs a start longer than the idle limit",
                 (long long)(ready - asked));
    cr_assert_eq(xh_context_get(gw.port, ctx, NULL), 200, "a context %lld ms after it was ready (idle limit 1 s) is gone",
                 (long long)(ts_now_ms() - ready));
    ts_events_t evs;
    xh_run_ok(gw.port, ctx, "print(1 + 1)", &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "2\n");
    ts_events_dispose(&evs);
    /* and it does end once idle */
    int64_t deadline = ts_now_ms() + 6000;
    while (xh_context_get(gw.port, ctx, NULL) == 200 && ts_now_ms() < deadline)
        ts_sleep_ms(50);
    cr_assert_eq(xh_context_get(gw.port, ctx, NULL), 404, "a context idle for 6 s (limit 1 s) is still there");
    free(ctx);
    xh_gateway_stop(&gw);
    unlink(path);
    snprintf(path, sizeof(path), "%s/slowpy", dir);
    rmdir(path);
    rmdir(dir);
}

Test(lifecycle, too_many_contexts)
{
    static ts_gateway_t gw;
    const char *args[] = {"--max-contexts", "1", NULL};
    xh_gateway_start(&gw, args);
    char *first = xh_context_new(gw.port, NULL, NULL);
    ts_response_t r;
    json_t *body = json_pack("{s:s}", "language", "python");
    ts_post_json(gw.port, "/code/context", NULL, body, &r);
    E2E_ASSERT_ERROR(&r, 429, "TOO_MANY_CONTEXTS");
    ts_response_dispose(&r);

    /* A language's default context and a stateless language run need a kernel too. */
    json_t *code = ts_code_body(NULL, "python", "print(1)");
    ts_post_json(gw.port, "/code", NULL, code, &r);
    E2E_ASSERT_ERROR(&r, 429, "TOO_MANY_CONTEXTS");
    ts_response_dispose(&r);
    json_object_set_new(code, "stateless", json_true());
    ts_post_json(gw.port, "/code", NULL, code, &r);
    E2E_ASSERT_ERROR(&r, 429, "TOO_MANY_CONTEXTS");
    ts_response_dispose(&r);
    json_decref(code);

    cr_assert_eq(ts_context_delete(gw.port, NULL, first), 200);
    ts_post_json(gw.port, "/code/context", NULL, body, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
    json_decref(body);
    free(first);
    xh_gateway_stop(&gw);
}

/* MIME bundles are relayed as the kernel encoded them: numbers beyond what a double or a 64-bit integer holds keep their text. */
Test(lifecycle, result_bundles_keep_the_numbers_the_kernel_wrote)
{
    char *ctx = xh_context_new(port(), NULL, NULL), zeros[82];
    ts_events_t evs;
    size_t results = 0;

    memset(zeros, '0', 81);
    zeros[81] = '\0';
    json_t *body = xh_body(ctx, "from IPython.display import JSON, display\ndisplay(JSON({'n': 10**81, 'f': 1.5e300}))");
    /* not xh_run_ok: a JSON parser with 64-bit integers (jansson, the tests' own) refuses the result's line, as it would
     * refuse the kernel's message; a client's parser with big numbers (Python's) reads it as the kernel wrote it */
    xh_run(port(), body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    cr_assert(evs.ended && evs.n != 0 && strstr(evs.v[evs.n - 1].data, "execution_complete") != NULL, "the run did not complete");
    cr_assert_eq(ts_events_count(&evs, "error"), 0);
    cr_assert_eq(xh_status_count(&evs, "message_undecodable"), 0, "the bundle was dropped as undecodable");
    for (size_t i = 0; i != evs.n; ++i) {
        const char *data = evs.v[i].data, *n;
        if (strstr(data, "\"type\":\"result\"") == NULL)
            continue;
        ++results;
        cr_assert_not_null(n = strstr(data, "\"n\": 1"), "no integer n: %s", data);
        cr_assert_eq(strncmp(n + 6, zeros, 81), 0, "10**81 lost digits: %s", data);
        cr_assert(n[6 + 81] < '0' || n[6 + 81] > '9', "10**81 gained digits: %s", data);
        cr_assert_not_null(strstr(data, "\"f\": 1.5e+300"), "1.5e300 was rewritten: %s", data);
    }
    cr_assert_eq(results, 1, "%zu result events", results);
    ts_events_dispose(&evs);
    free(ctx);
}

/* The traceback of `1/0`, joined. */
static char *zero_division_traceback(unsigned short p, const char *ctx)
{
    json_t *body = xh_body(ctx, "1/0");
    ts_events_t evs;
    xh_run(p, body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    const ts_event_t *err = xh_error_event(&evs, "ZeroDivisionError");
    json_t *tb = json_object_get(json_object_get(err->json, "error"), "traceback");
    size_t cap = 1, i;
    json_t *line;
    json_array_foreach(tb, i, line)
    {
        cap += json_string_length(line) + 1;
    }
    char *out = calloc(1, cap);
    json_array_foreach(tb, i, line)
    {
        strcat(out, json_string_value(line));
        strcat(out, "\n");
    }
    cr_assert(strstr(out, "ZeroDivisionError") != NULL, "traceback: %s", out);
    ts_events_dispose(&evs);
    return out;
}

#define COLOURED_REPR "class C:\n    def __repr__(self): return '\\x1b[33m2\\x1b[39m'\nC()"

/* The text/plain of the result of a value whose repr is coloured (as Deno's are), and its `text` copy: asserted equal. */
static char *coloured_result(unsigned short p, const char *ctx)
{
    ts_events_t evs;
    char *out = NULL;

    xh_run_ok(p, ctx, COLOURED_REPR, &evs);
    for (size_t i = 0; i != evs.n; ++i) {
        json_t *results = json_object_get(evs.v[i].json, "results");
        if (strcmp(evs.v[i].type, "result") != 0)
            continue;
        cr_assert_str_eq(xh_str(results, "text/plain"), xh_str(results, "text"));
        out = strdup(xh_str(results, "text/plain"));
    }
    cr_assert_not_null(out, "no result event");
    ts_events_dispose(&evs);
    return out;
}

Test(lifecycle, ansi_codes_are_stripped_unless_kept)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    char *tb = zero_division_traceback(port(), ctx), *result = coloured_result(port(), ctx);
    cr_assert_null(strchr(tb, '\x1b'), "the default traceback carries ANSI escapes: %s", tb);
    cr_assert_str_eq(result, "2", "the default result text carries ANSI escapes: %s", result);
    free(result);
    free(tb);
    free(ctx);

    static ts_gateway_t gw;
    const char *args[] = {"--keep-ansi", NULL};
    xh_gateway_start(&gw, args);
    ctx = xh_context_new(gw.port, NULL, NULL);
    tb = zero_division_traceback(gw.port, ctx);
    cr_assert_not_null(strstr(tb, "\x1b["), "with --keep-ansi the traceback has no ANSI escapes: %s", tb);
    free(tb);
    result = coloured_result(gw.port, ctx);
    cr_assert_str_eq(result, "\x1b[33m2\x1b[39m", "with --keep-ansi the result text lost its ANSI escapes");
    free(result);
    free(ctx);
    xh_gateway_stop(&gw);
}
