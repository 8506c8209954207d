/* The proxy door: its route, the checks every relayed request passes, set-up and shutdown. */
#include <string.h>
#include "core/http.h"
#include "core/ws.h"
#include "proxy/internal.h"

static void on_watch(h2o_timeout_entry_t *entry)
{
    gw_proxy_t *proxy = H2O_STRUCT_FROM_MEMBER(gw_proxy_t, watch_entry, entry);

    gw_proxy_http_watch(proxy);
    if (!h2o_linklist_is_empty(&proxy->exchanges))
        h2o_timeout_link(proxy->host->loop, &proxy->watch_timeout, &proxy->watch_entry);
}

void gw_proxy_init(gw_proxy_t *proxy, gw_host_t *host)
{
    memset(proxy, 0, sizeof(*proxy));
    proxy->super.name = "proxy";
    proxy->host = host;
    h2o_timeout_init(host->loop, &proxy->io_timeout, host->config->proxy_timeout_ms);
    proxy->client_ctx.loop = host->loop;
    proxy->client_ctx.io_timeout = &proxy->io_timeout;
    h2o_timeout_init(host->loop, &proxy->watch_timeout, GW_PROXY_WATCH_MS);
    proxy->watch_entry.cb = on_watch;
    h2o_linklist_init_anchor(&proxy->exchanges);
    h2o_linklist_init_anchor(&proxy->tunnels);
}

void gw_proxy_set_own_port(gw_proxy_t *proxy, uint16_t port)
{
    proxy->own_port = port;
}

/* A decimal port 1-65535 (leading zeros allowed, as in a URL's authority), or 0. */
static uint16_t parse_port(h2o_iovec_t s)
{
    unsigned long v = 0;

    if (s.len == 0 || s.len > 5)
        return 0;
    for (size_t i = 0; i != s.len; ++i) {
        if (s.base[i] < '0' || s.base[i] > '9')
            return 0;
        v = v * 10 + (unsigned long)(s.base[i] - '0');
    }
    return v <= 65535 ? (uint16_t)v : 0;
}

/*
 * The upstream target is cut from the path as received, not from h2o's normalised one: that one has
 * its escapes decoded (a %2F becomes a '/', a %20 a bare space that is no valid request line). So
 * the received path must start with the prefix the route matched; one that reached it through dot
 * segments or escapes ("/proxy/80/../8080/", "/proxy/%38080/") is refused rather than guessed at.
 */
static int cut_target(h2o_req_t *req, h2o_iovec_t port_segment, gw_proxy_target_t *target)
{
    static const char lead[] = "/proxy/";
    size_t path_len = req->query_at != SIZE_MAX ? req->query_at : req->path.len, prefix_len = sizeof(lead) - 1 + port_segment.len;
    const char *p = req->path.base;
    char *out;
    size_t rest;

    if (path_len < prefix_len || memcmp(p, lead, sizeof(lead) - 1) != 0 ||
        memcmp(p + sizeof(lead) - 1, port_segment.base, port_segment.len) != 0 || (path_len != prefix_len && p[prefix_len] != '/'))
        return -1;
    target->prefix = h2o_iovec_init(p, prefix_len);
    /* "/proxy/8080" asks for "/"; the query, when there is one, follows as it came */
    rest = req->path.len - prefix_len;
    out = h2o_mem_alloc_pool(&req->pool, rest + 2);
    if (path_len == prefix_len) {
        out[0] = '/';
        memcpy(out + 1, p + prefix_len, rest);
        target->path_and_query = h2o_iovec_init(out, rest + 1);
    } else {
        memcpy(out, p + prefix_len, rest);
        target->path_and_query = h2o_iovec_init(out, rest);
    }
    return 0;
}

static void on_proxy(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_proxy_t *proxy = gw_proxy_from(door);
    const gw_config_t *config = proxy->host->config;
    h2o_iovec_t seg = params->values[0];
    gw_proxy_target_t target;

    if ((target.port = parse_port(seg)) == 0) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "the port must be a number from 1 to 65535, not \"%.*s\"",
                      (int)(seg.len > 32 ? 32 : seg.len), seg.base);
        return;
    }
    /* kgate itself: the request would come back to this door (a loop bounded only by the connection
     * bound) or to an API the caller can reach directly; either way nothing is gained */
    if (target.port == proxy->own_port) {
        gw_send_error(req, GW_HTTP_FORBIDDEN, "port %u is kgate's own: call its API directly", target.port);
        return;
    }
    if (proxy->host->shutting_down) {
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "kgate is shutting down");
        return;
    }
    if (proxy->num_active >= config->max_proxy_connections) {
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT(GW_PROXY_RETRY_AFTER));
        gw_send_error(req, GW_HTTP_TOO_MANY_PROXY_CONNECTIONS, "%zu connections are being relayed (--max-proxy-connections)",
                      proxy->num_active);
        return;
    }
    if (cut_target(req, seg, &target) != 0) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "the path must start with /proxy/%u written out (no dot segments or escapes)",
                      target.port);
        return;
    }
    gw_proxy_http_start(proxy, req, &target, gw_ws_is_upgrade(req));
    if (!h2o_timeout_is_linked(&proxy->watch_entry))
        h2o_timeout_link(proxy->host->loop, &proxy->watch_timeout, &proxy->watch_entry);
}

void gw_proxy_add_routes(gw_proxy_t *proxy, gw_route_table_t *table)
{
    gw_route_t route = {.method = GW_ROUTE_ANY_METHOD,
                        .pattern = "/proxy/{}" GW_ROUTE_REST,
                        .handler = on_proxy,
                        .max_body_bytes = proxy->host->config->max_proxy_body_bytes,
                        .door = &proxy->super};

    gw_route_table_add(table, &route);
}

void gw_proxy_shutdown(gw_proxy_t *proxy)
{
    gw_proxy_http_shutdown(proxy);
    gw_proxy_tunnel_shutdown(proxy);
}

int gw_proxy_is_drained(gw_proxy_t *proxy)
{
    return proxy->num_active == 0;
}

void gw_proxy_dispose(gw_proxy_t *proxy)
{
    /* by now every exchange has been disposed with its request and every tunnel has closed: no
     * upstream client is left on the timeout */
    h2o_timeout_unlink(&proxy->watch_entry);
    h2o_timeout_dispose(proxy->host->loop, &proxy->watch_timeout);
    h2o_timeout_dispose(proxy->host->loop, &proxy->io_timeout);
}
