/* bench/http_client.h: a minimal blocking HTTP/1.1 client (keep-alive, TCP_NODELAY, any body framing). */
#ifndef BENCH_HTTP_CLIENT_H
#define BENCH_HTTP_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/**
 * One persistent connection to host:port, opened on first use and reopened when the server closes
 * it. Every read waits at most `timeout_ms`. Not thread-safe.
 */
typedef struct st_bench_http_t {
    char host[64];
    uint16_t port;
    unsigned timeout_ms;
    int fd; /* -1 while not connected */
    /** Connections opened after the first: a reopened connection inside a timed request costs a handshake. */
    size_t reconnects;
    size_t connects;
    char *buf;
    size_t start, end, capacity;
} bench_http_t;

/** How the body of the current response is delimited, and how far it has been read. */
typedef enum {
    BENCH_BODY_NONE,    /* no body (HEAD-like statuses) */
    BENCH_BODY_LENGTH,  /* Content-Length */
    BENCH_BODY_CHUNKED, /* Transfer-Encoding: chunked */
    BENCH_BODY_CLOSE,   /* until the server closes the connection */
} bench_body_framing_t;

/** The head of a response, and the state of reading its body. */
typedef struct st_bench_http_response_t {
    int status;
    int keep_alive; /* 0: the connection is closed once the body has been read */
    char content_type[128];
    bench_body_framing_t framing;
    /* LENGTH: bytes left; CHUNKED: bytes left in the current chunk. */
    uint64_t remaining;
    /* CHUNKED: 0 before a size line, 1 inside data, 2 after the last chunk, 3 before the CRLF after data. */
    int chunk_state;
    int done;
} bench_http_response_t;

/** Prepares a client for `host` (an IPv4/IPv6 literal or name) and `port`; nothing is connected yet. */
void bench_http_init(bench_http_t *c, const char *host, uint16_t port, unsigned timeout_ms);
/** Closes the connection and frees the buffer. */
void bench_http_dispose(bench_http_t *c);

/** Closes the connection (the next request opens a new one); used after an error mid-response. */
void bench_http_close(bench_http_t *c);

/** Opens the connection now if it is not open (TCP_NODELAY set). Returns 0, BENCH_ECONNECT. */
int bench_http_connect(bench_http_t *c);

/**
 * Writes one request (`body` may be NULL; it is sent as application/json) in a single write and
 * reads the response head into `resp`. When a reused connection turns out to be closed by the
 * server before any response byte, the request is sent once more on a new connection. Returns 0,
 * or BENCH_ECONNECT, BENCH_EIO, BENCH_ECLOSED, BENCH_ETIMEDOUT, BENCH_EPROTO, BENCH_ETOOBIG.
 */
int bench_http_request(bench_http_t *c, const char *method, const char *path, const char *body, bench_http_response_t *resp);

/**
 * Reads up to `n` bytes of the decoded body into `out`. Returns the count, 0 once the body is
 * complete (the connection is closed then unless it can be reused), or an error as above.
 */
ssize_t bench_http_read_body(bench_http_t *c, bench_http_response_t *resp, char *out, size_t n);

/** Reads and discards the rest of the body. Returns 0 or an error. */
int bench_http_discard_body(bench_http_t *c, bench_http_response_t *resp);

/**
 * Reads the whole body (at most `max` bytes, else BENCH_ETOOBIG) into a new NUL-terminated string
 * stored in `*out` (the caller frees it). Returns 0 or an error.
 */
int bench_http_read_all(bench_http_t *c, bench_http_response_t *resp, size_t max, char **out, size_t *len);

#endif
