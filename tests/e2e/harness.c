/* tests/e2e/harness.c: kgate process control, a blocking HTTP/1.1 client and an SSE reader for e2e tests. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strsignal, prctl, nftw */
#endif
#include "harness.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_KERNEL_PATH "/usr/share/jupyter/kernels" /* Debian's python3-ipykernel kernelspec */
#define MAX_HEADER_LINE 16000                            /* below conn_t's buffer, which must hold a whole line */
#define MAX_HEADERS 200
#define MAX_DESCENDANTS 512

int64_t e2e_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        abort();
    return p;
}

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (p == NULL)
        abort();
    return p;
}

static char *xstrndup(const char *s, size_t n)
{
    char *d = xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

__attribute__((format(printf, 3, 4))) static void seterr(char *buf, size_t size, const char *fmt, ...)
{
    if (buf == NULL)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

/* ---- the kgate process ---------------------------------------------------------------------- */

const char *e2e_kgate_path(const char *binary_dir)
{
    static char path[1024];
    const char *env = getenv("KGATE_E2E_KGATE");
    if (env != NULL && *env != '\0')
        snprintf(path, sizeof(path), "%s", env);
    else
        snprintf(path, sizeof(path), "%s/gateway/kgate", binary_dir);
    return path;
}

/* Racy by nature (another process may take the port before kgate binds it), which is acceptable for tests. */
static int free_port(unsigned short *port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t len = sizeof(sin);
    int rc = -1;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 && getsockname(fd, (struct sockaddr *)&sin, &len) == 0) {
        *port = ntohs(sin.sin_port);
        rc = 0;
    }
    close(fd);
    return rc;
}

static int has_arg(const char *const *args, const char *name)
{
    for (size_t i = 0; args != NULL && args[i] != NULL; i++)
        if (strcmp(args[i], name) == 0 || (strncmp(args[i], name, strlen(name)) == 0 && args[i][strlen(name)] == '='))
            return 1;
    return 0;
}

static int reap(e2e_gateway_t *gw, int64_t deadline_ms)
{
    for (;;) {
        int status;
        pid_t r = waitpid(gw->pid, &status, WNOHANG);
        if (r == gw->pid) {
            gw->exit_status = status;
            gw->pid = 0;
            return 0;
        }
        if (r < 0 && errno != EINTR) {
            seterr(gw->error, sizeof(gw->error), "waitpid(%d): %s", (int)gw->pid, strerror(errno));
            gw->pid = 0;
            return -1;
        }
        if (e2e_now_ms() >= deadline_ms)
            return -1;
        sleep_ms(5);
    }
}

static void describe_status(int status, char *buf, size_t size)
{
    if (status < 0)
        snprintf(buf, size, "not reaped");
    else if (WIFEXITED(status))
        snprintf(buf, size, "exit code %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, size, "killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        snprintf(buf, size, "wait status %#x", status);
}

int e2e_gateway_start(e2e_gateway_t *gw, const char *exe, const char *const *args, const char *const *env)
{
    memset(gw, 0, sizeof(*gw));
    gw->exit_status = -1;
    gw->owner = 1;

    if (access(exe, X_OK) != 0) {
        seterr(gw->error, sizeof(gw->error), "kgate executable %s: %s (not built yet?)", exe, strerror(errno));
        return -1;
    }
    const char *base = getenv("TMPDIR");
    snprintf(gw->tmpdir, sizeof(gw->tmpdir), "%s/kgate-e2e-XXXXXX", base != NULL && *base != '\0' ? base : "/tmp");
    if (mkdtemp(gw->tmpdir) == NULL) {
        seterr(gw->error, sizeof(gw->error), "mkdtemp(%s): %s", gw->tmpdir, strerror(errno));
        gw->tmpdir[0] = '\0';
        return -1;
    }
    snprintf(gw->log_path, sizeof(gw->log_path), "%s/kgate.log", gw->tmpdir);
    snprintf(gw->runtime_dir, sizeof(gw->runtime_dir), "%s/runtime", gw->tmpdir);
    if (mkdir(gw->runtime_dir, 0700) != 0) {
        seterr(gw->error, sizeof(gw->error), "mkdir(%s): %s", gw->runtime_dir, strerror(errno));
        e2e_gateway_cleanup(gw);
        return -1;
    }
    if (free_port(&gw->port) != 0) {
        seterr(gw->error, sizeof(gw->error), "no free port: %s", strerror(errno));
        e2e_gateway_cleanup(gw);
        return -1;
    }

    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", gw->port);
    size_t nargs = 0;
    while (args != NULL && args[nargs] != NULL)
        nargs++;
    const char **argv = xmalloc((nargs + 8) * sizeof(*argv));
    size_t argc = 0;
    argv[argc++] = exe;
    argv[argc++] = "--listen";
    argv[argc++] = listen;
    if (!has_arg(args, "--runtime-dir")) {
        argv[argc++] = "--runtime-dir";
        argv[argc++] = gw->runtime_dir;
    }
    if (!has_arg(args, "--kernel-path")) {
        argv[argc++] = "--kernel-path";
        argv[argc++] = DEFAULT_KERNEL_PATH;
    }
    for (size_t i = 0; i < nargs; i++)
        argv[argc++] = args[i];
    argv[argc] = NULL;

    int logfd = open(gw->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        seterr(gw->error, sizeof(gw->error), "open(%s): %s", gw->log_path, strerror(errno));
        free(argv);
        e2e_gateway_cleanup(gw);
        return -1;
    }
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        /* If the test process dies without stopping kgate, kgate still gets its SIGTERM. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(127);
        int nullfd = open("/dev/null", O_RDONLY);
        if (nullfd >= 0)
            dup2(nullfd, 0);
        dup2(logfd, 1);
        dup2(logfd, 2);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        signal(SIGINT, SIG_DFL);
        unsetenv("KGATE_ACCESS_TOKEN");
        for (size_t i = 0; env != NULL && env[i] != NULL; i++) {
            const char *eq = strchr(env[i], '=');
            if (eq == NULL)
                continue;
            char name[256];
            snprintf(name, sizeof(name), "%.*s", (int)(eq - env[i]), env[i]);
            setenv(name, eq + 1, 1);
        }
        execv(exe, (char *const *)argv);
        dprintf(2, "e2e harness: execv(%s): %s\n", exe, strerror(errno));
        _exit(127);
    }
    int fork_errno = errno;
    close(logfd);
    free(argv);
    if (pid < 0) {
        seterr(gw->error, sizeof(gw->error), "fork: %s", strerror(fork_errno));
        e2e_gateway_cleanup(gw);
        return -1;
    }
    gw->pid = pid;

    int64_t deadline = e2e_now_ms() + E2E_STARTUP_MS;
    for (;;) {
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            gw->pid = 0;
            gw->exit_status = status;
            char st[128];
            describe_status(status, st, sizeof(st));
            seterr(gw->error, sizeof(gw->error), "kgate exited (%s) before answering /healthz; log: %s", st, gw->log_path);
            e2e_gateway_dump_log(gw, 4096);
            e2e_gateway_cleanup(gw);
            return -1;
        }
        int64_t now = e2e_now_ms();
        if (now >= deadline)
            break;
        e2e_response_t r;
        int64_t probe_deadline = now + 1000 < deadline ? now + 1000 : deadline;
        int st = e2e_http_request_until(gw->port, "GET", "/healthz", NULL, NULL, probe_deadline, &r);
        e2e_response_dispose(&r);
        if (st == 200)
            return 0;
        sleep_ms(E2E_HEALTH_POLL_MS);
    }
    char keep[sizeof(gw->error)];
    snprintf(keep, sizeof(keep), "kgate did not answer GET /healthz with 200 within %d ms", E2E_STARTUP_MS);
    e2e_gateway_dump_log(gw, 4096);
    e2e_gateway_stop(gw, NULL);
    snprintf(gw->error, sizeof(gw->error), "%s", keep);
    return -1;
}

int e2e_gateway_signal(e2e_gateway_t *gw, int sig)
{
    if (!gw->owner || gw->pid <= 0)
        return -1;
    return kill(gw->pid, sig);
}

int e2e_gateway_wait(e2e_gateway_t *gw, int64_t deadline_ms)
{
    if (!gw->owner)
        return -1;
    if (gw->pid <= 0)
        return 0;
    return reap(gw, deadline_ms);
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

void e2e_gateway_cleanup(e2e_gateway_t *gw)
{
    if (!gw->owner || gw->tmpdir[0] == '\0')
        return;
    const char *keep = getenv("KGATE_E2E_KEEP");
    if (keep != NULL && *keep != '\0' && strcmp(keep, "0") != 0) {
        fprintf(stderr, "e2e: kept %s\n", gw->tmpdir);
    } else {
        nftw(gw->tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    gw->tmpdir[0] = '\0';
}

int e2e_gateway_stop(e2e_gateway_t *gw, size_t *survivors)
{
    int rc = e2e_gateway_stop_keep(gw, survivors);
    e2e_gateway_cleanup(gw);
    return rc;
}

int e2e_gateway_stop_keep(e2e_gateway_t *gw, size_t *survivors)
{
    if (survivors != NULL)
        *survivors = 0;
    if (!gw->owner || gw->pid <= 0)
        return 0;
    e2e_proc_t procs[MAX_DESCENDANTS];
    size_t nprocs = e2e_descendants(gw->pid, procs, MAX_DESCENDANTS);
    int rc = 0;
    kill(gw->pid, SIGTERM);
    if (reap(gw, e2e_now_ms() + E2E_STOP_GRACE_MS) != 0) {
        if (gw->pid > 0) {
            seterr(gw->error, sizeof(gw->error), "kgate (pid %d) did not exit within %d ms of SIGTERM; sent SIGKILL", (int)gw->pid,
                   E2E_STOP_GRACE_MS);
            kill(gw->pid, SIGKILL);
            reap(gw, e2e_now_ms() + 5000);
        }
        rc = -1;
    }
    /* Processes that kgate was stopping may need a moment to vanish after it exits; zombies do not count. */
    int64_t deadline = e2e_now_ms() + 1000;
    size_t alive;
    for (;;) {
        alive = 0;
        for (size_t i = 0; i < nprocs; i++)
            alive += (size_t)e2e_proc_alive(&procs[i]);
        if (alive == 0 || e2e_now_ms() >= deadline)
            break;
        sleep_ms(20);
    }
    if (alive != 0) {
        /* Report them, then do not leave them running on the machine. */
        for (size_t i = 0; i < nprocs; i++)
            if (e2e_proc_alive(&procs[i])) {
                fprintf(stderr, "e2e: process %d (a descendant of kgate) survived kgate; killing it\n", (int)procs[i].pid);
                kill(procs[i].pid, SIGKILL);
            }
    }
    if (survivors != NULL)
        *survivors = alive;
    return rc;
}

void e2e_gateway_dump_log(const e2e_gateway_t *gw, size_t max)
{
    if (gw->log_path[0] == '\0')
        return;
    FILE *f = fopen(gw->log_path, "r");
    if (f == NULL)
        return;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long from = size > (long)max ? size - (long)max : 0;
    fseek(f, from, SEEK_SET);
    fprintf(stderr, "---- kgate log %s (last %ld of %ld bytes) ----\n", gw->log_path, size - from, size);
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, stderr);
    fprintf(stderr, "\n---- end of kgate log ----\n");
    fclose(f);
}

void e2e_gateway_format(const e2e_gateway_t *gw, char *buf, size_t size)
{
    snprintf(buf, size, "%d %u %s %s", (int)gw->pid, gw->port, gw->log_path, gw->runtime_dir);
}

int e2e_gateway_parse(e2e_gateway_t *gw, const char *s)
{
    memset(gw, 0, sizeof(*gw));
    gw->exit_status = -1;
    int pid;
    unsigned port;
    if (s == NULL || sscanf(s, "%d %u %299s %299s", &pid, &port, gw->log_path, gw->runtime_dir) != 4 || port == 0 || port > 65535)
        return -1;
    gw->pid = pid;
    gw->port = (unsigned short)port;
    gw->owner = 0;
    return 0;
}

/* ---- processes ------------------------------------------------------------------------------ */

/* Reads /proc/<pid>/stat into `buf` and returns where the fields after comm begin, or NULL. */
static const char *stat_fields(pid_t pid, char *buf, size_t size)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return NULL;
    buf[n] = '\0';
    /* comm may contain spaces and parentheses: fields resume after the last ')'. */
    char *p = strrchr(buf, ')');
    return p != NULL ? p + 1 : NULL;
}

