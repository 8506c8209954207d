/* app/observe.h: what operators see of every request: per-door figures, the Prometheus route, the access log. */
#ifndef GW_APP_OBSERVE_H
#define GW_APP_OBSERVE_H

#include <h2o.h>
#include "kmgr/manager.h"
#include "core/host.h"
#include "core/router.h"
#include "app/access_log.h"

/** The path of the Prometheus exposition (execd owns GET /metrics, in JSON). */
#define GW_OBSERVE_PROMETHEUS_PATH "/kgate/metrics"

typedef struct st_gw_observe_t {
    gw_door_t super; /* the Prometheus route's door ("kgate") */
    gw_host_t *host;
    const gw_route_table_t *routes; /* to name the door of a request (its route's) */
    kmgr_manager_t *kmgr;
    gw_access_log_t *access_log; /* --access-log's (gw_observe_set_access_log); NULL: none */
    int closed;                  /* gw_observe_close: requests disposed from now on count in no figure */
    /* what each kernel start figure reads (kmgr_start_stats_t): the counter_fn's argument, one per series */
    struct st_gw_observe_start_figure_t {
        kmgr_manager_t *kmgr;
        int which; /* a kmgr_fallback_t, or one of observe.c's START_* */
    } start_figures[KMGR_FALLBACK_COUNT + 5];
} gw_observe_t;

/**
 * Registers the app's figures (the kernel start queue, HTTP durations and bytes by door, requests in flight) and an
 * h2o logger on `pathconf` (every request kgate's handler sees) and on `fallback` (requests h2o answers itself, such as a
 * 413 for a body over h2o's global limit) that counts each request as it ends. Everything borrowed lives as long as
 * the server.
 */
void gw_observe_init(gw_observe_t *observe, gw_host_t *host, const gw_route_table_t *routes, kmgr_manager_t *kmgr,
                     h2o_pathconf_t *pathconf, h2o_pathconf_t *fallback);

/** Every request from now on gets a line in `log` (borrowed; it must outlive every request: dispose it after h2o's context). */
void gw_observe_set_access_log(gw_observe_t *observe, gw_access_log_t *log);

/** A request reached kgate's handler: counted in flight for its door until h2o disposes it. */
void gw_observe_request_begins(gw_observe_t *observe, h2o_req_t *req);

/**
 * The server is going away: the host's figures may be freed before h2o disposes the last requests (a connection still
 * open), whose lines still go to the access log but no longer into the figures.
 */
void gw_observe_close(gw_observe_t *observe);

/** Adds GET GW_OBSERVE_PROMETHEUS_PATH (under the token, as every route but the probes). */
void gw_observe_add_routes(gw_observe_t *observe, gw_route_table_t *routes);

#endif
