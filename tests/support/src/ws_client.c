/* tests/support/src/ws_client.c: a small blocking WebSocket client (RFC 6455): no extensions, masked frames, pings answered. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include "support/ws_client.h"

#define GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

int64_t wsc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int fail(wsc_t *ws, const char *why)
{
    snprintf(ws->error, sizeof(ws->error), "%s%s%s", why, errno != 0 ? ": " : "", errno != 0 ? strerror(errno) : "");
    return -1;
}

/* Reads more bytes into ws->in before the deadline. 0, or -1 on EOF, error or timeout. */
static int fill(wsc_t *ws, int64_t deadline_ms)
{
    struct pollfd pfd = {ws->fd, POLLIN, 0};
    int64_t left = deadline_ms - wsc_now_ms();
    ssize_t n;

    errno = 0;
    if (left <= 0 || poll(&pfd, 1, (int)left) <= 0)
        return fail(ws, "timed out");
    if (ws->in_cap - ws->in_len < 65536) {
        ws->in_cap = ws->in_cap * 2 + 65536;
        ws->in = realloc(ws->in, ws->in_cap);
    }
    if ((n = read(ws->fd, ws->in + ws->in_len, ws->in_cap - ws->in_len)) <= 0)
        return fail(ws, n == 0 ? "connection closed" : "read failed");
    ws->in_len += (size_t)n;
    /* Linux leaves quick-ack mode on its own; it has to be asked again after every read */
    if (ws->quickack)
        setsockopt(ws->fd, IPPROTO_TCP, TCP_QUICKACK, &ws->quickack, sizeof(ws->quickack));
    return 0;
}

static void consume(wsc_t *ws, size_t n)
{
    memmove(ws->in, ws->in + n, ws->in_len - n);
    ws->in_len -= n;
}

