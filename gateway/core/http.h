/* gateway/http.h: response and request helpers shared by every route (JSON bodies, errors, queries). */
#ifndef GW_HTTP_H
#define GW_HTTP_H

#include <stddef.h>
#include <jansson.h>
#include <h2o.h>
#include "core/router.h"

/* XX(name, status, code): every error code of docs/API.md section 0. */
#define GW_HTTP_ERROR_MAP(XX)                                                                                                      \
    XX(INVALID_REQUEST_BODY, 400)                                                                                                  \
    XX(MISSING_QUERY, 400)                                                                                                         \
    XX(UNKNOWN_LANGUAGE, 400)                                                                                                      \
    XX(UNAUTHORIZED, 401)                                                                                                          \
    XX(NOT_FOUND, 404)                                                                                                             \
    XX(CONTEXT_NOT_FOUND, 404)                                                                                                     \
    XX(EXECUTION_NOT_FOUND, 404)                                                                                                   \
    XX(METHOD_NOT_ALLOWED, 405)                                                                                                    \
    XX(NO_INPUT_PENDING, 409)                                                                                                      \
    XX(EVENTS_GONE, 410)                                                                                                           \
    XX(PAYLOAD_TOO_LARGE, 413)                                                                                                     \
    XX(TOO_MANY_CONTEXTS, 429)                                                                                                     \
    XX(QUEUE_FULL, 429)                                                                                                            \
    XX(RUNTIME_ERROR, 500)                                                                                                         \
    XX(KERNEL_UNAVAILABLE, 503)                                                                                                    \
    XX(FORBIDDEN, 403)                                                                                                             \
    XX(COMMAND_NOT_FOUND, 404)                                                                                                     \
    XX(SESSION_NOT_FOUND, 404)                                                                                                     \
    XX(TOO_MANY_COMMANDS, 429)                                                                                                     \
    XX(INVALID_PARAMETER, 400)                                                                                                     \
    XX(INVALID_FILE, 400)                                                                                                          \
    XX(INVALID_FILE_METADATA, 400)                                                                                                 \
    XX(INVALID_FILE_CONTENT, 400)                                                                                                  \
    XX(NOT_A_DIRECTORY, 400)                                                                                                       \
    XX(IS_A_DIRECTORY, 400)                                                                                                        \
    XX(NO_MATCH, 400)                                                                                                              \
    XX(MULTIPLE_MATCHES, 400)                                                                                                      \
    XX(NO_EDIT_HISTORY, 400)                                                                                                       \
    XX(PATH_OUTSIDE_WORKSPACE, 403)                                                                                                \
    XX(PERMISSION_DENIED, 403)                                                                                                     \
    XX(FILE_NOT_FOUND, 404)                                                                                                        \
    XX(FILE_EXISTS, 409)                                                                                                           \
    XX(FILE_BUSY, 409)                                                                                                             \
    XX(FILE_TOO_LARGE, 413)                                                                                                        \
    XX(RANGE_NOT_SATISFIABLE, 416)                                                                                                 \
    XX(NOT_SUPPORTED, 501)                                                                                                         \
    XX(ALREADY_CONNECTED, 409)                                                                                                     \
    XX(TOO_MANY_SESSIONS, 429)                                                                                                     \
    XX(TOO_MANY_PROXY_CONNECTIONS, 429)                                                                                            \
    XX(BAD_GATEWAY, 502)                                                                                                           \
    XX(GATEWAY_TIMEOUT, 504)                                                                                                       \
    XX(TOOL_CALL_NOT_FOUND, 404)                                                                                                   \
    XX(TOOL_CALL_ANSWERED, 409)                                                                                                    \
    XX(TOOL_CALL_CLOSED, 409)                                                                                                      \
    XX(AMBIGUOUS_FRAMING, 400)                                                                                                     \
    XX(ALREADY_INITIALIZED, 409)                                                                                                   \
    XX(NOT_INITIALIZED, 503)                                                                                                       \
    XX(SHUTTING_DOWN, 503)

