/* The Jupyter door's route table and its set-up: the top of the door (its handlers are in kernels_api.c, sessions.c). */
#include <stdio.h>
#include <string.h>
#include "core/http.h"
#include "jupyter/jupyter.h"

void gw_jupyter_init(gw_jupyter_t *jupyter, gw_host_t *host, gw_languages_t *languages, gw_contexts_t *contexts)
{
    memset(jupyter, 0, sizeof(*jupyter));
    jupyter->super.name = "jupyter";
    jupyter->host = host;
    jupyter->languages = languages;
    jupyter->contexts = contexts;
    h2o_linklist_init_anchor(&jupyter->sessions);
    h2o_linklist_init_anchor(&jupyter->conns);
    h2o_linklist_init_anchor(&jupyter->away);
}

void gw_jupyter_add_routes(gw_jupyter_t *jupyter, gw_route_table_t *table)
{
    const struct {
        const char *method, *pattern;
        gw_route_handler_t handler;
    } rows[] = {
        {"GET", "/api", gw_jupyter_api_root},
        {"GET", "/api/kernelspecs", gw_jupyter_kernelspecs_list},
        {"GET", "/api/kernelspecs/{}", gw_jupyter_kernelspec_get},
        {"GET", "/kernelspecs/{}/{}", gw_jupyter_kernelspec_resource},
        {"GET", "/api/kernels", gw_jupyter_kernels_list},
        {"POST", "/api/kernels", gw_jupyter_kernel_start},
        {"GET", "/api/kernels/{}", gw_jupyter_kernel_get},
        {"DELETE", "/api/kernels/{}", gw_jupyter_kernel_delete},
        {"POST", "/api/kernels/{}/interrupt", gw_jupyter_kernel_interrupt},
        {"POST", "/api/kernels/{}/restart", gw_jupyter_kernel_restart},
        {"GET", "/api/kernels/{}/channels", gw_jupyter_kernel_channels},
        {"GET", "/api/sessions", gw_jupyter_sessions_list},
        {"POST", "/api/sessions", gw_jupyter_session_create},
        {"GET", "/api/sessions/{}", gw_jupyter_session_get},
        {"PATCH", "/api/sessions/{}", gw_jupyter_session_patch},
        {"DELETE", "/api/sessions/{}", gw_jupyter_session_delete},
    };

    for (size_t i = 0; i != sizeof(rows) / sizeof(rows[0]); ++i) {
        gw_route_t route = {.method = rows[i].method,
                            .pattern = rows[i].pattern,
                            .handler = rows[i].handler,
                            .max_body_bytes = jupyter->host->config->max_body_bytes,
                            .door = &jupyter->super,
                            /* JupyterLab puts the token on the WebSocket's URL: browsers cannot set headers there */
                            .token_in_query = 1};
        gw_route_table_add(table, &route);
    }
}
