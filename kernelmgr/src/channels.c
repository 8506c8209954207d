/* kernelmgr/src/channels.c: the five ZMQ sockets of a kernel process: connect, send, drain, reopen, close; a leaf. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/errors.h"
#include "wire/ids.h"
#include "kmgr/errors.h"
#include "kmgr/util.h"
#include "channels.h"

static void mark_redrain(kmgr_channels_t *ch)
{
    ch->redrain = 1;
    if (ch->ops != NULL)
        ch->ops->on_redrain(ch->data);
}

static void drain_monitor(kmgr_channels_t *ch, wire_channel_t channel);

static void on_readable(void *arg)
{
    kmgr_chan_t *chan = arg;
    kmgr_channels_t *ch = chan->channels;

    if (ch->ops == NULL)
        return;
    if (chan->is_monitor) {
        drain_monitor(ch, chan->channel);
        return;
    }
    /* A capped batch leaves the rest for kmgr_channels_drain_all: the edge-triggered fd will not
     * signal again, and the owner drains only channels marked for it. */
    if (kmgr_channels_drain(ch, chan->channel))
        mark_redrain(ch);
}

static int set_int(void *sock, int option, int value)
{
    return zmq_setsockopt(sock, option, &value, sizeof(value));
}

void kmgr_channels_init(kmgr_channels_t *ch, void *zctx, const kmgr_loop_ops_t *loop_ops, void *loop, const wire_connection_t *conn,
                        const wire_signer_t *signer, const char *uuid, int64_t max_message_bytes)
{
    memset(ch, 0, sizeof(*ch));
    ch->zctx = zctx;
    ch->loop_ops = loop_ops;
    ch->loop = loop;
    ch->conn = conn;
    ch->signer = signer;
    ch->uuid = uuid;
    ch->max_message_bytes = max_message_bytes;
}

static void *watch_socket(kmgr_channels_t *ch, void *s, kmgr_chan_t *chan)
{
    int fd;
    size_t fdlen = sizeof(fd);

    if (zmq_getsockopt(s, ZMQ_FD, &fd, &fdlen) != 0)
        return NULL;
    return ch->loop_ops->watch(ch->loop, fd, on_readable, chan);
}

/* Stops and releases the monitor of `channel`: a watched ZMQ_FD nobody drains would stay readable
 * and spin the loop, and libzmq's end would queue events nobody reads. */
static void close_monitor(kmgr_channels_t *ch, wire_channel_t channel)
{
    kmgr_monitor_t *m = &ch->monitors[channel];

    if (ch->sockets[channel] != NULL && m->socket != NULL)
        zmq_socket_monitor(ch->sockets[channel], NULL, 0);
    if (m->watch != NULL) {
        ch->loop_ops->unwatch(ch->loop, m->watch);
        m->watch = NULL;
    }
    if (m->socket != NULL) {
        zmq_close(m->socket);
        m->socket = NULL;
    }
    m->dropped_at = 0;
}

static void close_socket(kmgr_channels_t *ch, wire_channel_t channel)
{
    close_monitor(ch, channel);
    if (ch->watches[channel] != NULL) {
        ch->loop_ops->unwatch(ch->loop, ch->watches[channel]);
        ch->watches[channel] = NULL;
    }
    if (ch->sockets[channel] != NULL) {
        zmq_close(ch->sockets[channel]);
        ch->sockets[channel] = NULL;
    }
}

static int open_monitor(kmgr_channels_t *ch, wire_channel_t channel)
{
    kmgr_monitor_t *m = &ch->monitors[channel];
    char endpoint[sizeof("inproc://kmgr-monitor--4294967295") + WIRE_UUID_STRLEN];

    snprintf(endpoint, sizeof(endpoint), "inproc://kmgr-monitor-%s-%u", ch->uuid, ch->monitor_serial++);
    if (zmq_socket_monitor(ch->sockets[channel], endpoint,
                           ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_CONNECT_RETRIED) != 0 ||
        (m->socket = zmq_socket(ch->zctx, ZMQ_PAIR)) == NULL || set_int(m->socket, ZMQ_LINGER, 0) != 0 ||
        zmq_connect(m->socket, endpoint) != 0)
        return KMGR_EZMQ;
    m->chan.channels = ch;
    m->chan.channel = channel;
    m->chan.is_monitor = 1;
    /* Only readiness needs waking for; the rest is read from the tick (kmgr_channels_check_given_up)
     * and with every drain_all, which saves a descriptor per monitor. */
    if (channel == WIRE_CHANNEL_STDIN && !ch->stdin_connected && (m->watch = watch_socket(ch, m->socket, &m->chan)) == NULL)
        return KMGR_EZMQ;
    return 0;
}

