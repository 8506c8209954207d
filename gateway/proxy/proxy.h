/* proxy/proxy.h: the /proxy front door: a reverse proxy (HTTP and WebSocket) to services on 127.0.0.1. */
#ifndef GW_PROXY_H
#define GW_PROXY_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>
#include <h2o/http1client.h>
#include "core/host.h"
#include "core/router.h"

/**
 * The door's state (execd's `ANY /proxy/{port}/{path}`). It speaks for no engine feature: it
 * relays requests to 127.0.0.1:{port} and their answers back, each direction bounded. Route
 * handlers get it through gw_proxy_from(door).
 */
typedef struct st_gw_proxy_t {
    gw_door_t super;
    gw_host_t *host;
    uint16_t own_port;                /* kgate's listening port, refused as a target (0: not known yet) */
    h2o_timeout_t io_timeout;         /* --proxy-timeout-ms: the upstream's connect, answer and every body read */
    h2o_http1client_ctx_t client_ctx; /* h2o's HTTP/1 client, on io_timeout */
    h2o_timeout_t watch_timeout;      /* GW_PROXY_WATCH_MS: looks for clients gone while their exchange waits */
    h2o_timeout_entry_t watch_entry;  /* linked while exchanges are relayed */
    h2o_linklist_t exchanges;         /* HTTP requests being relayed (proxy/http.c) */
    h2o_linklist_t tunnels;           /* WebSockets being relayed (proxy/tunnel.c) */
    size_t num_active;                /* both of them: bounded by --max-proxy-connections */
} gw_proxy_t;

/* How often exchanges look for clients that closed their connection (proxy/exchange.c). */
#define GW_PROXY_WATCH_MS 1000
/* The Retry-After (seconds) of a 429 TOO_MANY_PROXY_CONNECTIONS. */
#define GW_PROXY_RETRY_AFTER "1"

/** Initialises the door on `host` (borrowed for the door's life). */
void gw_proxy_init(gw_proxy_t *proxy, gw_host_t *host);
/** Appends the door's routes to `table` (body limit: --max-proxy-body-bytes). */
void gw_proxy_add_routes(gw_proxy_t *proxy, gw_route_table_t *table);
/** Tells the door kgate's own port once the listener is bound. */
void gw_proxy_set_own_port(gw_proxy_t *proxy, uint16_t port);
/**
 * Server shutdown: pending requests get 503, streamed answers end, WebSockets close with 1001
 * both ways. Relays end from the loop.
 */
void gw_proxy_shutdown(gw_proxy_t *proxy);
/** True once nothing is being relayed (after gw_proxy_shutdown). */
int gw_proxy_is_drained(gw_proxy_t *proxy);
/** Releases the door (call when drained; whatever remains is cut). */
void gw_proxy_dispose(gw_proxy_t *proxy);

/** The door's state from a handler's `door` argument. */
static inline gw_proxy_t *gw_proxy_from(gw_door_t *door)
{
    return H2O_STRUCT_FROM_MEMBER(gw_proxy_t, super, door);
}

#endif
