/* tests/e2e/jserver.c: a Jupyter Server 1.23 process of the test's own, and client scripts run with a deadline. */
#include "jserver.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <jansson.h>

#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/jserver.h"
#include "support/proc.h"

#define START_ATTEMPTS 3
#define MAX_DESCENDANTS 512
#define POLL_MS 50

__attribute__((format(printf, 2, 3))) static void set_error(js_server_t *js, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(js->error, sizeof(js->error), fmt, ap);
    va_end(ap);
}

int js_get(unsigned short port, const char *token, const char *path, char **body)
{
    char auth[128];
    snprintf(auth, sizeof(auth), "Authorization: token %s", token);
    const char *headers[] = {auth, NULL};
    ts_response_t r;
    int st = ts_http_request(port, "GET", path, headers, NULL, &r);
    if (body != NULL)
        *body = strdup(r.body != NULL ? r.body : "");
    ts_response_dispose(&r);
    return st;
}

static int log_has(const js_server_t *js, const char *needle)
{
    FILE *f = fopen(js->log_path, "r");
    if (f == NULL)
        return 0;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strcasestr(buf, needle) != NULL;
}

void js_server_dump_log(const js_server_t *js, size_t max)
{
    int fd = open(js->log_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END), from = end > (off_t)max ? end - (off_t)max : 0;
    char *buf = ts_malloc(max + 1);
    ssize_t n = pread(fd, buf, max, from);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    fprintf(stderr, "---- jupyter server log (%s, last %zu bytes) ----\n%s\n---- end of log ----\n", js->log_path,
            (size_t)(n > 0 ? n : 0), buf);
    free(buf);
}

/* Polls GET /api until 200 (0), the server exits (1, reaped), or the deadline (-1). */
static int wait_ready(js_server_t *js)
{
    int64_t deadline = ts_now_ms() + JS_STARTUP_MS;
    for (;;) {
        int status;
        if (waitpid(js->pid, &status, WNOHANG) == js->pid) {
            js->pid = 0;
            set_error(js, "jupyter server exited (wait status %#x) before answering GET /api", status);
            return 1;
        }
        int64_t now = ts_now_ms();
        if (now >= deadline) {
            set_error(js, "jupyter server did not answer GET /api with 200 within %d ms", JS_STARTUP_MS);
            return -1;
        }
        ts_response_t r;
        int st = ts_http_request_until(js->port, "GET", "/api", NULL, NULL, now + 1000 < deadline ? now + 1000 : deadline, &r);
        ts_response_dispose(&r);
        if (st == 200)
            return 0;
        ts_sleep_ms(POLL_MS);
    }
}

static void cleanup_tmpdir(js_server_t *js)
{
    const char *keep = getenv("KGATE_E2E_KEEP");
    if (js->tmpdir[0] != '\0' && (keep == NULL || *keep == '\0' || strcmp(keep, "0") == 0))
        ts_remove_tree(js->tmpdir);
    js->tmpdir[0] = '\0';
}

int js_server_start(js_server_t *js, const char *label, const char *token, const char *const *args)
{
    memset(js, 0, sizeof(*js));
    snprintf(js->token, sizeof(js->token), "%s", token);
    const char *base = getenv("TMPDIR");
    snprintf(js->tmpdir, sizeof(js->tmpdir), "%s/kgate-%s-XXXXXX", base != NULL && *base != '\0' ? base : "/tmp", label);
    if (mkdtemp(js->tmpdir) == NULL) {
        set_error(js, "mkdtemp(%s): %s", js->tmpdir, strerror(errno));
        js->tmpdir[0] = '\0';
        return -1;
    }
    snprintf(js->log_path, sizeof(js->log_path), "%s/server.log", js->tmpdir);
    for (int attempt = 1; attempt <= START_ATTEMPTS; attempt++) {
        if (ts_free_port(&js->port) != 0) {
            set_error(js, "no free port: %s", strerror(errno));
            break;
        }
        ts_jserver_cmd_t cmd = {.dir = js->tmpdir, .port = js->port, .token = js->token, .args = args, .log_path = js->log_path};
        if (ts_jserver_spawn(&cmd, &js->pid, js->error, sizeof(js->error)) != 0)
            break;
        int rc = wait_ready(js);
        if (rc == 0)
            return 0;
        if (rc < 0) {
            js_server_dump_log(js, 4096);
            js_server_stop(js, NULL);
            return -1;
        }
        /* Only a port taken in the meantime is worth another attempt. */
        if (!log_has(js, "already in use") && !log_has(js, "available port"))
            break;
    }
    js_server_dump_log(js, 4096);
    cleanup_tmpdir(js);
    return -1;
}

