/* gateway/auth.h: the access token: three header forms, compared in constant time. */
#ifndef GW_AUTH_H
#define GW_AUTH_H

#include <stddef.h>
#include <h2o.h>

/**
 * True when `presented` (`len` bytes) equals `token`: lengths compared first, then the bytes in
 * constant time (sodium_memcmp), so the comparison time does not depend on a matching prefix.
 */
int gw_auth_token_equal(const char *token, const char *presented, size_t len);

/**
 * True when the request carries `token` as `X-EXECD-ACCESS-TOKEN: <t>`, `Authorization: Bearer <t>`
 * or `Authorization: token <t>` (scheme case-insensitive). A NULL token admits every request.
 */
int gw_auth_check(h2o_req_t *req, const char *token);

/**
 * True when a browser page may make this request: it carries no Origin header (not a browser, or
 * a same-origin GET), or its Origin's host[:port] is the request's Host (kgate's own pages), or it
 * is listed in `allow` (comma-separated origins, exactly as browsers send them, or "*"; NULL: none).
 * Without it, any page a local user visits could POST code to a kgate on loopback that has no token
 * (a text/plain POST needs no CORS preflight) or open its WebSockets (which CORS does not cover).
 */
int gw_auth_origin_allowed(h2o_req_t *req, const char *allow);

/** True when the request's query carries `token=<token>` (percent-decoded; compared as gw_auth_token_equal does). */
int gw_auth_check_query(h2o_req_t *req, const char *token);

/**
 * True when request header `name: value` is a credential meant for kgate: any X-EXECD-ACCESS-TOKEN
 * (kgate's own header), or an Authorization that carries `token` (NULL: none does). A reverse
 * proxy drops these so that the token never reaches the service behind it.
 */
int gw_auth_is_credential(const char *token, h2o_iovec_t name, h2o_iovec_t value);

#endif
