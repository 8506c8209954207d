/* tests/e2e/test_http.c: errors, stateless runs, auth, execd framing and shutdown of the real kgate. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "exec_helpers.h"
#include "shared.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"

#define RUN_MS 60000
#define NO_SUCH_CONTEXT "00000000-0000-4000-8000-000000000000"

/* A kgate of a test's own (auth, framing, shutdown), stopped in fini whatever happened in the test. */
static ts_gateway_t own;

static void fini(void)
{
    ts_gateway_stop(&own, NULL);
    e2e_shared_cleanup();
}

TestSuite(http, .fini = fini, .timeout = 180);

static unsigned short port(void)
{
    return e2e_shared()->port;
}

static void start_own(const char *const *args, const char *const *env)
{
    int rc = ts_gateway_start(&own, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .env = env});
    cr_assert_eq(rc, 0, "kgate did not start: %s", own.error);
}

/* Stops our own kgate and asserts a clean shutdown: exit 0 within the grace period, no surviving descendant. */
static void stop_own(void)
{
    size_t survivors = 0;
    int rc = ts_gateway_stop_keep(&own, &survivors);
    int st = own.exit_status;
    if (rc != 0 || survivors != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        ts_gateway_dump_log(&own, 8192);
    ts_gateway_cleanup(&own);
    cr_assert_eq(rc, 0, "SIGTERM: %s", own.error);
    cr_assert_eq(survivors, 0, "%zu descendant process(es) of kgate survived it", survivors);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kgate did not exit 0 on SIGTERM (wait status %#x%s)", st,
              WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT ? ": SIGABRT, e.g. a sanitizer report at exit, see its log" : "");
}

static void post_raw(const char *path, const char *body, ts_response_t *r)
{
    ts_http_request(port(), "POST", path, NULL, body, r);
}

/* ---- errors --------------------------------------------------------------------------------- */

Test(http, unknown_context_in_post_code)
{
    ts_response_t r;
    post_raw("/code", "{\"context\":{\"id\":\"" NO_SUCH_CONTEXT "\"},\"code\":\"1\"}", &r);
    E2E_ASSERT_ERROR(&r, 404, "CONTEXT_NOT_FOUND");
    ts_response_dispose(&r);
}

Test(http, unknown_context_elsewhere)
{
    ts_response_t r;
    ts_http_request(port(), "GET", "/code/contexts/" NO_SUCH_CONTEXT, NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 404, "CONTEXT_NOT_FOUND");
    ts_response_dispose(&r);
    ts_http_request(port(), "DELETE", "/code/contexts/" NO_SUCH_CONTEXT, NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 404, "CONTEXT_NOT_FOUND");
    ts_response_dispose(&r);
    ts_http_request(port(), "DELETE", "/code?id=" NO_SUCH_CONTEXT, NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 404, NULL);
    ts_response_dispose(&r);
    ts_http_request(port(), "DELETE", "/code", NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 400, NULL);
    ts_response_dispose(&r);
}

/* Kernels kgate has started (each path of kgate_kernel_starts_total) plus those starting or waiting to (its gauges). */
static double kernel_starts(unsigned short gw_port)
{
    static const char *const series[] = {
        "kgate_kernel_starts_total{path=\"forked\"}", "kgate_kernel_starts_total{path=\"spawned\"}",
        "kgate_kernel_starts_total{path=\"fallback\"}", "kgate_kernels_starting", "kgate_kernel_start_queue"};
    double sum = 0;

    for (size_t i = 0; i != sizeof(series) / sizeof(series[0]); ++i) {
        double v = xh_metric(gw_port, series[i]);
        cr_assert(v >= 0, "GET /kgate/metrics has no %s", series[i]);
        sum += v;
    }
    return sum;
}

/* A context of an unknown language is refused at once (API.md): 400 UNKNOWN_LANGUAGE naming the available languages, answered
 * without any kernel started or queued for it, on a kgate that starts none by itself (no pool, no template): its kernel starts
 * and its processes are the same after the answer as before, and no context is listed. No bound on time. */
Test(http, unknown_language_at_once)
{
    ts_proc_t before[64], after[64];
    size_t nbefore, nafter;
    double starts;
    ts_response_t r;

    start_own((const char *[]){"--pool", "none", "--kernel-template", "none", NULL}, NULL);
    starts = kernel_starts(own.port);
    nbefore = ts_descendants(own.pid, before, 64);
    ts_http_request(own.port, "POST", "/code/context", NULL, "{\"language\":\"cobol\"}", &r);
    E2E_ASSERT_ERROR(&r, 400, "UNKNOWN_LANGUAGE");
    const char *message = json_string_value(json_object_get(r.json, "message"));
    cr_assert(strstr(message, "python") != NULL, "the message does not name the available languages: %s", message);
    ts_response_dispose(&r);
    nafter = ts_descendants(own.pid, after, 64);
    cr_assert_eq(kernel_starts(own.port), starts, "a kernel was started for a context of an unknown language");
    cr_assert_eq(nafter, nbefore, "kgate had %zu descendants before a context of an unknown language was refused, %zu after",
                 nbefore, nafter);
    ts_http_request(own.port, "GET", "/code/contexts", NULL, NULL, &r);
    cr_assert_eq(r.status, 200);
    cr_assert(json_is_array(r.json) && json_array_size(r.json) == 0, "contexts listed: %.400s", r.body);
    ts_response_dispose(&r);
    stop_own();
}

Test(http, empty_code)
{
    ts_response_t r;
    post_raw("/code", "{\"context\":{\"language\":\"python\"},\"code\":\"\"}", &r);
    E2E_ASSERT_ERROR(&r, 400, NULL);
    ts_response_dispose(&r);
    post_raw("/code", "{\"code\":\"\"}", &r);
    E2E_ASSERT_ERROR(&r, 400, NULL);
    ts_response_dispose(&r);
}

/* A context member of the wrong type is refused, not read as absent (which ran the code in a shell, stateless). */
Test(http, context_members_of_the_wrong_type)
{
    static const char *const bodies[] = {
        "{\"context\":{\"id\":7},\"code\":\"echo ran\"}",
        "{\"context\":{\"id\":[\"x\"]},\"code\":\"echo ran\"}",
        "{\"context\":{\"language\":true},\"code\":\"echo ran\"}",
        "{\"context\":\"python\",\"code\":\"echo ran\"}",
    };
    ts_response_t r;

    for (size_t i = 0; i != sizeof(bodies) / sizeof(bodies[0]); ++i) {
        post_raw("/code", bodies[i], &r);
        E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
        cr_expect_null(strstr(r.body, "ran"), "the code ran: %s", r.body);
        ts_response_dispose(&r);
    }
    /* null is absent, as before: a stateless shell run */
    post_raw("/code", "{\"context\":{\"id\":null,\"language\":null},\"code\":\"echo ran\"}", &r);
    cr_assert_eq(r.status, 200, "%d %.300s", r.status, r.body);
    cr_expect_not_null(strstr(r.body, "ran\\n"), "%.300s", r.body);
    ts_response_dispose(&r);
}

/*
 * An error message that quotes a client's value cut inside a character: "no context with id \"%.64s\"" of 63 letters and an
 * "é" cut the "é" in half, jansson refused the message, and kgate crashed (SIGSEGV) on a valid request. The same for a Jupyter
 * kernel id, a path of bytes that are no UTF-8 (the Jupyter door's errors too) and a language quoted at "%.100s". Each now
 * answers its error with U+FFFD for the cut character, and kgate goes on serving.
 */
Test(http, error_messages_quoting_a_value_cut_inside_a_character)
{
    static const char *const paths[] = {
        "/code/contexts/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa%C3%A9",
        "/api/kernels/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa%C3%A9",
        "/code/contexts/%FF%FE",
    };
    ts_response_t r;

    post_raw("/code",
             "{\"context\":{\"id\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\u00e9\"},\"code\":\"1\"}", &r);
    E2E_ASSERT_ERROR(&r, 404, "CONTEXT_NOT_FOUND");
    cr_expect_not_null(strstr(r.body, "aaa\xef\xbf\xbd"), "the cut character is not U+FFFD: %.200s", r.body);
    ts_response_dispose(&r);
    for (size_t i = 0; i != sizeof(paths) / sizeof(paths[0]); ++i) {
        ts_http_request(port(), "GET", paths[i], NULL, NULL, &r);
        cr_expect_eq(r.status, 404, "GET %s: %d %.200s", paths[i], r.status, r.body);
        const char *message = json_string_value(json_object_get(r.json, "message"));
        cr_expect(message != NULL && strstr(message, "\xef\xbf\xbd") != NULL, "GET %s: %.200s", paths[i], r.body);
        ts_response_dispose(&r);
    }
    /* a language quoted at "%.100s": 99 letters, then the é it cuts */
    char language[128], body[256];
    memset(language, 'a', 99);
    memcpy(language + 99, "\xc3\xa9", 3);
    snprintf(body, sizeof(body), "{\"language\":\"%s\"}", language);
    post_raw("/code/context", body, &r);
    E2E_ASSERT_ERROR(&r, 400, "UNKNOWN_LANGUAGE");
    cr_expect_not_null(strstr(r.body, "\xef\xbf\xbd\\\"; available"), "%.300s", r.body);
    ts_response_dispose(&r);
    ts_http_request(port(), "GET", "/healthz", NULL, NULL, &r);
    cr_assert_eq(r.status, 200, "kgate is gone: %s", r.error);
    ts_response_dispose(&r);
}

/*
 * A port that is taken ends kgate at once with status 1 and says why, having released what it allocated: the sanitizer build
 * reported the event loop as leaked (not destroyed on that path) and, with abort_on_error, kgate died of SIGABRT instead.
 */
Test(http, a_taken_port_ends_kgate_with_status_1_and_nothing_leaked)
{
    char listen[64], log[] = "/tmp/kgate-taken-port-XXXXXX";
    int fd = mkstemp(log), status = 0;
    pid_t pid;

    cr_assert_geq(fd, 0);
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", port()); /* the shared kgate's */
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        execl(ts_kgate_path(KGATE_BINARY_DIR), "kgate", "--listen", listen, "--pool", "none", "--kernel-template", "none",
              (char *)NULL);
        _exit(127);
    }
    close(fd);
    for (int64_t deadline = ts_now_ms() + 30000; waitpid(pid, &status, WNOHANG) == 0;) {
        if (ts_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        ts_sleep_ms(20);
    }
    static char text[16384];
    ssize_t n = 0;
    if ((fd = open(log, O_RDONLY | O_CLOEXEC)) >= 0) {
        n = read(fd, text, sizeof(text) - 1);
        close(fd);
    }
    text[n > 0 ? n : 0] = '\0';
    unlink(log);
    cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 1, "wait status %#x; log: %s", status, text);
    cr_expect_not_null(strstr(text, "cannot listen on"), "no reason given: %s", text);
    cr_expect_null(strstr(text, "LeakSanitizer"), "%s", text);
}

