/* One WebSocket relayed: the client's end is core/ws.h, the upstream's core/ws_client.h; messages cross as they are. */
#include <stdlib.h>
#include "wire/alloc.h"
#include "core/ws.h"
#include "core/ws_client.h"
#include "proxy/internal.h"

/*
 * Both ends are bounded by the WebSocket core: a message larger than 64 MiB closes its side with
 * 1009, and a side that stops reading while more than 16 MiB wait for it is cut off with 1008.
 * Whichever side closes, the other is told with the same code.
 */
typedef struct st_tunnel_t {
    gw_proxy_t *proxy;
    h2o_linklist_t link;      /* in proxy->tunnels */
    gw_ws_t *client;          /* NULL once its on_close came */
    gw_ws_client_t *upstream; /* NULL once its on_close came */
} tunnel_t;

static void release_if_done(tunnel_t *t)
{
    if (t->client != NULL || t->upstream != NULL)
        return;
    h2o_linklist_unlink(&t->link);
    --t->proxy->num_active;
    free(t);
}

/* The code one side closed with, as the other side is told it: codes no close frame may carry become 1000 or 1001. */
static uint16_t relayed_code(uint16_t code)
{
    if ((code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) || (code >= 3000 && code <= 4999))
        return code;
    return code == GW_WS_ABNORMAL || code == 1015 ? GW_WS_GOING_AWAY : GW_WS_NORMAL;
}

static void on_client_message(gw_ws_t *ws, int is_binary, const uint8_t *data, size_t len)
{
    tunnel_t *t = gw_ws_data(ws);

    /* a full queue cuts the upstream off; its on_close then closes this side */
    if (t->upstream != NULL)
        gw_ws_client_send(t->upstream, is_binary, data, len);
}

static void on_client_close(gw_ws_t *ws, uint16_t code)
{
    tunnel_t *t = gw_ws_data(ws);

    t->client = NULL;
    if (t->upstream != NULL)
        gw_ws_client_close(t->upstream, relayed_code(code), code == GW_WS_ABNORMAL ? "the client's connection ended" : NULL);
    release_if_done(t);
}

static void on_upstream_message(gw_ws_client_t *wc, int is_binary, const uint8_t *data, size_t len)
{
    tunnel_t *t = gw_ws_client_data(wc);

    if (t->client != NULL)
        gw_ws_send(t->client, is_binary, data, len);
}

static void on_upstream_close(gw_ws_client_t *wc, uint16_t code)
{
    tunnel_t *t = gw_ws_client_data(wc);

    t->upstream = NULL;
    if (t->client != NULL)
        gw_ws_close(t->client, relayed_code(code), code == GW_WS_ABNORMAL ? "the upstream's connection ended" : NULL);
    release_if_done(t);
}

void gw_proxy_tunnel_start(gw_proxy_t *proxy, h2o_req_t *req, h2o_socket_t *upstream, const char *subprotocol)
{
    static const gw_ws_callbacks_t client_callbacks = {on_client_message, on_client_close};
    static const gw_ws_client_callbacks_t upstream_callbacks = {on_upstream_message, on_upstream_close};
    /* each way: what waits for a peer that does not read cuts it off, and the tunnel with it */
    gw_ws_limits_t limits = {.max_queued_bytes = proxy->host->config->ws_queue_bytes, .door = proxy->super.name};
    tunnel_t *t = wire_calloc(1, sizeof(*t));

    t->proxy = proxy;
    /* the upgrade was checked before the upstream was asked: this answers 101 */
    if ((t->client = gw_ws_upgrade(req, proxy->host, subprotocol, &limits, &client_callbacks, t)) == NULL) {
        h2o_socket_close(upstream);
        free(t);
        return;
    }
    h2o_linklist_insert(&proxy->tunnels, &t->link);
    ++proxy->num_active;
    t->upstream = gw_ws_client_start(upstream, proxy->host, &limits, &upstream_callbacks, t);
}

void gw_proxy_tunnel_shutdown(gw_proxy_t *proxy)
{
    h2o_linklist_t *node;

    /* both closes only queue: the callbacks, and the tunnel's release, come from the loop */
    for (node = proxy->tunnels.next; node != &proxy->tunnels; node = node->next) {
        tunnel_t *t = H2O_STRUCT_FROM_MEMBER(tunnel_t, link, node);
        if (t->client != NULL)
            gw_ws_close(t->client, GW_WS_GOING_AWAY, "kgate is shutting down");
        if (t->upstream != NULL)
            gw_ws_client_close(t->upstream, GW_WS_GOING_AWAY, "kgate is shutting down");
    }
}
