/* Dispatch through the composed route table; /healthz and /readyz. */
#include "core/auth.h"
#include "core/http.h"
#include "app/routes.h"
#include "app/server.h"

static gw_server_t *server_of(gw_door_t *door)
{
    return H2O_STRUCT_FROM_MEMBER(gw_server_t, app_door, door);
}

static void on_health(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
{
    (void)door, (void)params;
    gw_send_json(req, 200, json_pack("{s:s, s:s}", "status", "ok", "version", GW_VERSION));
}

static void on_ready(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_server_t *server = server_of(door);
    (void)params;

    if (server->host.shutting_down)
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "kgate is shutting down");
    else if (server->languages.specs.size == 0)
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "no kernelspec is installed");
    else
        gw_send_json(req, 200, json_pack("{s:s, s:i}", "status", "ready", "kernelspecs", (int)server->languages.specs.size));
}

void gw_app_build_routes(gw_server_t *server)
{
    size_t max_body = server->host.config->max_body_bytes;
    gw_route_t health = {.method = "GET",
                         .pattern = "/healthz",
                         .handler = on_health,
                         .is_public = 1,
                         .max_body_bytes = max_body,
                         .door = &server->app_door},
               ready = {.method = "GET",
                        .pattern = "/readyz",
                        .handler = on_ready,
                        .is_public = 1,
                        .max_body_bytes = max_body,
                        .door = &server->app_door};

    server->app_door.name = "app";
    gw_route_table_add(&server->routes, &health);
    gw_route_table_add(&server->routes, &ready);
    gw_observe_add_routes(&server->observe, &server->routes);
    gw_runtime_init_add_routes(&server->runtime_init, &server->routes, max_body);
    gw_execd_add_routes(&server->execd, &server->routes);
    gw_proxy_add_routes(&server->proxy, &server->routes);
    gw_jupyter_add_routes(&server->jupyter, &server->routes);
    gw_mcp_add_routes(&server->mcp, &server->routes);
    gw_e2b_add_routes(&server->e2b, &server->routes);
}

/* A request's pool is released: it is no longer in flight (the drain of gw_server_begin_drain waits for none). */
static void on_request_disposed(void *p)
{
    gw_server_t *server = *(gw_server_t **)p;
    --server->requests_in_flight;
}

void gw_app_dispatch(gw_server_t *server, h2o_req_t *req)
{
    h2o_iovec_t path = req->path_normalized;
    const gw_route_t *route = NULL;
    gw_route_params_t params;
    gw_route_result_t found = gw_route_match(server->routes.entries, server->routes.size, req->method, path, &route, &params);
    const char *framing = gw_req_framing_error(req);
    gw_server_t **counted = h2o_mem_alloc_shared(&req->pool, sizeof(*counted), on_request_disposed);

    *counted = server;
    ++server->requests_in_flight;
    if (server->draining) {
        req->http1_is_persistent = 0;
        gw_send_error(req, GW_HTTP_SHUTTING_DOWN, "kgate is shutting down: it finishes the requests in flight and takes no more");
        return;
    }

    /* before anything: where this request's body ends is in doubt, so where the next one begins is too */
    if (framing != NULL) {
        req->http1_is_persistent = 0;
        gw_send_error(req, GW_HTTP_AMBIGUOUS_FRAMING, "%s (RFC 9112 6.3): the connection is closed", framing);
        return;
    }
    /* a page of another site first: it never gets an answer it could learn from (core/auth.h) */
    if (!gw_auth_host_allowed(req, server->loopback_listener)) {
        gw_send_error(req, GW_HTTP_FORBIDDEN,
                      "kgate listens on loopback: the Host header must name it (localhost, 127.0.0.1 or [::1])");
        return;
    }
    if (!gw_auth_origin_allowed(req, server->host.config->allow_origin)) {
        gw_send_error(req, GW_HTTP_FORBIDDEN, "requests from the origin of another site are refused (see --allow-origin)");
        return;
    }
    /* --runtime-init, before the token (which init may set): until POST /internal/init, only the public routes (probes and init
     * itself) answer */
    if (!server->runtime_init.initialized && !(found == GW_ROUTE_FOUND && route->is_public)) {
        gw_send_error(req, GW_HTTP_NOT_INITIALIZED, "the runtime is not initialised yet (POST /internal/init; see GET /ready)");
        return;
    }
    /* the token before anything else: without it only the public routes answer, and a 404 or 405
     * would tell a stranger which routes exist */
    if (!(found == GW_ROUTE_FOUND &&
          (route->is_public || (route->token_in_query && gw_auth_check_query(req, server->host.config->access_token)) ||
           (route->token_headers != NULL &&
            gw_auth_check_headers(req, server->host.config->access_token, route->token_headers)))) &&
        !gw_runtime_init_check_token(&server->runtime_init, req, server->host.config->access_token)) {
        gw_send_error(req, GW_HTTP_UNAUTHORIZED,
                      "a valid access token is required (X-EXECD-ACCESS-TOKEN or Authorization: Bearer)");
        return;
    }
    switch (found) {
    case GW_ROUTE_NO_PATH:
        gw_send_error(req, GW_HTTP_NOT_FOUND, "no route for %.*s", (int)(path.len > 200 ? 200 : path.len), path.base);
        return;
    case GW_ROUTE_NO_METHOD:
        gw_send_error(req, GW_HTTP_METHOD_NOT_ALLOWED, "%.*s is not allowed on %.*s",
                      (int)(req->method.len > 16 ? 16 : req->method.len), req->method.base, (int)(path.len > 200 ? 200 : path.len),
                      path.base);
        return;
    case GW_ROUTE_FOUND:
        break;
    }
    /* h2o's global limit is the largest route's; each route holds its own */
    if (req->entity.len > route->max_body_bytes) {
        gw_send_error(req, GW_HTTP_PAYLOAD_TOO_LARGE, "the request body exceeds %zu bytes (--max-body-bytes)",
                      route->max_body_bytes);
        return;
    }
    route->handler(route->door, req, &params);
}