Test(http, malformed_json)
{
    ts_response_t r;
    post_raw("/code", "{\"code\": ", &r);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
    ts_response_dispose(&r);
    post_raw("/code/context", "not json", &r);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
    ts_response_dispose(&r);
}

Test(http, unknown_route)
{
    ts_response_t r;
    ts_http_request(port(), "GET", "/no/such/route", NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 404, "NOT_FOUND");
    ts_response_dispose(&r);
}

Test(http, health_and_ping)
{
    ts_response_t r;
    ts_http_request(port(), "GET", "/healthz", NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
    ts_http_request(port(), "GET", "/ping", NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_eq(r.body_len, 0, "GET /ping has a body: %.200s", r.body);
    ts_response_dispose(&r);
}

/* ---- stateless runs ------------------------------------------------------------------------- */

Test(http, stateless_echo)
{
    ts_events_t evs;
    ts_response_t r;
    int st = ts_run_code(port(), NULL, NULL, NULL, "echo hi", RUN_MS, &evs, &r);
    cr_assert_eq(st, 200, "POST /code {\"code\":\"echo hi\"}: HTTP %d (%s) %.600s", st, evs.error, r.body ? r.body : "");
    E2E_ASSERT_RUN(&evs, NULL, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&evs, "stdout", "hi\n");
    char sum[E2E_MSG_SIZE];
    cr_assert_eq(ts_events_count(&evs, "error"), 0, "echo hi reported an error; %s", ts_events_summary(&evs, sum, sizeof(sum)));
    ts_response_dispose(&r);
    ts_events_dispose(&evs);
}

Test(http, stateless_exit_code)
{
    ts_events_t evs;
    ts_response_t r;
    int st = ts_run_code(port(), NULL, NULL, NULL, "exit 3", RUN_MS, &evs, &r);
    cr_assert_eq(st, 200, "POST /code {\"code\":\"exit 3\"}: HTTP %d (%s) %.600s", st, evs.error, r.body ? r.body : "");
    E2E_ASSERT_RUN(&evs, NULL, E2E_FRAMING_SSE);
    char sum[E2E_MSG_SIZE];
    long i = ts_events_find(&evs, "error", 0);
    cr_assert(i >= 0, "exit 3 reported no error; %s", ts_events_summary(&evs, sum, sizeof(sum)));
    cr_assert(json_is_object(json_object_get(evs.v[i].json, "error")), "the error event has no error object: %.400s",
              evs.v[i].data);
    ts_response_dispose(&r);
    ts_events_dispose(&evs);
}

/* ---- auth ----------------------------------------------------------------------------------- */

static void expect_status(const char *method, const char *path, const char *header, int status, const char *code)
{
    const char *headers[] = {header, NULL};
    ts_response_t r;
    ts_http_request(own.port, method, path, header != NULL ? headers : NULL, NULL, &r);
    if (code != NULL) {
        char msg[E2E_MSG_SIZE];
        cr_assert(e2e_check_error(&r, status, code, msg, sizeof(msg)), "%s %s with [%s]: %s", method, path,
                  header ? header : "no token", msg);
    } else {
        cr_assert_eq(r.status, status, "%s %s with [%s]: expected HTTP %d, got %d (%s) %.400s", method, path,
                     header ? header : "no token", status, r.status, r.error, r.body);
    }
    ts_response_dispose(&r);
}

Test(http, access_token_flag)
{
    start_own((const char *[]){"--access-token", "s3cret", NULL}, NULL);
    expect_status("GET", "/code/contexts", NULL, 401, "UNAUTHORIZED");
    expect_status("GET", "/code/contexts", "X-EXECD-ACCESS-TOKEN: wrong", 401, "UNAUTHORIZED");
    expect_status("GET", "/code/contexts", "Authorization: Bearer wrong", 401, "UNAUTHORIZED");
    expect_status("GET", "/code/contexts", "Authorization: Bearer s3cre", 401, "UNAUTHORIZED");
    expect_status("GET", "/code/contexts", "Authorization: Bearer s3cretx", 401, "UNAUTHORIZED");
    expect_status("POST", "/code/context", NULL, 401, "UNAUTHORIZED");
    expect_status("POST", "/code", NULL, 401, "UNAUTHORIZED");
    expect_status("GET", "/ping", NULL, 200, NULL); /* execd's liveness probe needs no token (docs/API.md 6.3) */
    expect_status("GET", "/ping", "X-EXECD-ACCESS-TOKEN: wrong", 200, NULL);
    expect_status("GET", "/code/contexts", "X-EXECD-ACCESS-TOKEN: s3cret", 200, NULL);
    expect_status("GET", "/code/contexts", "Authorization: Bearer s3cret", 200, NULL);
    expect_status("GET", "/code/contexts", "Authorization: token s3cret", 200, NULL);
    expect_status("GET", "/ping", "X-EXECD-ACCESS-TOKEN: s3cret", 200, NULL);
    expect_status("GET", "/healthz", NULL, 200, NULL);
    expect_status("GET", "/readyz", NULL, 200, NULL);
    /* the route table is not mapped without the token: unknown routes and wrong methods say 401 too */
    expect_status("GET", "/nonexistent", NULL, 401, "UNAUTHORIZED");
    expect_status("PUT", "/code", NULL, 401, "UNAUTHORIZED");
    expect_status("GET", "/nonexistent", "X-EXECD-ACCESS-TOKEN: s3cret", 404, "NOT_FOUND");
    expect_status("PUT", "/code", "X-EXECD-ACCESS-TOKEN: s3cret", 405, "METHOD_NOT_ALLOWED");
    stop_own();
}

Test(http, access_token_environment)
{
    start_own(NULL, (const char *[]){"KGATE_ACCESS_TOKEN=fromenv", NULL});
    expect_status("GET", "/code/contexts", NULL, 401, "UNAUTHORIZED");
    expect_status("GET", "/code/contexts", "X-EXECD-ACCESS-TOKEN: s3cret", 401, "UNAUTHORIZED");
    expect_status("GET", "/code/contexts", "X-EXECD-ACCESS-TOKEN: fromenv", 200, NULL);
    expect_status("GET", "/healthz", NULL, 200, NULL);
    stop_own();
}

/* ---- execd framing -------------------------------------------------------------------------- */

Test(http, compat_execd_framing)
{
    start_own((const char *[]){"--compat", "execd", NULL}, NULL);
    char *id = NULL;
    ts_response_t r;
    int st = ts_context_create(own.port, NULL, "python", &id, &r);
    cr_assert_eq(st, 200, "POST /code/context: HTTP %d (%s) %.600s", st, r.error, r.body);
    ts_response_dispose(&r);

    ts_events_t evs;
    st = ts_run_code(own.port, NULL, id, NULL, "1+1", RUN_MS, &evs, &r);
    cr_assert_eq(st, 200, "POST /code: HTTP %d (%s) %.600s", st, evs.error, r.body ? r.body : "");
    ts_response_dispose(&r);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_EXECD);
    char sum[E2E_MSG_SIZE];
    const ts_event_t *res = e2e_find_result(&evs, "text/plain");
    cr_assert_not_null(res, "no result with text/plain; %s", ts_events_summary(&evs, sum, sizeof(sum)));
    json_t *results = json_object_get(res->json, "results");
    json_t *text = json_object_get(results, "text"), *plain = json_object_get(results, "text/plain");
    cr_assert(json_is_string(text) && strcmp(json_string_value(text), "2") == 0, "results.text is not \"2\": %.400s", res->data);
    cr_assert(json_is_string(plain) && strcmp(json_string_value(plain), "2") == 0, "results[\"text/plain\"] is not \"2\": %.400s",
              res->data);
    ts_events_dispose(&evs);

    /* Go's SDK reads results as a map of strings: a JSON value arrives as its JSON text */
    st = ts_run_code(own.port, NULL, id, NULL, "from IPython.display import JSON, display\ndisplay(JSON({'a': [1, 2]}))", RUN_MS,
                     &evs, &r);
    cr_assert_eq(st, 200, "POST /code: HTTP %d (%s) %.600s", st, evs.error, r.body ? r.body : "");
    ts_response_dispose(&r);
    res = e2e_find_result(&evs, "application/json");
    cr_assert_not_null(res, "no result with application/json; %s", ts_events_summary(&evs, sum, sizeof(sum)));
    json_t *value = json_object_get(json_object_get(res->json, "results"), "application/json");
    cr_assert(json_is_string(value), "application/json is not a string under --compat execd: %.400s", res->data);
    json_t *parsed = json_loads(json_string_value(value), 0, NULL);
    json_t *expected = json_pack("{s:[i,i]}", "a", 1, 2);
    cr_assert(json_equal(parsed, expected), "application/json's text is not the value: %.400s", res->data);
    json_decref(parsed);
    json_decref(expected);
    ts_events_dispose(&evs);
    cr_assert_eq(ts_context_delete(own.port, NULL, id), 200);
    free(id);
    stop_own();
}

/* ---- shutdown ------------------------------------------------------------------------------- */

static pid_t kernel_pid(const char *id)
{
    ts_events_t evs;
    ts_response_t r;
    int st = ts_run_code(own.port, NULL, id, NULL, "import os; print(os.getpid())", RUN_MS, &evs, &r);
    cr_assert_eq(st, 200, "POST /code: HTTP %d (%s) %.600s", st, evs.error, r.body ? r.body : "");
    ts_response_dispose(&r);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    char *out = ts_events_text(&evs, "stdout");
    pid_t pid = (pid_t)atoi(out);
    cr_assert(pid > 1, "the kernel did not print its pid: '%s'", out);
    free(out);
    ts_events_dispose(&evs);
    return pid;
}

static size_t count_json_files(const char *dir, char *names, size_t size)
{
    size_t n = 0, len = 0;
    names[0] = '\0';
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l > 5 && strcmp(de->d_name + l - 5, ".json") == 0) {
            n++;
            if (len + l + 2 < size)
                len += (size_t)snprintf(names + len, size - len, "%s ", de->d_name);
        }
    }
    closedir(d);
    return n;
}

