/* bench/kgate_proc.c: starting and stopping the kgate process under test. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include "wire/alloc.h"
#include "common.h"
#include "http_client.h"
#include "kgate_client.h"
#include "stats.h"
#include "kgate_proc.h"

#define START_ATTEMPTS 3

/* Binding port 0 and closing is racy (another process may take the port before kgate binds it);
 * bench_kgate_proc_start retries when kgate exits during start-up saying the address is in use. */
static uint16_t pick_free_port(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    uint16_t port = 0;
    if (fd < 0)
        return 0;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 && getsockname(fd, (struct sockaddr *)&sin, &len) == 0)
        port = ntohs(sin.sin_port);
    close(fd);
    return port;
}

static char *path_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *s = wire_malloc(n);
    snprintf(s, n, "%s/%s", a, b);
    return s;
}

/* The last lines of kgate's log, for error messages. */
static void log_tail(const char *path, char *out, size_t size)
{
    out[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    off_t end = lseek(fd, 0, SEEK_END);
    off_t from = end > (off_t)size - 1 ? end - (off_t)size + 1 : 0;
    ssize_t n = pread(fd, out, size - 1, from);
    close(fd);
    out[n > 0 ? n : 0] = '\0';
}

static pid_t spawn(bench_kgate_proc_t *p, const char *binary, char *const *extra_args)
{
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", p->port);
    size_t nextra = 0;
    while (extra_args != NULL && extra_args[nextra] != NULL)
        ++nextra;
    char **argv = wire_calloc(nextra + 6, sizeof(*argv));
    argv[0] = (char *)binary;
    argv[1] = "--listen";
    argv[2] = listen;
    argv[3] = "--runtime-dir";
    argv[4] = p->runtime_dir;
    for (size_t i = 0; i < nextra; ++i)
        argv[5 + i] = extra_args[i];

    int logfd = open(p->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    pid_t pid = fork();
    if (pid == 0) {
        /* If the bench dies without stopping kgate, kgate (and through it its kernels) goes too. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int nullfd = open("/dev/null", O_RDONLY);
        if (nullfd >= 0)
            dup2(nullfd, STDIN_FILENO);
        if (logfd >= 0) {
            dup2(logfd, STDOUT_FILENO);
            dup2(logfd, STDERR_FILENO);
        }
        execv(binary, argv);
        fprintf(stderr, "exec %s: %s\n", binary, strerror(errno));
        _exit(127);
    }
    if (logfd >= 0)
        close(logfd);
    free(argv);
    return pid;
}

/* Polls until kgate answers any HTTP request; 1 when up, 0 when it exited, -1 on timeout. */
static int wait_listening(bench_kgate_proc_t *p, unsigned timeout_ms, int *status)
{
    double deadline = bench_now_ms() + timeout_ms;
    bench_http_t http;
    int up = -1;
    bench_http_init(&http, "127.0.0.1", p->port, 1000);
    while (bench_now_ms() < deadline) {
        if (waitpid(p->pid, status, WNOHANG) == p->pid) {
            p->pid = 0;
            up = 0;
            break;
        }
        int code;
        if (bench_kgate_probe(&http, "/healthz", &code) == 0) {
            up = 1;
            break;
        }
        bench_http_close(&http);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    bench_http_dispose(&http);
    return up;
}

int bench_kgate_proc_start(bench_kgate_proc_t *p, const char *binary, char *const *extra_args, unsigned timeout_ms)
{
    memset(p, 0, sizeof(*p));
    if (access(binary, X_OK) != 0) {
        bench_set_detail("%s: %s (build the kgate target, or pass --kgate PATH)", binary, strerror(errno));
        return BENCH_ESPAWN;
    }
    const char *tmp = getenv("TMPDIR");
    char *templ = path_join(tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp", "kgate-bench-XXXXXX");
    if (mkdtemp(templ) == NULL) {
        bench_set_detail("mkdtemp %s: %s", templ, strerror(errno));
        free(templ);
        return BENCH_ESPAWN;
    }
    p->tmpdir = templ;
    p->runtime_dir = path_join(templ, "runtime");
    p->log_path = path_join(templ, "kgate.log");
    if (mkdir(p->runtime_dir, 0700) != 0) {
        bench_set_detail("mkdir %s: %s", p->runtime_dir, strerror(errno));
        bench_kgate_proc_stop(p, 0);
        return BENCH_ESPAWN;
    }

    char tail[1024];
    int status = 0;
    for (int attempt = 0; attempt < START_ATTEMPTS; ++attempt) {
        if ((p->port = pick_free_port()) == 0 || (p->pid = spawn(p, binary, extra_args)) < 0) {
            p->pid = 0;
            bench_set_detail("cannot pick a port or fork: %s", strerror(errno));
            break;
        }
        int up = wait_listening(p, timeout_ms, &status);
        if (up == 1)
            return 0;
        log_tail(p->log_path, tail, sizeof(tail));
        if (up < 0) {
            bench_set_detail("kgate did not answer HTTP on 127.0.0.1:%u within %u ms; its log ends:\n%s", p->port, timeout_ms,
                             tail);
            break;
        }
        if (WIFSIGNALED(status))
            bench_set_detail("kgate was killed by signal %d during start-up; its log ends:\n%s", WTERMSIG(status), tail);
        else
            bench_set_detail("kgate exited with code %d during start-up; its log ends:\n%s", WEXITSTATUS(status), tail);
        /* Only a port taken in the meantime is worth another attempt. */
        if (strcasestr(tail, "in use") == NULL)
            break;
    }
    bench_kgate_proc_stop(p, 2000);
    return BENCH_ESPAWN;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)type, (void)ftw;
    remove(path);
    return 0;
}

int bench_kgate_proc_stop(bench_kgate_proc_t *p, unsigned grace_ms)
{
    int status = -1;
    if (p->pid > 0) {
        kill(p->pid, SIGTERM);
        double deadline = bench_now_ms() + grace_ms;
        pid_t r;
        while ((r = waitpid(p->pid, &status, WNOHANG)) == 0 && bench_now_ms() < deadline) {
            struct timespec ts = {0, 10 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (r == 0) {
            fprintf(stderr, "kgate (pid %d) still running %u ms after SIGTERM: sending SIGKILL\n", (int)p->pid, grace_ms);
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
        }
        p->pid = 0;
    }
    if (p->tmpdir != NULL && getenv("KGATE_BENCH_KEEP") == NULL)
        nftw(p->tmpdir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    free(p->tmpdir);
    free(p->runtime_dir);
    free(p->log_path);
    p->tmpdir = p->runtime_dir = p->log_path = NULL;
    return status;
}