/* Opens, connects and watches the socket of `channel` (closed), with its monitor. On error the
 * caller closes what was opened. */
static int open_socket(kmgr_channels_t *ch, wire_channel_t channel)
{
    static const int types[WIRE_CHANNEL_COUNT] = {
        [WIRE_CHANNEL_SHELL] = ZMQ_DEALER,   [WIRE_CHANNEL_IOPUB] = ZMQ_SUB, [WIRE_CHANNEL_STDIN] = ZMQ_DEALER,
        [WIRE_CHANNEL_CONTROL] = ZMQ_DEALER, [WIRE_CHANNEL_HB] = ZMQ_DEALER,
    };
    char endpoint[256];
    void *s;

    if ((s = ch->sockets[channel] = zmq_socket(ch->zctx, types[channel])) == NULL)
        return KMGR_EZMQ;
    /* Linger 0: closing must never block the loop on a dead kernel's unsent messages. */
    if (set_int(s, ZMQ_LINGER, 0) != 0 ||
        zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &ch->max_message_bytes, sizeof(ch->max_message_bytes)) != 0)
        return KMGR_EZMQ;
    /* Requests queued while the kernel starts must not hit the default send HWM; the callers bound
     * how many they queue. iopub is bounded: when kgate lags, the transport pushes back and the
     * backlog waits in the kernel's PUB queue rather than in kgate (KMGR_IOPUB_RCVHWM). */
    if (channel != WIRE_CHANNEL_HB &&
        (set_int(s, ZMQ_SNDHWM, 0) != 0 || set_int(s, ZMQ_RCVHWM, channel == WIRE_CHANNEL_IOPUB ? KMGR_IOPUB_RCVHWM : 0) != 0))
        return KMGR_EZMQ;
    if ((channel == WIRE_CHANNEL_SHELL || channel == WIRE_CHANNEL_STDIN) &&
        zmq_setsockopt(s, ZMQ_ROUTING_ID, ch->identity, strlen(ch->identity)) != 0)
        return KMGR_EZMQ;
    if (channel == WIRE_CHANNEL_IOPUB && zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0) != 0)
        return KMGR_EZMQ;
    /* The monitor before the connection, so that it sees every event of it. */
    if (channel != WIRE_CHANNEL_HB && channel != WIRE_CHANNEL_CONTROL && open_monitor(ch, channel) != 0)
        return KMGR_EZMQ;
    if (wire_connection_endpoint(ch->conn, channel, endpoint, sizeof(endpoint)) < 0 || zmq_connect(s, endpoint) != 0)
        return KMGR_EZMQ;
    ch->chans[channel].channels = ch;
    ch->chans[channel].channel = channel;
    ch->chans[channel].is_monitor = 0;
    if ((ch->watches[channel] = watch_socket(ch, s, &ch->chans[channel])) == NULL)
        return KMGR_EZMQ;
    return 0;
}

int kmgr_channels_open(kmgr_channels_t *ch, const kmgr_channels_ops_t *ops, void *data)
{
    ch->ops = ops;
    ch->data = data;
    wire_uuid4(ch->identity);
    for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i)
        if (open_socket(ch, (wire_channel_t)i) != 0)
            goto Error;
    /* The stdin handshake may be done already (the monitor's fd then signalled before the watch). */
    mark_redrain(ch);
    return 0;

Error:
    kmgr_channels_close(ch, 0);
    return KMGR_EZMQ;
}

void kmgr_channels_close(kmgr_channels_t *ch, int keep_control)
{
    /* Forgetting the owner first is what stops a drain that a callback closed the channels from. */
    ch->ops = NULL;
    ch->data = NULL;
    for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i) {
        if (keep_control && i == WIRE_CHANNEL_CONTROL) {
            /* unwatched from now on: it only carries a last shutdown_request */
            if (ch->watches[i] != NULL) {
                ch->loop_ops->unwatch(ch->loop, ch->watches[i]);
                ch->watches[i] = NULL;
            }
            continue;
        }
        close_socket(ch, (wire_channel_t)i);
    }
}

