/* kernelmgr/src/channels.c: the five connections of a kernel process: open, send, drain, close; a leaf over zsock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/codec.h"
#include "wire/errors.h"
#include "wire/ids.h"
#include "ksys/errors.h"
#include "channels.h"
#include "ksys/log.h"

static void mark_redrain(kmgr_channels_t *ch)
{
    ch->redrain = 1;
    if (ch->ops != NULL)
        ch->ops->on_redrain(ch->data);
}

static void on_readable(void *arg)
{
    kmgr_chan_t *chan = arg;
    kmgr_channels_t *ch = chan->channels;

    if (ch->ops == NULL)
        return;
    /* A capped batch leaves bytes in the connection's buffer, which the socket will not signal
     * again: the owner drains channels marked for it. */
    if (kmgr_channels_drain(ch, chan->channel))
        mark_redrain(ch);
}

void kmgr_channels_init(kmgr_channels_t *ch, const kmgr_loop_ops_t *loop_ops, void *loop, const wire_connection_t *conn,
                        const wire_signer_t *signer, const char *uuid, uint64_t max_message_bytes)
{
    memset(ch, 0, sizeof(*ch));
    ch->loop_ops = loop_ops;
    ch->loop = loop;
    ch->conn = conn;
    ch->signer = signer;
    ch->uuid = uuid;
    ch->max_message_bytes = max_message_bytes;
}

int kmgr_channels_open(kmgr_channels_t *ch, const kmgr_channels_ops_t *ops, void *data)
{
    ch->ops = ops;
    ch->data = data;
    ch->stdin_connected = 0;
    wire_uuid4(ch->identity);
    for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i) {
        wire_channel_t channel = (wire_channel_t)i;
        char endpoint[256];
        /* a DEALER rather than REQ for hb: REQ's lockstep would wedge on a lost pong */
        const char *type = channel == WIRE_CHANNEL_IOPUB ? "SUB" : "DEALER";
        const char *identity = channel == WIRE_CHANNEL_SHELL || channel == WIRE_CHANNEL_STDIN ? ch->identity : NULL;
        ch->chans[i].channels = ch;
        ch->chans[i].channel = channel;
        snprintf(ch->labels[i], sizeof(ch->labels[i]), "kernel %s %s", ch->uuid, wire_channel_name(channel));
        if (wire_connection_endpoint(ch->conn, channel, endpoint, sizeof(endpoint)) < 0 ||
            kmgr_zsock_open(&ch->socks[i], ch->loop_ops, ch->loop, endpoint, type, identity, ch->max_message_bytes, on_readable,
                            &ch->chans[i], ch->labels[i]) != 0)
            goto Error;
    }
    return 0;

Error:
    kmgr_channels_close(ch, 0);
    return KSYS_EZMQ;
}

void kmgr_channels_close(kmgr_channels_t *ch, int keep_control)
{
    /* Forgetting the owner first is what stops a drain that a callback closed the channels from. */
    ch->ops = NULL;
    ch->data = NULL;
    kmgr_overcap_dispose(&ch->overcap);
    for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i) {
        if (keep_control && i == WIRE_CHANNEL_CONTROL)
            kmgr_zsock_stop_reading(&ch->socks[i]); /* it only carries a last shutdown_request */
        else
            kmgr_zsock_close(&ch->socks[i]);
    }
}

int kmgr_channels_is_open(const kmgr_channels_t *ch, wire_channel_t channel)
{
    return ch->socks[channel].state != KMGR_ZSOCK_CLOSED;
}

int kmgr_channels_send(kmgr_channels_t *ch, wire_channel_t channel, const wire_msg_t *msg)
{
    wire_frames_t frames;
    int ret;

    if (!kmgr_channels_is_open(ch, channel))
        return KSYS_EZMQ;
    wire_frames_init(&frames);
    wire_encode(ch->signer, msg, &frames);
    ret = kmgr_zsock_send(&ch->socks[channel], frames.entries, frames.size, NULL, 0);
    wire_frames_dispose(&frames);
    return ret;
}

