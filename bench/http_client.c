/* bench/http_client.c: a minimal blocking HTTP/1.1 client for the benchmark. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "common.h"
#include "http_client.h"

#define HEAD_MAX (64 * 1024)
#define READ_CHUNK (256 * 1024)

void bench_http_init(bench_http_t *c, const char *host, uint16_t port, unsigned timeout_ms)
{
    memset(c, 0, sizeof(*c));
    snprintf(c->host, sizeof(c->host), "%s", host);
    c->port = port;
    c->timeout_ms = timeout_ms;
    c->fd = -1;
    c->capacity = READ_CHUNK;
    c->buf = wire_malloc(c->capacity);
}

static void close_conn(bench_http_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->start = c->end = 0;
}

void bench_http_close(bench_http_t *c)
{
    close_conn(c);
}

void bench_http_dispose(bench_http_t *c)
{
    close_conn(c);
    free(c->buf);
    c->buf = NULL;
}

int bench_http_connect(bench_http_t *c)
{
    if (c->fd >= 0)
        return 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
    char port[8];
    snprintf(port, sizeof(port), "%u", c->port);
    int gai = getaddrinfo(c->host, port, &hints, &res);
    if (gai != 0) {
        bench_set_detail("%s: %s", c->host, gai_strerror(gai));
        return BENCH_ECONNECT;
    }
    int fd = -1, err = 0;
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0)
            continue;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
            break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        bench_set_detail("%s:%u: %s", c->host, c->port, strerror(err));
        return BENCH_ECONNECT;
    }
    /* Without it Nagle and delayed ACKs add ~40 ms to each small exchange (PLATFORM.md). */
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->fd = fd;
    c->start = c->end = 0;
    if (c->connects++ > 0)
        ++c->reconnects;
    return 0;
}

static int write_all(bench_http_t *c, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            bench_set_detail("send: %s", strerror(errno));
            return errno == EPIPE || errno == ECONNRESET ? BENCH_ECLOSED : BENCH_EIO;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads more bytes into the buffer, compacting or growing it up to `limit` bytes of unread data.
 * Returns the number of bytes read, 0 at EOF, or an error. */
static ssize_t fill(bench_http_t *c, size_t limit)
{
    if (c->start == c->end)
        c->start = c->end = 0;
    if (c->end == c->capacity) {
        if (c->start > 0) {
            memmove(c->buf, c->buf + c->start, c->end - c->start);
            c->end -= c->start;
            c->start = 0;
        } else {
            if (c->capacity >= limit)
                return BENCH_ETOOBIG;
            c->capacity *= 2;
            c->buf = wire_realloc(c->buf, c->capacity);
        }
    }
    for (;;) {
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)c->timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            bench_set_detail("poll: %s", strerror(errno));
            return BENCH_EIO;
        }
        if (r == 0) {
            bench_set_detail("no response from %s:%u within %u ms", c->host, c->port, c->timeout_ms);
            return BENCH_ETIMEDOUT;
        }
        ssize_t n = recv(c->fd, c->buf + c->end, c->capacity - c->end, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            bench_set_detail("recv: %s", strerror(errno));
            return errno == ECONNRESET ? BENCH_ECLOSED : BENCH_EIO;
        }
        c->end += (size_t)n;
        return n;
    }
}

/* Finds a header's value in `head` (NUL-terminated, lines end in CRLF); copies it into `out`. */
static int find_header(const char *head, const char *name, char *out, size_t outsize)
{
    size_t nlen = strlen(name);
    for (const char *line = strstr(head, "\r\n"); line != NULL; line = strstr(line, "\r\n")) {
        line += 2;
        if (strncasecmp(line, name, nlen) != 0 || line[nlen] != ':')
            continue;
        const char *v = line + nlen + 1, *e = strstr(v, "\r\n");
        while (*v == ' ' || *v == '\t')
            ++v;
        if (e == NULL)
            e = v + strlen(v);
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
            --e;
        snprintf(out, outsize, "%.*s", (int)(e - v), v);
        return 1;
    }
    return 0;
}

