/* bench/jupyter_server.c: Debian's Jupyter Server as the benchmark's peer, in a temp dir of its own, stopped by its PID. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/jserver.h"
#include "support/proc.h"
#include "jupyter_server.h"

#define PYTHON TS_JSERVER_PYTHON
#define START_ATTEMPTS 3
#define STARTUP_MS 60000 /* a cold python import of jupyter_server on a loaded 2-core VM takes seconds */
#define STOP_GRACE_MS 10000
#define MAX_DESCENDANTS 512
#define LOG_TAIL 2048

int bench_jserver_available(void)
{
    /* the same interpreter the server runs on: Debian's python3-jupyter-server */
    int rc = system(PYTHON " -c 'import jupyter_server' >/dev/null 2>&1");
    if (rc != 0) {
        bench_set_detail(PYTHON " cannot import jupyter_server (deploy/deps.sh --with-bench installs python3-jupyter-server)");
        return 0;
    }
    return 1;
}

/* The last bytes of the server's log, on one line, into `out`. */
static void log_tail(const bench_jserver_t *js, char *out, size_t size)
{
    char path[320], buf[LOG_TAIL + 1];
    ssize_t n = 0;
    int fd;

    snprintf(path, sizeof(path), "%s/jupyter-server.log", js->tmpdir);
    out[0] = '\0';
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    if (end > LOG_TAIL)
        lseek(fd, end - LOG_TAIL, SEEK_SET);
    else
        lseek(fd, 0, SEEK_SET);
    n = read(fd, buf, LOG_TAIL);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    for (char *p = buf; *p != '\0'; ++p)
        if (*p == '\n')
            *p = ' ';
    snprintf(out, size, "%s", buf);
}

/* Reaps the server if it exited; 1 then (its status in *status). */
static int exited(bench_jserver_t *js, int *status)
{
    pid_t r = waitpid(js->pid, status, WNOHANG);
    if (r == js->pid || (r < 0 && errno == ECHILD)) {
        js->pid = 0;
        return 1;
    }
    return 0;
}

static void remove_tmpdir(bench_jserver_t *js)
{
    const char *keep = getenv("KGATE_BENCH_KEEP");

    if (js->tmpdir[0] == '\0')
        return;
    if (keep != NULL && *keep != '\0' && strcmp(keep, "0") != 0)
        fprintf(stderr, "kept %s (KGATE_BENCH_KEEP is set)\n", js->tmpdir);
    else
        ts_remove_tree(js->tmpdir);
    js->tmpdir[0] = '\0';
}