/* Sends `n` frames as one multipart message: the first `nhead` from `head`, the rest from `tail`. */
static int send_frames(kmgr_channels_t *ch, wire_channel_t channel, const wire_frame_t *head, size_t nhead,
                       const wire_frame_t *tail, size_t ntail)
{
    void *s = ch->sockets[channel];
    int ret = 0;

    if (s == NULL)
        return KMGR_EZMQ;
    for (size_t i = 0, n = nhead + ntail; i != n; ++i) {
        const wire_frame_t *f = i < nhead ? &head[i] : &tail[i - nhead];
        int flags = ZMQ_DONTWAIT | (i + 1 != n ? ZMQ_SNDMORE : 0);
        if (zmq_send(s, f->base, f->len, flags) < 0) {
            ret = KMGR_EZMQ;
            break;
        }
    }
    /* A message that already arrived may have lost its fd signal to this send (PLATFORM.md). */
    if (ch->watches[channel] != NULL)
        mark_redrain(ch);
    return ret;
}

int kmgr_channels_send(kmgr_channels_t *ch, wire_channel_t channel, const wire_msg_t *msg)
{
    wire_frames_t frames;
    int ret;

    if (ch->sockets[channel] == NULL)
        return KMGR_EZMQ;
    wire_frames_init(&frames);
    wire_encode(ch->signer, msg, &frames);
    ret = send_frames(ch, channel, frames.entries, frames.size, NULL, 0);
    wire_frames_dispose(&frames);
    return ret;
}

int kmgr_channels_send_parts(kmgr_channels_t *ch, wire_channel_t channel, const wire_frame_t *parts, size_t nparts)
{
    char sig[WIRE_SIG_HEX_LEN + 1];
    wire_frame_t head[2] = {{WIRE_DELIMITER, sizeof(WIRE_DELIMITER) - 1}, {sig, 0}};

    if (nparts < 4)
        return KMGR_EINVAL;
    if (ch->sockets[channel] == NULL)
        return KMGR_EZMQ;
    wire_signer_sign(ch->signer, parts, sig);
    head[1].len = strlen(sig);
    return send_frames(ch, channel, head, 2, parts, nparts);
}

