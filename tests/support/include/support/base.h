/* support/base.h: what every part of the test-support library shares: its errors, its clock, its allocator, and a few
 * helpers for the servers it starts (a free port, a token). */
#ifndef KGATE_SUPPORT_BASE_H
#define KGATE_SUPPORT_BASE_H

#include <stddef.h>
#include <stdint.h>

/*
 * tests/support drives a real kgate from the outside, for the end-to-end tests and for the
 * benchmark: process control, an HTTP/1.1 client, an SSE parser and kgate's API. It knows no
 * Criterion (the benchmark builds without the tests) and none of kgate's internals.
 */

/* XX(name, message): every error a function of this library returns (negative, one table, as in wire/). */
#define TS_ERRNO_MAP(XX)                                                                                                           \
    XX(TIMEDOUT, "timed out")                                                                                                      \
    XX(CONNECT, "cannot connect")                                                                                                  \
    XX(IO, "input/output error")                                                                                                   \
    XX(CLOSED, "connection closed by the peer")                                                                                    \
    XX(PROTO, "the peer broke its protocol")                                                                                       \
    XX(TOOBIG, "a response exceeds its size bound")                                                                                \
    XX(SPAWN, "cannot start kgate")                                                                                                \
    XX(INVAL, "invalid argument")

typedef enum {
    TS_OK = 0,
#define TS_XX_ENUM(name, msg) TS_E##name,
    TS__ERR_FIRST = -100,
    TS_ERRNO_MAP(TS_XX_ENUM)
#undef TS_XX_ENUM
} ts_err_t;

/** A static description of a TS_E* code ("unknown error" for anything else). */
const char *ts_strerror(int err);

/** Monotonic clock in milliseconds: every deadline of this library is on it. */
int64_t ts_now_ms(void);

/** Sleeps `ms` milliseconds, resuming after signals. */
void ts_sleep_ms(int ms);

/* Out of memory aborts (STYLE.md 6): these never return NULL. */
void *ts_malloc(size_t n);
void *ts_realloc(void *p, size_t n);
/** A NUL-terminated copy of the `n` bytes at `s`. */
char *ts_strndup(const char *s, size_t n);

/**
 * A TCP port of 127.0.0.1 that nobody listens on at this moment, in `*port`: 0, or TS_EIO. Racy by
 * nature (another process may take it before the server binds it): starters retry on another then.
 */
int ts_free_port(unsigned short *port);

/** `size - 1` (at most 32) random hex digits, NUL-terminated, into `out`: a server's token. */
void ts_random_hex(char *out, size_t size);

#endif
