/* kernels/bash/src/proc.c: locating bash, resetting signals in children, running short helpers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "proc.h"

const char *bk_bash_path(void)
{
    static char found[PATH_MAX];
    const char *path = getenv("PATH");

    if (found[0] != '\0')
        return found;
    while (path != NULL && *path != '\0') {
        const char *end = strchrnul(path, ':');
        int n = snprintf(found, sizeof(found), "%.*s/bash", (int)(end - path), path);
        if (n > 0 && (size_t)n < sizeof(found) && found[0] == '/' && access(found, X_OK) == 0)
            return found;
        path = *end == ':' ? end + 1 : end;
    }
    snprintf(found, sizeof(found), "/bin/bash");
    return found;
}

void bk_child_reset_signals(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGCHLD, SIGPIPE, SIGQUIT};
    sigset_t none;

    for (size_t i = 0; i != sizeof(sigs) / sizeof(sigs[0]); ++i)
        signal(sigs[i], SIG_DFL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

void bk_child_die_with_parent(pid_t parent)
{
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(127);
}

long long bk_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int bk_run_capture(char *const argv[], int timeout_ms, size_t max_out, char **out, int *wstatus)
{
    int fds[2], devnull, ret = 0;
    pid_t pid;
    char *buf;
    size_t len = 0;
    long long deadline = bk_now_ms() + timeout_ms;
    pid_t parent = getpid();

    if (pipe2(fds, O_CLOEXEC) != 0)
        return -errno;
    if ((devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        ret = -errno;
        close(fds[0]);
        close(fds[1]);
        return ret;
    }
    if ((pid = fork()) < 0) {
        ret = -errno;
        close(fds[0]);
        close(fds[1]);
        close(devnull);
        return ret;
    }
    if (pid == 0) {
        bk_child_reset_signals();
        bk_child_die_with_parent(parent);
        dup2(devnull, 0);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    close(devnull);

    buf = wire_malloc(max_out + 1);
    for (;;) {
        long long left = deadline - bk_now_ms();
        struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
        char chunk[4096];
        ssize_t n;

        if (left <= 0) {
            ret = -ETIMEDOUT;
            break;
        }
        if (poll(&pfd, 1, (int)left) < 0) {
            if (errno == EINTR)
                continue;
            ret = -errno;
            break;
        }
        if (pfd.revents == 0)
            continue;
        if ((n = read(fds[0], chunk, sizeof(chunk))) < 0) {
            if (errno == EINTR)
                continue;
            ret = -errno;
            break;
        }
        if (n == 0)
            break;
        size_t keep = max_out - len < (size_t)n ? max_out - len : (size_t)n;
        memcpy(buf + len, chunk, keep);
        len += keep;
    }
    /* Left before EOF (too slow, or its output unreadable): the child cannot be waited for as it is. */
    if (ret != 0)
        kill(pid, SIGKILL);
    close(fds[0]);
    while (waitpid(pid, wstatus, 0) < 0 && errno == EINTR)
        ;
    if (ret != 0 && ret != -ETIMEDOUT) {
        free(buf);
        return ret;
    }
    buf[len] = '\0';
    *out = buf;
    return ret;
}
