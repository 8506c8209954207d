/* A process's descendants, read from /proc (the children of each one's main thread), and signalling them. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "procs/proctree.h"

pid_t gw_proctree_first_child(pid_t pid)
{
    char path[64], buf[64];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return (pid_t)atoi(buf);
}

size_t gw_proctree_descendants(pid_t pid, pid_t *out, size_t max)
{
    size_t n = 0, next = 0;
    pid_t cur = pid;

    for (;;) {
        char path[64], buf[8192], *p, *end;
        ssize_t len;
        int fd;
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)cur, (int)cur);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) != -1) {
            len = read(fd, buf, sizeof(buf) - 1);
            close(fd);
            buf[len > 0 ? len : 0] = '\0';
            for (p = buf; n < max; p = end) {
                long v = strtol(p, &end, 10);
                if (end == p)
                    break;
                out[n++] = (pid_t)v;
            }
        }
        if (next == n)
            return n;
        cur = out[next++];
    }
}

void gw_proctree_signal(pid_t root, int sig)
{
    pid_t *pids;
    size_t n;

    if (root <= 0)
        return;
    pids = wire_malloc(GW_PROCTREE_MAX * sizeof(pid_t));
    n = gw_proctree_descendants(root, pids, GW_PROCTREE_MAX);
    for (size_t i = 0; i != n; ++i)
        kill(pids[i], sig);
    free(pids);
}

/* Gone, or a zombie: dead already, its namespaces and mounts released; whichever init adopted it reaps it (in a container
 * whose pid 1 does not reap, never: kill(pid, 0) would go on succeeding). */
int gw_proctree_gone(pid_t pid)
{
    char path[64], buf[512], *paren;
    ssize_t n;
    int fd;

    if (kill(pid, 0) != 0 && errno == ESRCH)
        return 1;
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
        return errno == ENOENT;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    /* "pid (comm) S ...": comm may hold anything, ')' too: the state follows the last one */
    return (paren = strrchr(buf, ')')) != NULL && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}
