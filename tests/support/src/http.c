/* tests/support/src/http.c: a blocking HTTP/1.1 client of 127.0.0.1 with a deadline on every wait. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include "support/base.h"
#include "support/http.h"

#define READ_CHUNK (256 * 1024) /* the first buffer, and so the largest single recv until a head needs more */
#define MAX_LINE 4096           /* a chunk-size or trailer line */

__attribute__((format(printf, 2, 3))) static void set_error(ts_response_t *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->error, sizeof(r->error), fmt, ap);
    va_end(ap);
}

void ts_http_init(ts_http_t *c, unsigned short port, int keep_alive)
{
    memset(c, 0, sizeof(*c));
    c->port = port;
    c->keep_alive = keep_alive;
    c->fd = -1;
    c->capacity = READ_CHUNK;
    c->buf = ts_malloc(c->capacity);
}

void ts_http_close(ts_http_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->start = c->end = 0;
}

void ts_http_dispose(ts_http_t *c)
{
    ts_http_close(c);
    free(c->buf);
    c->buf = NULL;
}

/* What is left of `deadline_ms` for one poll: 0 once it has passed. */
static int remaining_ms(int64_t deadline_ms)
{
    int64_t r = deadline_ms - ts_now_ms();
    if (r <= 0)
        return 0;
    return r > 600000 ? 600000 : (int)r;
}

static int connect_now(ts_http_t *c, int64_t deadline_ms, ts_response_t *r)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        set_error(r, "socket: %s", strerror(errno));
        return TS_ECONNECT;
    }
    /* Backstop for any blocking call; the deadlines given to poll are the real bound. */
    int ms = remaining_ms(deadline_ms);
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    if (ms == 0)
        tv.tv_usec = 1000;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    /* Without it Nagle and delayed ACKs add ~40 ms to each small exchange (PLATFORM.md). */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = htons(c->port)};
    while (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
        if (errno == EINTR)
            continue;
        set_error(r, "connect 127.0.0.1:%u: %s", c->port, strerror(errno));
        close(fd);
        return TS_ECONNECT;
    }
    c->fd = fd;
    c->start = c->end = 0;
    if (c->connects++ > 0)
        ++c->reconnects;
    return 0;
}

/* The socket blocks, with SO_SNDTIMEO as a backstop: a request that fits in the socket's buffer costs one
 * send, as a timed client should; only a peer that stops reading leads to the deadline's poll. */
static int send_all(ts_http_t *c, const char *p, size_t len, int64_t deadline_ms, ts_response_t *r)
{
    while (len > 0) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n >= 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (errno == EINTR)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) {
            set_error(r, "send: %s", strerror(errno));
            return errno == EPIPE || errno == ECONNRESET ? TS_ECLOSED : TS_EIO;
        }
        int ms = remaining_ms(deadline_ms);
        if (ms == 0) {
            set_error(r, "timed out sending the request");
            return TS_ETIMEDOUT;
        }
        struct pollfd pfd = {c->fd, POLLOUT, 0};
        poll(&pfd, 1, ms);
    }
    return 0;
}

/* Receives more bytes after the unread ones, compacting the buffer or growing it up to `limit`
 * bytes. Returns how many arrived (> 0), 0 at EOF, or an error. Unread bytes survive a failure. */
static ssize_t fill(ts_http_t *c, size_t limit, int64_t deadline_ms, ts_response_t *r)
{
    if (c->start == c->end)
        c->start = c->end = 0;
    if (c->end == c->capacity) {
        if (c->start > 0) {
            memmove(c->buf, c->buf + c->start, c->end - c->start);
            c->end -= c->start;
            c->start = 0;
        } else {
            if (c->capacity >= limit) {
                set_error(r, "a line of the response exceeds %zu bytes", limit);
                return TS_ETOOBIG;
            }
            c->capacity *= 2;
            c->buf = ts_realloc(c->buf, c->capacity);
        }
    }
    for (;;) {
        int ms = remaining_ms(deadline_ms);
        if (ms == 0) {
            set_error(r, "no response from 127.0.0.1:%u in time", c->port);
            return TS_ETIMEDOUT;
        }
        struct pollfd pfd = {c->fd, POLLIN, 0};
        int pr = poll(&pfd, 1, ms);
        if (pr < 0 && errno != EINTR) {
            set_error(r, "poll: %s", strerror(errno));
            return TS_EIO;
        }
        if (pr <= 0)
            continue;
        ssize_t n = recv(c->fd, c->buf + c->end, c->capacity - c->end, 0);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            set_error(r, "recv: %s", strerror(errno));
            return errno == ECONNRESET ? TS_ECLOSED : TS_EIO;
        }
        c->end += (size_t)n;
        return n;
    }
}

