/* kernelmgr/src/zsock.c: a native ZMTP 3.0 connection to one kernel socket: connect, handshake, frames in and out; a leaf. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/zmtp.h"
#include "wire/zmtp_reader.h"
#include "ksys/errors.h"
#include "ksys/util.h"
#include "zsock.h"
#include "ksys/log.h"

/* The least room a read is given. */
#define READ_MIN_BYTES ((size_t)4 * 1024)

/* ---- connection life ---- */

static void on_writable(void *arg);

static void unwatch(kmgr_zsock_t *z)
{
    if (z->watch != NULL) {
        z->loop_ops->unwatch(z->loop, z->watch);
        z->watch = NULL;
    }
    z->watching_write = 0;
}

static void close_fd(kmgr_zsock_t *z)
{
    unwatch(z);
    /* a CLOSED zsock holds no descriptor; a zero-filled one says fd 0, which is not its own */
    if (z->state != KMGR_ZSOCK_CLOSED && z->fd != -1)
        close(z->fd);
    z->fd = -1;
}

/*
 * The connection is gone (or never came): what was read and what waits to be written on it go
 * with it; another attempt follows from the tick. Messages queued before a connection was ever
 * made are kept: `keep_out`.
 */
static void lose(kmgr_zsock_t *z, int keep_out)
{
    /* a message over the cap was being passed over: its owner hears it ended unfinished (KMGR_ZSOCK_OVER_LOST) */
    if (z->reader.skipping == WIRE_ZMTP_OVERSIZED) {
        z->over_lost = 1;
        z->dropped_parent = z->reader.parent; /* the reader keeps it until the next message over the cap */
        z->dropped_parent_len = z->reader.parent_len;
    }
    close_fd(z);
    kmgr_bytebuf_clear(&z->in);
    z->consumed = 0;
    wire_zmtp_reader_reset(&z->reader);
    z->read_all = 0;
    z->out_handshake = 0;
    if (!keep_out)
        kmgr_bytebuf_clear(&z->out);
    z->state = KMGR_ZSOCK_WAITING;
    z->retry_at = ksys_now_ms() + KMGR_ZSOCK_RETRY_MS;
}

static void protocol_error(kmgr_zsock_t *z, const char *why)
{
    /* a peer that breaks the protocol every time would be retried (and logged) 20 times a second */
    if (z->protocol_errors++ % 1000 == 0)
        ksys_log_warn("%s: %s; reconnecting (%llu such errors so far)", z->label, why, (unsigned long long)z->protocol_errors);
    lose(z, 0);
}

static void want_writable(kmgr_zsock_t *z)
{
    if (z->watching_write || z->watch == NULL)
        return;
    z->watching_write = 1;
    z->loop_ops->notify_writable(z->loop, z->watch, on_writable, z);
}

/* Writes what the socket takes now; the rest waits for a writable notification. */
static void flush(kmgr_zsock_t *z)
{
    for (;;) {
        size_t len = z->state == KMGR_ZSOCK_READY       ? kmgr_bytebuf_size(&z->out)
                     : z->state == KMGR_ZSOCK_HANDSHAKE ? z->out_handshake
                                                        : 0;
        if (len == 0)
            break;
        ssize_t n = send(z->fd, z->out.data + z->out.start, len, MSG_NOSIGNAL);
        if (n > 0) {
            z->out.start += (size_t)n;
            z->out_handshake -= (size_t)n < z->out_handshake ? (size_t)n : z->out_handshake;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            want_writable(z);
            return;
        }
        lose(z, 0);
        return;
    }
    if (kmgr_bytebuf_size(&z->out) == 0) {
        z->out.start = z->out.end = 0;
        /* a big message's buffer goes with it: memory does not stay at the largest request ever sent */
        if (z->out.cap > KMGR_ZSOCK_KEEP_BYTES)
            kmgr_bytebuf_free(&z->out);
    }
}

