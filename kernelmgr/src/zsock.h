/*
 * kernelmgr/src/zsock.h: one connection to one of a kernel's ZMQ sockets, spoken natively (ZMTP
 * 3.0, NULL mechanism; wire/zmtp.h) inside the host's loop.
 *
 * Why not libzmq: its I/O thread took every kernel message off the TCP socket and handed it to the
 * loop through a mailbox and an eventfd, two thread wake-ups per message; measured, that thread was
 * over a third of kgate's CPU per execute. Here the loop reads the socket itself.
 *
 * What it keeps of a libzmq connecting socket (DEALER, SUB): it connects (TCP or ipc), retries
 * while nobody listens (a kernel binds its ports some time after it starts) and after a lost
 * connection, and messages sent before the handshake wait in order for it. What it does not keep:
 * messages queued when a connection drops are dropped with it (a kernel's connections drop when it
 * dies; its owner then starts a new one with new connections). A message over the size cap is
 * skipped as it arrives, never buffered, and the connection stays.
 */
#ifndef KMGR_ZSOCK_H
#define KMGR_ZSOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include "wire/frames.h"
#include "wire/zmtp_reader.h"
#include "kmgr/loop.h"
#include "bytebuf.h"

/* How long after a failed connect, or a lost connection, the next attempt is made (from kmgr_zsock_tick). Under one
 * tick (KMGR_TICK_MS), so that the attempt falls due at the next tick: at 50, a tick that came a fraction of a millisecond
 * short of 50 ms after the failed attempt left it for the tick after, 100 ms apart (strace of a forked kernel's start:
 * kgate's connects at 1, 67 and 167 ms after its fork request, the kernel's socket there between the second and third). */
#define KMGR_ZSOCK_RETRY_MS 40
/* A connection whose peer has not finished the handshake this long after connecting is dropped and
 * retried (libzmq's ZMQ_HANDSHAKE_IVL): a peer that accepts and says nothing must not hold it forever. */
#define KMGR_ZSOCK_HANDSHAKE_MS 10000
/* A receive buffer bigger than this is given back once it is empty at a tick (after a big message). */
#define KMGR_ZSOCK_KEEP_BYTES ((size_t)64 * 1024)
/* Bytes that may wait for the kernel to take them; a message that would pass it is refused
 * (KSYS_EBACKLOG) unless nothing waits, so one message of any size still goes. A client that
 * sends faster than a kernel reads must not grow kgate without limit. */
#define KMGR_ZSOCK_MAX_QUEUED_BYTES ((size_t)64 * 1024 * 1024)
/* Most frames one message may have (a kernel's buffers); a longer one is dropped whole. */
#define KMGR_ZSOCK_MAX_FRAMES 1024

typedef enum {
    KMGR_ZSOCK_CLOSED,     /* not opened, or closed */
    KMGR_ZSOCK_WAITING,    /* no connection: the next attempt is due at retry_at */
    KMGR_ZSOCK_CONNECTING, /* a non-blocking connect is in progress */
    KMGR_ZSOCK_HANDSHAKE,  /* connected; greeting and READY sent, the peer's awaited */
    KMGR_ZSOCK_READY,      /* the peer's READY arrived: messages flow both ways */
} kmgr_zsock_state_t;

/**
 * One received message: `frames` point into the connection's buffer until the next recv or close. That buffer is
 * `storage` (borrowed): a holder that must keep some of the frames' bytes longer takes a reference to it (wire_buf_ref)
 * instead of copying them; the connection then reads on into new storage and never touches those bytes again.
 */
typedef struct st_kmgr_zsock_msg_t {
    const wire_frame_t *frames;
    size_t nframes;
    size_t bytes; /* of every frame body together */
    wire_buf_t *storage;
} kmgr_zsock_msg_t;

/* kmgr_zsock_recv's results for a message over the cap, read on the fly as it is passed over (wire/zmtp_reader.h): */
#define KMGR_ZSOCK_OVER_START 2 /* its whole frames before the one over the cap in `*msg`, `msg->bytes` that frame's size */
#define KMGR_ZSOCK_OVER_PIECE 3 /* the next bytes of that frame: `msg->frames[0]` */
#define KMGR_ZSOCK_OVER_LOST 4  /* the connection was lost before its end: it ends unfinished (kmgr_zsock_dropped_parent) */

/** The longest parent_header of a skipped message that is kept for its owner (kmgr_zsock_dropped_parent). */
#define KMGR_ZSOCK_PARENT_MAX WIRE_ZMTP_PARENT_MAX

