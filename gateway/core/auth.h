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
 * True when `s` (`len` bytes: a Host header's or an origin's host[:port]) names this machine's
 * loopback: localhost, 127.0.0.0/8 or [::1], with any port.
 */
int gw_auth_is_loopback_authority(const char *s, size_t len);

/**
 * True unless kgate listens on loopback (`loopback_listener`) and the request's Host names another
 * host. A page of another site whose name was made to resolve to 127.0.0.1 (DNS rebinding) is on
 * "its own" origin to the browser, which then lets it read kgate's answers; its requests still
 * carry its own name in Host.
 */
int gw_auth_host_allowed(h2o_req_t *req, int loopback_listener);

/**
 * True when a browser page may make this request: it carries no Origin header (not a browser, or a
 * same-origin GET), or its Origin is of this machine's loopback (a local tool, any port) or the
 * address the request was sent to, or it is listed in `allow` (comma-separated origins, exactly as
 * browsers send them, or "*"; NULL: none). Without it, any page a local user visits could POST
 * code to a kgate on loopback that has no token (a text/plain POST needs no CORS preflight) or open
 * its WebSockets (which CORS does not cover).
 */
int gw_auth_origin_allowed(h2o_req_t *req, const char *allow);

/**
 * True when one of the headers `names` (lower-case, NULL-terminated: a route's own, such as E2B's
 * E2B-Traffic-Access-Token) carries `token` exactly, compared as gw_auth_token_equal does. True
 * when `token` is NULL.
 */
int gw_auth_check_headers(h2o_req_t *req, const char *token, const char *const *names);

/** True when the request's query carries `token=<token>` (percent-decoded; compared as gw_auth_token_equal does). */
int gw_auth_check_query(h2o_req_t *req, const char *token);

/**
 * True when request header `name: value` is a credential meant for kgate: any X-EXECD-ACCESS-TOKEN
 * (kgate's own header), or an Authorization that carries `token` (NULL: none does). A reverse
 * proxy drops these so that the token never reaches the service behind it.
 */
int gw_auth_is_credential(const char *token, h2o_iovec_t name, h2o_iovec_t value);

#endif
