/* kernelmgr/src/util.c: small helpers of every kernelmgr file: the monotonic clock, path joining. */
#include <string.h>
#include <time.h>
#include "wire/alloc.h"
#include "util_private.h"

uint64_t kmgr_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

char *kmgr_path_join(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    char *p = wire_malloc(la + lb + 2);

    memcpy(p, a, la);
    p[la] = '/';
    memcpy(p + la + 1, b, lb + 1);
    return p;
}