int bench_jserver_start(bench_jserver_t *js, unsigned timeout_ms)
{
    char log_path[320], auth[80], tail[LOG_TAIL + 1];
    const char *headers[] = {auth, NULL};
    const char *tmp = getenv("TMPDIR");

    memset(js, 0, sizeof(*js));
    js->timeout_ms = timeout_ms;
    snprintf(js->tmpdir, sizeof(js->tmpdir), "%s/kgate-bench-jserver-XXXXXX", tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
    if (mkdtemp(js->tmpdir) == NULL) {
        bench_set_detail("mkdtemp(%s): %s", js->tmpdir, strerror(errno));
        js->tmpdir[0] = '\0';
        return BENCH_EIO;
    }
    snprintf(log_path, sizeof(log_path), "%s/jupyter-server.log", js->tmpdir);
    ts_random_hex(js->token, sizeof(js->token));
    snprintf(auth, sizeof(auth), "Authorization: token %s", js->token);
    for (int attempt = 1; attempt <= START_ATTEMPTS; ++attempt) {
        char err[512];
        int status;
        if (ts_free_port(&js->port) != 0) {
            bench_set_detail("no free port on 127.0.0.1");
            break;
        }
        ts_jserver_cmd_t cmd = {.dir = js->tmpdir, .port = js->port, .token = js->token, .log_path = log_path};
        if (ts_jserver_spawn(&cmd, &js->pid, err, sizeof(err)) != 0) {
            bench_set_detail("%s", err);
            remove_tmpdir(js);
            return BENCH_EIO;
        }
        for (int64_t deadline = ts_now_ms() + STARTUP_MS; ts_now_ms() < deadline;) {
            ts_response_t r = {0};
            int st = ts_http_request_until(js->port, "GET", "/api", headers, NULL, ts_now_ms() + 2000, &r);
            const char *v = json_string_value(json_object_get(r.json, "version"));
            snprintf(js->version, sizeof(js->version), "%s", v != NULL ? v : "?");
            ts_response_dispose(&r);
            if (st == 200)
                return 0;
            if (exited(js, &status))
                break;
            ts_sleep_ms(100);
        }
        log_tail(js, tail, sizeof(tail));
        if (js->pid == 0 && strstr(tail, "already in use") != NULL && attempt < START_ATTEMPTS)
            continue; /* the port was taken between free_port and the server's bind */
        bench_set_detail("Jupyter Server did not answer GET /api within %d ms (%s); its log ends: %.400s", STARTUP_MS,
                         js->pid == 0 ? "it exited" : "still running", tail);
        break;
    }
    bench_jserver_stop(js);
    return BENCH_EIO;
}

int bench_jserver_start_kernel(bench_jserver_t *js, const char *name, const char **id)
{
    char auth[80], body[128];
    const char *headers[] = {auth, NULL};
    ts_response_t r = {0};
    int st, err = 0;

    if (js->nkernels == BENCH_JSERVER_MAX_KERNELS) {
        bench_set_detail("at most %d Jupyter Server kernels", BENCH_JSERVER_MAX_KERNELS);
        return BENCH_EIO;
    }
    snprintf(auth, sizeof(auth), "Authorization: token %s", js->token);
    snprintf(body, sizeof(body), "{\"name\":\"%s\"}", name);
    st = ts_http_request_until(js->port, "POST", "/api/kernels", headers, body, ts_now_ms() + js->timeout_ms, &r);
    const char *s = json_string_value(json_object_get(r.json, "id"));
    if (st != 201 || s == NULL) {
        bench_set_detail("Jupyter Server: POST /api/kernels: %s %d %.300s", st < 0 ? r.error : "HTTP", st,
                         r.body != NULL ? r.body : "");
        err = st < 0 ? st : BENCH_ESTATUS;
    } else {
        js->kernels[js->nkernels] = wire_strdup(s);
        *id = js->kernels[js->nkernels++];
    }
    ts_response_dispose(&r);
    return err;
}

const char *bench_jserver_channels_path(const bench_jserver_t *js, const char *id, char *buf, size_t size)
{
    snprintf(buf, size, "/api/kernels/%s/channels?token=%s", id, js->token);
    return buf;
}

void bench_jserver_stop(bench_jserver_t *js)
{
    char auth[80], path[160];
    const char *headers[] = {auth, NULL};
    ts_proc_t procs[MAX_DESCENDANTS];
    size_t nprocs = 0;
    int status;

    snprintf(auth, sizeof(auth), "Authorization: token %s", js->token);
    for (size_t i = 0; i != js->nkernels; ++i) {
        ts_response_t r = {0};
        snprintf(path, sizeof(path), "/api/kernels/%s", js->kernels[i]);
        int st = js->pid > 0 ? ts_http_request_until(js->port, "DELETE", path, headers, NULL, ts_now_ms() + 10000, &r) : 204;
        if (st != 204)
            fprintf(stderr, "warning: Jupyter Server: DELETE %s: %d %s\n", path, st, st < 0 ? r.error : r.body);
        ts_response_dispose(&r);
        free(js->kernels[i]);
        js->kernels[i] = NULL;
    }
    js->nkernels = 0;
    if (js->pid > 0) {
        nprocs = ts_descendants(js->pid, procs, MAX_DESCENDANTS);
        kill(js->pid, SIGTERM);
        for (int64_t deadline = ts_now_ms() + STOP_GRACE_MS; !exited(js, &status) && ts_now_ms() < deadline;)
            ts_sleep_ms(10);
        if (js->pid > 0) {
            fprintf(stderr, "warning: Jupyter Server (pid %d) did not exit within %d ms of SIGTERM; sent SIGKILL\n", (int)js->pid,
                    STOP_GRACE_MS);
            kill(js->pid, SIGKILL);
            waitpid(js->pid, &status, 0);
            js->pid = 0;
        }
        /* its kernels were shut down above; whatever of its process tree is left goes too */
        for (int64_t deadline = ts_now_ms() + 1000;;) {
            size_t alive = 0;
            for (size_t i = 0; i != nprocs; ++i)
                alive += (size_t)ts_proc_alive(&procs[i]);
            if (alive == 0)
                break;
            if (ts_now_ms() >= deadline) {
                for (size_t i = 0; i != nprocs; ++i)
                    if (ts_proc_alive(&procs[i])) {
                        fprintf(stderr, "warning: process %d (a descendant of Jupyter Server) outlived it; killing it\n",
                                (int)procs[i].pid);
                        kill(procs[i].pid, SIGKILL);
                    }
                break;
            }
            ts_sleep_ms(20);
        }
    }
    remove_tmpdir(js);
}
