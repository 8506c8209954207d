/* A small HTTP and WebSocket server for the proxy's tests: blocking sockets, one thread per connection (see upstream.h). */
#include "upstream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#define MAX_CONNS 400
#define MAX_HEAD (64u << 10)
#define BLOCK (64u << 10)
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

typedef struct st_conn_t {
    upstream_t *server;
    int fd;
    pthread_t thread;
} conn_t;

struct st_upstream_t {
    int listen_fd;
    unsigned short port;
    pthread_t accept_thread;
    atomic_int stopping;
    atomic_uint requests;
    atomic_uint open;
    atomic_uint stream_releases; /* upstream_release_stream calls not yet taken by a /stream answer */
    pthread_mutex_t lock;
    conn_t conns[MAX_CONNS];
    size_t num_conns;
};

void upstream_release_stream(upstream_t *u)
{
    atomic_fetch_add(&u->stream_releases, 1);
}

/* Takes one release for a /stream answer: 1, or 0 once the server stops or after UPSTREAM_STREAM_HOLD_MS. */
static int take_stream_release(upstream_t *u)
{
    for (int waited = 0; waited < UPSTREAM_STREAM_HOLD_MS && !atomic_load(&u->stopping); waited += 10) {
        unsigned n = atomic_load(&u->stream_releases);
        if (n != 0 && atomic_compare_exchange_weak(&u->stream_releases, &n, n - 1))
            return 1;
        usleep(10000);
    }
    return 0;
}

unsigned upstream_open(const upstream_t *u)
{
    return atomic_load(&((upstream_t *)u)->open);
}

unsigned char upstream_pattern_byte(size_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13);
}

static int send_all(int fd, const void *p, size_t len)
{
    while (len != 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p = (const char *)p + n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads at least one more byte into buf (of `cap`) at *len, waiting in slices so that a stop is noticed. 0, or -1 on EOF. */
static int read_more(conn_t *c, uint8_t *buf, size_t cap, size_t *len)
{
    for (;;) {
        struct pollfd pfd = {c->fd, POLLIN, 0};
        ssize_t n;
        if (atomic_load(&c->server->stopping) || *len == cap)
            return -1;
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        if ((n = read(c->fd, buf + *len, cap - *len)) <= 0)
            return -1;
        *len += (size_t)n;
        return 0;
    }
}

/* Value of header `name` in the head (case-insensitive) into out; NULL when absent. */
static const char *header(const char *head, const char *name, char *out, size_t size)
{
    size_t n = strlen(name);
    for (const char *line = strstr(head, "\r\n"); line != NULL; line = strstr(line + 2, "\r\n")) {
        const char *p = line + 2, *eol = strstr(p, "\r\n");
        if (eol == NULL || eol == p)
            break;
        if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
            for (p += n + 1; *p == ' '; ++p)
                ;
            snprintf(out, size, "%.*s", (int)(eol - p), p);
            return out;
        }
    }
    return NULL;
}

static void serve_status(conn_t *c, int status)
{
    char out[512];
    int has_body = status != 204 && status != 304;
    int n =
        snprintf(out, sizeof(out), "HTTP/1.1 %d Custom\r\nX-Upstream-Status: %d\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
                 status, status, has_body ? 11 : 0);
    if (has_body)
        n += snprintf(out + n, sizeof(out) - (size_t)n, "status %03d\n", status);
    send_all(c->fd, out, (size_t)n);
}

static void serve_echo(conn_t *c, int status, const uint8_t *request, size_t len)
{
    char out[256];
    int n = snprintf(
        out, sizeof(out),
        "HTTP/1.1 %d %s\r\nContent-Type: text/plain\r\nX-Upstream: echo\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
        status, status == 200 ? "OK" : "Not Found", len);
    if (send_all(c->fd, out, (size_t)n) == 0)
        send_all(c->fd, request, len);
}

static void serve_big(conn_t *c, size_t total, int chunked)
{
    static __thread uint8_t block[BLOCK];
    char head[256], size_line[32];
    size_t off;

    snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n%s%zu\r\nConnection: close\r\n\r\n",
             chunked ? "Transfer-Encoding: chunked\r\nX-Total: " : "Content-Length: ", total);
    if (send_all(c->fd, head, strlen(head)) != 0)
        return;
    for (off = 0; off < total && !atomic_load(&c->server->stopping); off += BLOCK) {
        size_t n = total - off < BLOCK ? total - off : BLOCK;
        for (size_t i = 0; i != n; ++i)
            block[i] = upstream_pattern_byte(off + i);
        if (chunked && send_all(c->fd, size_line, (size_t)snprintf(size_line, sizeof(size_line), "%zx\r\n", n)) != 0)
            return;
        if (send_all(c->fd, block, n) != 0 || (chunked && send_all(c->fd, "\r\n", 2) != 0))
            return;
    }
    if (chunked)
        send_all(c->fd, "0\r\n\r\n", 5);
}