static int write_all(wsc_t *ws, const void *data, size_t len)
{
    const char *p = data;
    while (len != 0) {
        ssize_t n = send(ws->fd, p, len, MSG_NOSIGNAL); /* a closed peer is an error, not SIGPIPE */
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return fail(ws, "write failed");
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int wsc_connect(wsc_t *ws, unsigned short port, const char *path, const char *const *headers, int64_t deadline_ms)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    unsigned char nonce[16], digest[SHA_DIGEST_LENGTH];
    char key[32], expect[64], src[128], req[8192], accept[128];
    int on = 1;
    size_t off;
    char *end;

    memset(ws, 0, sizeof(*ws));
    errno = 0;
    if ((ws->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
        connect(ws->fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
        return fail(ws, "connect failed");
    setsockopt(ws->fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
    for (size_t i = 0; i != sizeof(nonce); ++i)
        nonce[i] = (unsigned char)(rand() & 0xff);
    EVP_EncodeBlock((unsigned char *)key, nonce, sizeof(nonce));
    snprintf(src, sizeof(src), "%s%s", key, GUID);
    SHA1((const unsigned char *)src, strlen(src), digest);
    EVP_EncodeBlock((unsigned char *)expect, digest, sizeof(digest));
    off = (size_t)snprintf(req, sizeof(req),
                           "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%u\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n",
                           path, port, key);
    for (size_t i = 0; headers != NULL && headers[i] != NULL && off < sizeof(req); ++i)
        off += (size_t)snprintf(req + off, sizeof(req) - off, "%s\r\n", headers[i]);
    off += (size_t)snprintf(req + off, sizeof(req) - off, "\r\n");
    if (off >= sizeof(req) || write_all(ws, req, off) != 0)
        return -1;
    while ((end = ws->in_len != 0 ? memmem(ws->in, ws->in_len, "\r\n\r\n", 4) : NULL) == NULL)
        if (fill(ws, deadline_ms) != 0)
            return -1;
    off = (size_t)(end - (char *)ws->in) + 4;
    memcpy(ws->headers, ws->in, off < sizeof(ws->headers) ? off : sizeof(ws->headers) - 1);
    ws->headers[off < sizeof(ws->headers) ? off : sizeof(ws->headers) - 1] = '\0';
    consume(ws, off);
    if (sscanf(ws->headers, "HTTP/1.%*d %d", &ws->status) != 1)
        return fail(ws, "no HTTP status line");
    errno = 0;
    if (ws->status != 101)
        return fail(ws, "the server did not switch protocols");
    if (wsc_header(ws, "sec-websocket-accept", accept, sizeof(accept)) == NULL || strcmp(accept, expect) != 0)
        return fail(ws, "wrong or missing Sec-WebSocket-Accept");
    return 0;
}

const char *wsc_header(const wsc_t *ws, const char *name, char *out, size_t size)
{
    size_t n = strlen(name);
    for (const char *line = strstr(ws->headers, "\r\n"); line != NULL; line = strstr(line + 2, "\r\n")) {
        const char *p = line + 2, *eol = strstr(p, "\r\n");
        if (eol == NULL || eol == p)
            break;
        if (strncasecmp(p, name, n) == 0 && p[n] == ':') {
            p += n + 1;
            while (*p == ' ')
                ++p;
            snprintf(out, size, "%.*s", (int)(eol - p), p);
            return out;
        }
    }
    return NULL;
}

int wsc_send(wsc_t *ws, int opcode, const void *data, size_t len)
{
    uint8_t head[14], mask[4];
    size_t h = 0;
    uint8_t *frame;
    int ret;

    head[h++] = (uint8_t)(0x80 | opcode);
    if (len < 126) {
        head[h++] = (uint8_t)(0x80 | len);
    } else if (len < 65536) {
        head[h++] = 0x80 | 126;
        head[h++] = (uint8_t)(len >> 8);
        head[h++] = (uint8_t)len;
    } else {
        head[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; --i)
            head[h++] = (uint8_t)((uint64_t)len >> (8 * i));
    }
    for (int i = 0; i != 4; ++i)
        head[h++] = mask[i] = (uint8_t)(rand() & 0xff);
    frame = malloc(h + len + 1);
    memcpy(frame, head, h);
    for (size_t i = 0; i != len; ++i)
        frame[h + i] = ((const uint8_t *)data)[i] ^ mask[i & 3];
    ret = write_all(ws, frame, h + len);
    free(frame);
    return ret;
}

int wsc_recv(wsc_t *ws, int64_t deadline_ms, wsc_msg_t *msg)
{
    uint8_t *joined = NULL;
    size_t joined_len = 0;
    int first_opcode = 0;

    memset(msg, 0, sizeof(*msg));
    for (;;) {
        size_t h = 2;
        uint64_t len;
        int fin, opcode;
        while (ws->in_len < 2)
            if (fill(ws, deadline_ms) != 0)
                goto Fail;
        fin = ws->in[0] & 0x80;
        opcode = ws->in[0] & 0x0f;
        len = ws->in[1] & 0x7f;
        if (ws->in[1] & 0x80) {
            errno = 0;
            fail(ws, "the server masked a frame");
            goto Fail;
        }
        if (len >= 126) {
            h += len == 126 ? 2 : 8;
            while (ws->in_len < h)
                if (fill(ws, deadline_ms) != 0)
                    goto Fail;
            len = 0;
            for (size_t i = 2; i != h; ++i)
                len = len << 8 | ws->in[i];
        }
        while (ws->in_len < h + len)
            if (fill(ws, deadline_ms) != 0)
                goto Fail;
        if (opcode == WSC_PING) {
            uint8_t payload[125];
            size_t n = len < sizeof(payload) ? (size_t)len : sizeof(payload);
            memcpy(payload, ws->in + h, n);
            consume(ws, h + (size_t)len);
            wsc_send(ws, WSC_PONG, payload, n);
            continue;
        }
        if (opcode >= 0x8 || first_opcode == 0)
            first_opcode = opcode != 0 ? opcode : first_opcode;
        joined = realloc(joined, joined_len + (size_t)len + 1);
        memcpy(joined + joined_len, ws->in + h, (size_t)len);
        joined_len += (size_t)len;
        joined[joined_len] = '\0';
        consume(ws, h + (size_t)len);
        if (fin || opcode >= 0x8) {
            msg->opcode = first_opcode;
            msg->data = joined;
            msg->len = joined_len;
            if (first_opcode == WSC_CLOSE && joined_len >= 2)
                msg->close_code = (uint16_t)(joined[0] << 8 | joined[1]);
            return 0;
        }
    }
Fail:
    free(joined);
    return -1;
}

size_t wsc_ping_frames(uint8_t *out, size_t count, uint32_t first_seq, size_t payload_len)
{
    static const uint8_t mask[4] = {0x5a, 0xc3, 0x19, 0xe7};
    uint8_t *p = out;

    for (size_t i = 0; i != count; ++i) {
        uint32_t seq = first_seq + (uint32_t)i;
        *p++ = 0x80 | WSC_PING;
        *p++ = (uint8_t)(0x80 | payload_len);
        memcpy(p, mask, 4);
        p += 4;
        for (size_t j = 0; j != payload_len; ++j)
            *p++ = (uint8_t)((j < 4 ? (uint8_t)(seq >> (24 - 8 * j)) : (uint8_t)'.') ^ mask[j & 3]);
    }
    return (size_t)(p - out);
}

int wsc_write(wsc_t *ws, const void *bytes, size_t len)
{
    return write_all(ws, bytes, len);
}

uint32_t wsc_pong_seq(const wsc_msg_t *msg)
{
    if (msg->len < 4)
        return 0;
    return (uint32_t)msg->data[0] << 24 | (uint32_t)msg->data[1] << 16 | (uint32_t)msg->data[2] << 8 | msg->data[3];
}

void wsc_close(wsc_t *ws)
{
    if (ws->fd > 0)
        close(ws->fd);
    ws->fd = -1;
    free(ws->in);
    ws->in = NULL;
    ws->in_len = ws->in_cap = 0;
}
