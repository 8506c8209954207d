/* app/routes.h: dispatch of every request through the composed route table, and the app's own health routes. */
#ifndef GW_APP_ROUTES_H
#define GW_APP_ROUTES_H

#include <h2o.h>
#include "core/router.h"

typedef struct st_gw_server_t gw_server_t;

/** Builds the server's route table: the app's health routes, then each front door's rows. */
void gw_app_build_routes(gw_server_t *server);

/**
 * Handles one request: routing, authentication, the route's body limit, dispatch. Always answers
 * (404/405 JSON when no route matches).
 */
void gw_app_dispatch(gw_server_t *server, h2o_req_t *req);

#endif