static int parse_head(const char *head, bench_http_response_t *resp)
{
    int minor;
    memset(resp, 0, sizeof(*resp));
    if (sscanf(head, "HTTP/1.%d %3d", &minor, &resp->status) != 2) {
        bench_set_detail("bad status line: %.60s", head);
        return BENCH_EPROTO;
    }
    char v[128];
    resp->keep_alive = minor >= 1;
    if (find_header(head, "connection", v, sizeof(v)))
        resp->keep_alive = strcasestr(v, "close") != NULL ? 0 : strcasestr(v, "keep-alive") != NULL ? 1 : resp->keep_alive;
    find_header(head, "content-type", resp->content_type, sizeof(resp->content_type));
    if (find_header(head, "transfer-encoding", v, sizeof(v)) && strcasestr(v, "chunked") != NULL) {
        resp->framing = BENCH_BODY_CHUNKED;
    } else if (find_header(head, "content-length", v, sizeof(v))) {
        char *end;
        errno = 0;
        unsigned long long len = strtoull(v, &end, 10);
        if (errno != 0 || end == v || *end != '\0') {
            bench_set_detail("bad Content-Length: %s", v);
            return BENCH_EPROTO;
        }
        resp->framing = BENCH_BODY_LENGTH;
        resp->remaining = len;
    } else if (resp->status == 204 || resp->status == 304 || resp->status < 200) {
        resp->framing = BENCH_BODY_NONE;
    } else {
        resp->framing = BENCH_BODY_CLOSE;
        resp->keep_alive = 0;
    }
    if (resp->framing == BENCH_BODY_NONE || (resp->framing == BENCH_BODY_LENGTH && resp->remaining == 0))
        resp->done = 1;
    return 0;
}

static int read_head(bench_http_t *c, bench_http_response_t *resp, int *got_bytes)
{
    /* How far into the unread bytes the terminator has been looked for: an offset from c->start,
     * because fill() may move the unread bytes. */
    size_t scanned = 0;
    *got_bytes = c->end > c->start;
    for (;;) {
        size_t avail = c->end - c->start;
        char *p = avail >= 4 ? memmem(c->buf + c->start + scanned, avail - scanned, "\r\n\r\n", 4) : NULL;
        if (p != NULL) {
            /* The NUL ends the head; find_header treats the end of the string as the last line end. */
            *p = '\0';
            const char *head = c->buf + c->start;
            c->start = (size_t)(p + 4 - c->buf);
            return parse_head(head, resp);
        }
        if (avail > HEAD_MAX) {
            bench_set_detail("response head longer than %d bytes", HEAD_MAX);
            return BENCH_ETOOBIG;
        }
        scanned = avail >= 3 ? avail - 3 : 0;
        ssize_t n = fill(c, HEAD_MAX * 2);
        if (n < 0)
            return (int)n;
        if (n == 0) {
            bench_set_detail("connection closed before a response");
            return BENCH_ECLOSED;
        }
        *got_bytes = 1;
    }
}

int bench_http_request(bench_http_t *c, const char *method, const char *path, const char *body, bench_http_response_t *resp)
{
    size_t blen = body != NULL ? strlen(body) : 0;
    size_t cap = strlen(method) + strlen(path) + sizeof(c->host) + blen + 256;
    char *req = wire_malloc(cap);
    int len = snprintf(req, cap,
                       "%s %s HTTP/1.1\r\nHost: %s:%u\r\nAccept: */*\r\nConnection: keep-alive\r\n%s"
                       "Content-Length: %zu\r\n\r\n",
                       method, path, c->host, c->port, body != NULL ? "Content-Type: application/json\r\n" : "", blen);
    if (blen > 0) {
        memcpy(req + len, body, blen);
        len += (int)blen;
    }
    int err = 0;
    for (int attempt = 0; attempt < 2; ++attempt) {
        int reused = c->fd >= 0, got_bytes = 0;
        if ((err = bench_http_connect(c)) != 0)
            break;
        if ((err = write_all(c, req, (size_t)len)) == 0 && (err = read_head(c, resp, &got_bytes)) == 0)
            break;
        close_conn(c);
        /* A keep-alive connection the server has timed out fails like this; retry once, fresh. */
        if (!reused || got_bytes || (err != BENCH_ECLOSED && err != BENCH_EIO))
            break;
    }
    free(req);
    return err;
}

