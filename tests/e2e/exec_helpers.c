/* tests/e2e/exec_helpers.c: helpers shared by the executions e2e tests (see exec_helpers.h). */
#include "exec_helpers.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"
#include "support/skip.h"
#include "support/stream.h"

/* Private gateways still running, so that a test's fini stops them even after a failed assertion. */
static ts_gateway_t *started[8];

void xh_gateway_start(ts_gateway_t *gw, const char *const *args)
{
    /* ASan's quarantine keeps freed blocks resident for a while: without it RSS tracks what kgate really holds. */
    static char asan[1024];
    const char *prev = getenv("ASAN_OPTIONS");
    snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%squarantine_size_mb=0:malloc_context_size=5", prev != NULL ? prev : "",
             prev != NULL && *prev != '\0' ? ":" : "");
    const char *env[] = {asan, NULL};
    int rc = ts_gateway_start(gw, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .env = env});
    cr_assert_eq(rc, 0, "starting a private kgate: %s", gw->error);
    for (size_t i = 0; i < sizeof(started) / sizeof(started[0]); i++)
        if (started[i] == NULL) {
            started[i] = gw;
            break;
        }
}

void xh_gateways_stop_all(void)
{
    for (size_t i = 0; i < sizeof(started) / sizeof(started[0]); i++)
        if (started[i] != NULL)
            xh_gateway_stop(started[i]);
}