static int read_stat(pid_t pid, char *state, pid_t *ppid, unsigned long long *starttime)
{
    char buf[1024];
    const char *p = stat_fields(pid, buf, sizeof(buf));
    if (p == NULL)
        return -1;
    int ppid_i;
    if (sscanf(p, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", state, &ppid_i, starttime) !=
        3)
        return -1;
    *ppid = ppid_i;
    return 0;
}

size_t e2e_descendants(pid_t root, e2e_proc_t *out, size_t max)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    size_t cap = 1024, n = 0;
    struct {
        pid_t pid, ppid;
        unsigned long long starttime;
    } *all = xmalloc(cap * sizeof(*all));
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(de->d_name);
        char state;
        pid_t ppid;
        unsigned long long st;
        if (read_stat(pid, &state, &ppid, &st) != 0 || state == 'Z')
            continue;
        if (n == cap) {
            cap *= 2;
            all = xrealloc(all, cap * sizeof(*all));
        }
        all[n].pid = pid;
        all[n].ppid = ppid;
        all[n].starttime = st;
        n++;
    }
    closedir(d);
    /* Breadth-first from root over the parent links; out[] doubles as the queue. */
    size_t count = 0, head = 0;
    pid_t parent = root;
    for (;;) {
        for (size_t i = 0; i < n && count < max; i++)
            if (all[i].ppid == parent) {
                out[count].pid = all[i].pid;
                out[count].starttime = all[i].starttime;
                count++;
            }
        if (head >= count)
            break;
        parent = out[head++].pid;
    }
    free(all);
    return count;
}