void kmgr_channels_ping(kmgr_channels_t *ch)
{
    void *s = ch->sockets[WIRE_CHANNEL_HB];

    if (s == NULL)
        return;
    /* The empty delimiter makes the ping valid for a REP heartbeat as well as ipykernel's echo device;
     * a DEALER avoids REQ's lockstep, which a lost pong would wedge. */
    if (zmq_send(s, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        zmq_send(s, "ping", 4, ZMQ_DONTWAIT);
    mark_redrain(ch);
}

/* Reads the events of `channel`'s monitor: a handshake (stdin: readiness), a dropped connection,
 * and libzmq's announcement that it reconnects by itself (see KMGR_GIVEN_UP_AFTER_MS). */
static void drain_monitor(kmgr_channels_t *ch, wire_channel_t channel)
{
    kmgr_monitor_t *m = &ch->monitors[channel];
    int events;
    size_t len = sizeof(events);

    while (ch->ops != NULL && m->socket != NULL && zmq_getsockopt(m->socket, ZMQ_EVENTS, &events, &len) == 0 &&
           (events & ZMQ_POLLIN) != 0) {
        zmq_msg_t part;
        uint16_t event = 0;
        int more;
        /* A monitor event is two frames: uint16 event + uint32 value, then the endpoint. */
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, m->socket, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            return;
        }
        if (zmq_msg_size(&part) >= sizeof(event))
            memcpy(&event, zmq_msg_data(&part), sizeof(event));
        for (more = zmq_msg_more(&part); more; more = zmq_msg_more(&part)) {
            zmq_msg_close(&part);
            zmq_msg_init(&part);
            if (zmq_msg_recv(&part, m->socket, ZMQ_DONTWAIT) < 0)
                break;
        }
        zmq_msg_close(&part);
        switch (event) {
        case ZMQ_EVENT_DISCONNECTED:
            if (m->dropped_at == 0)
                m->dropped_at = kmgr_now_ms();
            break;
        case ZMQ_EVENT_CONNECT_RETRIED:
            m->dropped_at = 0;
            break;
        case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
            m->dropped_at = 0;
            if (channel == WIRE_CHANNEL_STDIN && !ch->stdin_connected) {
                ch->stdin_connected = 1;
                /* from now on read from the tick like the others (a watch may end inside its own callback) */
                if (m->watch != NULL) {
                    ch->loop_ops->unwatch(ch->loop, m->watch);
                    m->watch = NULL;
                }
                ch->ops->on_stdin_connected(ch->data);
            }
            break;
        default:
            break;
        }
    }
}

static void drain_monitors(kmgr_channels_t *ch)
{
    for (int i = 0; i != WIRE_CHANNEL_COUNT && ch->ops != NULL; ++i)
        drain_monitor(ch, (wire_channel_t)i);
}

/* Replaces the socket of `channel` with a fresh one; shell and stdin go together under a new
 * identity, since the kernel's ROUTER may not have let go of the old one yet (a duplicate identity
 * is refused there). */
static int reopen(kmgr_channels_t *ch, wire_channel_t channel)
{
    int ret;

    if (channel == WIRE_CHANNEL_SHELL || channel == WIRE_CHANNEL_STDIN) {
        close_socket(ch, WIRE_CHANNEL_SHELL);
        close_socket(ch, WIRE_CHANNEL_STDIN);
        wire_uuid4(ch->identity);
        if ((ret = open_socket(ch, WIRE_CHANNEL_SHELL)) != 0 || (ret = open_socket(ch, WIRE_CHANNEL_STDIN)) != 0) {
            close_socket(ch, WIRE_CHANNEL_SHELL);
            close_socket(ch, WIRE_CHANNEL_STDIN);
            return ret;
        }
    } else {
        close_socket(ch, channel);
        if ((ret = open_socket(ch, channel)) != 0) {
            close_socket(ch, channel);
            return ret;
        }
    }
    /* What arrives before the watches begin would not signal them. */
    mark_redrain(ch);
    return 0;
}

int kmgr_channels_check_given_up(kmgr_channels_t *ch, uint64_t now)
{
    /* An announcement already queued must count before the wait is judged over. */
    drain_monitors(ch);
    for (int i = 0; i != WIRE_CHANNEL_COUNT && ch->ops != NULL; ++i) {
        kmgr_monitor_t *m = &ch->monitors[i];
        int ret;
        if (m->dropped_at == 0 || now - m->dropped_at < KMGR_GIVEN_UP_AFTER_MS)
            continue;
        fprintf(stderr,
                "kgate: kernel %s: a message on %s was larger than the message cap (%lld bytes): it was dropped with its "
                "connection, which was reopened\n",
                ch->uuid, wire_channel_name((wire_channel_t)i), (long long)ch->max_message_bytes);
        if ((ret = reopen(ch, (wire_channel_t)i)) != 0)
            return ret;
        ch->ops->on_given_up(ch->data, (wire_channel_t)i);
    }
    return 0;
}

/* Frames a received message keeps without touching the heap; longer messages grow onto it. */
#define RX_INLINE_PARTS 16

/*
 * One received multipart message. The bytes stay in ZMQ's messages, not copied: `frames` point
 * into `parts` until rx_release. Small parts keep their bytes inside the zmq_msg_t itself, so
 * `frames` are filled in only once every part is in place (rx_recv).
 */
typedef struct st_rx_t {
    size_t n, capacity;
    zmq_msg_t *parts;
    wire_frame_t *frames;
    zmq_msg_t inline_parts[RX_INLINE_PARTS];
    wire_frame_t inline_frames[RX_INLINE_PARTS];
} rx_t;

static void rx_init(rx_t *rx)
{
    rx->n = 0;
    rx->capacity = RX_INLINE_PARTS;
    rx->parts = rx->inline_parts;
    rx->frames = rx->inline_frames;
}

static void rx_release(rx_t *rx)
{
    for (size_t i = 0; i != rx->n; ++i)
        zmq_msg_close(&rx->parts[i]);
    rx->n = 0;
}

static void rx_dispose(rx_t *rx)
{
    rx_release(rx);
    if (rx->parts != rx->inline_parts) {
        free(rx->parts);
        free(rx->frames);
    }
}

/* zmq_msg_t must not be copied byte-wise: the parts move with zmq_msg_move. */
static void rx_grow(rx_t *rx)
{
    size_t capacity = rx->capacity * 2;
    zmq_msg_t *parts = wire_calloc(capacity, sizeof(*parts));

    for (size_t i = 0; i != rx->n; ++i) {
        zmq_msg_init(&parts[i]);
        zmq_msg_move(&parts[i], &rx->parts[i]);
        zmq_msg_close(&rx->parts[i]);
    }
    if (rx->parts != rx->inline_parts) {
        free(rx->parts);
        free(rx->frames);
    }
    rx->parts = parts;
    rx->frames = wire_calloc(capacity, sizeof(*rx->frames));
    rx->capacity = capacity;
}

/* Receives one multipart message into `rx` (empty). Returns 1 (got one), 0 (nothing), -1 (dropped). */
static int rx_recv(void *s, rx_t *rx)
{
    int more, too_many = 0;

    do {
        zmq_msg_t discard, *part = &discard;
        if (rx->n != KMGR_MAX_FRAMES) {
            if (rx->n == rx->capacity)
                rx_grow(rx);
            part = &rx->parts[rx->n];
        }
        zmq_msg_init(part);
        if (zmq_msg_recv(part, s, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(part);
            /* Parts of one message arrive atomically, so this only happens before the first. */
            return rx->n == 0 ? 0 : -1;
        }
        more = zmq_msg_more(part);
        if (part == &discard) {
            zmq_msg_close(part);
            too_many = 1;
        } else {
            ++rx->n;
        }
    } while (more);
    for (size_t i = 0; i != rx->n; ++i) {
        rx->frames[i].base = zmq_msg_data(&rx->parts[i]);
        rx->frames[i].len = zmq_msg_size(&rx->parts[i]);
    }
    return too_many ? -1 : 1;
}

static void count_dropped(kmgr_channels_t *ch, const char *why)
{
    if (ch->dropped++ == 0)
        fprintf(stderr, "kgate: kernel %s: dropped a message (%s); further drops are counted silently\n", ch->uuid, why);
}

int kmgr_channels_drain(kmgr_channels_t *ch, wire_channel_t channel)
{
    size_t bytes = 0;
    int more = 1;
    rx_t rx;

    rx_init(&rx);
    for (int n = 0; n != KMGR_DRAIN_BATCH && bytes < KMGR_DRAIN_BYTES; ++n) {
        void *s = ch->sockets[channel];
        wire_msg_t *msg;
        int events, got, ret;
        size_t len = sizeof(events);

        if (s == NULL || ch->ops == NULL || zmq_getsockopt(s, ZMQ_EVENTS, &events, &len) != 0 || (events & ZMQ_POLLIN) == 0) {
            more = 0;
            break;
        }
        got = rx_recv(s, &rx);
        if (got <= 0) {
            rx_release(&rx);
            if (got == 0) {
                more = 0;
                break;
            }
            count_dropped(ch, "too many frames");
            continue;
        }
        if (channel == WIRE_CHANNEL_HB) {
            rx_release(&rx);
            ch->ops->on_pong(ch->data);
            continue;
        }
        size_t msg_bytes = 0;
        for (size_t i = 0; i != rx.n; ++i)
            msg_bytes += rx.frames[i].len;
        bytes += msg_bytes;
        /* Nothing of it is read to decide: only its size and the owner's own state. */
        kmgr_big_iopub_t big = KMGR_BIG_IOPUB_READ;
        if (channel == WIRE_CHANNEL_IOPUB && msg_bytes > KMGR_UNAWAITED_MAX_BYTES)
            big = ch->ops->big_iopub(ch->data);
        if (big == KMGR_BIG_IOPUB_PASS_OVER) {
            rx_release(&rx);
            continue;
        }
        /* stream content stays raw until someone must read it (kmgr_requests_on_iopub): a relay of its
         * text copies the bytes as they are instead of decoding and re-encoding them */
        int flags = big == KMGR_BIG_IOPUB_HEADERS   ? WIRE_DECODE_SKIP_CONTENT
                    : channel == WIRE_CHANNEL_IOPUB ? WIRE_DECODE_RAW_STREAM
                                                    : 0;
        ret = wire_decode_ex(ch->signer, rx.frames, rx.n, flags, &msg);
        if (ret != 0) {
            rx_release(&rx);
            count_dropped(ch, wire_strerror(ret));
            continue;
        }
        /* wire_decode copies what it keeps: unless a relay wants the parts as they came, they go
         * before anyone sees the message, so that a big one is not held twice. */
        if (ch->ops->wants_parts(ch->data)) {
            size_t nparts;
            const wire_frame_t *parts = wire_signed_parts(msg, rx.frames, &nparts);
            ch->ops->on_message(ch->data, channel, msg, parts, nparts);
            rx_release(&rx);
        } else {
            rx_release(&rx);
            ch->ops->on_message(ch->data, channel, msg, NULL, 0);
        }
    }
    rx_dispose(&rx);
    /* A callback may have closed these channels (the owner restarted or destroyed the kernel). */
    return more && ch->ops != NULL;
}

void kmgr_channels_drain_all(kmgr_channels_t *ch)
{
    int more = 0;

    ch->redrain = 0;
    drain_monitors(ch);
    for (int i = 0; i != WIRE_CHANNEL_COUNT && ch->ops != NULL; ++i)
        more |= kmgr_channels_drain(ch, (wire_channel_t)i);
    if (more && ch->ops != NULL)
        mark_redrain(ch);
}