/* Reads one CRLF-terminated line of a chunked body into `line` (without the CRLF). */
static int read_line(bench_http_t *c, char *line, size_t size)
{
    for (;;) {
        char *p = memmem(c->buf + c->start, c->end - c->start, "\r\n", 2);
        if (p != NULL) {
            size_t n = (size_t)(p - (c->buf + c->start));
            if (n >= size)
                return BENCH_EPROTO;
            memcpy(line, c->buf + c->start, n);
            line[n] = '\0';
            c->start += n + 2;
            return 0;
        }
        if (c->end - c->start > 4096)
            return BENCH_EPROTO;
        ssize_t r = fill(c, SIZE_MAX);
        if (r < 0)
            return (int)r;
        if (r == 0) {
            bench_set_detail("connection closed inside a chunked body");
            return BENCH_ECLOSED;
        }
    }
}

static void finish(bench_http_t *c, bench_http_response_t *resp)
{
    resp->done = 1;
    if (!resp->keep_alive)
        close_conn(c);
}

ssize_t bench_http_read_body(bench_http_t *c, bench_http_response_t *resp, char *out, size_t n)
{
    char line[4096];
    int err;
    while (!resp->done) {
        if (resp->framing == BENCH_BODY_CHUNKED && resp->chunk_state == 0) {
            if ((err = read_line(c, line, sizeof(line))) != 0)
                return err;
            char *end;
            errno = 0;
            unsigned long long size = strtoull(line, &end, 16);
            if (errno != 0 || end == line) {
                bench_set_detail("bad chunk size line: %.40s", line);
                return BENCH_EPROTO;
            }
            resp->remaining = size;
            resp->chunk_state = size > 0 ? 1 : 2;
            continue;
        }
        if (resp->framing == BENCH_BODY_CHUNKED && resp->chunk_state == 3) {
            if ((err = read_line(c, line, sizeof(line))) != 0)
                return err;
            if (line[0] != '\0') {
                bench_set_detail("chunk not followed by CRLF");
                return BENCH_EPROTO;
            }
            resp->chunk_state = 0;
            continue;
        }
        if (resp->framing == BENCH_BODY_CHUNKED && resp->chunk_state == 2) {
            do { /* trailers, up to the empty line */
                if ((err = read_line(c, line, sizeof(line))) != 0)
                    return err;
            } while (line[0] != '\0');
            finish(c, resp);
            break;
        }
        if (c->start == c->end) {
            ssize_t r = fill(c, SIZE_MAX);
            if (r < 0)
                return r;
            if (r == 0) {
                if (resp->framing == BENCH_BODY_CLOSE) {
                    finish(c, resp);
                    break;
                }
                bench_set_detail("connection closed inside the body");
                close_conn(c);
                return BENCH_ECLOSED;
            }
        }
        size_t avail = c->end - c->start;
        if (avail > n)
            avail = n;
        if (resp->framing != BENCH_BODY_CLOSE && avail > resp->remaining)
            avail = (size_t)resp->remaining;
        memcpy(out, c->buf + c->start, avail);
        c->start += avail;
        if (resp->framing != BENCH_BODY_CLOSE) {
            resp->remaining -= avail;
            if (resp->remaining == 0) {
                if (resp->framing == BENCH_BODY_LENGTH)
                    finish(c, resp);
                else
                    resp->chunk_state = 3; /* its CRLF is read on the next call, not while the caller waits */
            }
        }
        return (ssize_t)avail;
    }
    return 0;
}

int bench_http_discard_body(bench_http_t *c, bench_http_response_t *resp)
{
    char tmp[16384];
    ssize_t n;
    while ((n = bench_http_read_body(c, resp, tmp, sizeof(tmp))) > 0)
        ;
    return (int)n;
}

int bench_http_read_all(bench_http_t *c, bench_http_response_t *resp, size_t max, char **out, size_t *len)
{
    size_t cap = 4096, size = 0;
    char *body = wire_malloc(cap);
    ssize_t n;
    for (;;) {
        if (cap - size < 2048) {
            cap *= 2;
            body = wire_realloc(body, cap);
        }
        if ((n = bench_http_read_body(c, resp, body + size, cap - size - 1)) <= 0)
            break;
        size += (size_t)n;
        if (size > max) {
            n = BENCH_ETOOBIG;
            break;
        }
    }
    if (n < 0) {
        free(body);
        return (int)n;
    }
    body[size] = '\0';
    *out = body;
    if (len != NULL)
        *len = size;
    return 0;
}