/* 1 if `value` holds `token`, case-insensitively (a plain substring: good enough for kgate's heads). */
static int has_token(const char *value, const char *token)
{
    return value != NULL && strcasestr(value, token) != NULL;
}

/* Cuts the next line off `*p` (LF or CRLF ended; `end` bounds it) and NUL-terminates it in place. */
static char *next_line(char **p, char *end)
{
    char *line = *p, *nl = memchr(line, '\n', (size_t)(end - line)), *e = nl != NULL ? nl : end;
    *p = nl != NULL ? nl + 1 : end;
    while (e > line && e[-1] == '\r')
        --e;
    *e = '\0';
    return line;
}

/* Parses a head of `len` bytes at `text` (its lines, without the blank one); the headers point into it. */
static int parse_head(char *text, size_t len, const char *method, ts_response_t *r)
{
    char *p = text, *end = text + len, *status_line = next_line(&p, end);
    int minor, status;
    if (sscanf(status_line, "HTTP/1.%d %d", &minor, &status) != 2 || status < 100 || status > 999) {
        set_error(r, "bad status line: %.100s", status_line);
        return TS_EPROTO;
    }
    r->status = status;
    size_t lines = 1;
    for (const char *q = p; (q = memchr(q, '\n', (size_t)(end - q))) != NULL; ++q)
        ++lines;
    r->headers = ts_malloc(lines * sizeof(*r->headers));
    while (p < end) {
        char *line = next_line(&p, end), *colon = strchr(line, ':');
        if (colon == NULL || r->num_headers >= TS_MAX_HEADERS) {
            set_error(r, "bad or too many header lines: %.100s", line);
            return TS_EPROTO;
        }
        char *v = colon + 1, *e = v + strlen(v);
        *colon = '\0';
        while (*v == ' ' || *v == '\t')
            ++v;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        r->headers[r->num_headers++] = (ts_header_t){line, v};
    }

    const char *te = ts_response_header(r, "Transfer-Encoding"), *cl = ts_response_header(r, "Content-Length");
    const char *conn = ts_response_header(r, "Connection");
    r->keep_alive = conn != NULL && has_token(conn, "close") ? 0 : conn != NULL && has_token(conn, "keep-alive") ? 1 : minor >= 1;
    if (strcasecmp(method, "HEAD") == 0 || status == 204 || status == 304) {
        r->_private.framing = TS_BODY_NONE;
    } else if (has_token(te, "chunked")) {
        r->_private.framing = TS_BODY_CHUNKED;
        r->chunked = 1;
    } else if (cl != NULL) {
        char *cl_end;
        errno = 0;
        unsigned long long n = strtoull(cl, &cl_end, 10);
        if (errno != 0 || cl_end == cl || *cl_end != '\0') {
            set_error(r, "bad Content-Length: %s", cl);
            return TS_EPROTO;
        }
        r->_private.framing = TS_BODY_LENGTH;
        r->_private.remaining = n;
    } else {
        r->_private.framing = TS_BODY_CLOSE;
        r->keep_alive = 0;
    }
    r->_private.done = r->_private.framing == TS_BODY_NONE || (r->_private.framing == TS_BODY_LENGTH && r->_private.remaining == 0);
    return 0;
}

/* Reads response heads until a final one (interim 1xx heads are dropped). `*got_bytes` tells
 * whether the server sent anything at all, which decides whether a request may be retried. */
