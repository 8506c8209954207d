/* kernelmgr/src/channels.h: the ZMQ sockets of one kernel process, a transport that knows no kernel state. */
#ifndef KMGR_CHANNELS_H
#define KMGR_CHANNELS_H

#include <stddef.h>
#include <stdint.h>
#include "wire/connfile.h"
#include "wire/message.h"
#include "wire/signer.h"
#include "kmgr/loop.h"

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
/*
 * A frame larger than the message cap (kmgr_channels_init) is never buffered: libzmq reads its
 * size, then drops the connection it came on and gives that connection up for good (a protocol
 * error; libzmq 4.3 session_base_t::engine_error), with every message still queued on it. A
 * connection that dropped because the kernel went away is retried by libzmq itself, which it
 * announces (ZMQ_EVENT_CONNECT_RETRIED) within a millisecond of the ZMQ_EVENT_DISCONNECTED; one
 * with no such announcement this long after was given up, and the channels reopen it.
 */
#define KMGR_GIVEN_UP_AFTER_MS 100

typedef struct st_kmgr_channels_t kmgr_channels_t;

/** What to do with an iopub message over KMGR_UNAWAITED_MAX_BYTES (kmgr_channels_ops_t.big_iopub). */
typedef enum {
    KMGR_BIG_IOPUB_READ,      /* verify and decode it whole: someone reads its content */
    KMGR_BIG_IOPUB_HEADERS,   /* verify it, decode its headers only: it is relayed, not read */
    KMGR_BIG_IOPUB_PASS_OVER, /* neither verify nor read it: nobody awaits output */
} kmgr_big_iopub_t;

/**
 * What the channels report to their owner (the kernel state machine), always from the loop and
 * with the owner's `data`. Any of them may close the channels (kmgr_channels_close), directly or
 * through a callback of its own: a drain in progress then stops at once and calls nothing more.
 */
typedef struct st_kmgr_channels_ops_t {
    /**
     * A verified message arrived on `channel`; the callee owns `msg`. `parts` are its signed parts as
     * they came (header, parent_header, metadata, content, then its buffers; `nparts` of them),
     * valid during the call, when wants_parts said so; NULL otherwise.
     */
    void (*on_message)(void *data, wire_channel_t channel, wire_msg_t *msg, const wire_frame_t *parts, size_t nparts);
    /** Nonzero when on_message is to get the raw parts (a relay is attached); they are then kept until it returns. */
    int (*wants_parts)(void *data);
    /** The stdin channel finished its handshake: an input_request can no longer be lost. Once. */
    void (*on_stdin_connected)(void *data);
    /** A heartbeat answer arrived. */
    void (*on_pong)(void *data);
    /**
     * An iopub message of more than KMGR_UNAWAITED_MAX_BYTES arrived, neither verified nor read:
     * returns what to do with it (kmgr_big_iopub_t).
     */
    kmgr_big_iopub_t (*big_iopub)(void *data);
    /**
     * A kernel message on `channel` was bigger than the message cap: it was dropped, with whatever
     * else was in flight on that connection, and the socket has been reopened (for shell or stdin,
     * both, under a new identity). Only from kmgr_channels_check_given_up.
     */
    void (*on_given_up)(void *data, wire_channel_t channel);
    /**
     * The channels marked themselves for a redrain (see `redrain`): the owner must have
     * kmgr_channels_drain_all called from the loop soon, never from inside this call.
     */
    void (*on_redrain)(void *data);
} kmgr_channels_ops_t;

/* The watch argument of one socket or of its monitor: which channels and which channel signalled. */
typedef struct st_kmgr_chan_t {
    kmgr_channels_t *channels;
    wire_channel_t channel;
    int is_monitor;
} kmgr_chan_t;

/*
 * A socket monitor (a PAIR connected to libzmq's inproc endpoint for one socket): it reports the
 * connection's handshake (stdin: an input_request can no longer be lost), its loss, and libzmq's
 * own reconnects. shell, iopub and stdin have one: they carry what a kernel's user code can make
 * as big as it likes (output, replies with tracebacks, prompts). A control reply is the kernel's
 * own and small, and a lost hb connection shows as missed heartbeats. Only stdin's is watched,
 * until its handshake; the others are read from the tick.
 */