/* 1 if kgate's log holds `needle` (the log is small: read it whole, bounded). */
static int log_contains(const ts_gateway_t *gw, const char *needle)
{
    FILE *f = fopen(gw->log_path, "r");
    if (f == NULL)
        return 0;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

void xh_gateway_stop(ts_gateway_t *gw)
{
    size_t survivors = 0;
    for (size_t i = 0; i < sizeof(started) / sizeof(started[0]); i++)
        if (started[i] == gw)
            started[i] = NULL;
    if (gw->pid <= 0)
        return;
    int rc = ts_gateway_stop_keep(gw, &survivors);
    int st = gw->exit_status;
    int clean = rc == 0 && survivors == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    /* A leak report at exit alone is the shared kgate's finding (shared.c fails the binary for it); here it is only
     * noted, so that each test fails for what it tests. Anything else (a crash, a hang, a kernel left behind) fails. */
    int leak_only = rc == 0 && survivors == 0 && log_contains(gw, "LeakSanitizer: detected memory leaks") &&
                    !log_contains(gw, "ERROR: AddressSanitizer") && !log_contains(gw, "runtime error:");
    if (!clean)
        ts_gateway_dump_log(gw, leak_only ? 2048 : 16384);
    if (!clean && leak_only)
        cr_log_warn("private kgate: LeakSanitizer reported leaks at exit (wait status %#x)", st);
    cr_expect(clean || leak_only, "private kgate did not stop cleanly on SIGTERM: %s; wait status %#x; %zu descendant(s) survived",
              rc != 0 ? gw->error : "exited in time", st, survivors);
    ts_gateway_cleanup(gw);
}

char *xh_context_new(unsigned short port, const char *cwd, json_t *env)
{
    json_t *body = json_object();
    json_object_set_new(body, "language", json_string("python"));
    if (cwd != NULL)
        json_object_set_new(body, "cwd", json_string(cwd));
    if (env != NULL)
        json_object_set(body, "env", env);
    ts_response_t r;
    int st = ts_post_json(port, "/code/context", NULL, body, &r);
    json_decref(body);
    cr_assert_eq(st, 200, "POST /code/context: HTTP %d (%s) %.600s", st, r.error, r.body);
    json_t *id = json_object_get(r.json, "id");
    cr_assert(json_is_string(id) && e2e_is_uuid(json_string_value(id)), "POST /code/context: no UUID id in %.600s", r.body);
    char *out = strdup(json_string_value(id));
    ts_response_dispose(&r);
    return out;
}

json_t *xh_body(const char *ctx_id, const char *code)
{
    return ts_code_body(ctx_id, NULL, code);
}

ts_stream_t *xh_open(unsigned short port, json_t *body, int64_t deadline_ms)
{
    char *text = json_dumps(body, JSON_COMPACT);
    cr_assert_not_null(text);
    char err[256] = "";
    ts_stream_t *s = ts_stream_open(port, "POST", "/code", NULL, text, deadline_ms, err);
    cr_assert_not_null(s, "POST /code %.300s: %s", text, err);
    free(text);
    return s;
}

void xh_run(unsigned short port, json_t *body, int64_t deadline_ms, ts_events_t *out)
{
    memset(out, 0, sizeof(*out));
    ts_stream_t *s = xh_open(port, body, deadline_ms);
    const ts_response_t *r = ts_stream_response(s);
    cr_assert_eq(r->status, 200, "POST /code: HTTP %d; body: %.600s", r->status, r->body);
    ts_stream_collect(s, deadline_ms, 0, out);
    ts_stream_close(s);
}

void xh_run_ok(unsigned short port, const char *ctx_id, const char *code, ts_events_t *out)
{
    json_t *body = xh_body(ctx_id, code);
    xh_run(port, body, ts_now_ms() + XH_RUN_MS, out);
    json_decref(body);
    E2E_ASSERT_RUN(out, ctx_id, E2E_FRAMING_SSE);
    char sum[E2E_MSG_SIZE];
    cr_assert_eq(ts_events_count(out, "error"), 0, "`%s` produced an error; %s", code, ts_events_summary(out, sum, sizeof(sum)));
}

size_t xh_wait_event(ts_stream_t *s, ts_events_t *evs, const char *type, size_t from, int64_t deadline_ms)
{
    char sum[E2E_MSG_SIZE];
    for (;;) {
        long i = ts_events_find(evs, type, from);
        if (i >= 0)
            return (size_t)i;
        int r = ts_stream_next(s, deadline_ms, evs);
        cr_assert(r > 0, "waiting for a `%s` event: the stream %s; %s", type, r == 0 ? "ended" : "timed out or failed",
                  ts_events_summary(evs, sum, sizeof(sum)));
    }
}

const char *xh_execution_id(const ts_events_t *evs)
{
    char sum[E2E_MSG_SIZE];
    cr_assert(evs->n > 0 && strcmp(evs->v[0].type, "init") == 0, "no init event first; %s",
              ts_events_summary(evs, sum, sizeof(sum)));
    json_t *id = json_object_get(evs->v[0].json, "execution_id");
    cr_assert(json_is_string(id) && e2e_is_uuid(json_string_value(id)), "init has no UUID execution_id: %.400s", evs->v[0].data);
    return json_string_value(id);
}

const ts_event_t *xh_error_event(const ts_events_t *evs, const char *ename)
{
    char sum[E2E_MSG_SIZE];
    long i = ts_events_find(evs, "error", 0);
    cr_assert(i >= 0, "no error event (expected %s); %s", ename != NULL ? ename : "one", ts_events_summary(evs, sum, sizeof(sum)));
    if (ename != NULL) {
        json_t *err = json_object_get(evs->v[i].json, "error");
        cr_assert_str_eq(xh_str(err, "ename"), ename, "error.ename is not %s: %.800s", ename, evs->v[i].data);
        cr_assert(json_is_array(json_object_get(err, "traceback")), "error.traceback is not an array: %.400s", evs->v[i].data);
    }
    return &evs->v[i];
}

size_t xh_status_count(const ts_events_t *evs, const char *text)
{
    size_t n = 0;
    for (size_t i = 0; i < evs->n; i++)
        n += strcmp(evs->v[i].type, "status") == 0 && strcmp(xh_str(evs->v[i].json, "text"), text) == 0;
    return n;
}

json_t *xh_execution(unsigned short port, const char *exec_id)
{
    char path[256];
    snprintf(path, sizeof(path), "/code/executions/%s", exec_id);
    ts_response_t r;
    int st = ts_http_request(port, "GET", path, NULL, NULL, &r);
    cr_assert_eq(st, 200, "GET %s: HTTP %d (%s) %.600s", path, st, r.error, r.body);
    cr_assert(json_is_object(r.json), "GET %s: not a JSON object: %.600s", path, r.body);
    json_t *out = json_incref(r.json);
    ts_response_dispose(&r);
    return out;
}

json_t *xh_execution_wait_state(unsigned short port, const char *exec_id, const char *state, int64_t deadline_ms)
{
    for (;;) {
        json_t *ex = xh_execution(port, exec_id);
        if (strcmp(xh_str(ex, "state"), state) == 0)
            return ex;
        if (ts_now_ms() >= deadline_ms) {
            char *dump = json_dumps(ex, JSON_COMPACT);
            cr_assert_fail("execution %s did not reach state %s in time; last: %s", exec_id, state, dump);
        }
        json_decref(ex);
        ts_sleep_ms(20);
    }
}

double xh_metric(unsigned short port, const char *series)
{
    ts_response_t r;
    double value = -1;
    size_t len = strlen(series);

    ts_http_request(port, "GET", "/kgate/metrics", NULL, NULL, &r);
    cr_assert_eq(r.status, 200, "GET /kgate/metrics: HTTP %d", r.status);
    for (const char *line = r.body; line != NULL && *line != '\0'; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
        if (strncmp(line, series, len) == 0 && line[len] == ' ')
            value = atof(line + len + 1);
    ts_response_dispose(&r);
    return value;
}

int xh_context_get(unsigned short port, const char *ctx_id, json_t **out)
{
    char path[256];
    snprintf(path, sizeof(path), "/code/contexts/%s", ctx_id);
    ts_response_t r;
    int st = ts_http_request(port, "GET", path, NULL, NULL, &r);
    if (out != NULL)
        *out = r.json != NULL ? json_incref(r.json) : NULL;
    ts_response_dispose(&r);
    return st;
}

json_t *xh_context(unsigned short port, const char *ctx_id)
{
    json_t *c = NULL;
    int st = xh_context_get(port, ctx_id, &c);
    cr_assert(st == 200 && c != NULL, "GET /code/contexts/%s: HTTP %d", ctx_id, st);
    return c;
}

json_t *xh_context_wait_status(unsigned short port, const char *ctx_id, const char *status, unsigned ms)
{
    int64_t deadline = ts_now_ms() + ms;
    for (;;) {
        json_t *c = xh_context(port, ctx_id);
        if (strcmp(xh_str(c, "status"), status) == 0)
            return c;
        cr_assert(ts_now_ms() < deadline, "context status not %s within %u ms: %s", status, ms, xh_str(c, "status"));
        json_decref(c);
        usleep(50 * 1000);
    }
}

char *xh_run_stdout(unsigned short port, const char *ctx_id, const char *code)
{
    ts_events_t evs;
    xh_run_ok(port, ctx_id, code, &evs);
    char *out = ts_events_text(&evs, "stdout");
    ts_events_dispose(&evs);
    cr_assert_not_null(out, "`%s` printed nothing", code);
    return out;
}

const char *xh_str(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s != NULL ? s : "";
}

long long xh_int(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

long long xh_rss_bytes(pid_t pid)
{
    long long kb = ts_proc_rss_kb(pid);
    return kb < 0 ? -1 : kb * 1024;
}

int xh_pid_alive(pid_t pid)
{
    ts_proc_t p = {pid, 0};
    return ts_proc_alive(&p);
}

int xh_pid_wait_gone(pid_t pid, int64_t deadline_ms)
{
    for (;;) {
        if (!xh_pid_alive(pid))
            return 1;
        if (ts_now_ms() >= deadline_ms)
            return 0;
        ts_sleep_ms(20);
    }
}

int xh_bwrap_works(void)
{
    return system("bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts --unshare-net --disable-userns --cap-drop ALL "
                  "--die-with-parent --new-session --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp /bin/true >/dev/null 2>&1") ==
           0;
}

void xh_require_bwrap(const char *consequence)
{
    cr_assert(system("command -v bwrap >/dev/null 2>&1") == 0, "bwrap is not installed: deploy/deps.sh installs bubblewrap");
    if (!xh_bwrap_works())
        cr_skip_test("%s", ts_skip_note(__func__, "bwrap cannot create user/pid/net namespaces on this host%s%s",
                                        consequence[0] != '\0' ? ": " : "", consequence));
}

void xh_sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

void xh_holding_wrapper(const char *dir, const char *name, const char *real, char *path, size_t size)
{
    FILE *f;

    xh_sh("rm -rf %s && mkdir -p %s && mkfifo %s/go", dir, dir, dir);
    snprintf(path, size, "%s/%s", dir, name);
    cr_assert_not_null(f = fopen(path, "w"), "cannot write %s", path);
    /* read(1) of a FIFO by the shell takes a byte at a time: each held process takes one line of the release, no more */
    fprintf(f, "#!/bin/sh\nif [ -e '%s/hold' ]; then echo $$ >> '%s/held'; read -r _ < '%s/go'; fi\nexec %s%s%s\"$@\"\n", dir, dir,
            dir, real != NULL ? "'" : "", real != NULL ? real : "", real != NULL ? "' " : "");
    fclose(f);
    cr_assert_eq(chmod(path, 0755), 0);
}

size_t xh_held_count(const char *dir)
{
    char path[512], line[64];
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/held", dir);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strchr(line, '\n') != NULL; /* a line being written counts once whole */
    fclose(f);
    return n;
}