/* DELETE /api/kernels/{id} for every kernel the server lists: kernels go the way the API says, before any signal. */
static void shutdown_kernels(js_server_t *js)
{
    char *body = NULL;
    if (js_get(js->port, js->token, "/api/kernels", &body) != 200) {
        free(body);
        return;
    }
    json_t *list = json_loads(body, 0, NULL);
    free(body);
    size_t i;
    json_t *k;
    char auth[128], path[256];
    snprintf(auth, sizeof(auth), "Authorization: token %s", js->token);
    const char *headers[] = {auth, NULL};
    json_array_foreach(list, i, k)
    {
        const char *id = json_string_value(json_object_get(k, "id"));
        if (id == NULL)
            continue;
        snprintf(path, sizeof(path), "/api/kernels/%s", id);
        ts_response_t r;
        ts_http_request(js->port, "DELETE", path, headers, NULL, &r);
        ts_response_dispose(&r);
    }
    json_decref(list);
}

int js_server_stop(js_server_t *js, size_t *survivors)
{
    if (survivors != NULL)
        *survivors = 0;
    if (js->pid <= 0) {
        cleanup_tmpdir(js);
        return 0;
    }
    shutdown_kernels(js);
    ts_proc_t desc[MAX_DESCENDANTS];
    size_t ndesc = ts_descendants(js->pid, desc, MAX_DESCENDANTS);
    kill(js->pid, SIGTERM);
    int rc = -1, status = -1;
    int64_t deadline = ts_now_ms() + JS_STOP_GRACE_MS;
    for (;;) {
        pid_t r = waitpid(js->pid, &status, WNOHANG);
        if (r == js->pid) {
            rc = 0;
            break;
        }
        if (r < 0 && errno != EINTR) {
            set_error(js, "waitpid(%d): %s", (int)js->pid, strerror(errno));
            break;
        }
        if (ts_now_ms() >= deadline) {
            set_error(js, "jupyter server did not exit within %d ms of SIGTERM: killed", JS_STOP_GRACE_MS);
            kill(js->pid, SIGKILL);
            waitpid(js->pid, &status, 0);
            break;
        }
        ts_sleep_ms(10);
    }
    js->pid = 0;
    /* Kernels end a moment after their shutdown_request, and after the server's own exit at worst: give them that. */
    size_t alive = 0;
    int64_t gone_by = ts_now_ms() + JS_STOP_GRACE_MS;
    for (size_t i = 0; i < ndesc; i++) {
        while (ts_proc_alive(&desc[i]) && ts_now_ms() < gone_by)
            ts_sleep_ms(20);
        if (ts_proc_alive(&desc[i])) {
            alive++;
            kill(desc[i].pid, SIGKILL);
        }
    }
    if (survivors != NULL)
        *survivors = alive;
    cleanup_tmpdir(js);
    return rc;
}

/* ---- client scripts ------------------------------------------------------------------------------------------------ */

