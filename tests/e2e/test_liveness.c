/* tests/e2e/test_liveness.c: kernels as Jupyter Server runs them (docs/API.md 6.1): a long cell or a stopped kernel is not a dead
 * one, a kernel that exits at start says why, and a kernel that dies on its own comes back under the same context id. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checks.h"
#include "exec_helpers.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/http.h"
#include "support/stream.h"

/* From a kernel's death to the error of the run in flight (docs/API.md 6.1's test: within 3 s). */
#define DEATH_REPORT_MS 3000

static ts_gateway_t gw;

/* As in test_languages.c: this binary checks kgate, and a failed assertion abandons the test's heap. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(liveness, .fini = fini, .timeout = 300);

/* POST /code/context for `language`; asserts 200; the id (free it). */
static char *context_new(const char *language)
{
    ts_response_t r;
    char *id = NULL;
    int st = ts_context_create(gw.port, NULL, language, &id, &r);
    if (st != 200)
        ts_gateway_dump_log(&gw, 4096);
    cr_assert_eq(st, 200, "POST /code/context {\"language\":\"%s\"}: HTTP %d %.800s", language, st, r.body);
    ts_response_dispose(&r);
    return id;
}

/* The pid of the context's python kernel, as the kernel says. */
static pid_t python_pid(const char *ctx)
{
    char *out = xh_run_stdout(gw.port, ctx, "import os; print(os.getpid())");
    pid_t pid = (pid_t)atoi(out);
    free(out);
    cr_assert_gt(pid, 1);
    return pid;
}

/* IRkernel answers heartbeats on the thread that runs R: a 10 s cell misses them all, and must complete all the same. */
Test(liveness, r_sleeps_10_s_then_gives_its_value)
{
    xh_gateway_start(&gw, NULL);
    char *ctx = context_new("R");
    ts_events_t evs;
    char sum[E2E_MSG_SIZE];

    xh_run_ok(gw.port, ctx, "x <- 21", &evs);
    ts_events_dispose(&evs);
    xh_run_ok(gw.port, ctx, "Sys.sleep(10); x * 2", &evs);
    const ts_event_t *res = e2e_find_result(&evs, "text/plain");
    cr_assert_not_null(res, "no result; %s", ts_events_summary(&evs, sum, sizeof(sum)));
    const char *plain = json_string_value(json_object_get(json_object_get(res->json, "results"), "text/plain"));
    cr_assert(plain != NULL && (strcmp(plain, "[1] 42") == 0 || strcmp(plain, "42") == 0), "result: %s", plain);
    cr_expect_geq(xh_status_count(&evs, "not answering"), 1, "the silence is told: %s", ts_events_summary(&evs, sum, sizeof(sum)));
    ts_events_dispose(&evs);
    json_t *c = xh_context(gw.port, ctx);
    cr_expect_str_eq(xh_str(c, "status"), "idle");
    cr_expect_eq(json_integer_value(json_object_get(c, "restarts")), 0, "never restarted");
    json_decref(c);
    free(ctx);
    xh_gateway_stop(&gw);
}

