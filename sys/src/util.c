/* sys/src/util.c: small helpers below every kgate module: the monotonic clock, path joining, closing descriptors. */
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include "wire/alloc.h"
#include "ksys/util.h"

uint64_t ksys_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

char *ksys_path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *p = wire_malloc(la + lb + 2);

    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
    return p;
}

void ksys_close_from(int lowfd)
{
    struct rlimit rl;
    int max_fd = 1024;

    /* close_range is Linux 5.9; a loop where it is missing */
    if (close_range((unsigned)lowfd, ~0u, 0) == 0)
        return;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (1u << 20))
        max_fd = (int)rl.rlim_cur;
    for (int fd = lowfd; fd < max_fd; ++fd)
        close(fd);
}