static int read_head(ts_http_t *c, const char *method, int64_t deadline_ms, ts_response_t *r, int *got_bytes)
{
    size_t line = 0; /* where the line being looked at starts, from c->start (fill() may move the bytes) */
    *got_bytes = c->end > c->start;
    for (;;) {
        char *base = c->buf + c->start, *nl = memchr(base + line, '\n', c->end - c->start - line);
        if (nl == NULL) {
            if (c->end - c->start > TS_MAX_HEAD) {
                set_error(r, "response head longer than %u bytes", TS_MAX_HEAD);
                return TS_ETOOBIG;
            }
            ssize_t n = fill(c, 2 * TS_MAX_HEAD, deadline_ms, r);
            if (n == 0) {
                set_error(r, "connection closed before a response");
                return TS_ECLOSED;
            }
            if (n < 0)
                return (int)n;
            *got_bytes = 1;
            continue;
        }
        size_t head_len = line, len = (size_t)(nl - (base + line));
        while (len > 0 && base[line + len - 1] == '\r')
            --len;
        line = (size_t)(nl + 1 - base);
        if (line > TS_MAX_HEAD) {
            set_error(r, "response head longer than %u bytes", TS_MAX_HEAD);
            return TS_ETOOBIG;
        }
        if (len > 0)
            continue;
        if (head_len == 0) {
            set_error(r, "an empty response head");
            return TS_EPROTO;
        }
        /* A final head replaces an interim one. */
        free(r->_private.head);
        free(r->headers);
        r->headers = NULL;
        r->num_headers = 0;
        r->_private.head = ts_strndup(base, head_len);
        c->start += line;
        line = 0;
        int err = parse_head(r->_private.head, head_len, method, r);
        if (err != 0 || r->status >= 200)
            return err;
    }
}

/* The request head, with `body` after it when given and Content-Length `clen` when `has_length`; its length in *len_out. */
static char *format_request(ts_http_t *c, const char *method, const char *path, const char *const *headers, const char *body,
                            int has_length, uint64_t clen, int *len_out)
{
    int has_type = 0;
    size_t blen = body != NULL ? strlen(body) : 0, cap = 512 + strlen(method) + strlen(path) + blen;
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++) {
        cap += strlen(headers[i]) + 2;
        has_type |= strncasecmp(headers[i], "Content-Type:", 13) == 0;
    }
    char *req = ts_malloc(cap);
    int len = snprintf(req, cap, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nConnection: %s\r\n", method, path, c->port,
                       c->keep_alive ? "keep-alive" : "close");
    for (size_t i = 0; headers != NULL && headers[i] != NULL; i++)
        len += snprintf(req + len, cap - (size_t)len, "%s\r\n", headers[i]);
    if (body != NULL && !has_type)
        len += snprintf(req + len, cap - (size_t)len, "Content-Type: application/json\r\n");
    if (has_length)
        len += snprintf(req + len, cap - (size_t)len, "Content-Length: %llu\r\n", (unsigned long long)clen);
    len += snprintf(req + len, cap - (size_t)len, "\r\n");
    memcpy(req + len, body != NULL ? body : "", blen);
    *len_out = len + (int)blen;
    return req;
}

int ts_http_start(ts_http_t *c, const char *method, const char *path, const char *const *headers, const char *body,
                  int64_t deadline_ms, ts_response_t *resp)
{
    memset(resp, 0, sizeof(*resp));
    int len, has_length = body != NULL || (strcasecmp(method, "GET") != 0 && strcasecmp(method, "HEAD") != 0);
    char *req = format_request(c, method, path, headers, body, has_length, body != NULL ? strlen(body) : 0, &len);

    int err = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
        int reused = c->fd >= 0, got_bytes = 0;
        if (!reused && (err = connect_now(c, deadline_ms, resp)) != 0)
            break;
        if ((err = send_all(c, req, (size_t)len, deadline_ms, resp)) == 0 &&
            (err = read_head(c, method, deadline_ms, resp, &got_bytes)) == 0)
            break;
        ts_http_close(c);
        /* A keep-alive connection the server has timed out fails like this; retry once, fresh. */
        if (!reused || got_bytes || (err != TS_ECLOSED && err != TS_EIO))
            break;
    }
    free(req);
    if (err == 0 && !c->keep_alive)
        resp->keep_alive = 0;
    return err;
}

