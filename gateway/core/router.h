/* core/router.h: the route table matcher (pure: method and path in, route and parameters out). */
#ifndef GW_ROUTER_H
#define GW_ROUTER_H

#include <stddef.h>
#include <h2o.h>

#define GW_ROUTE_MAX_PARAMS 2
/** The last segment of a prefix route: `/proxy/{}` GW_ROUTE_REST matches `/proxy/8080` and `/proxy/8080/a/b`. */
#define GW_ROUTE_REST "/{...}"
/** The method of a route that takes every method. */
#define GW_ROUTE_ANY_METHOD "*"

/** Path parameters: views into the request path of the `{}` segments, in order. */
typedef struct st_gw_route_params_t {
    h2o_iovec_t values[GW_ROUTE_MAX_PARAMS];
    size_t size;
} gw_route_params_t;

/**
 * A front door's state, as the routes see it (h2o's handler-object pattern): each front door embeds
 * one as its `super` member and its handlers get back to their own struct with
 * H2O_STRUCT_FROM_MEMBER. A handler never sees the whole server.
 */
typedef struct st_gw_door_t {
    const char *name; /* "execd", ... (logs) */
} gw_door_t;

/** Answers `req` (always, exactly once, now or later). */
typedef void (*gw_route_handler_t)(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params);

/**
 * One route. `pattern` is a path whose segments are literals or `{}` (exactly one non-empty
 * segment, no '/'); a pattern may end in GW_ROUTE_REST, which matches the rest of the path: nothing,
 * or '/' and anything after it, slashes included (its parameter is what follows that '/', maybe
 * empty). `method` is exact, or "*" for any method. `is_public` routes need no access token. A
 * request body larger than `max_body_bytes` is refused (413) before the handler runs.
 */
typedef struct st_gw_route_t {
    const char *method;
    const char *pattern;
    gw_route_handler_t handler;
    int is_public;
    size_t max_body_bytes;
    gw_door_t *door; /* the handler's first argument */
    /* the token may come as `?token=<t>` too (Jupyter's clients put it on WebSocket URLs, where a browser sets no header) */
    int token_in_query;
    /* headers that carry the token on this route besides kgate's own (lower-case, NULL-terminated; static), or NULL */
    const char *const *token_headers;
} gw_route_t;

/** The routes of every front door, composed by the app at start-up (matched in insertion order). */
typedef struct st_gw_route_table_t {
    gw_route_t *entries;
    size_t size;
    size_t capacity;
} gw_route_table_t;

/** Appends a copy of `route` (its strings are borrowed: static ones). */
void gw_route_table_add(gw_route_table_t *table, const gw_route_t *route);
/** Frees the entries; the table is empty afterwards. */
void gw_route_table_dispose(gw_route_table_t *table);

typedef enum { GW_ROUTE_FOUND, GW_ROUTE_NO_PATH, GW_ROUTE_NO_METHOD } gw_route_result_t;

/**
 * Finds the route for `method` and `path` (no query string; a trailing '/' is not ignored).
 * GW_ROUTE_NO_METHOD when some route matches the path with another method (405). On FOUND,
 * `*route` and `params` are set.
 */
gw_route_result_t gw_route_match(const gw_route_t *routes, size_t n, h2o_iovec_t method, h2o_iovec_t path, const gw_route_t **route,
                                 gw_route_params_t *params);

#endif