/* Connected: the greeting and READY go ahead of whatever was queued, which waits for the peer's READY. */
static void on_connected(kmgr_zsock_t *z)
{
    uint8_t hs[WIRE_ZMTP_GREETING_LEN + 512];
    size_t len = WIRE_ZMTP_GREETING_LEN;
    int ready;

    wire_zmtp_greeting(hs);
    ready = wire_zmtp_ready(hs + len, sizeof(hs) - len, z->socket_type, z->identity[0] != '\0' ? z->identity : NULL);
    if (ready < 0) {
        protocol_error(z, "cannot build the READY command");
        return;
    }
    len += (size_t)ready;
    kmgr_bytebuf_prepend(&z->out, hs, len);
    z->out_handshake = len;
    z->state = KMGR_ZSOCK_HANDSHAKE;
    z->connected_at = ksys_now_ms();
    ++z->connects;
    flush(z);
}

/* A non-blocking connect finished or failed: which one, SO_ERROR and getpeername tell. */
static void check_connect(kmgr_zsock_t *z)
{
    int err = 0;
    socklen_t len = sizeof(err);
    struct sockaddr_storage peer;
    socklen_t peerlen = sizeof(peer);

    if (getsockopt(z->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        lose(z, 1);
        return;
    }
    if (getpeername(z->fd, (struct sockaddr *)&peer, &peerlen) != 0) {
        if (errno != ENOTCONN)
            lose(z, 1);
        return; /* still in progress */
    }
    on_connected(z);
}

static void on_watch_readable(void *arg)
{
    kmgr_zsock_t *z = arg;

    z->read_all = 0;
    if (z->state == KMGR_ZSOCK_CONNECTING)
        check_connect(z);
    if (z->state >= KMGR_ZSOCK_HANDSHAKE)
        z->on_readable(z->arg);
}

static void on_writable(void *arg)
{
    kmgr_zsock_t *z = arg;

    z->watching_write = 0;
    if (z->state == KMGR_ZSOCK_CONNECTING) {
        check_connect(z);
        if (z->state == KMGR_ZSOCK_CONNECTING)
            want_writable(z);
        return; /* on_connected flushed */
    }
    flush(z);
}

/*
 * A unix socket's path as "/proc/self/fd/N" of an O_PATH descriptor of what lies at z->addr's path now, if that is a socket
 * and not a symbolic link (the caller closes `*held`). A sandboxed kernel writes the directory of its sockets: a connect by
 * path would follow a link it put in their place to any socket of the host, with kgate's rights.
 */
static int socket_inode(const kmgr_zsock_t *z, struct sockaddr_un *via, int *held)
{
    struct stat st;

    if ((*held = open(((const struct sockaddr_un *)&z->addr)->sun_path, O_PATH | O_NOFOLLOW | O_CLOEXEC)) == -1)
        return -1;
    if (fstat(*held, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        close(*held);
        *held = -1;
        return -1;
    }
    memset(via, 0, sizeof(*via));
    via->sun_family = AF_UNIX;
    snprintf(via->sun_path, sizeof(via->sun_path), "/proc/self/fd/%d", *held);
    return 0;
}

static void connect_now(kmgr_zsock_t *z)
{
    struct sockaddr_un via;
    int fd, one = 1, held = -1, ret;

    z->state = KMGR_ZSOCK_WAITING;
    z->retry_at = ksys_now_ms() + KMGR_ZSOCK_RETRY_MS;
    if (z->addr.ss_family == AF_UNIX && socket_inode(z, &via, &held) != 0)
        return;
    if ((fd = socket(z->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1) {
        if (held != -1)
            close(held);
        return;
    }
    /* small messages go out as they are written, as libzmq's own TCP connections do */
    if (z->addr.ss_family != AF_UNIX)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    z->fd = fd;
    if (held != -1)
        ret = connect(fd, (struct sockaddr *)&via, sizeof(via));
    else
        ret = connect(fd, (struct sockaddr *)&z->addr, z->addrlen);
    ret = ret == 0 ? 0 : errno;
    if (held != -1)
        close(held);
    if (ret != 0 && ret != EINPROGRESS) {
        close(fd);
        z->fd = -1;
        return;
    }
    if ((z->watch = z->loop_ops->watch(z->loop, fd, on_watch_readable, z)) == NULL) {
        close(fd);
        z->fd = -1;
        return;
    }
    z->state = KMGR_ZSOCK_CONNECTING;
    check_connect(z);
    if (z->state == KMGR_ZSOCK_CONNECTING)
        want_writable(z);
}

/* "tcp://HOST:PORT" (an IPv4 or IPv6 literal, brackets optional) or "ipc://PATH" into z->addr. */
static int parse_endpoint(kmgr_zsock_t *z, const char *endpoint)
{
    memset(&z->addr, 0, sizeof(z->addr));
    if (strncmp(endpoint, "ipc://", 6) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)&z->addr;
        const char *path = endpoint + 6;
        if (path[0] == '\0' || strlen(path) >= sizeof(un->sun_path))
            return KSYS_EZMQ;
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, path);
        z->addrlen = (socklen_t)sizeof(*un);
        return 0;
    }
    if (strncmp(endpoint, "tcp://", 6) != 0)
        return KSYS_EZMQ;
    const char *host = endpoint + 6, *colon = strrchr(host, ':');
    char ip[INET6_ADDRSTRLEN + 2], *end;
    size_t len;
    if (colon == NULL || (len = (size_t)(colon - host)) == 0 || len >= sizeof(ip))
        return KSYS_EZMQ;
    if (host[0] == '[' && len >= 2 && host[len - 1] == ']') {
        ++host;
        len -= 2;
    }
    memcpy(ip, host, len);
    ip[len] = '\0';
    errno = 0;
    long port = strtol(colon + 1, &end, 10);
    if (errno != 0 || *end != '\0' || port <= 0 || port > 65535)
        return KSYS_EZMQ;
    struct sockaddr_in *in4 = (struct sockaddr_in *)&z->addr;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&z->addr;
    if (inet_pton(AF_INET, ip, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        z->addrlen = (socklen_t)sizeof(*in4);
    } else if (inet_pton(AF_INET6, ip, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        z->addrlen = (socklen_t)sizeof(*in6);
    } else {
        return KSYS_EZMQ; /* a host name would need a blocking lookup */
    }
    return 0;
}

int kmgr_zsock_open(kmgr_zsock_t *z, const kmgr_loop_ops_t *loop_ops, void *loop, const char *endpoint, const char *socket_type,
                    const char *identity, uint64_t max_message_bytes, void (*on_readable)(void *arg), void *arg, const char *label)
{
    memset(z, 0, sizeof(*z));
    z->fd = -1;
    if (parse_endpoint(z, endpoint) != 0 || (identity != NULL && strlen(identity) >= sizeof(z->identity)))
        return KSYS_EZMQ;
    z->loop_ops = loop_ops;
    z->loop = loop;
    z->socket_type = socket_type;
    if (identity != NULL)
        strcpy(z->identity, identity);
    z->subscribe_all = strcmp(socket_type, "SUB") == 0;
    z->handshake_ms = KMGR_ZSOCK_HANDSHAKE_MS;
    z->max_queued_bytes = KMGR_ZSOCK_MAX_QUEUED_BYTES;
    z->max_message_bytes = max_message_bytes;
    wire_zmtp_reader_init(&z->reader, max_message_bytes, KMGR_ZSOCK_MAX_FRAMES);
    z->on_readable = on_readable;
    z->arg = arg;
    z->label = label;
    connect_now(z);
    return 0;
}

void kmgr_zsock_close(kmgr_zsock_t *z)
{
    close_fd(z);
    kmgr_bytebuf_free(&z->out);
    z->state = KMGR_ZSOCK_CLOSED;
    if (z->lent)
        return; /* the owner still reads the message: kmgr_zsock_release frees the rest */
    kmgr_bytebuf_free(&z->in);
    wire_zmtp_reader_dispose(&z->reader);
    z->consumed = 0;
}

void kmgr_zsock_release(kmgr_zsock_t *z)
{
    z->lent = 0;
    if (z->state == KMGR_ZSOCK_CLOSED)
        kmgr_zsock_close(z);
}

void kmgr_zsock_stop_reading(kmgr_zsock_t *z)
{
    unwatch(z);
}

int kmgr_zsock_send(kmgr_zsock_t *z, const wire_frame_t *head, size_t nhead, const wire_frame_t *tail, size_t ntail)
{
    size_t n = nhead + ntail, total = 0;

    if (z->state == KMGR_ZSOCK_CLOSED || n == 0)
        return KSYS_EZMQ;
    for (size_t i = 0; i != n; ++i)
        total += WIRE_ZMTP_HEAD_MAX + (i < nhead ? head[i].len : tail[i - nhead].len);
    if (kmgr_bytebuf_size(&z->out) != 0 && kmgr_bytebuf_size(&z->out) + total > z->max_queued_bytes)
        return KSYS_EBACKLOG;
    kmgr_bytebuf_reserve(&z->out, total);
    for (size_t i = 0; i != n; ++i) {
        const wire_frame_t *f = i < nhead ? &head[i] : &tail[i - nhead];
        uint8_t h[WIRE_ZMTP_HEAD_MAX];
        size_t hl = wire_zmtp_write_head(h, f->len, i + 1 != n ? WIRE_ZMTP_MORE : 0);
        memcpy(z->out.data + z->out.end, h, hl);
        z->out.end += hl;
        if (f->len != 0)
            memcpy(z->out.data + z->out.end, f->base, f->len);
        z->out.end += f->len;
    }
    if (!z->watching_write)
        flush(z);
    return 0;
}

/* ---- receiving ---- */

/* The peer's READY: what was queued may go now, behind the subscription (a SUB sends nothing else). */
static void on_ready(kmgr_zsock_t *z)
{
    z->state = KMGR_ZSOCK_READY;
    if (z->subscribe_all) {
        /* ZMTP 3.0's subscription: a message whose body is 0x01 and the (empty) topic */
        static const uint8_t subscribe[3] = {0, 1, 1};
        kmgr_bytebuf_append(&z->out, subscribe, sizeof(subscribe));
    }
    if (!z->watching_write)
        flush(z);
}

/* A command from the peer (its body whole in the buffer): READY ends the handshake, PING is answered. */
static void on_command(kmgr_zsock_t *z, const uint8_t *body, size_t len)
{
    wire_zmtp_command_t cmd;
    const uint8_t *value;
    size_t value_len;

    if (wire_zmtp_parse_command(body, len, &cmd) != 0) {
        protocol_error(z, "malformed ZMTP command");
    } else if (wire_zmtp_command_is(&cmd, "READY")) {
        if (z->state != KMGR_ZSOCK_HANDSHAKE || wire_zmtp_property(&cmd, "Socket-Type", &value, &value_len) != 1)
            protocol_error(z, "unexpected or malformed READY");
        else if (!wire_zmtp_socket_types_match(z->socket_type, value, value_len))
            protocol_error(z, "the kernel's socket is of a type this channel cannot talk to (a wrong port?)");
        else
            on_ready(z);
    } else if (wire_zmtp_command_is(&cmd, "PING")) {
        uint8_t pong[64];
        int n = wire_zmtp_pong(pong, sizeof(pong), &cmd);
        if (n < 0) {
            protocol_error(z, "malformed PING");
        } else {
            kmgr_bytebuf_append(&z->out, pong, (size_t)n);
            if (!z->watching_write)
                flush(z);
        }
    } else if (wire_zmtp_command_is(&cmd, "ERROR")) {
        protocol_error(z, "the kernel's socket refused the connection (ZMTP ERROR)");
    }
    /* anything else (PONG, SUBSCRIBE, CANCEL) means nothing to a DEALER or a SUB */
}

/*
 * Parses what the buffer holds (wire/zmtp_reader.h): the greeting, commands, then one whole message into `msg`.
 * Returns 1 (a message), 0 (more bytes needed: at least `*need` from in.start in all), or a dropped message's error.
 * The connection may be lost on the way (z->state then says so).
 */
static int parse(kmgr_zsock_t *z, kmgr_zsock_msg_t *msg, size_t *need)
{
    *need = 1;
    for (;;) {
        wire_zmtp_item_t it;
        wire_zmtp_reader_next(&z->reader, z->in.data + z->in.start, kmgr_bytebuf_size(&z->in), z->state == KMGR_ZSOCK_READY, &it);
        switch (it.kind) {
        case WIRE_ZMTP_NEED:
            z->in.start += it.consumed;
            *need = it.need;
            return 0;
        case WIRE_ZMTP_GREETED:
            z->in.start += it.consumed;
            continue;
        case WIRE_ZMTP_CMD:
            z->in.start += it.consumed;
            on_command(z, it.body, it.len);
            if (z->state < KMGR_ZSOCK_HANDSHAKE)
                return 0;
            continue;
        case WIRE_ZMTP_MESSAGE:
        case WIRE_ZMTP_OVER_START:
            z->consumed = it.consumed;
            msg->frames = it.frames;
            msg->nframes = it.nframes;
            msg->bytes = it.bytes;
            msg->storage = z->in.buf;
            return it.kind == WIRE_ZMTP_MESSAGE ? 1 : KMGR_ZSOCK_OVER_START;
        case WIRE_ZMTP_OVER_PIECE:
            z->consumed = it.consumed;
            z->piece = (wire_frame_t){(void *)it.body, it.len};
            msg->frames = &z->piece;
            msg->nframes = 1;
            msg->bytes = it.len;
            msg->storage = z->in.buf;
            return KMGR_ZSOCK_OVER_PIECE;
        case WIRE_ZMTP_OVERSIZED:
            z->in.start += it.consumed;
            z->dropped_parent = it.parent;
            z->dropped_parent_len = it.parent != NULL ? it.parent_len : 0;
            return KSYS_EMSGSIZE;
        case WIRE_ZMTP_TOO_MANY_FRAMES:
            z->in.start += it.consumed;
            return KSYS_EINVAL;
        case WIRE_ZMTP_BROKEN:
            protocol_error(z, it.why);
            return 0;
        }
    }
}

/* Reads what the socket has into the buffer, with room for `need` bytes from in.start. 1: read some; 0: nothing now or lost. */
static int read_more(kmgr_zsock_t *z, size_t need)
{
    size_t have = kmgr_bytebuf_size(&z->in), want = need > have ? need - have : 0;

    /* A read that did not fill its room took all the socket had: asking again before the watch
     * fires would be a syscall that says EAGAIN (half of all reads, with a message per wake-up).
     * The watch is level-triggered, so whatever arrives since is signalled. */
    if (z->read_all)
        return 0;
    /* a message being skipped is read through the buffer without growing it past what the tick keeps */
    size_t least = z->reader.skipping != WIRE_ZMTP_NEED ? KMGR_ZSOCK_KEEP_BYTES : READ_MIN_BYTES;
    kmgr_bytebuf_reserve(&z->in, want > least ? want : least);
    for (;;) {
        size_t room = z->in.cap - z->in.end;
        ssize_t n = recv(z->fd, z->in.data + z->in.end, room, 0);
        if (n > 0) {
            z->in.end += (size_t)n;
            z->read_all = (size_t)n < room;
            return 1;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            z->read_all = 1;
            return 0;
        }
        lose(z, 0); /* end of stream: the kernel closed it (or died) */
        return 0;
    }
}

int kmgr_zsock_recv(kmgr_zsock_t *z, kmgr_zsock_msg_t *msg)
{
    z->lent = 0;
    z->in.start += z->consumed;
    z->consumed = 0;
    if (z->in.start == z->in.end)
        kmgr_bytebuf_clear(&z->in);
    for (;;) {
        size_t need;
        int r;
        if (z->over_lost) {
            z->over_lost = 0;
            return KMGR_ZSOCK_OVER_LOST;
        }
        if (z->state == KMGR_ZSOCK_CONNECTING)
            check_connect(z);
        if (z->state < KMGR_ZSOCK_HANDSHAKE)
            return 0;
        if ((r = parse(z, msg, &need)) != 0) {
            z->lent = r > 0;
            return r;
        }
        if (z->state < KMGR_ZSOCK_HANDSHAKE || (!read_more(z, need) && !z->over_lost))
            return 0;
    }
}

void kmgr_zsock_retry_now(kmgr_zsock_t *z)
{
    if (z->state == KMGR_ZSOCK_WAITING)
        connect_now(z);
}

void kmgr_zsock_tick(kmgr_zsock_t *z, uint64_t now)
{
    /* a drain from the tick reads the socket even if its watch has not fired yet (a loop that
     * stalled must still find the heartbeat answers that arrived meanwhile) */
    z->read_all = 0;
    if (z->state == KMGR_ZSOCK_WAITING && now >= z->retry_at)
        connect_now(z);
    else if (z->state == KMGR_ZSOCK_HANDSHAKE && now - z->connected_at >= z->handshake_ms)
        protocol_error(z, "the kernel's socket did not finish the ZMTP handshake in time");
    /* a lost connection empties the buffer without ending a loan (consumed is 0 then): the owner still reads it */
    if (!z->lent && z->consumed == 0 && kmgr_bytebuf_size(&z->in) == 0 && z->in.cap > KMGR_ZSOCK_KEEP_BYTES)
        kmgr_bytebuf_free(&z->in);
}