int ts_http_start_streamed(ts_http_t *c, const char *method, const char *path, const char *const *headers, uint64_t content_length,
                           int64_t deadline_ms, ts_response_t *resp)
{
    memset(resp, 0, sizeof(*resp));
    int len, err = 0;
    char *req = format_request(c, method, path, headers, NULL, 1, content_length, &len);

    if ((c->fd >= 0 || (err = connect_now(c, deadline_ms, resp)) == 0) &&
        (err = send_all(c, req, (size_t)len, deadline_ms, resp)) != 0)
        ts_http_close(c);
    free(req);
    return err;
}

int ts_http_send_body(ts_http_t *c, const void *p, size_t len, int64_t deadline_ms, ts_response_t *resp)
{
    int err = c->fd >= 0 ? send_all(c, p, len, deadline_ms, resp) : TS_ECLOSED;
    if (err != 0)
        ts_http_close(c);
    return err;
}

int ts_http_finish_request(ts_http_t *c, const char *method, int64_t deadline_ms, ts_response_t *resp)
{
    int got_bytes = 0, err = c->fd >= 0 ? read_head(c, method, deadline_ms, resp, &got_bytes) : TS_ECLOSED;
    if (err != 0)
        ts_http_close(c);
    else if (!c->keep_alive)
        resp->keep_alive = 0;
    return err;
}

/* Reads one line of a chunked body (LF or CRLF) into `line`, without its end. */
static int read_line(ts_http_t *c, char *line, size_t size, int64_t deadline_ms, ts_response_t *r)
{
    for (;;) {
        char *p = c->buf + c->start, *nl = memchr(p, '\n', c->end - c->start);
        if (nl != NULL) {
            size_t n = (size_t)(nl - p);
            c->start += n + 1;
            while (n > 0 && p[n - 1] == '\r')
                --n;
            if (n >= size) {
                set_error(r, "chunked body: a line longer than %zu bytes", size);
                return TS_EPROTO;
            }
            memcpy(line, p, n);
            line[n] = '\0';
            return 0;
        }
        if (c->end - c->start >= size) {
            set_error(r, "chunked body: a line longer than %zu bytes", size);
            return TS_EPROTO;
        }
        ssize_t got = fill(c, SIZE_MAX, deadline_ms, r);
        if (got == 0) {
            set_error(r, "connection closed inside a chunked body");
            return TS_ECLOSED;
        }
        if (got < 0)
            return (int)got;
    }
}

static void finish(ts_http_t *c, ts_response_t *r)
{
    r->_private.done = 1;
    if (!r->keep_alive)
        ts_http_close(c);
}

/* The next step of a chunked body that is not data: a size line, the CRLF after data, or the trailers. */
static int chunk_framing(ts_http_t *c, ts_response_t *r, int64_t deadline_ms)
{
    char line[MAX_LINE];
    int err = read_line(c, line, sizeof(line), deadline_ms, r);
    if (err != 0)
        return err;
    switch (r->_private.chunk_state) {
    case 0: {
        char *end;
        errno = 0;
        unsigned long long size = strtoull(line, &end, 16);
        if (errno != 0 || end == line || (*end != '\0' && *end != ';' && *end != ' ')) {
            set_error(r, "bad chunk size line: %.60s", line);
            return TS_EPROTO;
        }
        r->_private.remaining = size;
        r->_private.chunk_state = size > 0 ? 1 : 3;
        return 0;
    }
    case 2:
        if (line[0] != '\0') {
            set_error(r, "chunk data not followed by CRLF");
            return TS_EPROTO;
        }
        r->_private.chunk_state = 0;
        return 0;
    default: /* trailers, up to the empty line */
        if (line[0] == '\0')
            finish(c, r);
        return 0;
    }
}

