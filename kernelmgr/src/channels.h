/* kernelmgr/src/channels.h: the five connections to one kernel process's sockets, a transport that knows no kernel state. */
#ifndef KMGR_CHANNELS_H
#define KMGR_CHANNELS_H

#include <stddef.h>
#include <stdint.h>
#include "wire/connfile.h"
#include "wire/message.h"
#include "wire/signer.h"
#include "kmgr/loop.h"
#include "overcap.h"
#include "zsock.h"

/* Messages, and bytes, drained from one socket per wakeup before yielding back to the loop: a
 * kernel printing at full speed must leave the loop time to write what it already relayed. */
#define KMGR_DRAIN_BATCH 64
#define KMGR_DRAIN_BYTES ((size_t)1024 * 1024)
/* An iopub message larger than this that arrives while no request awaits anything is passed over
 * unread (kmgr_channels_drain): verifying and parsing output nobody will see would cost as much as
 * relaying it. Status messages, which track the kernel's state, are far smaller. */
#define KMGR_UNAWAITED_MAX_BYTES ((size_t)64 * 1024)

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
     * A kernel message on `channel` was bigger than the message cap: it was skipped as it arrived
     * (never buffered); the connection goes on. `head` NULL: nobody sees it. `head` not NULL (the callee owns it): it was a
     * verified iopub `stream` message, cut to the head of its text (overcap.h: wire_msg_t.content_cut, text_dropped), to
     * be delivered as such. `parent` (`parent_len` bytes, or NULL) is its parent_header as sent, unverified
     * (kmgr_zsock_dropped_parent). From kmgr_channels_drain.
     */
    void (*on_oversized)(void *data, wire_channel_t channel, wire_msg_t *head, const char *parent, size_t parent_len);
    /**
     * An iopub message over the cap begins that may be a stream message: how many decoded bytes of its text its reader can
     * keep (UINT64_MAX: no bound but the cap's; 0: nobody reads it), its head being no longer (overcap.h). `parent` is its
     * parent_header as sent, unverified: it only sizes the head, which is delivered once the whole message verified.
     */
    uint64_t (*text_room)(void *data, const char *parent, size_t parent_len);
    /**
     * The channels marked themselves for a redrain (see `redrain`): the owner must have
     * kmgr_channels_drain_all called from the loop soon, never from inside this call.
     */
    void (*on_redrain)(void *data);
} kmgr_channels_ops_t;

/* The argument of one connection's callbacks: which channels and which channel. */
typedef struct st_kmgr_chan_t {
    kmgr_channels_t *channels;
    wire_channel_t channel;
} kmgr_chan_t;

/** The five connections of one kernel process. The owner reads the fields; only channels.c writes them. */
struct st_kmgr_channels_t {
    /* Borrowed from kmgr_channels_init. */
    const kmgr_loop_ops_t *loop_ops;
    void *loop;
    const wire_connection_t *conn;
    const wire_signer_t *signer;
    const char *uuid;
    uint64_t max_message_bytes;
    /* The owner while open (kmgr_channels_open); NULL once closed. */
    const kmgr_channels_ops_t *ops;
    void *data;
    kmgr_zsock_t socks[WIRE_CHANNEL_COUNT];
    kmgr_chan_t chans[WIRE_CHANNEL_COUNT];
    /* "kernel <uuid> <channel>", for the connections' log lines */
    char labels[WIRE_CHANNEL_COUNT][WIRE_UUID_STRLEN + 24];
    /* stdin and shell share one identity (the kernel routes input_request by the shell peer's). */
    char identity[WIRE_UUID_STRLEN + 1];
    /* A ROUTER drops messages for a peer whose handshake it has not seen, so an input_request sent
     * before our stdin connection finished its handshake is lost and the kernel waits forever: set
     * once the stdin connection's handshake is done. */
    int stdin_connected;
    /* Messages dropped because they failed to verify or decode; logged once. */
    uint64_t dropped;
    /* Set when a drain was capped with more to read: kmgr_channels_drain_all is due. */
    int redrain;
    /* An iopub message over the cap being read as it is passed over, for the head of its text. */
    kmgr_overcap_t overcap;
};