int e2e_proc_alive(const e2e_proc_t *p)
{
    char state;
    pid_t ppid;
    unsigned long long st;
    if (read_stat(p->pid, &state, &ppid, &st) != 0)
        return 0;
    if (state == 'Z')
        return 0;
    return p->starttime == 0 || st == p->starttime;
}

int64_t e2e_proc_cpu_ms(pid_t pid)
{
    char buf[1024];
    const char *p = stat_fields(pid, buf, sizeof(buf));
    unsigned long long utime, stime;
    if (p == NULL || sscanf(p, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? (int64_t)((utime + stime) * 1000 / (unsigned long long)hz) : -1;
}

/* ---- connection ----------------------------------------------------------------------------- */

typedef struct st_conn_t {
    int fd;
    char buf[16384];
    size_t off, len;
} conn_t;

static int remaining_ms(int64_t deadline_ms)
{
    int64_t r = deadline_ms - e2e_now_ms();
    if (r <= 0)
        return 0;
    return r > 600000 ? 600000 : (int)r;
}

static int conn_open(conn_t *c, unsigned short port, int64_t deadline_ms, char *err)
{
    c->off = c->len = 0;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0) {
        seterr(err, 256, "socket: %s", strerror(errno));
        return -1;
    }
    /* Backstop for any blocking call; the deadline below is the real bound. */
    int ms = remaining_ms(deadline_ms);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    if (ms == 0)
        tv.tv_usec = 1000;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = htons(port)};
    while (connect(c->fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        if (errno == EINTR)
            continue;
        seterr(err, 256, "connect 127.0.0.1:%u: %s", port, strerror(errno));
        close(c->fd);
        c->fd = -1;
        return -1;
    }
    return 0;
}

static void conn_close(conn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

static int conn_send_all(conn_t *c, const char *p, size_t len, int64_t deadline_ms, char *err)
{
    while (len > 0) {
        struct pollfd pfd = {c->fd, POLLOUT, 0};
        int ms = remaining_ms(deadline_ms);
        if (ms == 0) {
            seterr(err, 256, "timed out sending the request");
            return -1;
        }
        int pr = poll(&pfd, 1, ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            seterr(err, 256, "send: %s", strerror(errno));
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Receives more bytes after those buffered (compacting first). Returns bytes received (> 0), 0 at EOF, -1 on
 * error or timeout (errno ETIMEDOUT). Nothing buffered is lost on failure, so a caller may retry later. */
static ssize_t conn_more(conn_t *c, int64_t deadline_ms)
{
    if (c->off > 0) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    if (c->len == sizeof(c->buf)) {
        errno = ENOBUFS;
        return -1;
    }
    for (;;) {
        int ms = remaining_ms(deadline_ms);
        if (ms == 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd pfd = {c->fd, POLLIN, 0};
        int pr = poll(&pfd, 1, ms);
        if (pr < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (pr == 0)
            continue;
        ssize_t n = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return -1;
        }
        c->len += (size_t)n;
        return n;
    }
}

static ssize_t conn_read(conn_t *c, char *dst, size_t max, int64_t deadline_ms)
{
    if (c->off == c->len) {
        ssize_t r = conn_more(c, deadline_ms);
        if (r <= 0)
            return r;
    }
    size_t avail = c->len - c->off;
    size_t n = avail < max ? avail : max;
    memcpy(dst, c->buf + c->off, n);
    c->off += n;
    return (ssize_t)n;
}

/* Reads one line without its CRLF/LF into line (NUL-terminated). 0 ok, -1 error/EOF/too long. A line is
 * consumed only once complete, so a timeout loses nothing. */
static int conn_read_line(conn_t *c, char *line, size_t max, int64_t deadline_ms, char *err)
{
    for (;;) {
        char *start = c->buf + c->off;
        size_t avail = c->len - c->off;
        char *nl = memchr(start, '\n', avail);
        if (nl != NULL) {
            size_t len = (size_t)(nl - start);
            c->off += len + 1;
            while (len > 0 && start[len - 1] == '\r')
                len--;
            if (len >= max) {
                seterr(err, 256, "line longer than %zu bytes", max);
                return -1;
            }
            memcpy(line, start, len);
            line[len] = '\0';
            return 0;
        }
        if (avail >= max) {
            seterr(err, 256, "line longer than %zu bytes", max);
            return -1;
        }
        ssize_t r = conn_more(c, deadline_ms);
        if (r <= 0) {
            seterr(err, 256, "%s while reading a line", r == 0 ? "connection closed" : strerror(errno));
            return -1;
        }
    }
}

/* ---- HTTP ----------------------------------------------------------------------------------- */

enum { BODY_NONE, BODY_LENGTH, BODY_CHUNKED, BODY_CLOSE };

struct st_e2e_stream_t {
    conn_t conn;
    e2e_response_t resp;
    int mode;
    uint64_t remaining; /* BODY_LENGTH: bytes left; BODY_CHUNKED: bytes left in the chunk */
    int chunk_state;    /* 0 expecting a size line, 1 in chunk data, 2 expecting the CRLF after data, 3 trailers */
    int done;
    int is_sse;
    e2e_sse_parser_t parser;
};

const char *e2e_response_header(const e2e_response_t *r, const char *name)
{
    for (size_t i = 0; i < r->num_headers; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

void e2e_response_dispose(e2e_response_t *r)
{
    for (size_t i = 0; i < r->num_headers; i++) {
        free(r->headers[i].name);
        free(r->headers[i].value);
    }
    free(r->headers);
    free(r->body);
    json_decref(r->json);
    r->headers = NULL;
    r->num_headers = 0;
    r->body = NULL;
    r->body_len = 0;
    r->json = NULL;
}

static int has_header(const char *const *headers, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++)
        if (strncasecmp(headers[i], name, len) == 0 && headers[i][len] == ':')
            return 1;
    return 0;
}

static int contains_token(const char *value, const char *token)
{
    size_t len = strlen(token);
    for (const char *p = value; p != NULL && *p != '\0'; p++)
        if (strncasecmp(p, token, len) == 0)
            return 1;
    return 0;
}

static int read_head(e2e_stream_t *s, const char *method, int64_t deadline_ms)
{
    char *line = xmalloc(MAX_HEADER_LINE);
    e2e_response_t *r = &s->resp;
    int rc = -1;
    for (;;) {
        if (conn_read_line(&s->conn, line, MAX_HEADER_LINE, deadline_ms, r->error) != 0)
            goto Exit;
        int minor, status;
        if (sscanf(line, "HTTP/1.%d %d", &minor, &status) != 2 || status < 100 || status > 999) {
            seterr(r->error, sizeof(r->error), "bad status line: %.100s", line);
            goto Exit;
        }
        r->status = status;
        /* Skip interim responses (100 Continue) and their headers. */
        for (;;) {
            if (conn_read_line(&s->conn, line, MAX_HEADER_LINE, deadline_ms, r->error) != 0)
                goto Exit;
            if (line[0] == '\0')
                break;
            if (status < 200)
                continue;
            char *colon = strchr(line, ':');
            if (colon == NULL || r->num_headers >= MAX_HEADERS) {
                seterr(r->error, sizeof(r->error), "bad or too many header lines: %.100s", line);
                goto Exit;
            }
            char *v = colon + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vlen = strlen(v);
            while (vlen > 0 && (v[vlen - 1] == ' ' || v[vlen - 1] == '\t'))
                vlen--;
            r->headers = xrealloc(r->headers, (r->num_headers + 1) * sizeof(*r->headers));
            r->headers[r->num_headers].name = xstrndup(line, (size_t)(colon - line));
            r->headers[r->num_headers].value = xstrndup(v, vlen);
            r->num_headers++;
        }
        if (status >= 200)
            break;
    }
    const char *te = e2e_response_header(r, "Transfer-Encoding");
    const char *cl = e2e_response_header(r, "Content-Length");
    if (strcasecmp(method, "HEAD") == 0 || r->status == 204 || r->status == 304) {
        s->mode = BODY_NONE;
        s->done = 1;
    } else if (te != NULL && contains_token(te, "chunked")) {
        s->mode = BODY_CHUNKED;
        r->chunked = 1;
    } else if (cl != NULL) {
        char *end;
        unsigned long long v = strtoull(cl, &end, 10);
        if (end == cl || *end != '\0') {
            seterr(r->error, sizeof(r->error), "bad Content-Length: %s", cl);
            goto Exit;
        }
        s->mode = BODY_LENGTH;
        s->remaining = v;
        s->done = v == 0;
    } else {
        s->mode = BODY_CLOSE;
    }
    const char *ct = e2e_response_header(r, "Content-Type");
    s->is_sse = ct != NULL && strncasecmp(ct, "text/event-stream", 17) == 0;
    rc = 0;
Exit:
    free(line);
    return rc;
}

/* Returns decoded body bytes (> 0), 0 at the end of the body, -1 on error/timeout (message in resp.error). */
static ssize_t body_read(e2e_stream_t *s, char *dst, size_t max, int64_t deadline_ms)
{
    char line[256];
    for (;;) {
        if (s->done)
            return 0;
        ssize_t n;
        switch (s->mode) {
        case BODY_LENGTH:
            n = conn_read(&s->conn, dst, s->remaining < max ? (size_t)s->remaining : max, deadline_ms);
            if (n <= 0)
                goto Fail;
            s->remaining -= (uint64_t)n;
            if (s->remaining == 0)
                s->done = 1;
            return n;
        case BODY_CLOSE:
            n = conn_read(&s->conn, dst, max, deadline_ms);
            if (n == 0)
                s->done = 1;
            if (n < 0)
                goto Fail;
            return n;
        case BODY_CHUNKED:
            if (s->chunk_state == 2) {
                if (conn_read_line(&s->conn, line, sizeof(line), deadline_ms, s->resp.error) != 0)
                    return -1;
                if (line[0] != '\0') {
                    seterr(s->resp.error, sizeof(s->resp.error), "chunk data not followed by CRLF");
                    return -1;
                }
                s->chunk_state = 0;
            }
            if (s->chunk_state == 0) {
                if (conn_read_line(&s->conn, line, sizeof(line), deadline_ms, s->resp.error) != 0)
                    return -1;
                char *end;
                unsigned long long size = strtoull(line, &end, 16);
                if (end == line || (*end != '\0' && *end != ';' && *end != ' ')) {
                    seterr(s->resp.error, sizeof(s->resp.error), "bad chunk size line: %.60s", line);
                    return -1;
                }
                if (size == 0) {
                    s->chunk_state = 3;
                } else {
                    s->remaining = size;
                    s->chunk_state = 1;
                }
            }
            while (s->chunk_state == 3) {
                if (conn_read_line(&s->conn, line, sizeof(line), deadline_ms, s->resp.error) != 0)
                    return -1;
                if (line[0] == '\0') {
                    s->done = 1;
                    return 0;
                }
            }
            n = conn_read(&s->conn, dst, s->remaining < max ? (size_t)s->remaining : max, deadline_ms);
            if (n <= 0)
                goto Fail;
            s->remaining -= (uint64_t)n;
            if (s->remaining == 0)
                s->chunk_state = 2;
            return n;
        default:
            s->done = 1;
            return 0;
        }
    Fail:
        if (n == 0)
            seterr(s->resp.error, sizeof(s->resp.error), "connection closed before the end of the body");
        else if (errno == ETIMEDOUT)
            seterr(s->resp.error, sizeof(s->resp.error), "timed out reading the body");
        else
            seterr(s->resp.error, sizeof(s->resp.error), "recv: %s", strerror(errno));
        return -1;
    }
}

static int read_body_all(e2e_stream_t *s, int64_t deadline_ms)
{
    e2e_response_t *r = &s->resp;
    size_t cap = 4096, len = 0;
    char *body = xmalloc(cap);
    for (;;) {
        if (cap - len < 4096) {
            cap *= 2;
            body = xrealloc(body, cap);
        }
        ssize_t n = body_read(s, body + len, cap - len - 1, deadline_ms);
        if (n < 0) {
            free(body);
            return -1;
        }
        if (n == 0)
            break;
        len += (size_t)n;
        if (len > E2E_MAX_BODY) {
            seterr(r->error, sizeof(r->error), "response body larger than %u bytes", E2E_MAX_BODY);
            free(body);
            return -1;
        }
    }
    body[len] = '\0';
    free(r->body);
    r->body = body;
    r->body_len = len;
    if (len > 0)
        r->json = json_loadb(body, len, JSON_DECODE_ANY, NULL);
    return 0;
}

static e2e_stream_t *stream_begin(unsigned short port, const char *method, const char *path, const char *const *headers,
                                  const char *body, int64_t deadline_ms, char *err)
{
    e2e_stream_t *s = xmalloc(sizeof(*s));
    memset(s, 0, sizeof(*s));
    s->conn.fd = -1;
    e2e_sse_parser_init(&s->parser);
    s->resp.body = xstrndup("", 0);
    if (conn_open(&s->conn, port, deadline_ms, err) != 0) {
        e2e_stream_close(s);
        return NULL;
    }
    size_t body_len = body != NULL ? strlen(body) : 0;
    size_t cap = 512 + strlen(method) + strlen(path) + body_len;
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++)
        cap += strlen(headers[i]) + 2;
    char *req = xmalloc(cap);
    int len = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: close\r\n", method, path, port);
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++)
        len += snprintf(req + len, cap - (size_t)len, "%s\r\n", headers[i]);
    if (body != NULL && !has_header(headers, "Content-Type"))
        len += snprintf(req + len, cap - (size_t)len, "Content-Type: application/json\r\n");
    if (body != NULL || (strcasecmp(method, "GET") != 0 && strcasecmp(method, "HEAD") != 0))
        len += snprintf(req + len, cap - (size_t)len, "Content-Length: %zu\r\n", body_len);
    len += snprintf(req + len, cap - (size_t)len, "\r\n");
    if (body_len > 0) {
        memcpy(req + len, body, body_len);
        len += (int)body_len;
    }
    int rc = conn_send_all(&s->conn, req, (size_t)len, deadline_ms, err);
    free(req);
    if (rc != 0 || read_head(s, method, deadline_ms) != 0) {
        if (rc == 0)
            seterr(err, 256, "%s", s->resp.error);
        e2e_stream_close(s);
        return NULL;
    }
    return s;
}

int e2e_http_request_until(unsigned short port, const char *method, const char *path, const char *const *headers, const char *body,
                           int64_t deadline_ms, e2e_response_t *out)
{
    memset(out, 0, sizeof(*out));
    e2e_stream_t *s = stream_begin(port, method, path, headers, body, deadline_ms, out->error);
    if (s == NULL) {
        out->body = xstrndup("", 0);
        return -1;
    }
    int rc = read_body_all(s, deadline_ms);
    *out = s->resp;
    memset(&s->resp, 0, sizeof(s->resp));
    e2e_stream_close(s);
    if (rc != 0) {
        out->status = -1;
        if (out->body == NULL)
            out->body = xstrndup("", 0);
        return -1;
    }
    return out->status;
}

int e2e_http_request(unsigned short port, const char *method, const char *path, const char *const *headers, const char *body,
                     e2e_response_t *out)
{
    return e2e_http_request_until(port, method, path, headers, body, e2e_now_ms() + E2E_REQUEST_MS, out);
}

int e2e_post_json(unsigned short port, const char *path, const char *const *headers, json_t *body, e2e_response_t *out)
{
    char *text = json_dumps(body, JSON_COMPACT);
    if (text == NULL)
        abort();
    int st = e2e_http_request(port, "POST", path, headers, text, out);
    free(text);
    return st;
}

/* ---- SSE ------------------------------------------------------------------------------------ */

void e2e_sse_parser_init(e2e_sse_parser_t *p)
{
    memset(p, 0, sizeof(*p));
    p->id = -1;
}

void e2e_sse_parser_dispose(e2e_sse_parser_t *p)
{
    free(p->line);
    free(p->data);
    e2e_sse_parser_init(p);
}

static int append_bounded(char **buf, size_t *len, size_t *cap, const char *src, size_t n, size_t max)
{
    if (*len + n + 1 > max)
        return -1;
    if (*len + n + 1 > *cap) {
        size_t c = *cap ? *cap : 256;
        while (c < *len + n + 1)
            c *= 2;
        *buf = xrealloc(*buf, c);
        *cap = c;
    }
    memcpy(*buf + *len, src, n);
    *len += n;
    (*buf)[*len] = '\0';
    return 0;
}

/* One line or event's data: bounded like a body. */
static int append(char **buf, size_t *len, size_t *cap, const char *src, size_t n)
{
    return append_bounded(buf, len, cap, src, n, E2E_MAX_BODY);
}

static void events_push(e2e_events_t *out, e2e_event_t *ev)
{
    if (out->n >= E2E_MAX_EVENTS) {
        out->truncated = 1;
        free(ev->data);
        json_decref(ev->json);
        return;
    }
    if (out->n == out->cap) {
        out->cap = out->cap ? out->cap * 2 : 32;
        out->v = xrealloc(out->v, out->cap * sizeof(*out->v));
    }
    out->v[out->n++] = *ev;
}

static int process_line(e2e_sse_parser_t *p, e2e_events_t *out)
{
    const char *line = p->line != NULL ? p->line : "";
    size_t len = p->line_len;
    if (len == 0) {
        if (p->has_data) {
            e2e_event_t ev = {.id = p->id, .bare = p->bare, .recv_ms = e2e_now_ms()};
            ev.data = xstrndup(p->data != NULL ? p->data : "", p->data_len);
            ev.json = json_loadb(ev.data, p->data_len, 0, NULL);
            json_t *t = json_object_get(ev.json, "type");
            ev.type = json_is_string(t) ? json_string_value(t) : "";
            events_push(out, &ev);
        }
        p->has_data = 0;
        p->bare = 0;
        p->data_len = 0;
        p->id = -1;
        return 0;
    }
    if (line[0] == ':')
        return 0;
    const char *value;
    size_t name_len, value_len;
    if (line[0] == '{' || line[0] == '[') {
        /* execd's framing: the JSON itself is the line. */
        if (p->has_data && append(&p->data, &p->data_len, &p->data_cap, "\n", 1) != 0)
            return -1;
        p->has_data = 1;
        p->bare = 1;
        return append(&p->data, &p->data_len, &p->data_cap, line, len);
    }
    const char *colon = memchr(line, ':', len);
    name_len = colon != NULL ? (size_t)(colon - line) : len;
    value = colon != NULL ? colon + 1 : line + len;
    if (colon != NULL && *value == ' ')
        value++;
    value_len = (size_t)(line + len - value);
    if (name_len == 4 && memcmp(line, "data", 4) == 0) {
        if (p->has_data && append(&p->data, &p->data_len, &p->data_cap, "\n", 1) != 0)
            return -1;
        p->has_data = 1;
        return append(&p->data, &p->data_len, &p->data_cap, value, value_len);
    }
    if (name_len == 2 && memcmp(line, "id", 2) == 0) {
        char tmp[32];
        snprintf(tmp, sizeof(tmp), "%.*s", (int)(value_len < 31 ? value_len : 31), value);
        char *end;
        long long id = strtoll(tmp, &end, 10);
        p->id = (end != tmp && *end == '\0') ? id : -2;
    }
    return 0;
}

int e2e_sse_parser_feed(e2e_sse_parser_t *p, const char *buf, size_t len, e2e_events_t *out)
{
    size_t i = 0;
    while (i < len) {
        if (p->skip_lf) {
            p->skip_lf = 0;
            if (buf[i] == '\n') {
                i++;
                continue;
            }
        }
        size_t j = i;
        while (j < len && buf[j] != '\n' && buf[j] != '\r')
            j++;
        if (j > i && append(&p->line, &p->line_len, &p->line_cap, buf + i, j - i) != 0)
            return -1;
        if (j == len)
            break;
        if (buf[j] == '\r')
            p->skip_lf = 1;
        if (process_line(p, out) != 0)
            return -1;
        p->line_len = 0;
        i = j + 1;
    }
    return 0;
}

void e2e_events_dispose(e2e_events_t *evs)
{
    for (size_t i = 0; i < evs->n; i++) {
        free(evs->v[i].data);
        json_decref(evs->v[i].json);
    }
    free(evs->v);
    memset(evs, 0, sizeof(*evs));
}

long e2e_events_find(const e2e_events_t *evs, const char *type, size_t from)
{
    for (size_t i = from; i < evs->n; i++)
        if (strcmp(evs->v[i].type, type) == 0)
            return (long)i;
    return -1;
}

size_t e2e_events_count(const e2e_events_t *evs, const char *type)
{
    size_t c = 0;
    for (size_t i = 0; i < evs->n; i++)
        c += strcmp(evs->v[i].type, type) == 0;
    return c;
}

char *e2e_events_text(const e2e_events_t *evs, const char *type)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;
    append(&buf, &len, &cap, "", 0);
    for (size_t i = 0; i < evs->n; i++) {
        if (strcmp(evs->v[i].type, type) != 0)
            continue;
        json_t *t = json_object_get(evs->v[i].json, "text");
        /* a whole run's text: the tests print up to a few hundred MiB */
        if (json_is_string(t) && append_bounded(&buf, &len, &cap, json_string_value(t), json_string_length(t), E2E_MAX_TEXT) != 0)
            break;
    }
    return buf;
}

const char *e2e_events_summary(const e2e_events_t *evs, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, size, "%zu events%s%s%s%s%s:", evs->n, evs->ended ? ", ended" : "",
                            evs->timed_out ? ", TIMED OUT" : "", evs->truncated ? ", truncated" : "",
                            evs->error[0] ? ", error: " : "", evs->error);
    for (size_t i = 0; i < evs->n && len + 1 < size; i++) {
        /* Long streams: show the head and the tail. */
        if (evs->n > 24 && i == 12) {
            len += (size_t)snprintf(buf + len, size - len, "\n  ... %zu more ...", evs->n - 24);
            i = evs->n - 12;
        }
        if (len + 1 >= size)
            break;
        len += (size_t)snprintf(buf + len, size - len, "\n  [%zu] id=%lld %.160s", i, evs->v[i].id, evs->v[i].data);
    }
    return buf;
}

/* ---- streams -------------------------------------------------------------------------------- */

e2e_stream_t *e2e_stream_open(unsigned short port, const char *method, const char *path, const char *const *headers,
                              const char *body, int64_t deadline_ms, char *err)
{
    e2e_stream_t *s = stream_begin(port, method, path, headers, body, deadline_ms, err);
    if (s == NULL)
        return NULL;
    if (!s->is_sse && read_body_all(s, deadline_ms) != 0) {
        seterr(err, 256, "%s", s->resp.error);
        e2e_stream_close(s);
        return NULL;
    }
    return s;
}

const e2e_response_t *e2e_stream_response(const e2e_stream_t *s)
{
    return &s->resp;
}

int e2e_stream_next(e2e_stream_t *s, int64_t deadline_ms, e2e_events_t *out)
{
    size_t before = out->n;
    int truncated_before = out->truncated;
    char buf[16384];
    for (;;) {
        if (!s->is_sse || s->done) {
            out->ended = 1;
            out->end_ms = e2e_now_ms();
            return 0;
        }
        ssize_t n = body_read(s, buf, sizeof(buf), deadline_ms);
        if (n < 0) {
            out->end_ms = e2e_now_ms();
            if (out->end_ms >= deadline_ms)
                out->timed_out = 1;
            else
                seterr(out->error, sizeof(out->error), "%s", s->resp.error);
            return -1;
        }
        if (n == 0)
            continue;
        if (e2e_sse_parser_feed(&s->parser, buf, (size_t)n, out) != 0) {
            seterr(out->error, sizeof(out->error), "an event exceeded %u bytes", E2E_MAX_BODY);
            return -1;
        }
        if (out->n > before || out->truncated != truncated_before)
            return (int)(out->n - before) + (out->truncated != truncated_before);
    }
}

int e2e_stream_collect(e2e_stream_t *s, int64_t deadline_ms, size_t max_events, e2e_events_t *out)
{
    if (max_events == 0 || max_events > E2E_MAX_EVENTS)
        max_events = E2E_MAX_EVENTS;
    size_t seen = 0;
    for (;;) {
        int r = e2e_stream_next(s, deadline_ms, out);
        if (r == 0)
            return 0;
        if (r < 0)
            return -1;
        for (; seen < out->n; seen++)
            if (strcmp(out->v[seen].type, "execution_complete") == 0) {
                int64_t grace = e2e_now_ms() + E2E_END_GRACE_MS;
                if (grace < deadline_ms)
                    deadline_ms = grace;
            }
        if (out->n >= max_events || out->truncated) {
            out->truncated = 1;
            out->end_ms = e2e_now_ms();
            return -1;
        }
    }
}

void e2e_stream_close(e2e_stream_t *s)
{
    if (s == NULL)
        return;
    conn_close(&s->conn);
    e2e_response_dispose(&s->resp);
    e2e_sse_parser_dispose(&s->parser);
    free(s);
}

/* ---- code interpreter helpers --------------------------------------------------------------- */

int e2e_context_create(unsigned short port, const char *const *headers, const char *language, char **id, e2e_response_t *resp)
{
    e2e_response_t local;
    e2e_response_t *r = resp != NULL ? resp : &local;
    json_t *body = json_object();
    json_object_set_new(body, "language", json_string(language));
    int st = e2e_post_json(port, "/code/context", headers, body, r);
    json_decref(body);
    if (id != NULL) {
        json_t *jid = json_object_get(r->json, "id");
        *id = st == 200 && json_is_string(jid) ? strdup(json_string_value(jid)) : NULL;
    }
    if (resp == NULL)
        e2e_response_dispose(&local);
    return st;
}

int e2e_context_delete(unsigned short port, const char *const *headers, const char *id)
{
    char path[512];
    snprintf(path, sizeof(path), "/code/contexts/%s", id);
    e2e_response_t r;
    int st = e2e_http_request(port, "DELETE", path, headers, NULL, &r);
    e2e_response_dispose(&r);
    return st;
}

json_t *e2e_code_body(const char *ctx_id, const char *language, const char *code)
{
    json_t *body = json_object();
    if (ctx_id != NULL || language != NULL) {
        json_t *ctx = json_object();
        if (ctx_id != NULL)
            json_object_set_new(ctx, "id", json_string(ctx_id));
        if (language != NULL)
            json_object_set_new(ctx, "language", json_string(language));
        json_object_set_new(body, "context", ctx);
    }
    json_object_set_new(body, "code", json_string(code));
    return body;
}

int e2e_run_code(unsigned short port, const char *const *headers, const char *ctx_id, const char *language, const char *code,
                 int timeout_ms, e2e_events_t *out, e2e_response_t *resp)
{
    memset(out, 0, sizeof(*out));
    if (resp != NULL)
        memset(resp, 0, sizeof(*resp));
    json_t *body = e2e_code_body(ctx_id, language, code);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (text == NULL)
        abort();
    int64_t deadline = e2e_now_ms() + timeout_ms;
    e2e_stream_t *s = e2e_stream_open(port, "POST", "/code", headers, text, deadline, out->error);
    free(text);
    if (s == NULL)
        return -1;
    int status = s->resp.status;
    if (s->is_sse)
        e2e_stream_collect(s, deadline, 0, out);
    if (resp != NULL) {
        *resp = s->resp;
        memset(&s->resp, 0, sizeof(s->resp));
    }
    e2e_stream_close(s);
    return status;
}