static void pause_ms(conn_t *c, int ms)
{
    for (int waited = 0; waited < ms && !atomic_load(&c->server->stopping); waited += 50)
        usleep(50000);
}

static void serve_stream(conn_t *c)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
                               "Connection: close\r\n\r\n";
    static const char first[] = "d\r\ndata: first\n\n\r\n", last[] = "c\r\ndata: last\n\n\r\n0\r\n\r\n";

    if (send_all(c->fd, head, sizeof(head) - 1) != 0 || send_all(c->fd, first, sizeof(first) - 1) != 0)
        return;
    if (take_stream_release(c->server))
        send_all(c->fd, last, sizeof(last) - 1);
}

/* Waits up to `ms` for the peer to close; 1 when it has (or the server stops), 0 after `ms`. Discards what it sends. */
static int peer_closed_within(conn_t *c, int ms)
{
    struct pollfd pfd = {c->fd, POLLIN, 0};
    uint8_t sink[4096];

    for (int waited = 0; waited < ms; waited += 100) {
        if (atomic_load(&c->server->stopping))
            return 1;
        if (poll(&pfd, 1, 100) == 1 && read(c->fd, sink, sizeof(sink)) <= 0)
            return 1;
    }
    return 0;
}

static void serve_trickle(conn_t *c)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nX-Slow: ";

    for (size_t i = 0;; ++i) {
        char byte = i < sizeof(head) - 1 ? head[i] : 'x';
        if (send_all(c->fd, &byte, 1) != 0 || peer_closed_within(c, 1000))
            return;
    }
}

/* An answer whose head never ends: one header line, 64 KiB at a time, until the peer closes or the server stops. */
static void serve_endless_head(conn_t *c)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nX-Endless: ";
    char *block = malloc(1 << 16);
    int ok = send_all(c->fd, head, sizeof(head) - 1) == 0;

    memset(block, 'h', 1 << 16);
    while (ok && !atomic_load(&c->server->stopping))
        ok = send_all(c->fd, block, 1 << 16) == 0;
    free(block);
}

static void serve_cut(conn_t *c, size_t n, int short_length)
{
    char out[256], *body = malloc(n + 1);
    int len = short_length ? snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", 2 * n)
                           : snprintf(out, sizeof(out), "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%zx\r\n", n);

    memset(body, 'c', n);
    if (send_all(c->fd, out, (size_t)len) == 0 && send_all(c->fd, body, n) == 0 && !short_length)
        send_all(c->fd, "\r\n", 2);
    free(body);
    /* a moment between the last byte and the close, so that they reach the proxy in two reads */
    pause_ms(c, 200);
}

static void serve_silent(conn_t *c)
{
    uint8_t sink[4096];
    size_t len = 0;

    while (read_more(c, sink, sizeof(sink), &len) == 0)
        len = 0;
}

/* ---- WebSocket echo ------------------------------------------------------------------------------- */

