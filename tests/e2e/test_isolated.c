/* tests/e2e/test_isolated.c: execd's isolated sessions (/v1/isolated, docs/API.md 5.1): capabilities, create/list/get/delete,
 * runs in one persistent bash per session (state kept), the workspace modes (overlay writes stay in the session, ro refuses),
 * the files routes as the sandbox sees them, share_net, env_passthrough, idle expiry, bounds. Each test runs a private kgate
 * on a workspace root of its own; skipped only where bwrap cannot create its namespaces (detected by running it).
 * Over 600 lines on purpose: one kgate fixture and its helpers serve every test of the route family, kgate's loop kept free
 * while sandboxes come and go (the last part) included. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "exec_helpers.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/skip.h"
#include "support/stream.h"

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(isolated, .fini = fini, .timeout = 240);

/* what a host where bwrap cannot create its namespaces lacks */
#define ISOLATED_UNAVAILABLE "isolated sessions are unavailable here, which test capabilities_tell_the_truth checks"

static ts_gateway_t gw;
static char root[300];

/* The whole file (up to 64 KiB) in a static buffer, or NULL. */
static char *slurp(const char *path)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    size_t n;
    if (f == NULL)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

/* A private kgate on a fresh workspace root (root/ws holds base.txt), with `extra` arguments. */
static void start(const char *const *extra)
{
    const char *args[16] = {"--workspace-root", NULL};
    size_t n = 1;

    snprintf(root, sizeof(root), "/tmp/kgate-e2e-iso-%d", (int)getpid());
    xh_sh("rm -rf %s && mkdir -p %s/ws && echo base > %s/ws/base.txt", root, root, root);
    args[n++] = root;
    for (; extra != NULL && *extra != NULL; ++extra)
        args[n++] = *extra;
    args[n] = NULL;
    xh_gateway_start(&gw, args);
}

static void stop(void)
{
    xh_gateway_stop(&gw);
    xh_sh("rm -rf %s", root);
}

/* One request; returns the status, the response in `r` (dispose it). */
static int req(const char *method, const char *path, const char *body, ts_response_t *r)
{
    const char *headers[] = {"Content-Type: application/json", NULL};
    return ts_http_request(gw.port, method, path, headers, body, r);
}

static void expect(const char *method, const char *path, const char *body, int status, const char *code)
{
    ts_response_t r;
    int st = req(method, path, body, &r);
    cr_assert_eq(st, status, "%s %s: HTTP %d, expected %d: %.600s", method, path, st, status, r.body);
    if (code != NULL)
        cr_assert_str_eq(xh_str(r.json, "code"), code, "%s %s: %.600s", method, path, r.body);
    ts_response_dispose(&r);
}

/* POST /v1/isolated/session with `tmpl` (a JSON object; "@" stands for the workspace root); returns the id (caller frees). */
static char *create(const char *tmpl)
{
    char body[4096];
    size_t len = 0;
    ts_response_t r;
    int st;

    for (; *tmpl != '\0' && len + sizeof(root) + 1 < sizeof(body); ++tmpl)
        len += (size_t)(*tmpl == '@' ? snprintf(body + len, sizeof(body) - len, "%s", root) : (body[len] = *tmpl, 1));
    body[len] = '\0';
    st = req("POST", "/v1/isolated/session", body, &r);
    cr_assert_eq(st, 200, "POST /v1/isolated/session %s: HTTP %d: %.800s", body, st, r.body);
    cr_assert_str_eq(xh_str(r.json, "status"), "active", "%s", r.body);
    char *id = strdup(xh_str(r.json, "session_id"));
    ts_response_dispose(&r);
    return id;
}

/* Runs `code` in session `id` (`extra`: more JSON fields, or ""), returns its stdout lines joined by '\n' (caller frees);
 * `ename` receives the error event's ename ("" when none). */
static char *run(const char *id, const char *code, const char *extra, char *ename, size_t ename_size)
{
    char path[200], err[256], sum[E2E_MSG_SIZE];
    json_t *body = json_object();
    ts_events_t evs = {0};
    char *text, *out = calloc(1, 1);
    size_t len = 0;

    json_object_set_new(body, "code", json_string(code));
    if (extra[0] != '\0') {
        json_t *more = json_loads(extra, 0, NULL);
        json_object_update(body, more);
        json_decref(more);
    }
    text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/run", id);
    ts_stream_t *s = ts_stream_open(gw.port, "POST", path, (const char *const[]){"Content-Type: application/json", NULL}, text,
                                    ts_now_ms() + XH_HEAD_MS, err);
    free(text);
    cr_assert_not_null(s, "POST %s: %s", path, err);
    cr_assert(ts_stream_is_sse(s), "POST %s: HTTP %d %.600s", path, ts_stream_response(s)->status, ts_stream_response(s)->body);
    ts_stream_collect(s, ts_now_ms() + XH_RUN_MS, 0, &evs);
    ts_stream_close(s);
    cr_assert(ts_events_find(&evs, "execution_complete", 0) >= 0, "no execution_complete: %s",
              ts_events_summary(&evs, sum, sizeof(sum)));
    ename[0] = '\0';
    for (size_t i = 0; i != evs.n; ++i) {
        if (strcmp(evs.v[i].type, "stdout") == 0) {
            const char *t = xh_str(evs.v[i].json, "text");
            out = realloc(out, len + strlen(t) + 2);
            len += (size_t)sprintf(out + len, "%s%s", len != 0 ? "\n" : "", t);
        } else if (strcmp(evs.v[i].type, "error") == 0) {
            snprintf(ename, ename_size, "%s", xh_str(json_object_get(evs.v[i].json, "error"), "ename"));
        }
    }
    ts_events_dispose(&evs);
    return out;
}

/* run() asserting no error. */
static char *run_ok(const char *id, const char *code)
{
    char ename[64];
    char *out = run(id, code, "", ename, sizeof(ename));
    cr_assert_str_eq(ename, "", "run %s: error %s (stdout %s)", code, ename, out);
    return out;
}