int kmgr_channels_send_parts(kmgr_channels_t *ch, wire_channel_t channel, const wire_frame_t *parts, size_t nparts)
{
    char sig[WIRE_SIG_HEX_LEN + 1];
    wire_frame_t head[2] = {{WIRE_DELIMITER, sizeof(WIRE_DELIMITER) - 1}, {sig, 0}};

    if (nparts < 4)
        return KSYS_EINVAL;
    if (!kmgr_channels_is_open(ch, channel))
        return KSYS_EZMQ;
    wire_signer_sign(ch->signer, parts, sig);
    head[1].len = strlen(sig);
    return kmgr_zsock_send(&ch->socks[channel], head, 2, parts, nparts);
}

void kmgr_channels_ping(kmgr_channels_t *ch)
{
    /* The empty delimiter makes the ping valid for a REP heartbeat as well as ipykernel's echo device. */
    wire_frame_t ping[2] = {{"", 0}, {"ping", 4}};

    if (kmgr_channels_is_open(ch, WIRE_CHANNEL_HB))
        kmgr_zsock_send(&ch->socks[WIRE_CHANNEL_HB], ping, 2, NULL, 0);
}

void kmgr_channels_tick(kmgr_channels_t *ch, uint64_t now)
{
    for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i)
        if (kmgr_channels_is_open(ch, (wire_channel_t)i))
            kmgr_zsock_tick(&ch->socks[i], now);
}

void kmgr_channels_retry_now(kmgr_channels_t *ch)
{
    for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i)
        if (kmgr_channels_is_open(ch, (wire_channel_t)i))
            kmgr_zsock_retry_now(&ch->socks[i]);
}

static void count_dropped(kmgr_channels_t *ch, const char *why)
{
    if (ch->dropped++ == 0)
        ksys_log_warn("kernel %s: dropped a message (%s); further drops are counted silently", ch->uuid, why);
}

/* The stdin connection finished its handshake: from now on an input_request reaches kgate. */
static void check_stdin_connected(kmgr_channels_t *ch)
{
    if (ch->stdin_connected || ch->ops == NULL || !kmgr_zsock_is_ready(&ch->socks[WIRE_CHANNEL_STDIN]))
        return;
    ch->stdin_connected = 1;
    ch->ops->on_stdin_connected(ch->data);
}