typedef struct st_kmgr_zsock_t {
    /* Fixed from kmgr_zsock_open. */
    const kmgr_loop_ops_t *loop_ops;
    void *loop;
    struct sockaddr_storage addr;
    socklen_t addrlen;
    const char *socket_type; /* "DEALER" or "SUB" (static) */
    char identity[256];      /* "" for none */
    int subscribe_all;       /* SUB: subscribe to everything once connected */
    uint64_t max_message_bytes;
    void (*on_readable)(void *arg); /* the owner's: a message may be ready for kmgr_zsock_recv */
    void *arg;
    const char *label; /* for log lines: "kernel <uuid> <channel>" style, borrowed */

    kmgr_zsock_state_t state;
    int fd;
    void *watch;
    int watching_write; /* a notify_writable is pending */
    uint64_t retry_at;
    uint64_t connected_at;   /* when the current connection was made (ksys_now_ms) */
    unsigned handshake_ms;   /* KMGR_ZSOCK_HANDSHAKE_MS from open; a test may shorten it */
    size_t max_queued_bytes; /* KMGR_ZSOCK_MAX_QUEUED_BYTES from open; a test may lower it */
    int read_all;            /* the last read emptied the socket: no read until the watch fires or the tick */
    /* bytes at the front of `out` that are our handshake: only they may go before the peer's READY
     * (libzmq 4.3 takes a message that arrives with our READY, before it sent its own, for a
     * second handshake command and drops the connection) */
    size_t out_handshake;
    kmgr_bytebuf_t in, out;
    /* the message last returned by recv: consumed at the next recv; lent until kmgr_zsock_release */
    size_t consumed;
    int lent;
    wire_frame_t piece; /* KMGR_ZSOCK_OVER_PIECE's frame */
    /* the stream's parser: where in the greeting, commands and messages the bytes read so far leave it */
    wire_zmtp_reader_t reader;
    /* the parent_header frame of the last message skipped over the cap, as it came (unverified: the signature covers what
     * was skipped), in the reader, when it had arrived and fit; length 0 otherwise */
    const char *dropped_parent;
    size_t dropped_parent_len;
    int over_lost; /* the connection was lost in the middle of a message over the cap: recv says so next (OVER_LOST) */
    /* counted for the owner and for log lines */
    uint64_t connects;        /* connections made (a reconnect after a loss counts again) */
    uint64_t protocol_errors; /* connections dropped because the peer broke ZMTP */
} kmgr_zsock_t;

/**
 * Opens a connection to `endpoint` ("tcp://IPv4-or-IPv6-literal:PORT" or "ipc://PATH") as a socket of
 * type `socket_type` ("DEALER", "SUB": a SUB subscribes to everything), announcing `identity` (NULL:
 * none). `on_readable(arg)` is called from the loop whenever a message may be ready. The first
 * connect is attempted at once. Returns 0, or KSYS_EZMQ (a malformed endpoint, no socket).
 */
int kmgr_zsock_open(kmgr_zsock_t *z, const kmgr_loop_ops_t *loop_ops, void *loop, const char *endpoint, const char *socket_type,
                    const char *identity, uint64_t max_message_bytes, void (*on_readable)(void *arg), void *arg, const char *label);

/**
 * Closes the connection and frees everything; a closed or zeroed zsock is fine. No callback after
 * it returns. While a received message is lent (between kmgr_zsock_recv and kmgr_zsock_release)
 * its bytes are kept: kmgr_zsock_release frees them.
 */
void kmgr_zsock_close(kmgr_zsock_t *z);

/** The owner is done with the message recv lent it (its frames may go); frees what a close during the loan kept. */
void kmgr_zsock_release(kmgr_zsock_t *z);

/** Stops reading (the watch goes; sends still go out as far as the socket takes them at once). */
void kmgr_zsock_stop_reading(kmgr_zsock_t *z);

/**
 * Queues one message of `nhead` frames from `head` then `ntail` from `tail` and writes what the
 * socket takes now; the rest goes out when it can. Returns 0, KSYS_EZMQ when closed, or
 * KSYS_EBACKLOG (nothing queued) when what already waits and this message would pass
 * max_queued_bytes.
 */
int kmgr_zsock_send(kmgr_zsock_t *z, const wire_frame_t *head, size_t nhead, const wire_frame_t *tail, size_t ntail);

/**
 * The next message: 1 (in `*msg`, valid until the next call or close), 0 (none now: the socket has
 * nothing more), KSYS_EMSGSIZE (one over the cap was skipped whole) or KSYS_EINVAL (one of more than
 * KMGR_ZSOCK_MAX_FRAMES frames was dropped). A message over the cap comes first as KMGR_ZSOCK_OVER_START, then
 * KMGR_ZSOCK_OVER_PIECE results with the bytes of its frame over the cap as they arrive (each in `*msg`, valid until the next
 * call or close, as a message), then KSYS_EMSGSIZE at its end; a lost connection in between ends it with KMGR_ZSOCK_OVER_LOST
 * instead (kmgr_zsock_dropped_parent then gives its parent_header as for KSYS_EMSGSIZE), returned by the next call whatever the
 * connection's state, so that what its owner holds of it goes at once. Reads the socket as needed; a lost connection is
 * retried from the tick. Handles the handshake and ZMTP commands itself.
 */
int kmgr_zsock_recv(kmgr_zsock_t *z, kmgr_zsock_msg_t *msg);

/**
 * After kmgr_zsock_recv returned KSYS_EMSGSIZE (or KMGR_ZSOCK_OVER_LOST): the skipped message's parent_header frame as the
 * kernel sent it (`*len` bytes, not NUL-terminated, valid until the next recv), or NULL when it had
 * not arrived before the frame over the cap or was longer than KMGR_ZSOCK_PARENT_MAX. Unverified:
 * the message's signature covers frames that were skipped; good to address a notice, nothing more.
 */
static inline const char *kmgr_zsock_dropped_parent(const kmgr_zsock_t *z, size_t *len)
{
    *len = z->dropped_parent_len;
    return z->dropped_parent_len != 0 ? z->dropped_parent : NULL;
}

/** Nonzero once the peer's READY arrived on the current connection. */
static inline int kmgr_zsock_is_ready(const kmgr_zsock_t *z)
{
    return z->state == KMGR_ZSOCK_READY;
}

/** Nonzero when bytes already read wait in the buffer (the socket will not signal for them again). */
static inline int kmgr_zsock_has_buffered(const kmgr_zsock_t *z)
{
    return z->in.end > z->in.start + z->consumed;
}

/** Retries a due connect; gives an idle big receive buffer back. Call every KMGR_TICK_MS or so. */
void kmgr_zsock_tick(kmgr_zsock_t *z, uint64_t now);
/** A connection waiting to retry its connect (the peer was not listening) tries now rather than at its next tick. */
void kmgr_zsock_retry_now(kmgr_zsock_t *z);

#endif