static int ws_send(conn_t *c, int opcode, const void *data, size_t len)
{
    uint8_t head[10];
    size_t h = 0;

    head[h++] = (uint8_t)(0x80 | opcode);
    if (len < 126) {
        head[h++] = (uint8_t)len;
    } else if (len < 65536) {
        head[h++] = 126;
        head[h++] = (uint8_t)(len >> 8);
        head[h++] = (uint8_t)len;
    } else {
        head[h++] = 127;
        for (int i = 7; i >= 0; --i)
            head[h++] = (uint8_t)((uint64_t)len >> (8 * i));
    }
    return send_all(c->fd, head, h) == 0 && send_all(c->fd, data, len) == 0 ? 0 : -1;
}

static void serve_ws(conn_t *c, const char *head, uint8_t *buf, size_t cap, size_t len)
{
    char key[128], protocols[256], src[256], accept[64], out[512];
    unsigned char digest[SHA_DIGEST_LENGTH];
    int chat, sent_close = 0;

    if (header(head, "sec-websocket-key", key, sizeof(key)) == NULL) {
        serve_status(c, 400);
        return;
    }
    chat = header(head, "sec-websocket-protocol", protocols, sizeof(protocols)) != NULL && strstr(protocols, "chat") != NULL;
    snprintf(src, sizeof(src), "%s%s", key, WS_GUID);
    SHA1((const unsigned char *)src, strlen(src), digest);
    EVP_EncodeBlock((unsigned char *)accept, digest, sizeof(digest));
    snprintf(out, sizeof(out),
             "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n",
             accept, chat ? "Sec-WebSocket-Protocol: chat\r\n" : "");
    if (send_all(c->fd, out, strlen(out)) != 0)
        return;
    for (;;) {
        size_t h = 2, plen;
        int opcode;
        while (len < 2 || len < h + 4)
            if (read_more(c, buf, cap, &len) != 0)
                return;
        opcode = buf[0] & 0x0f;
        plen = buf[1] & 0x7f;
        if (plen >= 126) {
            h += plen == 126 ? 2 : 8;
            while (len < h)
                if (read_more(c, buf, cap, &len) != 0)
                    return;
            plen = 0;
            for (size_t i = 2; i != h; ++i)
                plen = plen << 8 | buf[i];
        }
        while (len < h + 4 + plen) /* client frames are masked */
            if (read_more(c, buf, cap, &len) != 0)
                return;
        for (size_t i = 0; i != plen; ++i)
            buf[h + 4 + i] ^= buf[h + i % 4];
        uint8_t *payload = buf + h + 4;
        if (opcode == 0x8) {
            if (!sent_close)
                ws_send(c, 0x8, payload, plen >= 2 ? 2 : 0); /* the same code back, then done */
            return;
        }
        if (opcode == 0x9)
            ws_send(c, 0xa, payload, plen);
        else if (opcode == 0x1 && plen == 8 && memcmp(payload, "close-me", 8) == 0)
            sent_close = ws_send(c, 0x8, "\x0f\xa1going", 7) == 0; /* 4001 */
        else if (opcode == 0x1 || opcode == 0x2)
            ws_send(c, opcode, payload, plen);
        memmove(buf, buf + h + 4 + plen, len - (h + 4 + plen));
        len -= h + 4 + plen;
    }
}

/* ---- one connection -------------------------------------------------------------------------------- */

