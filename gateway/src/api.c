/* The route table, authentication and dispatch; health routes. */
#include <string.h>
#include "gateway/api.h"
#include "gateway/auth.h"
#include "gateway/config.h"
#include "gateway/http.h"
#include "gateway/server.h"

static const gw_route_t routes[] = {
    {"GET", "/healthz", gw_api_health, 1},
    {"GET", "/readyz", gw_api_ready, 1},
    {"GET", "/ping", gw_api_ping, 0},
    {"GET", "/files/info", gw_api_files_info, 0},
    {"DELETE", "/files", gw_api_files_delete, 0},
    {"POST", "/files/permissions", gw_api_files_permissions, 0},
    {"POST", "/files/mv", gw_api_files_mv, 0},
    {"GET", "/files/search", gw_api_files_search, 0},
    {"POST", "/files/replace", gw_api_files_replace, 0},
    {"POST", "/files/upload", gw_api_files_upload, 0},
    {"GET", "/files/download", gw_api_files_download, 0},
    {"GET", "/directories/list", gw_api_directories_list, 0},
    {"POST", "/directories", gw_api_directories_create, 0},
    {"DELETE", "/directories", gw_api_directories_delete, 0},
    {"POST", "/editor", gw_api_editor, 0},
    {"GET", "/code/languages", gw_api_languages, 0},
    {"POST", "/code/context", gw_api_context_create, 0},
    {"GET", "/code/contexts", gw_api_context_list, 0},
    {"DELETE", "/code/contexts", gw_api_context_delete_by_language, 0},
    {"GET", "/code/contexts/{}", gw_api_context_get, 0},
    {"DELETE", "/code/contexts/{}", gw_api_context_delete, 0},
    {"POST", "/code/contexts/{}/restart", gw_api_context_restart, 0},
    {"POST", "/code", gw_api_code_execute, 0},
    {"DELETE", "/code", gw_api_code_interrupt, 0},
    {"GET", "/code/executions/{}", gw_api_execution_get, 0},
    {"DELETE", "/code/executions/{}", gw_api_execution_cancel, 0},
    {"GET", "/code/executions/{}/events", gw_api_execution_events, 0},
    {"POST", "/code/executions/{}/input", gw_api_execution_input, 0},
    {"POST", "/command", gw_api_command_run, 0},
    {"DELETE", "/command", gw_api_command_interrupt, 0},
    {"GET", "/command/status/{}", gw_api_command_status, 0},
    {"GET", "/command/{}/logs", gw_api_command_logs, 0},
    {"POST", "/session", gw_api_session_create, 0},
    {"POST", "/session/{}/run", gw_api_session_run, 0},
    {"DELETE", "/session/{}", gw_api_session_delete, 0},
    {"GET", "/metrics", gw_api_metrics, 0},
    {"GET", "/metrics/watch", gw_api_metrics_watch, 0},
};

void gw_api_handle(gw_server_t *server, h2o_req_t *req)
{
    h2o_iovec_t path = req->path_normalized;
    const gw_route_t *route;
    gw_route_params_t params;

    switch (gw_route_match(routes, sizeof(routes) / sizeof(routes[0]), req->method, path, &route, &params)) {
    case GW_ROUTE_NO_PATH:
        gw_send_error(req, GW_ERR_NOT_FOUND, "no route for %.*s", (int)(path.len > 200 ? 200 : path.len), path.base);
        return;
    case GW_ROUTE_NO_METHOD:
        gw_send_error(req, GW_ERR_METHOD_NOT_ALLOWED, "%.*s is not allowed on %.*s",
                      (int)(req->method.len > 16 ? 16 : req->method.len), req->method.base, (int)(path.len > 200 ? 200 : path.len),
                      path.base);
        return;
    case GW_ROUTE_FOUND:
        break;
    }
    if (!route->is_public && !gw_auth_check(req, server->config->access_token)) {
        gw_send_error(req, GW_ERR_UNAUTHORIZED, "a valid access token is required (X-EXECD-ACCESS-TOKEN or Authorization: Bearer)");
        return;
    }
    /* h2o's global limit admits uploads (--max-upload-bytes); every other route keeps --max-body-bytes */
    if (req->entity.len > server->config->max_body_bytes && route->handler != gw_api_files_upload) {
        gw_send_error(req, GW_ERR_PAYLOAD_TOO_LARGE, "the request body exceeds %zu bytes (--max-body-bytes)",
                      server->config->max_body_bytes);
        return;
    }
    route->handler(server, req, &params);
}

void gw_api_health(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    (void)server, (void)params;
    gw_send_json(req, 200, json_pack("{s:s, s:s}", "status", "ok", "version", GW_VERSION));
}

void gw_api_ready(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    (void)params;
    if (server->shutting_down) {
        gw_send_error(req, GW_ERR_KERNEL_UNAVAILABLE, "kgate is shutting down");
    } else if (server->specs.size == 0) {
        gw_send_error(req, GW_ERR_KERNEL_UNAVAILABLE, "no kernelspec is installed");
    } else {
        gw_send_json(req, 200, json_pack("{s:s, s:i}", "status", "ready", "kernelspecs", (int)server->specs.size));
    }
}

void gw_api_ping(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    (void)server, (void)params;
    gw_send_empty(req);
}