Test(http, sigterm_stops_everything)
{
    start_own(NULL, NULL);
    char *ids[2];
    ts_proc_t kernels[2];
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(ts_context_create(own.port, NULL, "python", &ids[i], NULL), 200, "POST /code/context failed");
        kernels[i].pid = kernel_pid(ids[i]);
        kernels[i].starttime = 0;
        cr_assert(ts_proc_alive(&kernels[i]), "kernel %d is not running", (int)kernels[i].pid);
        free(ids[i]);
    }
    ts_proc_t procs[256];
    size_t nprocs = ts_descendants(own.pid, procs, 256);

    int64_t t0 = ts_now_ms();
    ts_gateway_signal(&own, SIGTERM);
    int rc = ts_gateway_wait(&own, t0 + TS_STOP_GRACE_MS);
    int64_t took = ts_now_ms() - t0;
    size_t alive = 0;
    for (size_t i = 0; i < nprocs; i++)
        alive += (size_t)ts_proc_alive(&procs[i]);
    int kernel_alive[2] = {ts_proc_alive(&kernels[0]), ts_proc_alive(&kernels[1])};
    /* Whatever the outcome, leave nothing running. */
    for (size_t i = 0; i < nprocs; i++)
        if (ts_proc_alive(&procs[i]))
            kill(procs[i].pid, SIGKILL);
    for (int i = 0; i < 2; i++)
        if (kernel_alive[i])
            kill(kernels[i].pid, SIGKILL);
    char names[1024];
    size_t files = count_json_files(own.runtime_dir, names, sizeof(names));
    int st = own.exit_status;
    if (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0 || alive || files)
        ts_gateway_dump_log(&own, 8192);

    /* The exit status last: what survived says more about a failed shutdown than a sanitizer's abort does. */
    cr_assert_eq(rc, 0, "kgate did not exit within %d ms of SIGTERM", TS_STOP_GRACE_MS);
    cr_assert(!kernel_alive[0] && !kernel_alive[1], "kernel process(es) survived kgate: %d %s, %d %s", (int)kernels[0].pid,
              kernel_alive[0] ? "alive" : "gone", (int)kernels[1].pid, kernel_alive[1] ? "alive" : "gone");
    cr_assert_eq(alive, 0, "%zu of %zu descendant processes survived kgate", alive, nprocs);
    cr_assert_eq(files, 0, "connection files left in the runtime dir: %s", names);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kgate did not exit 0 on SIGTERM (wait status %#x%s)", st,
              WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT ? ": SIGABRT, e.g. a sanitizer report at exit, see its log" : "");
    cr_log_info("kgate stopped with two live kernels in %lld ms", (long long)took);
}