typedef struct st_kmgr_monitor_t {
    void *socket;
    void *watch;
    kmgr_chan_t chan;
    /* When the monitored connection dropped with no reconnect announced yet (kmgr_now_ms); 0: none. */
    uint64_t dropped_at;
} kmgr_monitor_t;

/** The five sockets of one kernel process. The owner reads the fields; only channels.c writes them. */
struct st_kmgr_channels_t {
    /* Borrowed from kmgr_channels_init. */
    void *zctx;
    const kmgr_loop_ops_t *loop_ops;
    void *loop;
    const wire_connection_t *conn;
    const wire_signer_t *signer;
    const char *uuid;
    int64_t max_message_bytes;
    /* The owner while open (kmgr_channels_open); NULL once closed. */
    const kmgr_channels_ops_t *ops;
    void *data;
    void *sockets[WIRE_CHANNEL_COUNT];
    void *watches[WIRE_CHANNEL_COUNT];
    kmgr_chan_t chans[WIRE_CHANNEL_COUNT];
    kmgr_monitor_t monitors[WIRE_CHANNEL_COUNT];
    /* Names each monitor's inproc endpoint: a reopened socket's monitor must not race the old
     * endpoint's release. */
    unsigned monitor_serial;
    /* stdin and shell share one ZMQ identity (the kernel routes input_request by the shell peer's). */
    char identity[WIRE_UUID_STRLEN + 1];
    /* A ROUTER drops messages for a peer whose handshake it has not seen, so an input_request sent
     * before our stdin DEALER finished connecting is lost and the kernel waits forever: set once
     * the stdin monitor saw the handshake. */
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
 * the monitors' inproc endpoints and labels log lines. `max_message_bytes` caps every frame a
 * kernel sends (ZMQ_MAXMSGSIZE; see KMGR_GIVEN_UP_AFTER_MS). Allocates nothing.
 */
void kmgr_channels_init(kmgr_channels_t *ch, void *zctx, const kmgr_loop_ops_t *loop_ops, void *loop, const wire_connection_t *conn,
                        const wire_signer_t *signer, const char *uuid, int64_t max_message_bytes);
/**
 * Opens and connects the five sockets (and their monitors), watches them, and reports to `ops`
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
/**
 * Signs and sends a message given as its parts, sent verbatim: header, parent_header, metadata and
 * content (JSON texts, signed as they are), then `nparts - 4` buffers. Same results as kmgr_channels_send.
 */
int kmgr_channels_send_parts(kmgr_channels_t *ch, wire_channel_t channel, const wire_frame_t *parts, size_t nparts);
/** Sends a heartbeat ping (no-op when closed) and marks a redrain, as a send does. */
void kmgr_channels_ping(kmgr_channels_t *ch);
/**
 * Receives at most KMGR_DRAIN_BATCH messages, or KMGR_DRAIN_BYTES, from `channel`: each verified
 * message goes to ops->on_message, each heartbeat to ops->on_pong, and what to do with an iopub
 * message over KMGR_UNAWAITED_MAX_BYTES is asked of ops->big_iopub first. Bytes stay in ZMQ's messages
 * until wire_decode copies what it keeps. Returns 1 if the batch was capped with more to read,
 * else 0 (nothing more, or the channels were closed from a callback).
 */
int kmgr_channels_drain(kmgr_channels_t *ch, wire_channel_t channel);
/**
 * Reopens every connection libzmq gave up (dropped KMGR_GIVEN_UP_AFTER_MS or more before `now`
 * with no reconnect announced: a message over the cap), logs one line for each and reports it
 * through ops->on_given_up. Returns 0, or KMGR_EZMQ when a socket could not be reopened (the
 * channel then stays closed). Loop context; stops once a callback closes the channels.
 */
int kmgr_channels_check_given_up(kmgr_channels_t *ch, uint64_t now);
/**
 * Clears `redrain` and drains the monitors and every channel once (kmgr_channels_drain); if a
 * batch was capped, marks a redrain again. Stops as soon as a callback closes the channels.
 */
void kmgr_channels_drain_all(kmgr_channels_t *ch);

#endif
