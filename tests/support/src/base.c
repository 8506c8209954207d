/* tests/support/src/base.c: the library's error strings, clock and allocator; a free port, a token. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
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

int ts_free_port(unsigned short *port)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t len = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = TS_EIO;

    if (fd < 0)
        return TS_EIO;
    if (bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 && getsockname(fd, (struct sockaddr *)&sin, &len) == 0) {
        *port = ntohs(sin.sin_port);
        rc = 0;
    }
    close(fd);
    return rc;
}

void ts_random_hex(char *out, size_t size)
{
    unsigned char raw[16];
    size_t n = 0;

    if (size == 0)
        return;
    /* a token only keeps other local users out of a test's server: rand() will do if getrandom cannot */
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        for (size_t i = 0; i != sizeof(raw); ++i)
            raw[i] = (unsigned char)(rand() ^ getpid());
    for (size_t i = 0; i != sizeof(raw) && n + 2 < size; ++i)
        n += (size_t)snprintf(out + n, size - n, "%02x", raw[i]);
    out[n] = '\0';
}