static void delete_session(const char *id)
{
    char path[200];
    snprintf(path, sizeof(path), "/v1/isolated/session/%s", id);
    expect("DELETE", path, NULL, 200, NULL);
    expect("GET", path, NULL, 404, "SESSION_NOT_FOUND");
}

Test(isolated, capabilities_tell_the_truth)
{
    ts_response_t r;
    int works = xh_bwrap_works();

    start(NULL);
    cr_assert_eq(req("GET", "/v1/isolated/capabilities", NULL, &r), 200);
    cr_assert_eq(json_is_true(json_object_get(r.json, "available")), works, "bwrap %s here, capabilities say %s",
                 works ? "works" : "does not work", r.body);
    cr_assert_str_eq(xh_str(r.json, "isolator"), "bwrap");
    cr_assert(json_is_false(json_object_get(r.json, "diff_supported")) &&
              json_is_false(json_object_get(r.json, "commit_supported")));
    if (!works)
        cr_assert(json_is_string(json_object_get(r.json, "message")), "%s", r.body);
    ts_response_dispose(&r);
    if (!works)
        expect("POST", "/v1/isolated/session", "{\"workspace\": {\"path\": \"/tmp\"}}", 503, "NOT_SUPPORTED");
    stop();
}

/* A kgate whose bwrap cannot run (a path that is no bwrap) says so, and every other route answers 503 NOT_SUPPORTED. */
Test(isolated, unavailable_without_bwrap)
{
    ts_response_t r;

    start((const char *const[]){"--bwrap", "/bin/false", NULL});
    cr_assert_eq(req("GET", "/v1/isolated/capabilities", NULL, &r), 200);
    cr_assert(json_is_false(json_object_get(r.json, "available")), "%s", r.body);
    cr_assert(strstr(xh_str(r.json, "message"), "/bin/false") != NULL, "%s", r.body);
    ts_response_dispose(&r);
    expect("POST", "/v1/isolated/session", "{\"workspace\": {\"path\": \"/tmp\"}}", 503, "NOT_SUPPORTED");
    expect("GET", "/v1/isolated/sessions", NULL, 503, "NOT_SUPPORTED");
    expect("GET", "/v1/isolated/session/x", NULL, 503, "NOT_SUPPORTED");
    expect("POST", "/v1/isolated/session/x/run", "{\"code\": \"true\"}", 503, "NOT_SUPPORTED");
    expect("GET", "/v1/isolated/session/x/files/info?path=/", NULL, 503, "NOT_SUPPORTED");
    stop();
}

Test(isolated, create_list_get_delete)
{
    ts_response_t r;
    char path[200];

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    char *id = create("{\"workspace\": {\"path\": \"@/ws\", \"mode\": \"rw\"}, \"profile\": \"balanced\", "
                      "\"idle_timeout_seconds\": 600}");
    cr_assert_eq(req("GET", "/v1/isolated/sessions", NULL, &r), 200);
    cr_assert_eq(json_array_size(json_object_get(r.json, "sessions")), 1, "%s", r.body);
    cr_assert_str_eq(xh_str(json_array_get(json_object_get(r.json, "sessions"), 0), "session_id"), id);
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s", id);
    cr_assert_eq(req("GET", path, NULL, &r), 200);
    cr_assert_str_eq(xh_str(r.json, "status"), "active");
    cr_assert_str_eq(xh_str(r.json, "profile"), "balanced");
    cr_assert_str_eq(xh_str(json_object_get(r.json, "workspace"), "mode"), "rw");
    cr_assert(json_is_null(json_object_get(r.json, "last_run_at")), "%s", r.body);
    cr_assert(xh_int(r.json, "idle_remaining_seconds") > 590, "%s", r.body);
    cr_assert(json_is_string(json_object_get(r.json, "created_at")));
    ts_response_dispose(&r);
    free(run_ok(id, "true"));
    cr_assert_eq(req("GET", path, NULL, &r), 200);
    cr_assert(json_is_string(json_object_get(r.json, "last_run_at")), "%s", r.body);
    ts_response_dispose(&r);
    /* the defaults of strict: overlay */
    char *strict = create("{\"workspace\": {\"path\": \"@/ws\"}}");
    snprintf(path, sizeof(path), "/v1/isolated/session/%s", strict);
    cr_assert_eq(req("GET", path, NULL, &r), 200);
    cr_assert_str_eq(xh_str(r.json, "profile"), "strict");
    cr_assert_str_eq(xh_str(json_object_get(r.json, "workspace"), "mode"), "overlay");
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/diff", strict);
    expect("GET", path, NULL, 501, "NOT_SUPPORTED");
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/commit", strict);
    expect("POST", path, "{}", 501, "NOT_SUPPORTED");
    delete_session(id);
    delete_session(strict);
    expect("DELETE", "/v1/isolated/session/nope", NULL, 404, "SESSION_NOT_FOUND");
    free(id);
    free(strict);
    stop();
}

Test(isolated, bad_requests)
{
    char body[2000];

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    expect("POST", "/v1/isolated/session", "{}", 400, "INVALID_REQUEST_BODY");
    expect("POST", "/v1/isolated/session", "{\"workspace\": {\"path\": \"relative\"}}", 400, "INVALID_REQUEST_BODY");
    expect("POST", "/v1/isolated/session", "{\"workspace\": {\"path\": \"/etc\"}}", 400, "INVALID_REQUEST_BODY");
    snprintf(body, sizeof(body), "{\"workspace\": {\"path\": \"%s/ws\", \"mode\": \"cow\"}}", root);
    expect("POST", "/v1/isolated/session", body, 400, "INVALID_REQUEST_BODY");
    snprintf(body, sizeof(body), "{\"workspace\": {\"path\": \"%s/ws\"}, \"profile\": \"lax\"}", root);
    expect("POST", "/v1/isolated/session", body, 400, "INVALID_REQUEST_BODY");
    snprintf(body, sizeof(body), "{\"workspace\": {\"path\": \"%s/ws\"}, \"extra_writable\": [\"/usr\"]}", root);
    expect("POST", "/v1/isolated/session", body, 400, "INVALID_REQUEST_BODY");
    /* a bind whose source is missing: bwrap's own message */
    snprintf(body, sizeof(body),
             "{\"workspace\": {\"path\": \"%s/ws\"}, \"binds\": [{\"source\": \"%s/nothing\", \"dest\": \"/tmp/x\"}]}", root, root);
    expect("POST", "/v1/isolated/session", body, 400, "INVALID_REQUEST_BODY");
    char *id = create("{\"workspace\": {\"path\": \"@/ws\"}}");
    char path[200];
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/run", id);
    expect("POST", path, "{}", 400, "INVALID_REQUEST_BODY");
    expect("POST", path, "{\"code\": \"true\", \"envs\": {\"A;B\": \"x\"}}", 400, "INVALID_REQUEST_BODY");
    expect("POST", "/v1/isolated/session/nope/run", "{\"code\": \"true\"}", 404, "SESSION_NOT_FOUND");
    free(id);
    stop();
}

