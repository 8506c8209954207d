/* mcp/jsonrpc.h: the Model Context Protocol's JSON-RPC messages and Streamable HTTP headers (pure: no I/O, no state). */
#ifndef GW_MCP_JSONRPC_H
#define GW_MCP_JSONRPC_H

#include <stddef.h>
#include <jansson.h>

/* JSON-RPC 2.0's error codes, and the ones MCP's Streamable HTTP servers use for transport-level refusals. */
#define GW_MCP_PARSE_ERROR (-32700)
#define GW_MCP_INVALID_REQUEST (-32600)
#define GW_MCP_METHOD_NOT_FOUND (-32601)
#define GW_MCP_INVALID_PARAMS (-32602)
#define GW_MCP_INTERNAL_ERROR (-32603)
#define GW_MCP_SERVER_ERROR (-32000)  /* bad request at the transport: no session header, too many sessions, ... */
#define GW_MCP_SESSION_ERROR (-32001) /* the session is unknown or ended */

/** The revisions served, newest first; initialize answers the client's when it is one of them, else the newest. */
#define GW_MCP_VERSION_LATEST "2025-11-25"
#define GW_MCP_VERSION_PREVIOUS "2025-06-18"

typedef enum { GW_MCP_REQUEST, GW_MCP_NOTIFICATION, GW_MCP_RESPONSE } gw_mcp_kind_t;

/** One message a client POSTed. Fields point into `root`, which the message owns. */
typedef struct st_gw_mcp_message_t {
    gw_mcp_kind_t kind;
    json_t *root;
    json_t *id;         /* requests and responses: a string or an integer */
    const char *method; /* requests and notifications */
    json_t *params;     /* NULL when absent; may be any JSON value (the dispatcher checks it is an object) */
} gw_mcp_message_t;

/**
 * Parses one JSON-RPC 2.0 message of `len` bytes (any bytes). Returns 0 with `msg` filled (dispose
 * it), or GW_MCP_PARSE_ERROR (not JSON) or GW_MCP_INVALID_REQUEST (a batch, which revisions
 * 2025-06-18 and later removed; not an object; `jsonrpc` not "2.0"; `method` not a string; an `id`
 * that is neither a string nor an integer; a response without exactly one of `result` and `error`).
 * On failure `*why` says what (static) and `*bad_id` is the message's id when it had a valid one
 * (borrowed from nothing: a new reference, or NULL), so that the error can name it.
 */
int gw_mcp_message_parse(const char *body, size_t len, gw_mcp_message_t *msg, const char **why, json_t **bad_id);
/** Releases the message's JSON. */
void gw_mcp_message_dispose(gw_mcp_message_t *msg);

/** `{"jsonrpc":"2.0","id":id,"result":result}`; takes `result`, borrows `id`. */
json_t *gw_mcp_result(json_t *id, json_t *result);
/**
 * `{"jsonrpc":"2.0","id":id (null when NULL),"error":{"code","message"}}`; borrows `id`. Never NULL: `message` is often
 * made with printf from a client's bytes (a header's, which need not be UTF-8, or a value cut at "%.100s", which may cut
 * a character), so it goes through gw_json_text (core/json_out.h).
 */
json_t *gw_mcp_error(json_t *id, int code, const char *message);
/** `{"jsonrpc":"2.0","method":method,"params":params}`; takes `params`. */
json_t *gw_mcp_notification(const char *method, json_t *params);

/** True for a revision this server speaks (`len` bytes, not NUL-terminated). */
int gw_mcp_version_supported(const char *version, size_t len);
/** The revision to answer an initialize that asked for `requested` (NULL: none): it, when supported, else the newest. */
const char *gw_mcp_negotiate_version(const char *requested);

#define GW_MCP_ACCEPT_JSON 1u
#define GW_MCP_ACCEPT_SSE 2u
/**
 * Which response types an Accept header value allows: application/json and text/event-stream by
 * name, or through the wildcards (any, application, text) (parameters such as `q` are ignored). A
 * missing header (NULL) accepts both.
 */
unsigned gw_mcp_accepts(const char *accept, size_t len);

/** True when `id` (`len` bytes) could be a session id this server issued: 32 lower-case hex digits. */
int gw_mcp_session_id_valid(const char *id, size_t len);

#endif
