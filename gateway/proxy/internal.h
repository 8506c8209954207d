/* proxy/internal.h: what the proxy door's files share (the request head, the HTTP relay, the WebSocket relay). */
#ifndef GW_PROXY_INTERNAL_H
#define GW_PROXY_INTERNAL_H

#include <h2o.h>
#include "proxy/proxy.h"

/** Where one request goes. Views into the request (its path, its pool). */
typedef struct st_gw_proxy_target_t {
    uint16_t port;
    h2o_iovec_t prefix;         /* "/proxy/{port}" as the client wrote it: X-Forwarded-Prefix */
    h2o_iovec_t path_and_query; /* what the upstream is asked for: "/{path}?{query}", bytes as received */
} gw_proxy_target_t;

/* ---- head.c: the two heads a relay rewrites -------------------------------------------------- */

/**
 * The upstream request's head, allocated in `req`'s pool: method and target, Host as the client
 * sent it, the end-to-end headers (hop-by-hop ones, those the Connection header names, kgate's
 * credentials (`token`), Sec-WebSocket-Extensions dropped; cookies merged), Content-Length of the
 * body, Connection: close (or the WebSocket upgrade), and X-Forwarded-For (appended to),
 * -Proto, -Host and -Prefix (replaced).
 */
h2o_iovec_t gw_proxy_request_head(h2o_req_t *req, const gw_proxy_target_t *target, const char *token, int is_upgrade);

/**
 * Sets `req->res` from the upstream's answer: status, reason, end-to-end headers (hop-by-hop ones,
 * those its Connection header names, Date and Server dropped: h2o writes its own), Content-Length
 * as res.content_length. Copies into `req`'s pool. Returns 0, or -1 on a malformed Content-Length.
 */
int gw_proxy_response_head(h2o_req_t *req, int status, h2o_iovec_t reason, const h2o_header_t *headers, size_t num_headers);

/** The value of header `name` (lower case) among `headers`, or an empty iovec with a NULL base. */
h2o_iovec_t gw_proxy_find_header(const h2o_header_t *headers, size_t num_headers, const char *name);

/* ---- http.c: one HTTP exchange relayed ------------------------------------------------------- */

/**
 * Relays `req` to the target: connects, sends the head and the body h2o buffered, streams the
 * answer back through the core's writer with the upstream paused while the client lags. When
 * `is_upgrade` and the upstream answers 101, the connection becomes a tunnel (tunnel.c). Always
 * answers `req` (502, 504 or the upstream's answer).
 */
void gw_proxy_http_start(gw_proxy_t *proxy, h2o_req_t *req, const gw_proxy_target_t *target, int is_upgrade);
/**
 * Frees the slots of clients that went away: an exchange whose client closed its HTTP/1 connection
 * is ended (its upstream connection closed, its answer cut), whatever state it is in. h2o reads no
 * client socket while a request is handled, so this looks (every GW_PROXY_WATCH_MS).
 */
void gw_proxy_http_watch(gw_proxy_t *proxy);
/** Ends every exchange (server shutdown): 503 before the answer started, a cut answer after. */
void gw_proxy_http_shutdown(gw_proxy_t *proxy);

/* ---- tunnel.c: one WebSocket relayed --------------------------------------------------------- */

/**
 * Upgrades `req` (its upstream answered 101 with `subprotocol`, NULL for none) and relays messages
 * both ways between the client (core/ws.h) and `upstream` (core/ws_client.h; ownership taken).
 */
void gw_proxy_tunnel_start(gw_proxy_t *proxy, h2o_req_t *req, h2o_socket_t *upstream, const char *subprotocol);
/** Closes every tunnel with 1001 both ways (server shutdown). */
void gw_proxy_tunnel_shutdown(gw_proxy_t *proxy);

#endif
