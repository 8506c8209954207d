/* core/ws_client.h: the client end of a WebSocket over a connected h2o socket (wslay client mode), bounded and closed. */
#ifndef GW_WS_CLIENT_H
#define GW_WS_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>
#include "core/host.h"
#include "core/ws.h"

/*
 * The server end of a WebSocket is core/ws.h (h2o upgrades the request); this is the other end,
 * for a connection kgate opened itself once its handshake has been answered with 101 (a reverse
 * proxy's upstream). Frames are masked as RFC 6455 5.3 requires of a client. Same contract as
 * gw_ws_t: callbacks come from the loop, never from inside a gw_ws_client_* call.
 */
typedef struct st_gw_ws_client_t gw_ws_client_t;

typedef struct st_gw_ws_client_callbacks_t {
    /** A whole text or binary message; the bytes are valid during the call. */
    void (*on_message)(gw_ws_client_t *wc, int is_binary, const uint8_t *data, size_t len);
    /**
     * The connection is over: the closing handshake completed (`code` from the peer's close frame,
     * 1005 when it had none), the socket failed or the peer vanished (GW_WS_ABNORMAL), a message
     * passed its bound (GW_WS_TOO_BIG), the send queue passed its bound (GW_WS_POLICY_VIOLATION),
     * or the owner's gw_ws_client_close got no answer in time. Called exactly once; `wc` and its
     * socket are freed right after it returns.
     */
    void (*on_close)(gw_ws_client_t *wc, uint16_t code);
} gw_ws_client_callbacks_t;

/**
 * Speaks WebSocket over `sock`, whose handshake is done; bytes already in `sock->input` are the
 * peer's first frames. Takes ownership of `sock` (its data and read callback become the client's).
 * `limits` as for gw_ws_upgrade (ping_ms is the closing handshake's grace; no pings are sent:
 * the peer is local). Returns the client, owned by the core until on_close.
 */
gw_ws_client_t *gw_ws_client_start(h2o_socket_t *sock, gw_host_t *host, const gw_ws_limits_t *limits,
                                   const gw_ws_client_callbacks_t *callbacks, void *data);

/** The owner's pointer given to gw_ws_client_start. */
void *gw_ws_client_data(gw_ws_client_t *wc);

/**
 * Queues one message (copied) for the peer. Returns 0, GW_EWSCLOSED once closing, or GW_EWSFULL
 * when the queue would pass its bound: the connection is then cut (on_close follows with
 * GW_WS_POLICY_VIOLATION).
 */
int gw_ws_client_send(gw_ws_client_t *wc, int is_binary, const void *data, size_t len);

/**
 * Starts the closing handshake with `code` and `reason` (at most 123 bytes); on_close follows once
 * the peer answers, or after the grace. No-op when already closing.
 */
void gw_ws_client_close(gw_ws_client_t *wc, uint16_t code, const char *reason);

#endif