/* cwd, exported variables and functions persist between runs of one session; a failing command is CommandExitError; envs and
 * cwd of a run apply; another session has its own bash. */
Test(isolated, state_kept_between_runs)
{
    char ename[64], extra[400];

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    char *id = create("{\"workspace\": {\"path\": \"@/ws\", \"mode\": \"rw\"}}");
    free(run_ok(id, "mkdir -p sub && cd sub && export KEPT=yes && greet() { echo hello \"$1\"; }"));
    char *out = run_ok(id, "pwd; echo \"$KEPT\"; greet you");
    char want[600];
    snprintf(want, sizeof(want), "%s/ws/sub\nyes\nhello you", root);
    cr_assert_str_eq(out, want);
    free(out);
    out = run(id, "echo before; exit_status() { return 3; }; exit_status", "", ename, sizeof(ename));
    cr_assert_str_eq(ename, "CommandExitError");
    cr_assert_str_eq(out, "before");
    free(out);
    snprintf(extra, sizeof(extra), "{\"envs\": {\"ONE\": \"it's 1\"}, \"cwd\": \"%s/ws\"}", root);
    out = run(id, "pwd; echo \"$ONE\"", extra, ename, sizeof(ename));
    snprintf(want, sizeof(want), "%s/ws\nit's 1", root);
    cr_assert_str_eq(out, want);
    free(out);
    /* a second session does not share the first one's shell */
    char *other = create("{\"workspace\": {\"path\": \"@/ws\", \"mode\": \"rw\"}}");
    out = run_ok(other, "echo \"[$KEPT]\"; echo $$");
    cr_assert(strncmp(out, "[]\n", 3) == 0, "%s", out);
    free(out);
    /* its own pid namespace: bash is pid 2, under bwrap's pid 1 */
    out = run_ok(id, "echo $$; ls /proc | grep -c '^[0-9]'");
    cr_assert(strncmp(out, "2\n", 2) == 0, "%s", out);
    free(out);
    free(id);
    free(other);
    stop();
}

Test(isolated, timeout_kills_the_run_and_keeps_the_session)
{
    char ename[64];

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    char *id = create("{\"workspace\": {\"path\": \"@/ws\", \"mode\": \"rw\"}}");
    free(run_ok(id, "export STILL=here"));
    int64_t t0 = ts_now_ms();
    char *out = run(id, "echo started; sleep 30", "{\"timeout_seconds\": 1}", ename, sizeof(ename));
    cr_assert_str_eq(ename, "TimeoutError");
    cr_assert(ts_now_ms() - t0 < 10000, "the timeout took %lld ms", (long long)(ts_now_ms() - t0));
    free(out);
    out = run_ok(id, "echo $STILL");
    cr_assert_str_eq(out, "here");
    free(out);
    free(id);
    stop();
}

/* overlay: a write is visible inside the session (runs and files routes) and absent from the workspace; deleting the session
 * removes its upper layer. */
Test(isolated, overlay_keeps_the_workspace_untouched)
{
    char path[700], wsfile[400];
    ts_response_t r;

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    char *id = create("{\"workspace\": {\"path\": \"@/ws\", \"mode\": \"overlay\"}}");
    char *out = run_ok(id, "echo changed > base.txt; echo new > new.txt; cat base.txt new.txt");
    cr_assert_str_eq(out, "changed\nnew");
    free(out);
    snprintf(wsfile, sizeof(wsfile), "%s/ws/base.txt", root);
    cr_assert_str_eq(slurp(wsfile), "base\n");
    snprintf(wsfile, sizeof(wsfile), "%s/ws/new.txt", root);
    cr_assert_eq(access(wsfile, F_OK), -1, "new.txt reached the workspace");
    /* the files routes see the session's view */
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/download?path=%s/ws/new.txt", id, root);
    cr_assert_eq(req("GET", path, NULL, &r), 200, "%s", r.body);
    cr_assert_str_eq(r.body, "new\n");
    ts_response_dispose(&r);
    /* and what they write stays in the session too */
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/directories", id);
    char body[2000];
    snprintf(body, sizeof(body), "{\"%s/ws/made\": {\"mode\": 755}}", root);
    expect("POST", path, body, 200, NULL);
    snprintf(wsfile, sizeof(wsfile), "%s/ws/made", root);
    cr_assert_eq(access(wsfile, F_OK), -1, "a directory made through the session reached the workspace");
    out = run_ok(id, "test -d made && echo yes");
    cr_assert_str_eq(out, "yes");
    free(out);
    /* the server's own /files see the workspace as it is */
    snprintf(path, sizeof(path), "/files/download?path=%s/ws/base.txt", root);
    cr_assert_eq(req("GET", path, NULL, &r), 200);
    cr_assert_str_eq(r.body, "base\n");
    ts_response_dispose(&r);
    delete_session(id);
    free(id);
    /* the upper layer went with it (kgate's runtime dir holds no isolated session any more) */
    stop();
}

