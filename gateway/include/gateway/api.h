/* gateway/api.h: the HTTP routes: handlers of API.md, and the table that maps requests to them. */
#ifndef GW_API_H
#define GW_API_H

#include <h2o.h>
#include "gateway/router.h"

typedef struct st_gw_server_t gw_server_t;

/**
 * Handles one request: authentication, routing, dispatch. Always answers (404/405 JSON when no
 * route matches). Installed as the h2o handler by gw_server_init.
 */
void gw_api_handle(gw_server_t *server, h2o_req_t *req);

/* Route handlers, grouped by file. */
void gw_api_health(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_ready(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_ping(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_files_info(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_files_delete(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_files_permissions(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_files_mv(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_files_search(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_files_replace(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_files_upload(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_files_download(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_directories_list(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_directories_create(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_directories_delete(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_editor(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_languages(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_context_create(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_context_list(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_context_get(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_context_delete(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_context_delete_by_language(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_context_restart(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_code_execute(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_code_interrupt(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_execution_get(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_execution_events(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_execution_cancel(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_execution_input(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_command_run(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_command_interrupt(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_command_status(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_command_logs(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_session_create(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_session_run(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_session_delete(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_metrics(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);
void gw_api_metrics_watch(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params);

#endif