ssize_t ts_http_read_body(ts_http_t *c, ts_response_t *resp, char *out, size_t n, int64_t deadline_ms)
{
    int chunked = resp->_private.framing == TS_BODY_CHUNKED, until_close = resp->_private.framing == TS_BODY_CLOSE;
    ssize_t err;
    while (!resp->_private.done) {
        if (chunked && resp->_private.chunk_state != 1) {
            if ((err = chunk_framing(c, resp, deadline_ms)) != 0)
                goto Fail;
            continue;
        }
        if (c->start == c->end) {
            ssize_t got = fill(c, SIZE_MAX, deadline_ms, resp);
            if (got < 0) {
                err = got;
                goto Fail;
            }
            if (got == 0) {
                if (until_close) {
                    finish(c, resp);
                    break;
                }
                set_error(resp, "connection closed before the end of the body");
                err = TS_ECLOSED;
                goto Fail;
            }
        }
        size_t avail = c->end - c->start;
        if (avail > n)
            avail = n;
        if (!until_close && avail > resp->_private.remaining)
            avail = (size_t)resp->_private.remaining;
        memcpy(out, c->buf + c->start, avail);
        c->start += avail;
        if (!until_close && (resp->_private.remaining -= avail) == 0) {
            if (chunked)
                resp->_private.chunk_state = 2; /* its CRLF is read on the next call, not while the caller waits */
            else
                finish(c, resp);
        }
        return (ssize_t)avail;
    }
    return 0;
Fail:
    /* After a timeout nothing is lost (fill keeps what it has, lines are consumed whole): reading may resume. */
    if (err != TS_ETIMEDOUT)
        ts_http_close(c);
    return err;
}

int ts_http_discard_body(ts_http_t *c, ts_response_t *resp, int64_t deadline_ms)
{
    char tmp[16384];
    ssize_t n;
    while ((n = ts_http_read_body(c, resp, tmp, sizeof(tmp), deadline_ms)) > 0)
        ;
    return (int)n;
}

int ts_http_read_all(ts_http_t *c, ts_response_t *resp, size_t max, int64_t deadline_ms)
{
    size_t cap = 4096, len = 0;
    char *body = ts_malloc(cap);
    ssize_t n;
    for (;;) {
        if (cap - len < 4096)
            body = ts_realloc(body, cap *= 2);
        if ((n = ts_http_read_body(c, resp, body + len, cap - len - 1, deadline_ms)) <= 0)
            break;
        if ((len += (size_t)n) > max) {
            set_error(resp, "response body larger than %zu bytes", max);
            ts_http_close(c);
            n = TS_ETOOBIG;
            break;
        }
    }
    if (n < 0) {
        free(body);
        return (int)n;
    }
    body[len] = '\0';
    free(resp->body);
    json_decref(resp->json);
    resp->body = body;
    resp->body_len = len;
    resp->json = len > 0 ? json_loadb(body, len, JSON_DECODE_ANY, NULL) : NULL;
    return 0;
}

int ts_http_request_until(unsigned short port, const char *method, const char *path, const char *const *headers, const char *body,
                          int64_t deadline_ms, ts_response_t *out)
{
    ts_http_t c;
    ts_http_init(&c, port, 0);
    int err = ts_http_start(&c, method, path, headers, body, deadline_ms, out);
    if (err == 0 && (err = ts_http_read_all(&c, out, TS_MAX_BODY, deadline_ms)) != 0)
        out->status = err;
    ts_http_dispose(&c);
    if (out->body == NULL)
        out->body = ts_strndup("", 0);
    return err != 0 ? err : out->status;
}

int ts_http_request(unsigned short port, const char *method, const char *path, const char *const *headers, const char *body,
                    ts_response_t *out)
{
    return ts_http_request_until(port, method, path, headers, body, ts_now_ms() + TS_REQUEST_MS, out);
}

const char *ts_response_header(const ts_response_t *r, const char *name)
{
    for (size_t i = 0; i < r->num_headers; i++)
        if (strcasecmp(r->headers[i].name, name) == 0)
            return r->headers[i].value;
    return NULL;
}

void ts_response_dispose(ts_response_t *r)
{
    free(r->headers);
    free(r->_private.head);
    free(r->body);
    json_decref(r->json);
    r->headers = NULL;
    r->num_headers = 0;
    r->_private.head = NULL;
    r->body = NULL;
    r->body_len = 0;
    r->json = NULL;
}
