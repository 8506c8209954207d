/* kernelmgr/src/channels.c: the five ZMQ sockets of a kernel process: connect, send, drain, close. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/errors.h"
#include "kmgr/errors.h"
#include "internal.h"

static void on_readable(void *arg)
{
    kmgr_chan_t *chan = arg;
    kmgr_proc_t *proc = chan->proc;

    if (chan->channel == WIRE_CHANNEL_COUNT) {
        if (proc->kernel != NULL)
            kmgr_channels_drain_monitor(proc);
        return;
    }
    /* A capped batch leaves the rest for run_pending: the edge-triggered fd will not signal again,
     * and run_pending drains only a proc marked for it. */
    if (proc->kernel != NULL && kmgr_channels_drain(proc, chan->channel)) {
        proc->redrain = 1;
        kmgr_manager_schedule(proc->mgr);
    }
}

static int set_int(void *sock, int option, int value)
{
    return zmq_setsockopt(sock, option, &value, sizeof(value));
}

int kmgr_channels_open(kmgr_proc_t *proc)
{
    static const int types[WIRE_CHANNEL_COUNT] = {
        [WIRE_CHANNEL_SHELL] = ZMQ_DEALER,   [WIRE_CHANNEL_IOPUB] = ZMQ_SUB, [WIRE_CHANNEL_STDIN] = ZMQ_DEALER,
        [WIRE_CHANNEL_CONTROL] = ZMQ_DEALER, [WIRE_CHANNEL_HB] = ZMQ_DEALER,
    };
    kmgr_manager_t *mgr = proc->mgr;
    char identity[WIRE_UUID_STRLEN + 1], endpoint[256];
    int64_t maxmsg = KMGR_MAX_FRAME_BYTES;

    /* stdin and shell must share one identity: the kernel routes input_request by the shell peer's. */
    wire_uuid4(identity);
    for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i) {
        void *s;
        if ((s = proc->sockets[i] = zmq_socket(mgr->zctx, types[i])) == NULL)
            goto Error;
        /* Linger 0: closing must never block the loop on a dead kernel's unsent messages. */
        if (set_int(s, ZMQ_LINGER, 0) != 0 || zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)) != 0)
            goto Error;
        /* Requests queued while the kernel starts must not hit the default send HWM; the callers bound
         * how many they queue. iopub is bounded: when kgate lags, the transport pushes back and the
         * backlog waits in the kernel's PUB queue rather than in kgate (KMGR_IOPUB_RCVHWM). */
        if (i != WIRE_CHANNEL_HB &&
            (set_int(s, ZMQ_SNDHWM, 0) != 0 || set_int(s, ZMQ_RCVHWM, i == WIRE_CHANNEL_IOPUB ? KMGR_IOPUB_RCVHWM : 0) != 0))
            goto Error;
        if ((i == WIRE_CHANNEL_SHELL || i == WIRE_CHANNEL_STDIN) &&
            zmq_setsockopt(s, ZMQ_ROUTING_ID, identity, strlen(identity)) != 0)
            goto Error;
        if (i == WIRE_CHANNEL_IOPUB && zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0) != 0)
            goto Error;
        if (wire_connection_endpoint(&proc->conn, (wire_channel_t)i, endpoint, sizeof(endpoint)) < 0 ||
            zmq_connect(s, endpoint) != 0)
            goto Error;
    }
    {
        char monitor_endpoint[sizeof("inproc://kmgr-stdin-") + WIRE_UUID_STRLEN];
        snprintf(monitor_endpoint, sizeof(monitor_endpoint), "inproc://kmgr-stdin-%s", proc->uuid);
        if (zmq_socket_monitor(proc->sockets[WIRE_CHANNEL_STDIN], monitor_endpoint, ZMQ_EVENT_HANDSHAKE_SUCCEEDED) != 0 ||
            (proc->monitor = zmq_socket(mgr->zctx, ZMQ_PAIR)) == NULL || set_int(proc->monitor, ZMQ_LINGER, 0) != 0 ||
            zmq_connect(proc->monitor, monitor_endpoint) != 0)
            goto Error;
    }
    for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i) {
        int fd;
        size_t fdlen = sizeof(fd);
        if (zmq_getsockopt(proc->sockets[i], ZMQ_FD, &fd, &fdlen) != 0)
            goto Error;
        proc->chans[i].proc = proc;
        proc->chans[i].channel = (wire_channel_t)i;
        proc->watches[i] = mgr->ops->watch(mgr->loop, fd, on_readable, &proc->chans[i]);
    }
    {
        int fd;
        size_t fdlen = sizeof(fd);
        if (zmq_getsockopt(proc->monitor, ZMQ_FD, &fd, &fdlen) != 0)
            goto Error;
        proc->monitor_chan.proc = proc;
        proc->monitor_chan.channel = WIRE_CHANNEL_COUNT;
        proc->monitor_watch = mgr->ops->watch(mgr->loop, fd, on_readable, &proc->monitor_chan);
    }
    /* The handshake may be done already (the monitor's fd then signalled before the watch). */
    kmgr_manager_schedule(mgr);
    proc->redrain = 1;
    return 0;

Error:
    kmgr_channels_close(proc, 0);
    return KMGR_EZMQ;
}

/* The stdin monitor has one job (see kmgr_channels_open); once done, or when the kernel goes, it
 * goes entirely: a watched ZMQ_FD nobody drains stays readable and spins the loop. */
static void close_monitor(kmgr_proc_t *proc)
{
    if (proc->sockets[WIRE_CHANNEL_STDIN] != NULL)
        zmq_socket_monitor(proc->sockets[WIRE_CHANNEL_STDIN], NULL, 0);
    if (proc->monitor_watch != NULL) {
        proc->mgr->ops->unwatch(proc->mgr->loop, proc->monitor_watch);
        proc->monitor_watch = NULL;
    }
    if (proc->monitor != NULL) {
        zmq_close(proc->monitor);
        proc->monitor = NULL;
    }
}

