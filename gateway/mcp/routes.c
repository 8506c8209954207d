/* The MCP door's routes (POST, GET, DELETE /mcp), its JSON-RPC dispatch, and its sessions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/ids.h"
#include "core/http.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"

/* ---- the door --------------------------------------------------------------------------------- */

void gw_mcp_init(gw_mcp_t *mcp, gw_host_t *host, gw_languages_t *languages, gw_contexts_t *contexts, gw_files_t *files)
{
    memset(mcp, 0, sizeof(*mcp));
    mcp->super.name = "mcp";
    mcp->host = host;
    mcp->languages = languages;
    mcp->contexts = contexts;
    mcp->files = files;
    h2o_linklist_init_anchor(&mcp->sessions);
    h2o_linklist_init_anchor(&mcp->named);
    h2o_timeout_init(host->loop, &mcp->tick_timeout, GW_MCP_TICK_MS);
    gw_mcp_figures_register(mcp);
}

void gw_mcp_shutdown(gw_mcp_t *mcp)
{
    while (!h2o_linklist_is_empty(&mcp->sessions))
        gw_mcp_session_end(H2O_STRUCT_FROM_MEMBER(gw_mcp_session_t, link, mcp->sessions.next), GW_MCP_END_SHUTDOWN);
    gw_mcp_named_shutdown(mcp);
}

void gw_mcp_dispose(gw_mcp_t *mcp)
{
    gw_mcp_shutdown(mcp);
    h2o_timeout_dispose(mcp->host->loop, &mcp->tick_timeout);
}

/* ---- requests --------------------------------------------------------------------------------- */

static const char *header(h2o_req_t *req, const char *name, size_t name_len, size_t *len)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, name, name_len, -1);

    if (i == -1)
        return NULL;
    *len = req->headers.entries[i].value.len;
    return req->headers.entries[i].value.base;
}

/* The session a request names in Mcp-Session-Id; NULL after answering 400 (none) or 404 (unknown or ended). */
static gw_mcp_session_t *session_of(gw_mcp_t *mcp, h2o_req_t *req)
{
    size_t len = 0;
    const char *id = header(req, H2O_STRLIT("mcp-session-id"), &len);
    gw_mcp_session_t *session;

    if (id == NULL) {
        gw_mcp_send(
            req, 400,
            gw_mcp_error(NULL, GW_MCP_SERVER_ERROR, "Bad Request: the Mcp-Session-Id header is required (initialize first)"));
        return NULL;
    }
    if ((session = gw_mcp_session_find(mcp, id, len)) == NULL) {
        /* the spec's answer to a session the server no longer has: the client starts a new one */
        gw_mcp_send(req, 404, gw_mcp_error(NULL, GW_MCP_SESSION_ERROR, gw_mcp_session_gone(mcp, id, len)));
        return NULL;
    }
    session->last_activity_mono_ms = gw_now_ms();
    return session;
}

static void on_initialize(gw_mcp_t *mcp, h2o_req_t *req, gw_mcp_message_t *msg)
{
    const char *requested = json_string_value(json_object_get(msg->params, "protocolVersion")), *version;
    gw_mcp_session_t *session;
    json_t *result;
    unsigned retry_after_s = 0;
    char text[256];

    if (!json_is_object(msg->params) || requested == NULL) {
        gw_mcp_send(
            req, 200,
            gw_mcp_error(msg->id, GW_MCP_INVALID_PARAMS, "initialize takes params {protocolVersion, capabilities, clientInfo}"));
        return;
    }
    if (mcp->host->shutting_down) {
        gw_mcp_send(req, 503, gw_mcp_error(msg->id, GW_MCP_SERVER_ERROR, "kgate is shutting down"));
        return;
    }
    if (gw_mcp_session_admit(mcp, &retry_after_s) != 0) {
        char value[16];
        int n = snprintf(value, sizeof(value), "%u", retry_after_s);
        snprintf(text, sizeof(text),
                 "%zu MCP sessions are open, the maximum (--mcp-max-sessions), and each has a call in flight; retry in %u s "
                 "(Retry-After), or end a session (DELETE /mcp)",
                 mcp->nsessions, retry_after_s);
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, h2o_strdup(&req->pool, value, (size_t)n).base,
                       (size_t)n);
        gw_mcp_send(req, 429, gw_mcp_error(msg->id, GW_MCP_SERVER_ERROR, text));
        return;
    }
    version = gw_mcp_negotiate_version(requested);
    session = gw_mcp_session_create(mcp, version);
    result = json_pack("{s:s, s:{s:{s:b}, s:{}}, s:{s:s, s:s, s:s}, s:s}", "protocolVersion", version, "capabilities", "tools",
                       "listChanged", 0, "logging", "serverInfo", "name", "kgate", "title", "kgate", "version", GW_VERSION,
                       "instructions",
                       "kgate runs code in persistent Jupyter kernels. Each MCP session has its own kernels (one per language) and "
                       "its own bash shell; state persists between calls until the session ends.");
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("mcp-session-id"), 0, NULL,
                          h2o_strdup(&req->pool, session->id, SIZE_MAX).base, GW_MCP_SESSION_ID_LEN);
    gw_mcp_send(req, 200, gw_mcp_result(msg->id, result));
}

static void on_notification(gw_mcp_session_t *session, gw_mcp_message_t *msg)
{
    if (strcmp(msg->method, "notifications/initialized") == 0)
        session->initialized = 1;
    else if (strcmp(msg->method, "notifications/cancelled") == 0 && json_is_object(msg->params))
        gw_mcp_cancel(session, json_object_get(msg->params, "requestId"));
    /* other notifications (progress, roots/list_changed, ...) need nothing from this server */
}

