/* support/http.h: a blocking HTTP/1.1 client of kgate on 127.0.0.1 (keep-alive or one request per connection). */
#ifndef KGATE_SUPPORT_HTTP_H
#define KGATE_SUPPORT_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

#define TS_REQUEST_MS 30000     /* ts_http_request's bound on one whole exchange (a kernel start fits in it) */
#define TS_MAX_BODY (64u << 20) /* largest body ts_http_request reads, and largest SSE event of a ts_stream_t */
#define TS_MAX_HEAD (64u << 10) /* largest response head */
#define TS_MAX_HEADERS 200      /* most header lines in a response head */

typedef struct st_ts_header_t {
    const char *name;
    const char *value; /* without surrounding blanks */
} ts_header_t;

typedef enum {
    TS_BODY_NONE,    /* no body: HEAD, 204, 304 */
    TS_BODY_LENGTH,  /* Content-Length */
    TS_BODY_CHUNKED, /* Transfer-Encoding: chunked */
    TS_BODY_CLOSE,   /* until the server closes the connection */
} ts_body_framing_t;

/** One response: its head, its body once read whole, and where reading the body stands. */
typedef struct st_ts_response_t {
    /** The final status (interim 1xx responses are skipped); 0 when no head arrived; after a failure
     *  while reading the body, the TS_E* code of that failure. */
    int status;
    ts_header_t *headers; /* they point into storage the response owns */
    size_t num_headers;
    int chunked;    /* Transfer-Encoding: chunked */
    int keep_alive; /* the connection may carry another request once the body is read */
    char *body;     /* ts_http_read_all: the body, NUL-terminated; ts_http_request sets it ("") even on failure */
    size_t body_len;
    json_t *json;    /* ts_http_read_all: the body parsed as any JSON value, or NULL */
    char error[256]; /* why the last call on this response failed */
    struct {
        ts_body_framing_t framing;
        uint64_t remaining; /* LENGTH: bytes left; CHUNKED: bytes left in the current chunk */
        int chunk_state;    /* CHUNKED: 0 before a size line, 1 in data, 2 before the CRLF after data, 3 trailers */
        int done;           /* the whole body has been read */
        char *head;         /* the head's text, which `headers` point into */
    } _private;
} ts_response_t;

/**
 * A client of 127.0.0.1:`port` holding at most one connection, opened on first use. With
 * `keep_alive` the requests say Connection: keep-alive and the connection is reused while the
 * server allows it; without, each request says Connection: close and gets its own connection.
 * Not thread-safe.
 */
typedef struct st_ts_http_t {
    unsigned short port;
    int keep_alive;
    int fd; /* -1 while not connected */
    /** Connections opened after the first: a reopened connection inside a timed request costs a handshake. */
    size_t reconnects;
    size_t connects;
    char *buf; /* received, not yet consumed: [start, end) */
    size_t start, end, capacity;
} ts_http_t;

/** Prepares a client; nothing is connected yet. Release with ts_http_dispose. */
void ts_http_init(ts_http_t *c, unsigned short port, int keep_alive);

/** Closes the connection and frees the buffer. */
void ts_http_dispose(ts_http_t *c);

/** Closes the connection (the next request opens a new one); early, it abandons the response being read. */
void ts_http_close(ts_http_t *c);

/**
 * Writes one request and reads the response head into `resp`, which is zeroed first and must be
 * released with ts_response_dispose whatever the result. `headers` are "Name: value" strings,
 * NULL-terminated, may be NULL. `body` (NUL-terminated, may be NULL) goes with Content-Length, and
 * with Content-Type: application/json unless `headers` name a Content-Type; methods other than
 * GET and HEAD send Content-Length: 0 when there is no body. When a reused keep-alive connection
 * turns out closed before any byte of the response, the request is sent once more on a new one.
 * Every wait ends at `deadline_ms` (ts_now_ms clock). Returns 0, or TS_ECONNECT, TS_EIO,
 * TS_ECLOSED, TS_ETIMEDOUT, TS_EPROTO or TS_ETOOBIG with resp->error set (the connection is then
 * closed).
 */
int ts_http_start(ts_http_t *c, const char *method, const char *path, const char *const *headers, const char *body,
                  int64_t deadline_ms, ts_response_t *resp);

/**
 * A request whose body is too large to hold, written by the caller: ts_http_start_streamed writes
 * the head with Content-Length: `content_length` (connecting first when needed), then the caller
 * writes exactly that many bytes with ts_http_send_body and reads the response head with
 * ts_http_finish_request (then the body as after ts_http_start). `resp` is zeroed by the first call
 * and must be released with ts_response_dispose whatever the result. Unlike ts_http_start there is
 * no second attempt on a reused connection found closed (part of the body may be gone). Each returns
 * 0, or an error as ts_http_start's with resp->error set (the connection is then closed); a server
 * that answers early and closes makes ts_http_send_body fail with TS_ECLOSED.
 */
int ts_http_start_streamed(ts_http_t *c, const char *method, const char *path, const char *const *headers, uint64_t content_length,
                           int64_t deadline_ms, ts_response_t *resp);
int ts_http_send_body(ts_http_t *c, const void *p, size_t len, int64_t deadline_ms, ts_response_t *resp);
int ts_http_finish_request(ts_http_t *c, const char *method, int64_t deadline_ms, ts_response_t *resp);

/**
 * Reads up to `n` bytes of the decoded body into `out`. Returns how many (> 0), 0 once the body is
 * complete (the connection is closed then unless it can carry another request), or an error as
 * above; after TS_ETIMEDOUT (only) the connection stays open and reading may resume with a later
 * deadline. It never waits for framing that follows the bytes it returns (a chunk's CRLF is read on
 * the next call), so that a caller timing an event stops the clock on the event's own bytes.
 */
ssize_t ts_http_read_body(ts_http_t *c, ts_response_t *resp, char *out, size_t n, int64_t deadline_ms);

/** Reads and drops the rest of the body. Returns 0 or an error. */
int ts_http_discard_body(ts_http_t *c, ts_response_t *resp, int64_t deadline_ms);

/**
 * Reads the rest of the body (at most `max` bytes, else TS_ETOOBIG) into resp->body and parses it
 * into resp->json. Returns 0 or an error.
 */
int ts_http_read_all(ts_http_t *c, ts_response_t *resp, size_t max, int64_t deadline_ms);

/**
 * One request on its own connection (Connection: close) with its whole body read (up to
 * TS_MAX_BODY), bounded by `deadline_ms`. Returns the status (> 0) or a negative TS_E* with
 * out->error set. Release `out` with ts_response_dispose in every case.
 */
int ts_http_request_until(unsigned short port, const char *method, const char *path, const char *const *headers, const char *body,
                          int64_t deadline_ms, ts_response_t *out);

/** ts_http_request_until bounded by TS_REQUEST_MS from now. */
int ts_http_request(unsigned short port, const char *method, const char *path, const char *const *headers, const char *body,
                    ts_response_t *out);

/** First value of header `name` (case-insensitive), or NULL. */
const char *ts_response_header(const ts_response_t *r, const char *name);

/** Frees what `r` holds and leaves it empty; a zeroed response is fine. */
void ts_response_dispose(ts_response_t *r);

#endif