/* A stopped kernel (SIGSTOP, as a debugger or a swapping machine does) is silent, not dead: its run completes. */
Test(liveness, python_survives_a_3_s_sigstop_in_a_10_s_sleep)
{
    xh_gateway_start(&gw, NULL);
    char *ctx = context_new("python");
    pid_t pid = python_pid(ctx);
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    json_t *body = xh_body(ctx, "import time\ntime.sleep(10)\n'done'");
    ts_stream_t *s = xh_open(gw.port, body, deadline);
    ts_events_t evs = {0};
    char sum[E2E_MSG_SIZE];

    json_decref(body);
    xh_wait_event(s, &evs, "status", 0, deadline);
    usleep(1000 * 1000);
    cr_assert_eq(kill(pid, SIGSTOP), 0);
    usleep(3000 * 1000);
    cr_assert_eq(kill(pid, SIGCONT), 0);
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    cr_assert_eq(ts_events_count(&evs, "error"), 0, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    const ts_event_t *res = e2e_find_result(&evs, "text/plain");
    cr_assert_not_null(res, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(res->json, "results"), "text/plain")), "'done'");
    cr_expect_eq(xh_status_count(&evs, "not answering"), 1, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    cr_expect_eq(xh_status_count(&evs, "answering"), 1, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    ts_events_dispose(&evs);
    cr_expect_eq(python_pid(ctx), pid, "the same kernel");
    free(ctx);
    xh_gateway_stop(&gw);
}

/* A kernel that exits at start: the 503 carries what it wrote on stderr (it used to be in a log file only). */
Test(liveness, a_kernel_that_exits_at_start_says_why_in_the_503)
{
    char dir[512], path[600];
    FILE *f;

    snprintf(dir, sizeof(dir), "%s/kgate-liveness-specs-%d", P_tmpdir, (int)getpid());
    snprintf(path, sizeof(path), "%s/broken", dir);
    cr_assert(mkdir(dir, 0700) == 0 && mkdir(path, 0700) == 0);
    snprintf(path, sizeof(path), "%s/broken/kernel.json", dir);
    cr_assert_not_null(f = fopen(path, "w"));
    fputs("{\"argv\": [\"/bin/sh\", \"-c\", \"echo 'Traceback (most recent call last):' >&2; "
          "echo 'ModuleNotFoundError: No module named kgate_missing_kernel' >&2; exit 1\", \"{connection_file}\"], "
          "\"display_name\": \"Broken\", \"language\": \"broken\"}\n",
          f);
    fclose(f);
    const char *args[] = {"--kernel-path", dir, "--pool", "none", NULL};
    xh_gateway_start(&gw, args);

    ts_response_t r;
    char *id = NULL;
    int st = ts_context_create(gw.port, NULL, "broken", &id, &r);
    E2E_ASSERT_ERROR(&r, 503, "KERNEL_UNAVAILABLE");
    const char *message = xh_str(r.json, "message");
    cr_expect_eq(st, 503);
    cr_expect_not_null(strstr(message, "exited with code 1"), "message: %s", message);
    cr_expect_not_null(strstr(message, "ModuleNotFoundError: No module named kgate_missing_kernel"), "message: %s", message);
    cr_expect_not_null(strstr(message, "Traceback (most recent call last):\n"), "the lines, as lines: %s", message);
    ts_response_dispose(&r);
    free(id);
    xh_gateway_stop(&gw);
    unlink(path);
    snprintf(path, sizeof(path), "%s/broken", dir);
    rmdir(path);
    rmdir(dir);
}

/* kill -9 of a working kernel: the run in flight hears it within 3 s, then the context works again, fresh, same id. */
Test(liveness, kill_9_is_reported_and_the_kernel_comes_back_under_the_same_id)
{
    xh_gateway_start(&gw, NULL);
    char *ctx = context_new("python");
    ts_events_t evs = {0}, qev = {0};
    char sum[E2E_MSG_SIZE];

    xh_run_ok(gw.port, ctx, "state = 'before'", &evs);
    ts_events_dispose(&evs);
    pid_t pid = python_pid(ctx);
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    json_t *body = xh_body(ctx, "import time\ntime.sleep(30)");
    ts_stream_t *s = xh_open(gw.port, body, deadline);
    json_decref(body);
    body = xh_body(ctx, "print('queued behind the dying run', 'state' in dir())");
    ts_stream_t *q = xh_open(gw.port, body, deadline);
    json_decref(body);
    xh_wait_event(s, &evs, "status", 0, deadline);
    usleep(300 * 1000);
    int64_t t0 = ts_now_ms();
    cr_assert_eq(kill(pid, SIGKILL), 0);
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    const ts_event_t *err = xh_error_event(&evs, "KernelDied");
    const char *evalue = xh_str(json_object_get(err->json, "error"), "evalue");
    cr_expect_lt(err->recv_ms - t0, DEATH_REPORT_MS, "KernelDied %lld ms after the kill", (long long)(err->recv_ms - t0));
    cr_expect_not_null(strstr(evalue, "SIGKILL"), "evalue: %s", evalue);
    cr_expect_not_null(strstr(evalue, "its state was lost"), "evalue: %s", evalue);
    json_t *ex = xh_execution(gw.port, xh_execution_id(&evs));
    cr_expect_str_eq(xh_str(ex, "outcome"), "kernel_died");
    json_decref(ex);
    ts_events_dispose(&evs);

    /* the run queued behind it runs on the new kernel, told of the restart */
    ts_stream_collect(q, deadline, 0, &qev);
    ts_stream_close(q);
    E2E_ASSERT_RUN(&qev, ctx, E2E_FRAMING_SSE);
    cr_expect_eq(xh_status_count(&qev, "restarting"), 1, "%s", ts_events_summary(&qev, sum, sizeof(sum)));
    E2E_ASSERT_TEXT(&qev, "stdout", "queued behind the dying run False\n");
    ts_events_dispose(&qev);

    json_t *c = xh_context_wait_status(gw.port, ctx, "idle", 30000);
    cr_expect_str_eq(xh_str(c, "id"), ctx);
    cr_expect_eq(json_integer_value(json_object_get(c, "restarts")), 1);
    cr_expect_not_null(strstr(xh_str(c, "last_death"), "SIGKILL"), "last_death: %s", xh_str(c, "last_death"));
    json_decref(c);
    char *out = xh_run_stdout(gw.port, ctx, "print('state' in dir(), 6 * 7)");
    cr_expect_str_eq(out, "False 42\n", "fresh state");
    free(out);
    cr_expect_neq(python_pid(ctx), pid);
    free(ctx);
    xh_gateway_stop(&gw);
}

/* Past --kernel-restart-limit deaths in a row, the context stays dead and says why; a restart brings it back. */
Test(liveness, past_the_restart_limit_the_context_stays_dead)
{
    const char *args[] = {"--kernel-restart-limit", "1", NULL};
    xh_gateway_start(&gw, args);
    char *ctx = context_new("python");
    ts_response_t r;
    char path[256];

    cr_assert_eq(kill(python_pid(ctx), SIGKILL), 0);
    json_decref(xh_context_wait_status(gw.port, ctx, "restarting", 5000));
    json_decref(xh_context_wait_status(gw.port, ctx, "idle", 30000));
    cr_assert_eq(kill(python_pid(ctx), SIGKILL), 0);
    json_t *c = xh_context_wait_status(gw.port, ctx, "dead", 5000);
    cr_expect_not_null(strstr(xh_str(c, "last_death"), "the restart limit"), "last_death: %s", xh_str(c, "last_death"));
    json_decref(c);
    usleep(500 * 1000);
    json_decref(xh_context_wait_status(gw.port, ctx, "dead", 1000));

    json_t *body = xh_body(ctx, "print(1)");
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    ts_http_request(gw.port, "POST", "/code", NULL, text, &r);
    free(text);
    E2E_ASSERT_ERROR(&r, 503, "KERNEL_UNAVAILABLE");
    cr_expect_not_null(strstr(xh_str(r.json, "message"), "died again after 1 automatic restart in a row (the restart limit)"),
                       "message: %s", xh_str(r.json, "message"));
    ts_response_dispose(&r);

    snprintf(path, sizeof(path), "/code/contexts/%s/restart", ctx);
    ts_http_request(gw.port, "POST", path, NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
    char *out = xh_run_stdout(gw.port, ctx, "print(6 * 7)");
    cr_expect_str_eq(out, "42\n");
    free(out);
    free(ctx);
    xh_gateway_stop(&gw);
}