typedef enum {
#define GW_XX_ENUM(name, status) GW_HTTP_##name,
    GW_HTTP_ERROR_MAP(GW_XX_ENUM)
#undef GW_XX_ENUM
} gw_http_error_t;

/** Sends `json` (reference stolen) with `status` and Content-Type application/json. */
void gw_send_json(h2o_req_t *req, int status, json_t *json);
/** Sends the error `{"code","message"}` with the code's status; `fmt` is printf-style. */
void gw_send_error(h2o_req_t *req, gw_http_error_t err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** Sends 200 with an empty body and Content-Length: 0. */
void gw_send_empty(h2o_req_t *req);
/** Sends `status` (202 Accepted, say) with an empty body and Content-Length: 0. */
void gw_send_empty_status(h2o_req_t *req, int status);
/**
 * True when the client of `req` has hung up (or shut down its sending side): a response deferred until some work is done
 * asks before keeping what it made for the client. h2o 2.2.5 does not read an HTTP/1.1 connection while its request is
 * handled, so it notices a client gone only when a write fails (PLATFORM.md); this looks at the socket without reading.
 */
int gw_req_peer_gone(h2o_req_t *req);
/**
 * Why a raw HTTP/1 request head frames its body ambiguously, or NULL: Content-Length together with
 * Transfer-Encoding, or Content-Lengths that differ (RFC 9112 6.3: a server must reject or close;
 * a front proxy that frames the body the other way would see a different next request:
 * smuggling). `head` is the request line and header lines (up to the empty line that ends them,
 * or `len`); repeated identical Content-Lengths are allowed (RFC 9110 8.6). Pure.
 */
const char *gw_http1_framing_error(const char *head, size_t len);
/**
 * The same for `req`'s head as received (NULL over HTTP/2). h2o 2.2.5 keeps only the framing header
 * it chose (the first Content-Length, or Transfer-Encoding over it), but the head of a request
 * being handled stays at the front of its HTTP/1 socket's input until the answer is sent.
 */
const char *gw_req_framing_error(h2o_req_t *req);
/** Adds the headers every kgate response carries (version). */
void gw_add_common_headers(h2o_req_t *req);

/**
 * Parses the body as a JSON object. Returns a new reference, or NULL after answering 400
 * INVALID_REQUEST_BODY (naming the parse error).
 */
json_t *gw_parse_body(h2o_req_t *req);

/** gw_parse_body with jansson decoding `flags` of the caller's choice (JSON_ALLOW_NUL, ...). */
json_t *gw_parse_body_with(h2o_req_t *req, size_t flags);

/** One value of a query parameter: decoded into the request's pool, NUL-terminated, `len` bytes. */
typedef struct st_gw_query_value_t {
    char *s;
    size_t len;
} gw_query_value_t;

/**
 * Collects the values of every occurrence of query parameter `name` ('+' means a space), the
 * first `max` of them into `values`. Decoded NUL bytes are kept (`len` counts them) so that the
 * caller can refuse them in its own terms. Returns how many occurrences there are (which may
 * exceed `max`), or -1 when one of the stored values has a malformed percent-escape.
 */
long gw_query_values(h2o_req_t *req, const char *name, gw_query_value_t *values, size_t max);

/**
 * The first value of query parameter `name`, percent-decoded into the request's pool. Returns
 * NULL when absent, malformed or holding a NUL byte; "" when present but empty.
 */
char *gw_query_param(h2o_req_t *req, const char *name);

/**
 * Percent-decodes path parameter `i` into a string allocated from the request's pool. Returns NULL
 * when it is malformed (a bad escape, a decoded NUL byte).
 */
char *gw_path_param(h2o_req_t *req, const gw_route_params_t *params, size_t i);

/**
 * Percent-decodes `len` bytes of `s` into `out` (which must hold len + 1 bytes) and
 * NUL-terminates it ('+' becomes a space when `plus_is_space`). Returns the decoded length, or -1
 * on a bad escape or a decoded NUL byte.
 */
long gw_percent_decode(const char *s, size_t len, char *out, int plus_is_space);

#endif
