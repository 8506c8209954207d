/* gateway/router.h: the route table matcher (pure: method and path in, route and parameters out). */
#ifndef GW_ROUTER_H
#define GW_ROUTER_H

#include <stddef.h>
#include <h2o.h>

#define GW_ROUTE_MAX_PARAMS 2

/** Path parameters: views into the request path of the `{}` segments, in order. */
typedef struct st_gw_route_params_t {
    h2o_iovec_t values[GW_ROUTE_MAX_PARAMS];
    size_t size;
} gw_route_params_t;

typedef struct st_gw_server_t gw_server_t;
typedef void (*gw_route_handler_t)(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);

/**
 * One route. `pattern` is a path whose segments are literals or `{}` (exactly one non-empty
 * segment, no '/'). `is_public` routes need no access token.
 */
typedef struct st_gw_route_t {
    const char *method;
    const char *pattern;
    gw_route_handler_t handler;
    int is_public;
} gw_route_t;

typedef enum { GW_ROUTE_FOUND, GW_ROUTE_NO_PATH, GW_ROUTE_NO_METHOD } gw_route_result_t;

/**
 * Finds the route for `method` and `path` (no query string; a trailing '/' is not ignored).
 * GW_ROUTE_NO_METHOD when some route matches the path with another method (405). On FOUND,
 * `*route` and `params` are set.
 */
gw_route_result_t gw_route_match(const gw_route_t *routes, size_t n, h2o_iovec_t method, h2o_iovec_t path, const gw_route_t **route,
                                 gw_route_params_t *params);

#endif
