/* tests/e2e/shared.c: the kgate instance shared by the tests of one binary (see shared.h). */
#include "shared.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "support/gateway.h"
#include "support/http.h"

#define SHARED_ENV "KGATE_E2E_SHARED"
#define SHARED_ERROR_ENV "KGATE_E2E_SHARED_ERROR"

/* Criterion runs each test in a re-executed child: only the environment carries the runner's gateway over. */
static ts_gateway_t runner_gateway;
static ts_gateway_t test_gateway;

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
    (void)set;
    if (ts_gateway_start(&runner_gateway, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR)}) != 0) {
        fprintf(stderr, "e2e: shared kgate did not start: %s\n", runner_gateway.error);
        setenv(SHARED_ERROR_ENV, runner_gateway.error, 1);
        return;
    }
    char buf[1024];
    ts_gateway_format(&runner_gateway, buf, sizeof(buf));
    setenv(SHARED_ENV, buf, 1);
}

ReportHook(POST_ALL)(struct criterion_global_stats *stats)
{
    if (runner_gateway.pid <= 0)
        return;
    if (stats->tests_failed > 0 || stats->tests_crashed > 0)
        ts_gateway_dump_log(&runner_gateway, 16384);
    size_t survivors = 0;
    int rc = ts_gateway_stop_keep(&runner_gateway, &survivors);
    int st = runner_gateway.exit_status;
    if (rc != 0 || survivors != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        if (stats->tests_failed == 0 && stats->tests_crashed == 0)
            ts_gateway_dump_log(&runner_gateway, 16384);
        fprintf(stderr,
                "e2e: FAILED: stopping the shared kgate with SIGTERM: %s; wait status %#x (%s %d%s); %zu descendant "
                "process(es) survived\n",
                rc != 0 ? runner_gateway.error : "exited in time", st, WIFEXITED(st) ? "exit code" : "signal",
                WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT ? ": SIGABRT, e.g. a sanitizer report at exit, see the log above" : "",
                survivors);
        /* Criterion derives the exit status and the synthesis line from this counter. */
        stats->tests_failed++;
    }
    ts_gateway_cleanup(&runner_gateway);
}

/*
 * These binaries check kgate, not themselves: a failed assertion abandons the test's heap, and LeakSanitizer
 * (abort_on_error, as deploy/test.sh sets it) would then report that failure as a crash of the test. kgate is a
 * separate process and keeps its own leak detection. The harness was checked for leaks on its own.
 */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

const ts_gateway_t *e2e_shared(void)
{
    if (test_gateway.port != 0)
        return &test_gateway;
    const char *err = getenv(SHARED_ERROR_ENV);
    cr_assert_null(err, "the shared kgate did not start: %s", err);
    cr_assert(ts_gateway_parse(&test_gateway, getenv(SHARED_ENV)) == 0, "no shared kgate in the environment (%s)", SHARED_ENV);
    return &test_gateway;
}

void e2e_shared_cleanup(void)
{
    if (getenv(SHARED_ENV) == NULL)
        return;
    const ts_gateway_t *gw = e2e_shared();
    ts_response_t r;
    int st = ts_http_request(gw->port, "DELETE", "/code/contexts?language=python", NULL, NULL, &r);
    ts_response_dispose(&r);
    cr_expect_eq(st, 200, "cleanup: DELETE /code/contexts?language=python answered %d", st);
}
