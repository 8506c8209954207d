/* kernelmgr/src/channels.h: the ZMQ sockets of one kernel process, a transport that knows no kernel state. */
#ifndef KMGR_CHANNELS_H
#define KMGR_CHANNELS_H

#include <stddef.h>
#include <stdint.h>
#include "wire/connfile.h"
#include "wire/message.h"
#include "wire/signer.h"
#include "kmgr/loop.h"

/* Largest inbound frame accepted from a kernel (ZMQ_MAXMSGSIZE); a bigger one drops the peer. */
#define KMGR_MAX_FRAME_BYTES ((int64_t)64 * 1024 * 1024)
/* Most frames one message may have (a kernel's buffers); the rest of a longer one is discarded. */
#define KMGR_MAX_FRAMES 1024
/* Messages, and bytes, drained from one socket per wakeup before yielding back to the loop: a
 * kernel printing at full speed must leave the loop time to write what it already relayed. */
#define KMGR_DRAIN_BATCH 64
#define KMGR_DRAIN_BYTES ((size_t)1024 * 1024)
/* Messages kgate's iopub socket queues before it stops reading from the kernel. Unbounded, a
 * kernel printing faster than kgate relays grew kgate without limit; bounded, the backlog waits
 * in the kernel's own PUB queue (which drops beyond its high-water mark: KMGR_IDLE_GRACE_MS). */
#define KMGR_IOPUB_RCVHWM 16
/* An iopub message larger than this that arrives while no request awaits anything is passed over
 * unread (kmgr_channels_drain): verifying and parsing output nobody will see would cost as much as
 * relaying it. Status messages, which track the kernel's state, are far smaller. */
#define KMGR_UNAWAITED_MAX_BYTES ((size_t)64 * 1024)

typedef struct st_kmgr_channels_t kmgr_channels_t;

/**
 * What the channels report to their owner (the kernel state machine), always from the loop and
 * with the owner's `data`. Any of them may close the channels (kmgr_channels_close), directly or
 * through a callback of its own: a drain in progress then stops at once and calls nothing more.
 */
typedef struct st_kmgr_channels_ops_t {
    /** A verified message arrived on `channel`; the callee owns `msg`. */
    void (*on_message)(void *data, wire_channel_t channel, wire_msg_t *msg);
    /** The stdin channel finished its handshake: an input_request can no longer be lost. Once. */
    void (*on_stdin_connected)(void *data);
    /** A heartbeat answer arrived. */
    void (*on_pong)(void *data);
    /**
     * An iopub message of more than KMGR_UNAWAITED_MAX_BYTES arrived, neither verified nor read:
     * returns nonzero to have it passed over unread (nobody awaits output), 0 to read it.
     */
    int (*pass_over_iopub)(void *data);
    /**
     * The channels marked themselves for a redrain (see `redrain`): the owner must have
     * kmgr_channels_drain_all called from the loop soon, never from inside this call.
     */
    void (*on_redrain)(void *data);
} kmgr_channels_ops_t;

/* The watch argument of one socket: which channels and which channel signalled. */
typedef struct st_kmgr_chan_t {
    kmgr_channels_t *channels;
    wire_channel_t channel;
} kmgr_chan_t;

/** The five sockets of one kernel process. The owner reads the fields; only channels.c writes them. */
struct st_kmgr_channels_t {
    /* Borrowed from kmgr_channels_init. */
    void *zctx;
    const kmgr_loop_ops_t *loop_ops;
    void *loop;
    const wire_connection_t *conn;
    const wire_signer_t *signer;
    const char *uuid;
    /* The owner while open (kmgr_channels_open); NULL once closed. */
    const kmgr_channels_ops_t *ops;
    void *data;
    void *sockets[WIRE_CHANNEL_COUNT];
    void *watches[WIRE_CHANNEL_COUNT];
    kmgr_chan_t chans[WIRE_CHANNEL_COUNT];
    /* A ROUTER drops messages for a peer whose handshake it has not seen, so an input_request sent
     * before our stdin DEALER finished (re)connecting is lost and the kernel waits forever. A
     * monitor of the stdin socket (a PAIR, channel WIRE_CHANNEL_COUNT) tells when it has. */
    void *monitor;
    void *monitor_watch;
    kmgr_chan_t monitor_chan;
    int stdin_connected;
    /* Messages dropped because they failed to verify or decode; logged once. */
    uint64_t dropped;
    /* Set when a drain was capped or a send may have eaten a wakeup: kmgr_channels_drain_all is due. */
    int redrain;
};

/**
 * Prepares closed channels for one kernel process. Everything is borrowed and must outlive the
 * channels: the ZMQ context, the loop that watches the sockets, the connection (endpoints), the
 * signer (every message in and out), and the process's `uuid` (a wire_uuid4 string), which names
 * the stdin monitor's inproc endpoint and labels log lines. Allocates nothing.
 */
void kmgr_channels_init(kmgr_channels_t *ch, void *zctx, const kmgr_loop_ops_t *loop_ops, void *loop, const wire_connection_t *conn,
                        const wire_signer_t *signer, const char *uuid);
/**
 * Opens and connects the five sockets (and the stdin monitor), watches them, and reports to `ops`
 * with `data` until closed. A first drain is marked due at once (ops->on_redrain): the stdin
 * handshake may be done before the watch began. Returns 0, or KMGR_EZMQ with everything closed.
 */
int kmgr_channels_open(kmgr_channels_t *ch, const kmgr_channels_ops_t *ops, void *data);
/**
 * Stops watching, forgets the owner (no callback after this) and closes every socket;
 * keep_control: leave the control socket open, unwatched, for a last shutdown_request. Closing
 * closed channels is fine; close(ch, 0) releases everything kmgr_channels_open took.
 */
void kmgr_channels_close(kmgr_channels_t *ch, int keep_control);
/**
 * Signs and sends `msg` on `channel` (borrowed). Returns 0, or KMGR_EZMQ (that socket is closed,
 * or the send failed). A send on a watched socket marks a redrain: it may have consumed the wakeup of a
 * message that already arrived (PLATFORM.md).
 */
int kmgr_channels_send(kmgr_channels_t *ch, wire_channel_t channel, const wire_msg_t *msg);
/** Sends a heartbeat ping (no-op when closed) and marks a redrain, as a send does. */
void kmgr_channels_ping(kmgr_channels_t *ch);
/**
 * Receives at most KMGR_DRAIN_BATCH messages, or KMGR_DRAIN_BYTES, from `channel`: each verified
 * message goes to ops->on_message, each heartbeat to ops->on_pong, and an iopub message over
 * KMGR_UNAWAITED_MAX_BYTES is first offered to ops->pass_over_iopub. Bytes stay in ZMQ's messages
 * until wire_decode copies what it keeps. Returns 1 if the batch was capped with more to read,
 * else 0 (nothing more, or the channels were closed from a callback).
 */
int kmgr_channels_drain(kmgr_channels_t *ch, wire_channel_t channel);
/**
 * Clears `redrain` and drains the stdin monitor and every channel once (kmgr_channels_drain); if a
 * batch was capped, marks a redrain again. Stops as soon as a callback closes the channels.
 */
void kmgr_channels_drain_all(kmgr_channels_t *ch);

#endif