int kmgr_channels_drain(kmgr_channels_t *ch, wire_channel_t channel)
{
    kmgr_zsock_t *z = &ch->socks[channel];
    size_t bytes = 0;
    int more = 1;

    for (int n = 0; n != KMGR_DRAIN_BATCH && bytes < KMGR_DRAIN_BYTES; ++n) {
        kmgr_zsock_msg_t rx;
        wire_msg_t *msg;
        int got, ret;

        if (ch->ops == NULL || (got = kmgr_zsock_recv(z, &rx)) == 0) {
            more = 0;
            break;
        }
        /* a message over the cap as it passes: only iopub's are read, for a stream's head (overcap.h) */
        if (got == KMGR_ZSOCK_OVER_START) {
            const wire_frame_t *parent = channel == WIRE_CHANNEL_IOPUB ? kmgr_overcap_parent(rx.frames, rx.nframes) : NULL;
            /* the head is no longer than its reader keeps: the memory of a message over the cap follows its reader's bound */
            if (parent != NULL)
                kmgr_overcap_start(&ch->overcap, ch->signer, rx.frames, rx.nframes, rx.bytes, ch->max_message_bytes,
                                   ch->ops->text_room(ch->data, parent->base, parent->len));
            else
                kmgr_overcap_dispose(&ch->overcap);
            continue;
        }
        if (got == KMGR_ZSOCK_OVER_PIECE) {
            if (channel == WIRE_CHANNEL_IOPUB)
                kmgr_overcap_piece(&ch->overcap, rx.frames[0].base, rx.frames[0].len);
            bytes += rx.bytes;
            continue;
        }
        /* the connection went in the middle of one: what its head held goes now (its one release path), and its requests are
         * told a message was lost, as for one passed over unread; nothing unverified is delivered */
        if (got == KMGR_ZSOCK_OVER_LOST) {
            if (channel == WIRE_CHANNEL_IOPUB)
                kmgr_overcap_dispose(&ch->overcap);
            ksys_log_warn("kernel %s: the %s connection was lost in the middle of a message larger than the message cap (%llu "
                          "bytes): it was dropped",
                          ch->uuid, wire_channel_name(channel), (unsigned long long)ch->max_message_bytes);
            size_t parent_len;
            const char *parent = kmgr_zsock_dropped_parent(z, &parent_len);
            ch->ops->on_oversized(ch->data, channel, NULL, parent, parent_len);
            continue;
        }
        if (got == KSYS_EMSGSIZE) {
            int forged = 0;
            wire_msg_t *head = channel == WIRE_CHANNEL_IOPUB ? kmgr_overcap_end(&ch->overcap, &forged) : NULL;
            /* signed with another key: not the kernel's, so nothing it tracks was lost; dropped as a small one would be */
            if (forged) {
                count_dropped(ch, wire_strerror(WIRE_EBADSIG));
                continue;
            }
            if (head != NULL)
                ksys_log_warn("kernel %s: a stream message on %s was larger than the message cap (%llu bytes): the head of its "
                              "text was kept, %llu bytes of text after it were dropped",
                              ch->uuid, wire_channel_name(channel), (unsigned long long)ch->max_message_bytes,
                              (unsigned long long)head->text_dropped);
            else
                ksys_log_warn("kernel %s: a message on %s was larger than the message cap (%llu bytes): it was dropped", ch->uuid,
                              wire_channel_name(channel), (unsigned long long)ch->max_message_bytes);
            size_t parent_len;
            const char *parent = kmgr_zsock_dropped_parent(z, &parent_len);
            ch->ops->on_oversized(ch->data, channel, head, parent, parent_len);
            continue;
        }
        if (got < 0) {
            count_dropped(ch, "too many frames");
            continue;
        }
        if (channel == WIRE_CHANNEL_HB) {
            ch->ops->on_pong(ch->data);
            continue;
        }
        bytes += rx.bytes;
        /* Nothing of it is read to decide: only its size and the owner's own state. */
        kmgr_big_iopub_t big = KMGR_BIG_IOPUB_READ;
        if (channel == WIRE_CHANNEL_IOPUB && rx.bytes > KMGR_UNAWAITED_MAX_BYTES)
            big = ch->ops->big_iopub(ch->data);
        if (big == KMGR_BIG_IOPUB_PASS_OVER)
            continue;
        /* stream content stays raw until someone must read it (kmgr_requests_on_iopub): a relay of its
         * text copies the bytes as they are instead of decoding and re-encoding them */
        int flags = big == KMGR_BIG_IOPUB_HEADERS   ? WIRE_DECODE_SKIP_CONTENT
                    : channel == WIRE_CHANNEL_IOPUB ? WIRE_DECODE_RAW_STREAM | WIRE_DECODE_RAW_RESULT
                                                    : 0;
        if ((ret = wire_decode_in(ch->signer, rx.frames, rx.nframes, flags, rx.storage, &msg)) != 0) {
            count_dropped(ch, wire_strerror(ret));
            continue;
        }
        /* wire_decode copies what it keeps but raw content, a view of the connection's buffer (held by reference); the
         * parts as they came stay in that buffer until the next receive, for a relay that wants them */
        if (ch->ops->wants_parts(ch->data)) {
            size_t nparts;
            const wire_frame_t *parts = wire_signed_parts(msg, rx.frames, &nparts);
            ch->ops->on_message(ch->data, channel, msg, parts, nparts);
        } else {
            ch->ops->on_message(ch->data, channel, msg, NULL, 0);
        }
    }
    /* the last message's bytes may go now, or with the connection if a callback closed it */
    kmgr_zsock_release(z);
    if (channel == WIRE_CHANNEL_STDIN)
        check_stdin_connected(ch);
    /* A callback may have closed these channels (the owner restarted or destroyed the kernel). */
    return more && ch->ops != NULL;
}

void kmgr_channels_drain_all(kmgr_channels_t *ch)
{
    int more = 0;

    ch->redrain = 0;
    for (int i = 0; i != WIRE_CHANNEL_COUNT && ch->ops != NULL; ++i)
        more |= kmgr_channels_drain(ch, (wire_channel_t)i);
    if (more && ch->ops != NULL)
        mark_redrain(ch);
}