Test(isolated, ro_refuses_writes)
{
    char path[700], ename[64], wsfile[400];

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    char *id = create("{\"workspace\": {\"path\": \"@/ws\", \"mode\": \"ro\"}}");
    char *out = run(id, "cat base.txt; echo x > base.txt", "", ename, sizeof(ename));
    cr_assert_str_eq(ename, "CommandExitError");
    cr_assert_str_eq(out, "base");
    free(out);
    /* /tmp stays writable */
    out = run_ok(id, "echo t > /tmp/t && cat /tmp/t");
    cr_assert_str_eq(out, "t");
    free(out);
    snprintf(wsfile, sizeof(wsfile), "%s/ws/base.txt", root);
    cr_assert_str_eq(slurp(wsfile), "base\n");
    /* the files routes: reads work, writes are refused */
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/info?path=%s/ws/base.txt", id, root);
    expect("GET", path, NULL, 200, NULL);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files?path=%s/ws/base.txt", id, root);
    expect("DELETE", path, NULL, 403, "PERMISSION_DENIED");
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/directories", id);
    char body[2000];
    snprintf(body, sizeof(body), "{\"%s/ws/made\": {\"mode\": 755}}", root);
    expect("POST", path, body, 403, "PERMISSION_DENIED");
    cr_assert_str_eq(slurp(wsfile), "base\n");
    free(id);
    stop();
}

/* rw: the files routes of the session: upload, list, search, mv, replace, permissions, info, download, delete; paths outside
 * the session's workspace are refused. */