static void *serve(void *arg)
{
    conn_t *c = arg;
    uint8_t *buf = malloc(MAX_HEAD + (1u << 20));
    size_t cap = MAX_HEAD + (1u << 20), len = 0, head_len, body_len = 0;
    char *end, head[MAX_HEAD + 1], value[64], method[16], target[4096];

    while ((end = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL) == NULL)
        if (len >= MAX_HEAD || read_more(c, buf, cap, &len) != 0)
            goto Exit;
    head_len = (size_t)(end - (char *)buf) + 4;
    memcpy(head, buf, head_len);
    head[head_len] = '\0';
    atomic_fetch_add(&c->server->requests, 1);
    if (sscanf(head, "%15s %4095s", method, target) != 2)
        goto Exit;
    if (header(head, "content-length", value, sizeof(value)) != NULL)
        body_len = strtoul(value, NULL, 10);
    if (body_len > cap - head_len)
        goto Exit;
    while (len < head_len + body_len)
        if (read_more(c, buf, cap, &len) != 0)
            goto Exit;

    if (strncmp(target, "/echo", 5) == 0) {
        serve_echo(c, 200, buf, head_len + body_len);
    } else if (strncmp(target, "/status/", 8) == 0) {
        serve_status(c, atoi(target + 8));
    } else if (strncmp(target, "/big/", 5) == 0) {
        serve_big(c, strtoul(target + 5, NULL, 10), strstr(target, "chunked=1") != NULL);
    } else if (strcmp(target, "/stream") == 0) {
        serve_stream(c);
    } else if (strcmp(target, "/silent") == 0) {
        serve_silent(c);
    } else if (strcmp(target, "/trickle") == 0) {
        serve_trickle(c);
    } else if (strcmp(target, "/endless-head") == 0) {
        serve_endless_head(c);
    } else if (strncmp(target, "/cut/", 5) == 0) {
        serve_cut(c, strtoul(target + 5, NULL, 10), strstr(target, "short=1") != NULL);
    } else if (strcmp(target, "/ws") == 0) {
        memmove(buf, buf + head_len, len - head_len);
        serve_ws(c, head, buf, cap, len - head_len);
    } else {
        serve_echo(c, 404, buf, head_len + body_len);
    }
Exit:
    shutdown(c->fd, SHUT_WR);
    free(buf);
    atomic_fetch_sub(&c->server->open, 1);
    return NULL;
}

static void *accept_loop(void *arg)
{
    upstream_t *u = arg;

    while (!atomic_load(&u->stopping)) {
        struct pollfd pfd = {u->listen_fd, POLLIN, 0};
        int fd;
        if (poll(&pfd, 1, 100) <= 0 || (fd = accept(u->listen_fd, NULL, NULL)) < 0)
            continue;
        pthread_mutex_lock(&u->lock);
        if (u->num_conns == MAX_CONNS) {
            close(fd);
        } else {
            conn_t *c = &u->conns[u->num_conns++];
            atomic_fetch_add(&u->open, 1);
            c->server = u;
            c->fd = fd;
            pthread_create(&c->thread, NULL, serve, c);
        }
        pthread_mutex_unlock(&u->lock);
    }
    return NULL;
}

static int bind_loopback(unsigned short *port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), on = 1;

    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    *port = ntohs(sa.sin_port);
    return fd;
}

unsigned short upstream_closed_port(void)
{
    unsigned short port = 0;
    int fd = bind_loopback(&port);

    if (fd >= 0)
        close(fd);
    return port;
}

upstream_t *upstream_start(void)
{
    upstream_t *u = calloc(1, sizeof(*u));

    if ((u->listen_fd = bind_loopback(&u->port)) < 0 || listen(u->listen_fd, 64) != 0) {
        if (u->listen_fd >= 0)
            close(u->listen_fd);
        free(u);
        return NULL;
    }
    pthread_mutex_init(&u->lock, NULL);
    pthread_create(&u->accept_thread, NULL, accept_loop, u);
    return u;
}

unsigned short upstream_port(const upstream_t *u)
{
    return u->port;
}

unsigned upstream_requests(const upstream_t *u)
{
    return atomic_load(&((upstream_t *)u)->requests);
}

void upstream_stop(upstream_t *u)
{
    if (u == NULL)
        return;
    atomic_store(&u->stopping, 1);
    pthread_join(u->accept_thread, NULL);
    close(u->listen_fd);
    for (size_t i = 0; i != u->num_conns; ++i) {
        shutdown(u->conns[i].fd, SHUT_RDWR);
        pthread_join(u->conns[i].thread, NULL);
        close(u->conns[i].fd);
    }
    pthread_mutex_destroy(&u->lock);
    free(u);
}
