/* tests/support/src/gateway.c: starting kgate on a free loopback port, and stopping it and its kernels by PID. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"

#define START_ATTEMPTS 3
#define MAX_DESCENDANTS 512
#define START_LOG_TAIL 4096 /* bytes of kgate's log shown when it does not start */

__attribute__((format(printf, 2, 3))) static void set_error(ts_gateway_t *gw, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(gw->error, sizeof(gw->error), fmt, ap);
    va_end(ap);
}

const char *ts_kgate_path(const char *binary_dir)
{
    static char path[1024];
    const char *env = getenv("KGATE_E2E_KGATE");
    if (env != NULL && *env != '\0')
        snprintf(path, sizeof(path), "%s", env);
    else
        snprintf(path, sizeof(path), "%s/gateway/kgate", binary_dir);
    return path;
}

static int has_arg(const char *const *args, const char *name)
{
    size_t n = strlen(name);
    for (size_t i = 0; args != NULL && args[i] != NULL; i++)
        if (strncmp(args[i], name, n) == 0 && (args[i][n] == '\0' || args[i][n] == '='))
            return 1;
    return 0;
}

static int reap(ts_gateway_t *gw, int64_t deadline_ms)
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
            set_error(gw, "waitpid(%d): %s", (int)gw->pid, strerror(errno));
            gw->pid = 0;
            return TS_EIO;
        }
        if (ts_now_ms() >= deadline_ms)
            return TS_ETIMEDOUT;
        ts_sleep_ms(5);
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

/* The child's side of the fork: never returns. */
__attribute__((noreturn)) static void exec_kgate(const char *exe, const char **argv, const char *const *env, int logfd,
                                                 pid_t parent)
{
    ts_child_prepare(logfd, parent); /* the server goes with its starter (support/proc.h) */
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
    dprintf(2, "test support: execv(%s): %s\n", exe, strerror(errno));
    _exit(127);
}

/* Forks and execs kgate on gw->port, its output truncating the log. */
static int spawn(ts_gateway_t *gw, const ts_gateway_opts_t *opts)
{
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", gw->port);
    size_t nargs = 0;
    while (opts->args != NULL && opts->args[nargs] != NULL)
        nargs++;
    const char **argv = ts_malloc((nargs + 10) * sizeof(*argv));
    size_t argc = 0;
    argv[argc++] = opts->exe;
    argv[argc++] = "--listen";
    argv[argc++] = listen;
    if (!has_arg(opts->args, "--runtime-dir")) {
        argv[argc++] = "--runtime-dir";
        argv[argc++] = gw->runtime_dir;
    }
    if (!has_arg(opts->args, "--kernel-path")) {
        argv[argc++] = "--kernel-path";
        argv[argc++] = TS_KERNEL_PATH;
    }
    /* a warm pool's kernels would start beside every test's and bench's own: only those that ask get one */
    if (!has_arg(opts->args, "--pool")) {
        argv[argc++] = "--pool";
        argv[argc++] = "none";
    }
    for (size_t i = 0; i < nargs; i++)
        argv[argc++] = opts->args[i];
    argv[argc] = NULL;

    int logfd = open(gw->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0) {
        set_error(gw, "open(%s): %s", gw->log_path, strerror(errno));
        free(argv);
        return TS_ESPAWN;
    }
    fflush(NULL);
    pid_t parent = getpid(), pid = fork();
    if (pid == 0)
        exec_kgate(opts->exe, argv, opts->env, logfd, parent);
    int fork_errno = errno;
    close(logfd);
    free(argv);
    if (pid < 0) {
        set_error(gw, "fork: %s", strerror(fork_errno));
        return TS_ESPAWN;
    }
    gw->pid = pid;
    return 0;
}