void kmgr_channels_close(kmgr_proc_t *proc, int keep_control)
{
    close_monitor(proc);
    for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i) {
        if (proc->watches[i] != NULL) {
            proc->mgr->ops->unwatch(proc->mgr->loop, proc->watches[i]);
            proc->watches[i] = NULL;
        }
        if (proc->sockets[i] != NULL && !(keep_control && i == WIRE_CHANNEL_CONTROL)) {
            zmq_close(proc->sockets[i]);
            proc->sockets[i] = NULL;
        }
    }
}

/* After a send, a message that already arrived may have lost its fd signal (PLATFORM.md): re-drain. */
static void after_send(kmgr_proc_t *proc)
{
    proc->redrain = 1;
    kmgr_manager_schedule(proc->mgr);
}

int kmgr_channels_send(kmgr_proc_t *proc, wire_channel_t channel, const wire_msg_t *msg)
{
    void *s = proc->sockets[channel];
    wire_frames_t frames;
    int ret = 0;

    if (s == NULL)
        return KMGR_EZMQ;
    wire_frames_init(&frames);
    wire_encode(&proc->signer, msg, &frames);
    for (size_t i = 0; i != frames.size; ++i) {
        int flags = ZMQ_DONTWAIT | (i + 1 != frames.size ? ZMQ_SNDMORE : 0);
        if (zmq_send(s, frames.entries[i].base, frames.entries[i].len, flags) < 0) {
            ret = KMGR_EZMQ;
            break;
        }
    }
    wire_frames_dispose(&frames);
    if (proc->watches[channel] != NULL)
        after_send(proc);
    return ret;
}

void kmgr_channels_ping(kmgr_proc_t *proc)
{
    void *s = proc->sockets[WIRE_CHANNEL_HB];

    if (s == NULL)
        return;
    /* The empty delimiter makes the ping valid for a REP heartbeat as well as ipykernel's echo device;
     * a DEALER avoids REQ's lockstep, which a lost pong would wedge. */
    if (zmq_send(s, "", 0, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        zmq_send(s, "ping", 4, ZMQ_DONTWAIT);
    after_send(proc);
}

void kmgr_channels_drain_monitor(kmgr_proc_t *proc)
{
    void *s = proc->monitor;
    int events;
    size_t len = sizeof(events);

    while (s != NULL && !proc->stdin_connected && zmq_getsockopt(s, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN) != 0) {
        zmq_msg_t part;
        uint16_t event = 0;
        int more;
        /* A monitor event is two frames: uint16 event + uint32 value, then the endpoint. */
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, s, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            return;
        }
        if (zmq_msg_size(&part) >= sizeof(event))
            memcpy(&event, zmq_msg_data(&part), sizeof(event));
        for (more = zmq_msg_more(&part); more; more = zmq_msg_more(&part)) {
            zmq_msg_close(&part);
            zmq_msg_init(&part);
            if (zmq_msg_recv(&part, s, ZMQ_DONTWAIT) < 0)
                break;
        }
        zmq_msg_close(&part);
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
            proc->stdin_connected = 1;
            /* later reconnects need no notice */
            close_monitor(proc);
            kmgr_kernel_on_stdin_connected(proc->kernel);
            return;
        }
    }
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

static void count_dropped(kmgr_proc_t *proc, const char *why)
{
    if (proc->dropped++ == 0)
        fprintf(stderr, "kgate: kernel %s: dropped a message (%s); further drops are counted silently\n", proc->uuid, why);
}

int kmgr_channels_drain(kmgr_proc_t *proc, wire_channel_t channel)
{
    kmgr_kernel_t *kernel = proc->kernel;
    uint64_t generation = kmgr_kernel_generation(kernel);
    size_t bytes = 0;
    int more = 1;
    rx_t rx;

    rx_init(&rx);
    for (int n = 0; n != KMGR_DRAIN_BATCH && bytes < KMGR_DRAIN_BYTES; ++n) {
        void *s = proc->sockets[channel];
        wire_msg_t *msg;
        int events, got, ret;
        size_t len = sizeof(events);

        if (s == NULL || zmq_getsockopt(s, ZMQ_EVENTS, &events, &len) != 0 || (events & ZMQ_POLLIN) == 0) {
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
            count_dropped(proc, "too many frames");
            continue;
        }
        if (channel == WIRE_CHANNEL_HB) {
            rx_release(&rx);
            kmgr_kernel_on_pong(kernel);
            continue;
        }
        size_t msg_bytes = 0;
        for (size_t i = 0; i != rx.n; ++i)
            msg_bytes += rx.frames[i].len;
        bytes += msg_bytes;
        /* Nothing of it is read to decide: only its size and kgate's own state. */
        if (channel == WIRE_CHANNEL_IOPUB && msg_bytes > KMGR_UNAWAITED_MAX_BYTES && !kmgr_kernel_awaits_iopub(kernel)) {
            rx_release(&rx);
            kmgr_kernel_on_unawaited(kernel);
            continue;
        }
        /* wire_decode copies what it keeps, so the parts go before anyone sees the message. */
        ret = wire_decode(&proc->signer, rx.frames, rx.n, &msg);
        rx_release(&rx);
        if (ret != 0) {
            count_dropped(proc, wire_strerror(ret));
            continue;
        }
        kmgr_kernel_on_message(kernel, channel, msg);
        /* The callbacks may have restarted or destroyed the kernel; `proc` may then be detached. */
        if (kmgr_kernel_generation(kernel) != generation) {
            more = 0;
            break;
        }
    }
    rx_dispose(&rx);
    return more;
}
