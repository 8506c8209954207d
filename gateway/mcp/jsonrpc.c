/* MCP's JSON-RPC messages and Streamable HTTP header checks: pure functions, fuzzed (tests/fuzz/fuzz_mcp_jsonrpc.c). */
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include "core/json_out.h"
#include "mcp/jsonrpc.h"

static int valid_id(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

int gw_mcp_message_parse(const char *body, size_t len, gw_mcp_message_t *msg, const char **why, json_t **bad_id)
{
    json_t *root, *jsonrpc, *method, *id, *result, *error;
    json_error_t parse_error;

    memset(msg, 0, sizeof(*msg));
    *bad_id = NULL;
    /* NUL inside strings is kept: the editor refuses such paths like any other escape, code refuses it by name */
    if ((root = json_loadb(body, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &parse_error)) == NULL) {
        /* valid JSON all the same: the message is what kgate cannot take, not a body that fails to parse */
        if (json_error_code(&parse_error) == json_error_numeric_overflow) {
            *why = "Invalid Request: an integer beyond 64 bits (ids and arguments are kept as 64-bit integers)";
            return GW_MCP_INVALID_REQUEST;
        }
        *why = "Parse error: the body is not JSON";
        return GW_MCP_PARSE_ERROR;
    }
    if (json_is_array(root)) {
        *why = "Invalid Request: JSON-RPC batches are not supported (MCP removed them in 2025-06-18)";
        goto Invalid;
    }
    if (!json_is_object(root)) {
        *why = "Invalid Request: a JSON-RPC message is an object";
        goto Invalid;
    }
    id = json_object_get(root, "id");
    if (valid_id(id))
        *bad_id = json_incref(id);
    jsonrpc = json_object_get(root, "jsonrpc");
    /* by length: the body keeps a \u0000 inside strings, and "2.0\u0000x" is no "2.0" */
    if (!json_is_string(jsonrpc) || json_string_length(jsonrpc) != 3 || memcmp(json_string_value(jsonrpc), "2.0", 3) != 0) {
        *why = "Invalid Request: jsonrpc must be \"2.0\"";
        goto Invalid;
    }
    if (id != NULL && !valid_id(id)) {
        *why = "Invalid Request: id must be a string or an integer";
        goto Invalid;
    }
    method = json_object_get(root, "method");
    result = json_object_get(root, "result");
    error = json_object_get(root, "error");
    if (method != NULL) {
        if (!json_is_string(method) || json_string_length(method) == 0 ||
            strlen(json_string_value(method)) != json_string_length(method)) {
            *why = "Invalid Request: method must be a non-empty string";
            goto Invalid;
        }
        if (result != NULL || error != NULL) {
            *why = "Invalid Request: a message with a method carries no result or error";
            goto Invalid;
        }
        msg->kind = id != NULL ? GW_MCP_REQUEST : GW_MCP_NOTIFICATION;
        msg->method = json_string_value(method);
        msg->params = json_object_get(root, "params");
    } else {
        if (id == NULL || (result != NULL) == (error != NULL)) {
            *why = "Invalid Request: a message is a request, a notification (both with a method) or a response (an id and one "
                   "of result and error)";
            goto Invalid;
        }
        msg->kind = GW_MCP_RESPONSE;
    }
    msg->root = root;
    msg->id = id;
    json_decref(*bad_id);
    *bad_id = NULL;
    return 0;

Invalid:
    json_decref(root);
    return GW_MCP_INVALID_REQUEST;
}

void gw_mcp_message_dispose(gw_mcp_message_t *msg)
{
    json_decref(msg->root);
    memset(msg, 0, sizeof(*msg));
}

json_t *gw_mcp_result(json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id, "result", result);
}

json_t *gw_mcp_error(json_t *id, int code, const char *message)
{
    return json_pack("{s:s, s:O, s:{s:i, s:o}}", "jsonrpc", "2.0", "id", id != NULL ? id : json_null(), "error", "code", code,
                     "message", gw_json_text(message, strlen(message)));
}

json_t *gw_mcp_notification(const char *method, json_t *params)
{
    return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params);
}

int gw_mcp_version_supported(const char *version, size_t len)
{
    return (len == sizeof(GW_MCP_VERSION_LATEST) - 1 && memcmp(version, GW_MCP_VERSION_LATEST, len) == 0) ||
           (len == sizeof(GW_MCP_VERSION_PREVIOUS) - 1 && memcmp(version, GW_MCP_VERSION_PREVIOUS, len) == 0);
}

const char *gw_mcp_negotiate_version(const char *requested)
{
    if (requested != NULL && strcmp(requested, GW_MCP_VERSION_PREVIOUS) == 0)
        return GW_MCP_VERSION_PREVIOUS;
    return GW_MCP_VERSION_LATEST;
}

static int token_is(const char *s, size_t len, const char *lit)
{
    return len == strlen(lit) && strncasecmp(s, lit, len) == 0;
}

unsigned gw_mcp_accepts(const char *accept, size_t len)
{
    unsigned flags = 0;
    size_t i = 0;

    if (accept == NULL)
        return GW_MCP_ACCEPT_JSON | GW_MCP_ACCEPT_SSE;
    while (i < len) {
        size_t start, end;
        while (i < len && (accept[i] == ' ' || accept[i] == '\t' || accept[i] == ','))
            ++i;
        start = i;
        while (i < len && accept[i] != ',' && accept[i] != ';')
            ++i;
        end = i;
        while (end > start && (accept[end - 1] == ' ' || accept[end - 1] == '\t'))
            --end;
        /* the media range's parameters (q=...) up to the next range */
        while (i < len && accept[i] != ',')
            ++i;
        if (token_is(accept + start, end - start, "*/*"))
            flags |= GW_MCP_ACCEPT_JSON | GW_MCP_ACCEPT_SSE;
        else if (token_is(accept + start, end - start, "application/json") ||
                 token_is(accept + start, end - start, "application/*"))
            flags |= GW_MCP_ACCEPT_JSON;
        else if (token_is(accept + start, end - start, "text/event-stream") || token_is(accept + start, end - start, "text/*"))
            flags |= GW_MCP_ACCEPT_SSE;
    }
    return flags;
}

int gw_mcp_session_id_valid(const char *id, size_t len)
{
    if (len != 32)
        return 0;
    for (size_t i = 0; i != len; ++i)
        if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f')))
            return 0;
    return 1;
}