/* 1 if the log's last bytes hold `needle` (case-insensitive). */
static int log_tail_has(const ts_gateway_t *gw, const char *needle)
{
    char tail[START_LOG_TAIL + 1];
    int fd = open(gw->log_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    off_t end = lseek(fd, 0, SEEK_END), from = end > START_LOG_TAIL ? end - START_LOG_TAIL : 0;
    ssize_t n = pread(fd, tail, START_LOG_TAIL, from);
    close(fd);
    tail[n > 0 ? n : 0] = '\0';
    return strcasestr(tail, needle) != NULL;
}

/* Polls /healthz until it answers 200 (0), kgate exits (TS_ECLOSED, reaped), or `startup_ms` pass (TS_ETIMEDOUT). */
static int wait_healthy(ts_gateway_t *gw, int startup_ms)
{
    int64_t deadline = ts_now_ms() + startup_ms;
    for (;;) {
        int status;
        if (waitpid(gw->pid, &status, WNOHANG) == gw->pid) {
            gw->pid = 0;
            gw->exit_status = status;
            return TS_ECLOSED;
        }
        int64_t now = ts_now_ms();
        if (now >= deadline)
            return TS_ETIMEDOUT;
        ts_response_t r;
        int st = ts_http_request_until(gw->port, "GET", "/healthz", NULL, NULL, now + 1000 < deadline ? now + 1000 : deadline, &r);
        ts_response_dispose(&r);
        if (st == 200)
            return 0;
        ts_sleep_ms(TS_HEALTH_POLL_MS);
    }
}

int ts_gateway_start(ts_gateway_t *gw, const ts_gateway_opts_t *opts)
{
    memset(gw, 0, sizeof(*gw));
    gw->exit_status = -1;
    gw->owner = 1;
    snprintf(gw->keep_env, sizeof(gw->keep_env), "%s", opts->keep_env != NULL ? opts->keep_env : "KGATE_E2E_KEEP");
    int startup_ms = opts->startup_ms > 0 ? opts->startup_ms : TS_STARTUP_MS;

    if (access(opts->exe, X_OK) != 0) {
        set_error(gw, "kgate executable %s: %s (not built yet?)", opts->exe, strerror(errno));
        return TS_ESPAWN;
    }
    const char *base = getenv("TMPDIR");
    snprintf(gw->tmpdir, sizeof(gw->tmpdir), "%s/kgate-%s-XXXXXX", base != NULL && *base != '\0' ? base : "/tmp",
             opts->label != NULL ? opts->label : "e2e");
    if (mkdtemp(gw->tmpdir) == NULL) {
        set_error(gw, "mkdtemp(%s): %s", gw->tmpdir, strerror(errno));
        gw->tmpdir[0] = '\0';
        return TS_ESPAWN;
    }
    snprintf(gw->log_path, sizeof(gw->log_path), "%s/kgate.log", gw->tmpdir);
    snprintf(gw->runtime_dir, sizeof(gw->runtime_dir), "%s/runtime", gw->tmpdir);
    if (mkdir(gw->runtime_dir, 0700) != 0) {
        set_error(gw, "mkdir(%s): %s", gw->runtime_dir, strerror(errno));
        ts_gateway_cleanup(gw);
        return TS_ESPAWN;
    }

    for (int attempt = 1;; ++attempt) {
        if (ts_free_port(&gw->port) != 0) {
            set_error(gw, "no free port: %s", strerror(errno));
            break;
        }
        if (spawn(gw, opts) != 0)
            break;
        int rc = wait_healthy(gw, startup_ms);
        if (rc == 0)
            return 0;
        if (rc == TS_ETIMEDOUT) {
            ts_gateway_dump_log(gw, START_LOG_TAIL);
            ts_gateway_stop(gw, NULL);
            set_error(gw, "kgate did not answer GET /healthz with 200 within %d ms", startup_ms);
            return TS_ESPAWN;
        }
        char st[128];
        describe_status(gw->exit_status, st, sizeof(st));
        set_error(gw, "kgate exited (%s) before answering /healthz; log: %s", st, gw->log_path);
        /* Only a port taken in the meantime is worth another attempt. */
        if (attempt == START_ATTEMPTS || !log_tail_has(gw, "in use")) {
            ts_gateway_dump_log(gw, START_LOG_TAIL);
            break;
        }
    }
    ts_gateway_cleanup(gw);
    return TS_ESPAWN;
}

int ts_gateway_signal(ts_gateway_t *gw, int sig)
{
    if (!gw->owner || gw->pid <= 0)
        return TS_EINVAL;
    return kill(gw->pid, sig) == 0 ? 0 : TS_EIO;
}

int ts_gateway_wait(ts_gateway_t *gw, int64_t deadline_ms)
{
    if (!gw->owner)
        return TS_EINVAL;
    if (gw->pid <= 0)
        return 0;
    return reap(gw, deadline_ms) == 0 ? 0 : TS_ETIMEDOUT;
}

static int rm_entry(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    (void)sb;
    (void)type;
    (void)ftw;
    remove(path);
    return 0;
}

void ts_remove_tree(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void ts_gateway_cleanup(ts_gateway_t *gw)
{
    if (!gw->owner || gw->tmpdir[0] == '\0')
        return;
    const char *keep = gw->keep_env[0] != '\0' ? getenv(gw->keep_env) : NULL;
    if (keep != NULL && *keep != '\0' && strcmp(keep, "0") != 0)
        fprintf(stderr, "kept %s (%s is set)\n", gw->tmpdir, gw->keep_env);
    else
        ts_remove_tree(gw->tmpdir);
    gw->tmpdir[0] = '\0';
}

int ts_gateway_stop(ts_gateway_t *gw, size_t *survivors)
{
    int rc = ts_gateway_stop_keep(gw, survivors);
    ts_gateway_cleanup(gw);
    return rc;
}

int ts_gateway_stop_keep(ts_gateway_t *gw, size_t *survivors)
{
    if (survivors != NULL)
        *survivors = 0;
    if (!gw->owner || gw->pid <= 0)
        return 0;
    ts_proc_t procs[MAX_DESCENDANTS];
    size_t nprocs = ts_descendants(gw->pid, procs, MAX_DESCENDANTS);
    int rc = 0;
    kill(gw->pid, SIGTERM);
    if (reap(gw, ts_now_ms() + TS_STOP_GRACE_MS) != 0) {
        if (gw->pid > 0) {
            set_error(gw, "kgate (pid %d) did not exit within %d ms of SIGTERM; sent SIGKILL", (int)gw->pid, TS_STOP_GRACE_MS);
            kill(gw->pid, SIGKILL);
            reap(gw, ts_now_ms() + 5000);
        }
        rc = TS_ETIMEDOUT;
    }
    /* Processes that kgate was stopping may need a moment to vanish after it exits; zombies do not count. */
    int64_t deadline = ts_now_ms() + 1000;
    size_t alive;
    for (;;) {
        alive = 0;
        for (size_t i = 0; i < nprocs; i++)
            alive += (size_t)ts_proc_alive(&procs[i]);
        if (alive == 0 || ts_now_ms() >= deadline)
            break;
        ts_sleep_ms(20);
    }
    /* Report them, then do not leave them running on the machine. */
    for (size_t i = 0; alive != 0 && i < nprocs; i++)
        if (ts_proc_alive(&procs[i])) {
            fprintf(stderr, "process %d (a descendant of kgate) survived kgate; killing it\n", (int)procs[i].pid);
            kill(procs[i].pid, SIGKILL);
        }
    if (survivors != NULL)
        *survivors = alive;
    return rc;
}

void ts_gateway_dump_log(const ts_gateway_t *gw, size_t max)
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

void ts_gateway_format(const ts_gateway_t *gw, char *buf, size_t size)
{
    snprintf(buf, size, "%d %u %s %s", (int)gw->pid, gw->port, gw->log_path, gw->runtime_dir);
}

int ts_gateway_parse(ts_gateway_t *gw, const char *s)
{
    memset(gw, 0, sizeof(*gw));
    gw->exit_status = -1;
    int pid;
    unsigned port;
    if (s == NULL || sscanf(s, "%d %u %299s %299s", &pid, &port, gw->log_path, gw->runtime_dir) != 4 || port == 0 || port > 65535)
        return TS_EINVAL;
    gw->pid = pid;
    gw->port = (unsigned short)port;
    gw->owner = 0;
    return 0;
}
