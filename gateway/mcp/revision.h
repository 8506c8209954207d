/*
 * mcp/revision.h: MCP revision 2026-07-28, the stateless one, as far as it is pure (no I/O, no state): which
 * requests are of it, their checks (the `_meta` envelope and the MCP-Protocol-Version, Mcp-Method and Mcp-Name
 * headers against the body, as its Streamable HTTP transport requires), its errors, and the names of the contexts
 * that hold its state.
 */
#ifndef GW_MCP_REVISION_H
#define GW_MCP_REVISION_H

#include <stddef.h>
#include <jansson.h>
#include "mcp/jsonrpc.h"

#define GW_MCP_VERSION_STATELESS "2026-07-28"

/* Codes the revision reserves (-32020 to -32099): a header that does not match the body, a version not served. */
#define GW_MCP_HEADER_MISMATCH (-32020)
#define GW_MCP_UNSUPPORTED_VERSION (-32022)

/* The `_meta` keys of the per-request envelope and of a result. */
#define GW_MCP_META_VERSION "io.modelcontextprotocol/protocolVersion"
#define GW_MCP_META_CLIENT_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define GW_MCP_META_SERVER_INFO "io.modelcontextprotocol/serverInfo"

/* A context's name: 1 to this many of A-Z a-z 0-9 . _ - (it is also shown in tools' results and logs). */
#define GW_MCP_CONTEXT_NAME_MAX 64

/** A request's metadata headers (each NULL when absent; not NUL-terminated). */
typedef struct st_gw_mcp_headers_t {
    const char *version, *method, *name;
    size_t version_len, method_len, name_len;
} gw_mcp_headers_t;

/**
 * True when `msg` is to be served by the stateless revision: its params' `_meta` names a protocol version, or its
 * MCP-Protocol-Version header names one that is not a session revision (2025-06-18, 2025-11-25), which only the
 * stateless path answers (with UnsupportedProtocolVersion when it is not 2026-07-28). Everything else (initialize,
 * requests of a session) keeps the session revisions' path.
 */
int gw_mcp_is_stateless(const gw_mcp_headers_t *h, const gw_mcp_message_t *msg);

/**
 * Checks a stateless request (`msg` a request) against the revision's rules, in this order: the
 * MCP-Protocol-Version header is present; the body's `_meta` protocol version is present and equals it (else
 * HeaderMismatch); it is 2026-07-28 (else UnsupportedProtocolVersion with `data {supported, requested}`); the
 * Mcp-Method header equals `method`; for tools/call, prompts/get and resources/read the Mcp-Name header, decoded
 * (gw_mcp_header_value_decode), equals params.name or params.uri; `_meta` carries clientCapabilities (an object,
 * else InvalidParams). Returns NULL when the request passes, else the JSON-RPC error response to send (a new
 * object) with its HTTP status in `*status` (400).
 */
json_t *gw_mcp_stateless_check(const gw_mcp_headers_t *h, const gw_mcp_message_t *msg, int *status);

/** The UnsupportedProtocolVersion error for `id` (borrowed, may be NULL): the versions served, and `requested`. */
json_t *gw_mcp_unsupported_version(json_t *id, const char *requested, size_t len);

/**
 * Decodes a header value that may carry the revision's Base64 sentinel (`=?base64?...?=`, standard alphabet,
 * padding optional): `len` bytes of `value`. A plain value must be visible ASCII, space or tab. Returns the value
 * (malloc'd, NUL-terminated, its length in `*out_len`; may hold NUL bytes, which no body string matches), or NULL
 * when it is malformed (a control or non-ASCII byte, a bad Base64 body).
 */
char *gw_mcp_header_value_decode(const char *value, size_t len, size_t *out_len);

/**
 * Adds what a result of revision 2026-07-28 carries to the JSON-RPC response `message` (when it is a result):
 * `resultType: "complete"` unless it has one, and the server's identity in its `_meta`. Errors and notifications are
 * left as they are.
 */
void gw_mcp_stateless_stamp(json_t *message);

/** True for a context name (`len` bytes): 1 to GW_MCP_CONTEXT_NAME_MAX of A-Z a-z 0-9 . _ - */
int gw_mcp_context_name_valid(const char *name, size_t len);

#endif