/* ---- connection limits ---------------------------------------------------------------------- */

/* Opens a TCP connection to 127.0.0.1:port that sends nothing; -1 on failure. */
static int silent_connection(unsigned short p)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(p), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd != -1 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

static int cmp_ll(const void *a, const void *b)
{
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

/* 400 silent connections to a kgate limited to 256 fds: it keeps answering at once and does not spin. */
Test(http, silent_connections_beyond_the_fd_limit, .timeout = 120)
{
    enum { NCONN = 400, NPROBE = 5 };
    static int fds[NCONN];
    struct rlimit saved, low;
    long long took[NPROBE];
    size_t opened = 0;

    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
    low = saved;
    low.rlim_cur = 256;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    start_own(NULL, NULL); /* inherits the 256-fd limit */
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
    for (size_t i = 0; i != NCONN; ++i)
        if ((fds[i] = silent_connection(own.port)) != -1)
            ++opened;
    cr_assert_eq(opened, (size_t)NCONN, "only %zu of %d connections were opened", opened, NCONN);
    usleep(300 * 1000);

    int64_t cpu0 = ts_proc_cpu_ms(own.pid), t0 = ts_now_ms();
    for (int i = 0; i != NPROBE; ++i) {
        ts_response_t r;
        int64_t start = ts_now_ms();
        ts_http_request(own.port, "GET", "/healthz", NULL, NULL, &r);
        took[i] = ts_now_ms() - start;
        cr_assert_eq(r.status, 200, "/healthz with %d silent connections open: HTTP %d (%s)", NCONN, r.status, r.error);
        ts_response_dispose(&r);
    }
    usleep(1000 * 1000);
    int64_t cpu_ms = ts_proc_cpu_ms(own.pid) - cpu0, wall_ms = ts_now_ms() - t0;
    qsort(took, NPROBE, sizeof(took[0]), cmp_ll);
    cr_log_info(
        "/healthz beside %d silent connections under a 256-fd limit: median %lld ms, max %lld ms; kgate CPU %lld ms in %lld ms",
        NCONN, took[NPROBE / 2], took[NPROBE - 1], (long long)cpu_ms, (long long)wall_ms);
    cr_expect_lt(took[NPROBE / 2], 100, "/healthz took %lld ms (median) beside silent connections", took[NPROBE / 2]);
    cr_expect_lt(cpu_ms * 4, wall_ms, "kgate used %lld ms of CPU in %lld ms: it spins", (long long)cpu_ms, (long long)wall_ms);
    for (size_t i = 0; i != NCONN; ++i)
        close(fds[i]);
    stop_own();
}
