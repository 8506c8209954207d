/* core/ws.h: WebSocket connections over h2o 2.2.5 and wslay: upgrade, frames, keep-alive, close, bounded sending. */
#ifndef GW_WS_H
#define GW_WS_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>
#include "core/host.h"

typedef struct st_gw_ws_t gw_ws_t;

/* Close codes kgate sends (RFC 6455 7.4.1), besides those a front door chooses (4000-4999). */
#define GW_WS_NORMAL 1000
#define GW_WS_GOING_AWAY 1001
#define GW_WS_PROTOCOL_ERROR 1002
#define GW_WS_ABNORMAL 1006 /* never sent: reported when the connection ended without a close frame */
#define GW_WS_POLICY_VIOLATION 1008
#define GW_WS_TOO_BIG 1009

/** What the owner of a WebSocket hears. Each is called from the loop, never from inside a gw_ws_* call. */
typedef struct st_gw_ws_callbacks_t {
    /** A whole text (`is_binary` 0, valid UTF-8 is not checked) or binary message. The bytes are valid during the call. */
    void (*on_message)(gw_ws_t *ws, int is_binary, const uint8_t *data, size_t len);
    /**
     * The connection is over: the peer closed (`code` from its close frame, or GW_WS_ABNORMAL), the
     * owner's gw_ws_close completed, the socket failed, or the peer stopped reading (send queue over
     * its bound, GW_WS_POLICY_VIOLATION). Called exactly once; `ws` is freed right after it returns.
     */
    void (*on_close)(gw_ws_t *ws, uint16_t code);
} gw_ws_callbacks_t;

/** How a WebSocket is bounded. Zero fields take the defaults noted. */
typedef struct st_gw_ws_limits_t {
    size_t max_message_bytes; /* a larger incoming message closes with 1009 (default 64 MiB) */
    size_t max_queued_bytes;  /* more than this waiting for the peer cuts it off (default 16 MiB); see over_bound_ms */
    /* 0: at once; else the queue may stay past max_queued_bytes this long, and never pass 4 times it
     * (a relay of big messages: its peer reads, but one message may be bigger than the bound) */
    unsigned over_bound_ms;
    unsigned ping_ms; /* a ping every ping_ms; silence for 3 of them closes (0: the host's ping interval) */
    const char
        *door; /* the front door's name, a static string, for the figures (kgate_websockets_open, sent bytes); NULL: "other" */
} gw_ws_limits_t;

/**
 * True when `req` asks for a WebSocket (GET, Upgrade: websocket, a valid Sec-WebSocket-Key),
 * over HTTP/1.1 (h2o 2.2.5 cannot upgrade HTTP/2 streams).
 */
int gw_ws_is_upgrade(h2o_req_t *req);

/**
 * True when the client's Sec-WebSocket-Protocol offers `protocol` (comma-separated, case-sensitive
 * as RFC 6455 says).
 */
int gw_ws_offers_protocol(h2o_req_t *req, const char *protocol);

/**
 * Answers `req` with 101 and turns its connection into a WebSocket (`subprotocol`, when not
 * NULL, is echoed in Sec-WebSocket-Protocol). Returns the WebSocket, owned by the core until
 * `on_close`; `data` is the owner's (gw_ws_data). Returns NULL after answering 400 when `req` is no
 * WebSocket handshake.
 */
gw_ws_t *gw_ws_upgrade(h2o_req_t *req, gw_host_t *host, const char *subprotocol, const gw_ws_limits_t *limits,
                       const gw_ws_callbacks_t *callbacks, void *data);

/** The owner's pointer given to gw_ws_upgrade. */
void *gw_ws_data(gw_ws_t *ws);

/**
 * Queues one message (copied) for the peer; it leaves from the loop. Returns 0, or GW_EWSCLOSED
 * once the WebSocket is closing, or GW_EWSFULL when the peer stopped reading: more than
 * max_queued_bytes already waits for it (for longer than over_bound_ms, or a non-empty queue would
 * pass 4 times the bound); it is then cut off (on_close follows with GW_WS_POLICY_VIOLATION). A
 * message of any size goes to an empty queue.
 */
int gw_ws_send(gw_ws_t *ws, int is_binary, const void *data, size_t len);

/** gw_ws_send of the concatenation of `n` buffers (one message, one copy). */
int gw_ws_sendv(gw_ws_t *ws, int is_binary, const h2o_iovec_t *bufs, size_t n);

/** Bytes queued for the peer and not yet written. */
size_t gw_ws_queued_bytes(gw_ws_t *ws);

/**
 * Starts the closing handshake with `code` and `reason` (at most 123 bytes): the close frame leaves
 * after the messages queued before it, and no message is accepted afterwards. on_close follows
 * once the peer answers, or after a ping interval if it does not. No-op when already closing.
 */
void gw_ws_close(gw_ws_t *ws, uint16_t code, const char *reason);

#endif