Test(isolated, files_routes_rw)
{
    const char *headers[] = {"Content-Type: multipart/form-data; boundary=----isoB", NULL};
    char path[800], body[2000], wsfile[400];
    ts_response_t r;

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    char *id = create("{\"workspace\": {\"path\": \"@/ws\", \"mode\": \"rw\"}}");
    snprintf(body, sizeof(body),
             "------isoB\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"path\":\"%s/ws/up/one.txt\"}\r\n"
             "------isoB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"one.txt\"\r\n\r\nuploaded\n\r\n"
             "------isoB--\r\n",
             root);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/upload", id);
    cr_assert_eq(ts_http_request(gw.port, "POST", path, headers, body, &r), 200, "%s", r.body);
    ts_response_dispose(&r);
    char *out = run_ok(id, "cat up/one.txt");
    cr_assert_str_eq(out, "uploaded");
    free(out);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/directories/list?path=%s/ws", id, root);
    cr_assert_eq(req("GET", path, NULL, &r), 200, "%s", r.body);
    cr_assert(strstr(r.body, "base.txt") != NULL && strstr(r.body, "up") != NULL, "%s", r.body);
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/search?path=%s/ws&pattern=*.txt", id, root);
    cr_assert_eq(req("GET", path, NULL, &r), 200, "%s", r.body);
    cr_assert(strstr(r.body, "one.txt") != NULL, "%s", r.body);
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/mv", id);
    snprintf(body, sizeof(body), "[{\"src\": \"%s/ws/up/one.txt\", \"dest\": \"%s/ws/up/two.txt\"}]", root, root);
    expect("POST", path, body, 200, NULL);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/replace", id);
    snprintf(body, sizeof(body), "{\"%s/ws/up/two.txt\": {\"old\": \"uploaded\", \"new\": \"replaced\"}}", root);
    expect("POST", path, body, 200, NULL);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/permissions", id);
    snprintf(body, sizeof(body), "{\"%s/ws/up/two.txt\": {\"mode\": 600}}", root);
    expect("POST", path, body, 200, NULL);
    snprintf(wsfile, sizeof(wsfile), "%s/ws/up/two.txt", root);
    cr_assert_str_eq(slurp(wsfile), "replaced\n");
    struct stat st;
    cr_assert_eq(stat(wsfile, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/info?path=%s/ws/up/two.txt", id, root);
    expect("GET", path, NULL, 200, NULL);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files?path=%s/ws/up/two.txt", id, root);
    expect("DELETE", path, NULL, 200, NULL);
    cr_assert_eq(access(wsfile, F_OK), -1);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/directories?path=%s/ws/up", id, root);
    expect("DELETE", path, NULL, 200, NULL);
    /* outside the session's workspace: refused, even where the sandbox can read */
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/download?path=/etc/hostname", id);
    expect("GET", path, NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    /* a link planted inside pointing out is not followed */
    free(run_ok(id, "ln -s /etc/passwd leak"));
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/download?path=%s/ws/leak", id, root);
    expect("GET", path, NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    snprintf(path, sizeof(path), "/v1/isolated/session/nope/files/info?path=%s/ws", root);
    expect("GET", path, NULL, 404, "SESSION_NOT_FOUND");
    free(id);
    stop();
}

/* The sandbox's /tmp is its own (strict), and the workspace's parents lie on it: the session can move them away and put a
 * link where the workspace was. kgate opened "/proc/<pid 1>/root<workspace>" as a path, so an absolute link resolved from
 * kgate's own root (measured: a download read, and an upload wrote, a host directory of the link's choosing). */
Test(isolated, files_routes_follow_no_link_planted_above_the_workspace)
{
    const char *headers[] = {"Content-Type: multipart/form-data; boundary=----isoB", NULL};
    char path[1200], body[2000], code[4096], outside[400];
    ts_response_t r;

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    snprintf(outside, sizeof(outside), "%s-outside", root);
    xh_sh("rm -rf %s && mkdir -p %s && echo secret > %s/secret.txt", outside, outside, outside);
    char *id = create("{\"workspace\": {\"path\": \"@/ws\", \"mode\": \"rw\"}, \"profile\": \"strict\"}");
    snprintf(code, sizeof(code),
             "cd / && mv %s %s-moved && mkdir %s && ln -s %s %s/ws && { test -e %s/ws/secret.txt && echo seen || echo unseen; }",
             root, root, root, outside, root, root);
    char *out = run_ok(id, code);
    /* the sandbox itself has no such directory */
    cr_assert_str_eq(out, "unseen", "%s", out);
    free(out);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/download?path=%s/ws/secret.txt", id, root);
    int st = req("GET", path, NULL, &r);
    /* refused: the link leads within the sandbox, where nothing is (500), or elsewhere than the workspace (403) */
    cr_assert(st != 200 && strstr(r.body, "secret") == NULL, "download through a planted link: HTTP %d %.400s", st, r.body);
    ts_response_dispose(&r);
    snprintf(body, sizeof(body),
             "------isoB\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"path\":\"%s/ws/planted.txt\"}\r\n"
             "------isoB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"planted.txt\"\r\n\r\nplanted\n\r\n"
             "------isoB--\r\n",
             root);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/files/upload", id);
    st = ts_http_request(gw.port, "POST", path, headers, body, &r);
    cr_assert_neq(st, 200, "upload through a planted link: HTTP %d %.400s", st, r.body);
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "%s/planted.txt", outside);
    cr_assert_eq(access(path, F_OK), -1, "%s was written through the session's link", path);
    /* a link to a directory of the sandbox's own (its /tmp): not the workspace either */
    snprintf(code, sizeof(code), "rm %s/ws && ln -s /tmp %s/ws && echo relinked", root, root);
    out = run_ok(id, code);
    cr_assert_str_eq(out, "relinked");
    free(out);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s/directories/list?path=%s/ws", id, root);
    expect("GET", path, NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    free(id);
    xh_sh("rm -rf %s", outside);
    stop();
}

/* No network without share_net (not even kgate's own port: the loopback is the sandbox's own); with it, kgate answers. */
Test(isolated, share_net)
{
    char code[300];

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    snprintf(code, sizeof(code), "exec 3<>/dev/tcp/127.0.0.1/%u && echo open || echo closed", gw.port);
    char *closed = create("{\"workspace\": {\"path\": \"@/ws\"}}");
    char *out = run_ok(closed, code);
    cr_assert_str_eq(out, "closed");
    free(out);
    char *open_ = create("{\"workspace\": {\"path\": \"@/ws\"}, \"share_net\": true}");
    out = run_ok(open_, code);
    cr_assert_str_eq(out, "open");
    free(out);
    free(closed);
    free(open_);
    stop();
}

/* strict drops secrets from kgate's environment; env_passthrough allow passes only what it lists; kgate's runtime dir is hidden. */
Test(isolated, environment_and_hidden_runtime_dir)
{
    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    setenv("ISO_TEST_API_KEY", "secret", 1);
    setenv("ISO_TEST_PLAIN", "plain", 1);
    start(NULL);
    char *strict = create("{\"workspace\": {\"path\": \"@/ws\"}}");
    char *out = run_ok(strict, "echo \"[$ISO_TEST_API_KEY][$ISO_TEST_PLAIN][$HOME]\"");
    cr_assert_str_eq(out, "[][plain][/tmp/home]");
    free(out);
    char *allow = create("{\"workspace\": {\"path\": \"@/ws\"}, \"profile\": \"balanced\", "
                         "\"env_passthrough\": {\"mode\": \"allow\", \"keys\": [\"ISO_TEST_API_KEY\"]}}");
    out = run_ok(allow, "echo \"[$ISO_TEST_API_KEY][$ISO_TEST_PLAIN]\"");
    cr_assert_str_eq(out, "[secret][]");
    free(out);
    /* kgate's runtime dir (keys, every session's layers) is an empty directory inside */
    char code[600];
    cr_assert(access(gw.runtime_dir, F_OK) == 0, "%s", gw.runtime_dir);
    snprintf(code, sizeof(code), "ls -A '%s' | wc -l", gw.runtime_dir);
    out = run_ok(strict, code);
    cr_assert_str_eq(out, "0", "kgate's runtime dir %s is visible inside", gw.runtime_dir);
    free(out);
    free(run_ok(allow, code)); /* balanced binds the host's /tmp: hidden all the same */
    out = run_ok(allow, code);
    cr_assert_str_eq(out, "0", "kgate's runtime dir %s is visible inside balanced", gw.runtime_dir);
    free(out);
    /* and no tmpfs to fill: a session has no memory cap, and that one was sized at half the host's RAM */
    snprintf(code, sizeof(code), "touch '%s/x' 2>&1 | grep -c 'Read-only file system'", gw.runtime_dir);
    out = run_ok(strict, code);
    cr_assert_str_eq(out, "1", "a file could be written into the cover of kgate's runtime dir");
    free(out);
    free(strict);
    free(allow);
    stop();
}

Test(isolated, idle_expiry)
{
    char path[200];
    ts_response_t r;

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    char *id = create("{\"workspace\": {\"path\": \"@/ws\"}, \"idle_timeout_seconds\": 1}");
    snprintf(path, sizeof(path), "/v1/isolated/session/%s", id);
    int64_t until = ts_now_ms() + 10000;
    int st;
    while ((st = req("GET", path, NULL, &r)) == 200 && ts_now_ms() < until) {
        ts_response_dispose(&r);
        usleep(100 * 1000);
    }
    cr_assert_eq(st, 404, "the session did not expire: %.400s", r.body);
    ts_response_dispose(&r);
    free(id);
    stop();
}

Test(isolated, bounded_sessions)
{
    char body[2000];

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start((const char *const[]){"--max-isolated-sessions", "2", NULL});
    char *a = create("{\"workspace\": {\"path\": \"@/ws\"}}"), *b = create("{\"workspace\": {\"path\": \"@/ws\"}}");
    snprintf(body, sizeof(body), "{\"workspace\": {\"path\": \"%s/ws\"}}", root);
    expect("POST", "/v1/isolated/session", body, 429, "TOO_MANY_SESSIONS");
    delete_session(a);
    free(create("{\"workspace\": {\"path\": \"@/ws\"}}"));
    free(a);
    free(b);
    stop();
}

/* --- the event loop while sandboxes start and go (issue 13): other clients are never held up by bwrap --- */

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

enum { MAX_PINGS = 1 << 15 };

/* Pings sent one after another: when each was sent and when it was answered (microseconds; INT64_MAX: not answered). The
 * first `n` are complete (published after their times, so another thread may read them while the pinger runs). */
typedef struct st_pinger_t {
    pthread_t thread;
    volatile int stop;
    size_t n;
    int64_t sent[MAX_PINGS], answered[MAX_PINGS];
} pinger_t;

static void *pinger(void *arg)
{
    pinger_t *p = arg;
    for (size_t i = 0; !p->stop && i != MAX_PINGS; ++i) {
        ts_response_t r;
        p->sent[i] = now_us();
        int st = ts_http_request(gw.port, "GET", "/ping", NULL, NULL, &r);
        p->answered[i] = st == 200 ? now_us() : INT64_MAX;
        __atomic_store_n(&p->n, i + 1, __ATOMIC_RELEASE);
        ts_response_dispose(&r);
        usleep(1000);
    }
    return NULL;
}

/* How many of the pings were sent at or after `from` and answered by `to`: each one kgate's loop read and answered then. */
static size_t pings_within(pinger_t *p, int64_t from, int64_t to)
{
    size_t n = __atomic_load_n(&p->n, __ATOMIC_ACQUIRE), k = 0;
    for (size_t i = 0; i != n; ++i)
        k += p->sent[i] >= from && p->answered[i] != INT64_MAX && p->answered[i] <= to;
    return k;
}

/* The sandboxes kgate runs now: its children whose command is bwrap or unshare (an overlay's outer process). */
/* The pids of kgate's sandbox processes (children running bwrap or unshare), at most `max` of them; returns how many. */
static size_t sandbox_pids(long *out, size_t max)
{
    char path[128], buf[8192], comm[64];
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)gw.pid, (int)gw.pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    for (char *p = buf, *end; n != max; p = end) {
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        snprintf(path, sizeof(path), "/proc/%ld/comm", pid);
        if ((f = fopen(path, "r")) == NULL)
            continue;
        if (fgets(comm, sizeof(comm), f) != NULL && (strncmp(comm, "bwrap", 5) == 0 || strncmp(comm, "unshare", 7) == 0))
            out[n++] = pid;
        fclose(f);
    }
    return n;
}

static size_t count_sandboxes(void)
{
    long pids[256];
    return sandbox_pids(pids, 256);
}

/* Whether a sandbox runs now that is none of the `n` in `before` (one that is still going away counts for nothing). */
static int has_new_sandbox(const long *before, size_t n)
{
    long now[256];
    size_t m = sandbox_pids(now, 256);

    for (size_t i = 0; i != m; ++i) {
        size_t k = 0;
        while (k != n && before[k] != now[i])
            ++k;
        if (k == n)
            return 1;
    }
    return 0;
}

/* Entries of kgate's <runtime dir>/isolated (every session's directory), -1 when it does not exist. */
static int count_session_dirs(void)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "test -d '%s/isolated' && exit $(ls -A '%s/isolated' | wc -l); exit 255", gw.runtime_dir,
             gw.runtime_dir);
    int st = system(cmd);
    return WEXITSTATUS(st) == 255 ? -1 : WEXITSTATUS(st);
}

typedef struct st_churn_t {
    pthread_t thread;
    volatile int *stop;
    unsigned created, refused, failed;
    char error[600];
} churn_t;

/* Creates and deletes sessions until told to stop; a 429 (the bound) is waited out. */
static void *churn(void *arg)
{
    churn_t *c = arg;
    char body[1024], path[200];
    ts_response_t r;
    int st;

    snprintf(body, sizeof(body), "{\"workspace\": {\"path\": \"%s/ws\"}}", root);
    while (!*c->stop) {
        st = req("POST", "/v1/isolated/session", body, &r);
        if (st == 429) {
            ++c->refused;
            ts_response_dispose(&r);
            usleep(5000);
            continue;
        }
        if (st != 200) {
            ++c->failed;
            snprintf(c->error, sizeof(c->error), "create: HTTP %d %.500s", st, r.body != NULL ? r.body : r.error);
            ts_response_dispose(&r);
            continue;
        }
        snprintf(path, sizeof(path), "/v1/isolated/session/%s", xh_str(r.json, "session_id"));
        ts_response_dispose(&r);
        ++c->created;
        if ((st = req("DELETE", path, NULL, &r)) != 200) {
            ++c->failed;
            snprintf(c->error, sizeof(c->error), "delete: HTTP %d", st);
        }
        ts_response_dispose(&r);
    }
    return NULL;
}

/* One POST /v1/isolated/session (an overlay session, the default) from a thread: its HTTP status in *arg once answered. */
static void *create_once(void *arg)
{
    int *status = arg;
    char body[1024];
    ts_response_t r;

    snprintf(body, sizeof(body), "{\"workspace\": {\"path\": \"%s/ws\"}}", root);
    int st = req("POST", "/v1/isolated/session", body, &r);
    ts_response_dispose(&r);
    __atomic_store_n(status, st, __ATOMIC_RELEASE); /* another thread may watch for the answer */
    return NULL;
}

/* kgate's --bwrap for the test below, made in the directory `dir` (fresh): bwrap itself, except that a sandbox started while
 * <dir>/hold exists says so in <dir>/held and waits, before bubblewrap runs, for a line on the FIFO <dir>/go. The wait is a
 * shell builtin reading a FIFO: the held sandbox has no child, so kgate cannot take it for started. Returns the wrapper's
 * path (static). */
static const char *holding_bwrap(const char *dir)
{
    static char path[400];
    char real[300] = "";
    FILE *f = popen("command -v bwrap", "r");

    cr_assert(f != NULL && fgets(real, sizeof(real), f) != NULL, "bwrap is not on PATH");
    pclose(f);
    real[strcspn(real, "\n")] = '\0';
    xh_holding_wrapper(dir, "bwrap", real, path, sizeof(path)); /* named bwrap: sandbox_pids counts it */
    return path;
}

/* kgate answers other clients while a session is being created: a create of an overlay session is held before its sandbox's
 * bubblewrap runs (kgate has spawned it and waits for its bash), and a GET /ping sent then is answered before the hold ends.
 * kgate used to wait for each sandbox's bash inside its one event loop (2-4 s here): then no such ping can exist however fast
 * or slow the machine is (the loop reads it only once the sandbox runs, or once kgate gives up on it and the create fails),
 * so the test has no bound on time; how fast the loop answers belongs in bench/. Then one client creates and deletes
 * sessions in a loop: none fails and the bound (2) holds. */
Test(isolated, the_loop_answers_while_a_create_waits_for_its_sandbox)
{
    static pinger_t pinger_state;
    pinger_t *p = &pinger_state;
    char dir[100], flag[200], held[200], go[200];
    pthread_t creator;
    int status = INT_MIN, fd;
    churn_t c;
    volatile int stop_flag = 0;
    size_t most = 0, during;

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    snprintf(dir, sizeof(dir), "/tmp/kgate-e2e-iso-hold-%d", (int)getpid());
    const char *bwrap = holding_bwrap(dir);
    start((const char *const[]){"--max-isolated-sessions", "2", "--bwrap", bwrap, NULL});
    snprintf(flag, sizeof(flag), "%s/hold", dir);
    snprintf(held, sizeof(held), "%s/held", dir);
    snprintf(go, sizeof(go), "%s/go", dir);
    /* the test's own end of the FIFO (never blocks): the release written into it waits there for the held sandbox */
    cr_assert((fd = open(go, O_RDWR | O_CLOEXEC)) != -1, "open %s", go);

    xh_sh(": > %s", flag);
    cr_assert_eq(pthread_create(&creator, NULL, create_once, &status), 0);
    for (int64_t until = ts_now_ms() + 20000; access(held, F_OK) != 0 && ts_now_ms() < until;)
        usleep(1000);
    cr_assert_eq(access(held, F_OK), 0, "kgate never started the sandbox of the create (no %s)", held);
    int64_t held_at = now_us();
    cr_assert_eq(pthread_create(&p->thread, NULL, pinger, p), 0);
    /* until a ping sent during the hold is answered, or the create has its answer (kgate gave up on the held sandbox:
     * ISO_START_MS, 5 s), or 20 s (the hang of a loop that waits for the sandbox and never gives up) */
    for (int64_t until = ts_now_ms() + 20000; pings_within(p, held_at, INT64_MAX - 1) == 0 &&
                                              __atomic_load_n(&status, __ATOMIC_ACQUIRE) == INT_MIN && ts_now_ms() < until;)
        usleep(1000);
    int64_t released_at = now_us();
    cr_assert_eq(unlink(flag), 0);
    cr_assert_eq(write(fd, "go\n", 3), 3);
    pthread_join(creator, NULL);
    p->stop = 1;
    pthread_join(p->thread, NULL);
    close(fd);
    during = pings_within(p, held_at, released_at);
    fprintf(stderr, "isolated: %zu of %zu GET /ping sent while a create was held were answered before its release\n", during, p->n);
    cr_assert(during >= 1, "no GET /ping sent while a create was held (kgate had spawned its sandbox) was answered before the hold "
                           "ended: the create holds kgate's event loop");
    /* a create that failed while held: kgate gave up on the sandbox (a loop held until then answers the ping after that) */
    cr_assert_eq(status, 200, "POST /v1/isolated/session, held %.1f ms before its sandbox ran: HTTP %d",
                 (double)(released_at - held_at) / 1000, status);

    memset(&c, 0, sizeof(c));
    c.stop = &stop_flag;
    cr_assert_eq(pthread_create(&c.thread, NULL, churn, &c), 0);
    for (int64_t until = ts_now_ms() + 60000; c.created < 4 && c.failed == 0 && ts_now_ms() < until; usleep(3000)) {
        size_t n = count_sandboxes();
        most = n > most ? n : most;
    }
    stop_flag = 1;
    pthread_join(c.thread, NULL);
    cr_assert_eq(c.failed, 0, "%s", c.error);
    cr_assert(c.created >= 4, "only %u sessions were made in 60 s", c.created);
    cr_assert(most <= 2, "%zu sandboxes ran at once with --max-isolated-sessions 2", most);
    stop();
    xh_sh("rm -rf %s", dir);
}

/* Concurrent creates against the bound: as many succeed as the bound allows, the others get 429, never more. */
Test(isolated, concurrent_creates_respect_the_bound)
{
    enum { N = 6 };
    pthread_t t[N];
    int status[N], ok = 0, refused = 0;
    ts_response_t r;

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start((const char *const[]){"--max-isolated-sessions", "2", NULL});
    for (int i = 0; i != N; ++i)
        cr_assert_eq(pthread_create(&t[i], NULL, create_once, &status[i]), 0);
    for (int i = 0; i != N; ++i) {
        pthread_join(t[i], NULL);
        ok += status[i] == 200;
        refused += status[i] == 429;
    }
    cr_assert_eq(ok, 2, "%d of %d concurrent creates succeeded with --max-isolated-sessions 2 (%d refused)", ok, N, refused);
    cr_assert_eq(refused, N - 2);
    cr_assert_eq(req("GET", "/v1/isolated/sessions", NULL, &r), 200);
    cr_assert_eq(json_array_size(json_object_get(r.json, "sessions")), 2, "%s", r.body);
    ts_response_dispose(&r);
    cr_assert_eq(count_sandboxes(), 2);
    stop();
}

/* A client that sends a create and hangs up at once: kgate releases the half-made session (no sandbox, no directory). */
Test(isolated, client_gone_during_create_leaves_nothing)
{
    char body[1024], head[300];
    struct sockaddr_in sa = {.sin_family = AF_INET};
    ts_response_t r;
    size_t sandboxes = 0;
    int dirs = 0, listed = 0;

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    snprintf(body, sizeof(body), "{\"workspace\": {\"path\": \"%s/ws\"}}", root);
    snprintf(head, sizeof(head),
             "POST /v1/isolated/session HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n",
             strlen(body));
    for (int i = 0; i != 3; ++i) {
        long before[256];
        size_t nbefore = sandbox_pids(before, 256); /* the last round's sandbox may still be going away */
        int fd = socket(AF_INET, SOCK_STREAM, 0), spawned = 0;
        sa.sin_port = htons(gw.port);
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        cr_assert_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
        cr_assert_eq(write(fd, body, strlen(body)), (ssize_t)strlen(body));
        /* hang up once kgate has spawned the sandbox (it sees the request and the end together otherwise, and drops both) */
        for (int64_t until = ts_now_ms() + 3000; !(spawned = has_new_sandbox(before, nbefore)) && ts_now_ms() < until;)
            usleep(200);
        cr_assert(spawned, "kgate started no sandbox for the create");
        close(fd);
    }
    /* the creates went on in kgate (a sandbox takes a few ms): wait until nothing is left, or 5 s */
    for (int64_t until = ts_now_ms() + 5000; ts_now_ms() < until; usleep(50000)) {
        cr_assert_eq(req("GET", "/v1/isolated/sessions", NULL, &r), 200);
        listed = (int)json_array_size(json_object_get(r.json, "sessions"));
        ts_response_dispose(&r);
        sandboxes = count_sandboxes();
        dirs = count_session_dirs();
        if (listed == 0 && sandboxes == 0 && dirs <= 0 && ts_now_ms() > until - 4000)
            break;
    }
    cr_assert_eq(listed, 0, "%d session(s) of clients that went away are listed", listed);
    cr_assert_eq(sandboxes, 0, "%zu sandbox(es) of clients that went away still run", sandboxes);
    cr_assert(dirs <= 0, "%d session directories of clients that went away are left in %s/isolated", dirs, gw.runtime_dir);
    /* kgate still creates sessions for clients that wait */
    char *id = create("{\"workspace\": {\"path\": \"@/ws\"}}");
    delete_session(id);
    free(id);
    stop();
}

enum { BIG_OVERLAY_FILES = 20000 };

/* Watches a session's directory being removed, from outside kgate: `started` is a time by which the removal of `big` (a
 * directory of BIG_OVERLAY_FILES entries inside it) had begun, `present` the last time at which the session's directory still
 * existed, so the removal had not finished (it removes the directory itself last). */
typedef struct st_remove_watch_t {
    pthread_t thread;
    char dir[800], big[1000];
    int64_t started, present, until;
} remove_watch_t;

static int count_entries(const char *path)
{
    DIR *d = opendir(path);
    int n = 0;
    if (d == NULL)
        return -1;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

static void *remove_watch(void *arg)
{
    remove_watch_t *w = arg;
    struct stat st;

    for (;;) {
        int64_t before = now_us();
        if (stat(w->dir, &st) != 0 || now_us() / 1000 > w->until)
            return NULL;
        w->present = before;
        if (w->started == 0 && count_entries(w->big) < BIG_OVERLAY_FILES)
            w->started = now_us();
        usleep(500);
    }
}

/* Deleting an overlay session whose upper layer holds 20,000 files: DELETE answers with the session gone, its directory goes
 * later, and kgate's loop is not held for the removal: a /ping sent after the removal had begun is answered before it has
 * ended. With the removal inline on the loop no such ping can exist however fast or slow the machine is (the loop reads the
 * ping only once the directory is gone), so the test has no bound on time; how fast the loop answers belongs in bench/. */
Test(isolated, deleting_a_big_overlay_does_not_hold_the_loop)
{
    static pinger_t pinger_state;
    static remove_watch_t watch_state;
    pinger_t *p = &pinger_state;
    remove_watch_t *w = &watch_state;
    char path[200], cmd[2000], isolated[500];
    size_t during = 0;
    int dirs = 0;

    xh_require_bwrap(ISOLATED_UNAVAILABLE);
    start(NULL);
    char *id = create("{\"workspace\": {\"path\": \"@/ws\", \"mode\": \"overlay\"}}");
    snprintf(cmd, sizeof(cmd), "mkdir many && cd many && seq %d | xargs touch && ls | wc -l", BIG_OVERLAY_FILES);
    char *out = run_ok(id, cmd);
    cr_assert_eq(atoi(out), BIG_OVERLAY_FILES, "%s", out);
    free(out);
    /* the session's directory (the only one) and, in its upper layer, the directory of many files */
    snprintf(isolated, sizeof(isolated), "%s/isolated", gw.runtime_dir);
    DIR *d = opendir(isolated);
    cr_assert_not_null(d, "no %s", isolated);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            snprintf(w->dir, sizeof(w->dir), "%s/%s", isolated, e->d_name);
    closedir(d);
    cr_assert(w->dir[0] != '\0', "no session directory in %s", isolated);
    snprintf(cmd, sizeof(cmd), "find '%s/upper' -maxdepth 3 -type d -name many", w->dir);
    FILE *f = popen(cmd, "r");
    cr_assert(f != NULL && fgets(w->big, sizeof(w->big), f) != NULL, "no directory 'many' in %s/upper", w->dir);
    pclose(f);
    w->big[strcspn(w->big, "\n")] = '\0';
    cr_assert_eq(count_entries(w->big), BIG_OVERLAY_FILES, "%s", w->big);

    w->until = ts_now_ms() + 30000;
    cr_assert_eq(pthread_create(&w->thread, NULL, remove_watch, w), 0);
    cr_assert_eq(pthread_create(&p->thread, NULL, pinger, p), 0);
    usleep(50000);
    snprintf(path, sizeof(path), "/v1/isolated/session/%s", id);
    int64_t t0 = now_us();
    expect("DELETE", path, NULL, 200, NULL);
    int64_t delete_us = now_us() - t0;
    expect("GET", path, NULL, 404, "SESSION_NOT_FOUND");
    pthread_join(w->thread, NULL);
    p->stop = 1;
    pthread_join(p->thread, NULL);
    for (int64_t until = ts_now_ms() + 20000; (dirs = count_session_dirs()) > 0 && ts_now_ms() < until;)
        usleep(20000);
    during = pings_within(p, w->started, w->present);
    fprintf(stderr,
            "isolated: DELETE of a %d-file overlay took %.1f ms; its removal was seen for %.1f ms, %zu of %zu /ping sent and "
            "answered within it\n",
            BIG_OVERLAY_FILES, (double)delete_us / 1000, w->started != 0 ? (double)(w->present - w->started) / 1000 : 0.0, during,
            p->n);
    cr_assert(dirs <= 0, "the session's directory (its upper layer) is still there");
    cr_assert(w->started != 0, "the removal of %s was never seen under way", w->big);
    cr_assert(during >= 1,
              "no GET /ping sent while the %d-file upper layer was being removed was answered before the removal ended: "
              "the removal holds kgate's event loop",
              BIG_OVERLAY_FILES);
    free(id);
    stop();
}
