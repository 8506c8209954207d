/* bench/jupyter_server.c: Debian's Jupyter Server as the benchmark's peer, in a temp dir of its own, stopped by its PID. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include "wire/alloc.h"
#include "support/base.h"
#include "support/http.h"
#include "support/proc.h"
#include "jupyter_server.h"

#define PYTHON "/usr/bin/python3"
#define START_ATTEMPTS 3
#define STARTUP_MS 60000 /* a cold python import of jupyter_server on a loaded 2-core VM takes seconds */
#define STOP_GRACE_MS 10000
#define MAX_DESCENDANTS 512
#define LOG_TAIL 2048

extern char **environ;

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

/* Racy by nature (another process may take the port first): start() retries then. */
static int free_port(unsigned short *port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = -1;

    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 && getsockname(fd, (struct sockaddr *)&sin, &len) == 0) {
        *port = ntohs(sin.sin_port);
        rc = 0;
    }
    close(fd);
    return rc;
}

static void random_token(char *out, size_t size)
{
    unsigned char raw[16] = {0};
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);

    if (fd < 0 || read(fd, raw, sizeof(raw)) != (ssize_t)sizeof(raw))
        for (size_t i = 0; i != sizeof(raw); ++i)
            raw[i] = (unsigned char)rand();
    if (fd >= 0)
        close(fd);
    for (size_t i = 0; i != sizeof(raw) && 2 * i + 2 < size; ++i)
        snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

/* What the server must not inherit: the machine's Jupyter and IPython configuration, and kgate's own variables. */
static int inherited(const char *entry)
{
    static const char *const dropped[] = {
        "HOME=", "IPYTHONDIR=", "XDG_CONFIG_HOME=", "XDG_DATA_HOME=", "XDG_RUNTIME_DIR=", "PYTHONSTARTUP=", NULL};

    if (strncmp(entry, "JUPYTER", 7) == 0 || strncmp(entry, "KGATE_", 6) == 0)
        return 0;
    for (size_t i = 0; dropped[i] != NULL; ++i)
        if (strncmp(entry, dropped[i], strlen(dropped[i])) == 0)
            return 0;
    return 1;
}

/* The child's side of the fork: never returns. */
__attribute__((noreturn)) static void exec_server(const bench_jserver_t *js, char **argv, char **envp, int logfd, pid_t parent)
{
    ts_child_prepare(logfd, parent); /* the server goes with its starter (support/proc.h) */
    if (chdir(js->tmpdir) != 0)
        _exit(127);
    execve(argv[0], argv, envp);
    dprintf(2, "bench: execve(%s): %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int spawn(bench_jserver_t *js, const char *log_path)
{
    /* it refuses to run as root without this; the benchmark's containers often are root */
    char *allow_root = geteuid() == 0 ? "--allow-root" : NULL;
    char token_arg[80], port_arg[32], dirs[5][320];
    char *argv[] = {
        PYTHON,     "-m", "jupyter_server", token_arg, port_arg, "--ip=127.0.0.1", "--no-browser", "--ServerApp.port_retries=0",
        allow_root, NULL};
    size_t n = 0, k = 0;
    char **envp;
    int logfd;

    snprintf(token_arg, sizeof(token_arg), "--ServerApp.token=%s", js->token);
    snprintf(port_arg, sizeof(port_arg), "--port=%u", js->port);
    snprintf(dirs[0], sizeof(dirs[0]), "HOME=%s", js->tmpdir);
    snprintf(dirs[1], sizeof(dirs[1]), "JUPYTER_CONFIG_DIR=%s/config", js->tmpdir);
    snprintf(dirs[2], sizeof(dirs[2]), "JUPYTER_DATA_DIR=%s/data", js->tmpdir);
    snprintf(dirs[3], sizeof(dirs[3]), "JUPYTER_RUNTIME_DIR=%s/runtime", js->tmpdir);
    snprintf(dirs[4], sizeof(dirs[4]), "IPYTHONDIR=%s/ipython", js->tmpdir);
    while (environ[n] != NULL)
        ++n;
    envp = wire_calloc(n + 6, sizeof(*envp));
    for (size_t i = 0; i != n; ++i)
        if (inherited(environ[i]))
            envp[k++] = environ[i];
    for (size_t i = 0; i != 5; ++i)
        envp[k++] = dirs[i];
    if ((logfd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
        bench_set_detail("open(%s): %s", log_path, strerror(errno));
        free(envp);
        return BENCH_EIO;
    }
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0)
        exec_server(js, argv, envp, logfd, parent);
    int fork_errno = errno;
    close(logfd);
    free(envp);
    if (pid < 0) {
        bench_set_detail("fork: %s", strerror(fork_errno));
        return BENCH_EIO;
    }
    js->pid = pid;
    return 0;
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

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    remove(path);
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
        nftw(js->tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
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
    random_token(js->token, sizeof(js->token));
    snprintf(auth, sizeof(auth), "Authorization: token %s", js->token);
    for (int attempt = 1; attempt <= START_ATTEMPTS; ++attempt) {
        int status, err;
        if (free_port(&js->port) != 0) {
            bench_set_detail("no free port on 127.0.0.1");
            break;
        }
        if ((err = spawn(js, log_path)) != 0) {
            remove_tmpdir(js);
            return err;
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
