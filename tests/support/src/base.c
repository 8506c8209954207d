/* tests/support/src/base.c: the library's error strings, clock and allocator. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "support/base.h"

const char *ts_strerror(int err)
{
    switch (err) {
#define TS_XX_STR(name, msg)                                                                                                       \
    case TS_E##name:                                                                                                               \
        return msg;
        TS_ERRNO_MAP(TS_XX_STR)
#undef TS_XX_STR
    default:
        return "unknown error";
    }
}

int64_t ts_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ts_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void *ts_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        abort();
    return p;
}

void *ts_realloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (p == NULL)
        abort();
    return p;
}

char *ts_strndup(const char *s, size_t n)
{
    char *d = ts_malloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}