static void on_request(gw_mcp_session_t *session, h2o_req_t *req, gw_mcp_message_t *msg, unsigned accepts)
{
    static const char *const levels[] = {"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};
    char text[256];

    if (msg->params != NULL && !json_is_object(msg->params)) {
        gw_mcp_respond(req, accepts, gw_mcp_error(msg->id, GW_MCP_INVALID_PARAMS, "params must be an object"));
        return;
    }
    if (strcmp(msg->method, "ping") == 0) {
        gw_mcp_respond(req, accepts, gw_mcp_result(msg->id, json_object()));
    } else if (strcmp(msg->method, "tools/list") == 0) {
        gw_mcp_respond(req, accepts, gw_mcp_result(msg->id, gw_mcp_tools_list(session->mcp->host->config->max_timeout_ms)));
    } else if (strcmp(msg->method, "tools/call") == 0) {
        if (!json_is_string(json_object_get(msg->params, "name"))) {
            gw_mcp_respond(req, accepts, gw_mcp_error(msg->id, GW_MCP_INVALID_PARAMS, "tools/call takes params {name, arguments}"));
            return;
        }
        gw_mcp_tools_call(session, req, msg->id, msg->params, accepts);
    } else if (strcmp(msg->method, "logging/setLevel") == 0) {
        /* kgate sends no log messages yet: any valid level is accepted */
        const char *level = json_string_value(json_object_get(msg->params, "level"));
        for (size_t i = 0; level != NULL && i != sizeof(levels) / sizeof(levels[0]); ++i) {
            if (strcmp(level, levels[i]) == 0) {
                gw_mcp_respond(req, accepts, gw_mcp_result(msg->id, json_object()));
                return;
            }
        }
        gw_mcp_respond(req, accepts,
                       gw_mcp_error(msg->id, GW_MCP_INVALID_PARAMS, "level must be one of RFC 5424's: debug ... emergency"));
    } else {
        snprintf(text, sizeof(text), "Method not found: %.100s", msg->method);
        gw_mcp_respond(req, accepts, gw_mcp_error(msg->id, GW_MCP_METHOD_NOT_FOUND, text));
    }
}

static void on_post(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_mcp_t *mcp = gw_mcp_from(door);
    gw_mcp_message_t msg;
    gw_mcp_session_t *session;
    const char *why, *value;
    json_t *bad_id;
    size_t len = 0;
    unsigned accepts;
    int ret;
    (void)params;

    value = header(req, H2O_STRLIT("accept"), &len);
    accepts = gw_mcp_accepts(value, len);
    if ((ret = gw_mcp_message_parse(req->entity.base, req->entity.len, &msg, &why, &bad_id)) != 0) {
        gw_mcp_send(req, 400, gw_mcp_error(bad_id, ret, why));
        json_decref(bad_id);
        return;
    }
    if (msg.kind == GW_MCP_REQUEST && accepts == 0) {
        gw_mcp_send(req, 406,
                    gw_mcp_error(msg.id, GW_MCP_SERVER_ERROR,
                                 "Not Acceptable: the client must accept application/json or text/event-stream"));
        goto Exit;
    }
    /* revision 2026-07-28 (its _meta, or a version header of no session revision: it answers unsupported ones) */
    if (gw_mcp_stateless_claims(req, &msg)) {
        gw_mcp_stateless_post(mcp, req, &msg, accepts);
        goto Exit;
    }
    if (msg.kind == GW_MCP_REQUEST && strcmp(msg.method, "initialize") == 0) {
        on_initialize(mcp, req, &msg);
        goto Exit;
    }
    if ((session = session_of(mcp, req)) == NULL)
        goto Exit;
    if (msg.kind != GW_MCP_NOTIFICATION || strcmp(msg.method, "notifications/initialized") != 0)
        session->used = 1;
    switch (msg.kind) {
    case GW_MCP_REQUEST:
        on_request(session, req, &msg, accepts);
        break;
    case GW_MCP_NOTIFICATION:
        on_notification(session, &msg);
        gw_send_empty_status(req, 202);
        break;
    case GW_MCP_RESPONSE:
        /* kgate sends clients no requests: a response answers nothing, and is accepted all the same */
        gw_send_empty_status(req, 202);
        break;
    }
Exit:
    gw_mcp_message_dispose(&msg);
}

static void on_get(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
{
    (void)door, (void)params;
    /* no server-initiated stream: every message kgate sends answers a request, on that request's response */
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_ALLOW, NULL, H2O_STRLIT("POST, DELETE"));
    gw_mcp_send(req, 405,
                gw_mcp_error(NULL, GW_MCP_SERVER_ERROR, "Method Not Allowed: kgate offers no server-initiated stream (GET)"));
}

static void on_delete(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_mcp_t *mcp = gw_mcp_from(door);
    gw_mcp_session_t *session;
    (void)params;

    if ((session = session_of(mcp, req)) == NULL)
        return;
    gw_mcp_session_end(session, GW_MCP_END_DELETED);
    gw_send_empty(req);
}

void gw_mcp_add_routes(gw_mcp_t *mcp, gw_route_table_t *table)
{
    const struct {
        const char *method;
        gw_route_handler_t handler;
    } rows[] = {{"POST", on_post}, {"GET", on_get}, {"DELETE", on_delete}};

    for (size_t i = 0; i != sizeof(rows) / sizeof(rows[0]); ++i) {
        gw_route_t route = {.method = rows[i].method,
                            .pattern = "/mcp",
                            .handler = rows[i].handler,
                            .max_body_bytes = mcp->host->config->max_body_bytes,
                            .door = &mcp->super};
        gw_route_table_add(table, &route);
    }
}