/**
 * Prepares closed channels for one kernel process. Everything is borrowed and must outlive the
 * channels: the loop that watches the connections, the connection file (endpoints), the signer
 * (every message in and out), and the process's `uuid` (a wire_uuid4 string), which labels log
 * lines. `max_message_bytes` caps every message a kernel sends (its frames together). Allocates nothing.
 */
void kmgr_channels_init(kmgr_channels_t *ch, const kmgr_loop_ops_t *loop_ops, void *loop, const wire_connection_t *conn,
                        const wire_signer_t *signer, const char *uuid, uint64_t max_message_bytes);
/**
 * Opens the five connections (each connects, and retries from kmgr_channels_tick until the kernel
 * listens) and reports to `ops` with `data` until closed. Returns 0, or KSYS_EZMQ (an endpoint
 * kgate cannot connect to) with everything closed.
 */
int kmgr_channels_open(kmgr_channels_t *ch, const kmgr_channels_ops_t *ops, void *data);
/**
 * Forgets the owner (no callback after this) and closes every connection; keep_control: leave the
 * control connection open, unread, for a last shutdown_request (it goes out if the socket takes it
 * at once, as a small message on an idle connection does). Closing closed channels is fine;
 * close(ch, 0) releases everything kmgr_channels_open took.
 */
void kmgr_channels_close(kmgr_channels_t *ch, int keep_control);
/** Nonzero while the connection of `channel` is open (connected or still trying). */
int kmgr_channels_is_open(const kmgr_channels_t *ch, wire_channel_t channel);
/**
 * Signs and queues `msg` on `channel` (borrowed); it goes out now, or once connected. Returns 0,
 * KSYS_EZMQ (that connection is closed) or KSYS_EBACKLOG (the kernel has not taken what waits:
 * KMGR_ZSOCK_MAX_QUEUED_BYTES).
 */
int kmgr_channels_send(kmgr_channels_t *ch, wire_channel_t channel, const wire_msg_t *msg);
/**
 * Signs and sends a message given as its parts, sent verbatim: header, parent_header, metadata and
 * content (JSON texts, signed as they are), then `nparts - 4` buffers. Same results as kmgr_channels_send.
 */
int kmgr_channels_send_parts(kmgr_channels_t *ch, wire_channel_t channel, const wire_frame_t *parts, size_t nparts);
/** Sends a heartbeat ping (no-op when closed). */
void kmgr_channels_ping(kmgr_channels_t *ch);
/**
 * Receives at most KMGR_DRAIN_BATCH messages, or KMGR_DRAIN_BYTES, from `channel`: each verified
 * message goes to ops->on_message, each heartbeat to ops->on_pong, and what to do with an iopub
 * message over KMGR_UNAWAITED_MAX_BYTES is asked of ops->big_iopub first, and a message over the cap
 * is reported to ops->on_oversized (an iopub one read on the fly for its head: overcap.h; its pieces count as bytes drained). Bytes
 * stay in the connection's buffer until wire_decode copies what it keeps. Returns 1 if the batch was capped with more to read, else
 * 0 (nothing more, or the channels were closed from a callback).
 */
int kmgr_channels_drain(kmgr_channels_t *ch, wire_channel_t channel);
/** Retries connections due for another attempt and gives idle buffers back. Every KMGR_TICK_MS or so. */
void kmgr_channels_tick(kmgr_channels_t *ch, uint64_t now);
/**
 * Connections whose connect was refused (the kernel was not listening yet) try again now, not at their next tick: when
 * word comes that the kernel listens (its template's fork answer, sent once the child has bound its sockets).
 */
void kmgr_channels_retry_now(kmgr_channels_t *ch);
/**
 * Clears `redrain` and drains every channel once (kmgr_channels_drain); if a batch was capped,
 * marks a redrain again. Stops as soon as a callback closes the channels.
 */
void kmgr_channels_drain_all(kmgr_channels_t *ch);

#endif