static char *slurp(int fd)
{
    size_t cap = 4096, len = 0;
    char *buf = ts_malloc(cap);
    lseek(fd, 0, SEEK_SET);
    for (;;) {
        if (len + 1 >= cap)
            buf = ts_realloc(buf, cap *= 2);
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return buf;
}

int js_run(const char *const *argv, const char *const *env, int timeout_ms, js_run_t *run)
{
    memset(run, 0, sizeof(*run));
    run->status = -1;
    char out_path[] = "/tmp/kgate-jclient-out-XXXXXX", err_path[] = "/tmp/kgate-jclient-err-XXXXXX";
    int outfd = mkostemp(out_path, O_CLOEXEC), errfd = mkostemp(err_path, O_CLOEXEC);
    if (outfd >= 0)
        unlink(out_path);
    if (errfd >= 0)
        unlink(err_path);
    if (outfd < 0 || errfd < 0) {
        snprintf(run->error, sizeof(run->error), "mkostemp: %s", strerror(errno));
        goto Exit;
    }
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        int nullfd = open("/dev/null", O_RDONLY);
        if (nullfd >= 0)
            dup2(nullfd, 0);
        dup2(outfd, 1);
        dup2(errfd, 2);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        for (size_t i = 0; env != NULL && env[i] != NULL; i++)
            putenv((char *)env[i]);
        execvp(argv[0], (char *const *)argv);
        dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (pid < 0) {
        snprintf(run->error, sizeof(run->error), "fork: %s", strerror(errno));
        goto Exit;
    }
    setpgid(pid, pid);
    int64_t deadline = ts_now_ms() + timeout_ms;
    for (;;) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid) {
            run->status = status;
            break;
        }
        if (ts_now_ms() >= deadline) {
            run->timed_out = 1;
            kill(-pid, SIGKILL);
            waitpid(pid, &run->status, 0);
            break;
        }
        ts_sleep_ms(20);
    }
    kill(-pid, SIGKILL); /* anything the script left in its group */
Exit:
    run->out = outfd >= 0 ? slurp(outfd) : strdup("");
    run->err = errfd >= 0 ? slurp(errfd) : strdup("");
    if (outfd >= 0)
        close(outfd);
    if (errfd >= 0)
        close(errfd);
    return run->status == -1 ? -1 : 0;
}

void js_run_dispose(js_run_t *run)
{
    free(run->out);
    free(run->err);
    run->out = run->err = NULL;
}

int js_expect_steps(const char *client, const js_run_t *run, const char *const *steps)
{
    json_t *seen = json_object();
    char *save = NULL, *copy = strdup(run->out);
    for (char *line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(line, 0, NULL);
        const char *step = json_string_value(json_object_get(j, "step"));
        if (step != NULL)
            json_object_set(seen, step, j);
        json_decref(j);
    }
    free(copy);
    int exited_ok = !run->timed_out && WIFEXITED(run->status) && WEXITSTATUS(run->status) == 0, all = 1;
    for (size_t i = 0; steps[i] != NULL; i++) {
        json_t *s = json_object_get(seen, steps[i]);
        const char *detail = json_string_value(json_object_get(s, "detail"));
        if (!json_is_true(json_object_get(s, "ok")))
            all = 0;
        cr_expect(s != NULL, "step `%s` never reported", steps[i]);
        cr_expect(s == NULL || json_is_true(json_object_get(s, "ok")), "step `%s` failed: %s", steps[i],
                  detail != NULL ? detail : "");
    }
    size_t errlen = strlen(run->err);
    cr_expect(exited_ok, "the %s client %s (wait status %#x)\n--- stdout ---\n%s--- stderr (last 6000 bytes) ---\n%s", client,
              run->timed_out ? "was killed at its deadline" : "exited with an error", run->status, run->out,
              run->err + (errlen > 6000 ? errlen - 6000 : 0));
    if (exited_ok && all)
        cr_log_info("%s client:\n%s", client, run->out);
    json_decref(seen);
    return exited_ok && all;
}

const char *js_modules_dir(const char *env, const char *dflt)
{
    const char *d = getenv(env);
    return d != NULL && *d != '\0' ? d : dflt;
}

const char *js_node(void)
{
    static char path[1024];

    snprintf(path, sizeof(path), "%s/bin/node", js_modules_dir("KGATE_NODE_DIR", "/usr/local/lib/kgate/node"));
    cr_assert(access(path, X_OK) == 0, "%s is not there: deploy/deps.sh installs it (npm ci of tests/e2e/node's lock)", path);
    return path;
}

void js_assert_installed(const char *modules_dir, const char *package, const char *lock)
{
    char path[1024];

    snprintf(path, sizeof(path), "%s/node_modules/%s/package.json", modules_dir, package);
    cr_assert(access(path, R_OK) == 0, "%s is not installed in %s: deploy/deps.sh installs it (npm ci of %s)", package, modules_dir,
              lock);
}
