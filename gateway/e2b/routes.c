/* The E2B door's route table and set-up. */
#include <string.h>
#include "e2b/e2b.h"

void gw_e2b_init(gw_e2b_t *e2b, gw_host_t *host, gw_languages_t *languages, gw_contexts_t *contexts)
{
    memset(e2b, 0, sizeof(*e2b));
    e2b->super.name = "e2b";
    e2b->host = host;
    e2b->languages = languages;
    e2b->contexts = contexts;
    h2o_timeout_init(host->loop, &e2b->keepalive_timeout, GW_E2B_KEEPALIVE_MS);
    h2o_timeout_init(host->loop, &e2b->gone_timeout, GW_E2B_GONE_CHECK_MS);
    h2o_linklist_init_anchor(&e2b->streams);
}

int gw_e2b_is_drained(gw_e2b_t *e2b)
{
    return h2o_linklist_is_empty(&e2b->streams);
}

void gw_e2b_dispose(gw_e2b_t *e2b)
{
    h2o_timeout_dispose(e2b->host->loop, &e2b->keepalive_timeout);
    h2o_timeout_dispose(e2b->host->loop, &e2b->gone_timeout);
}

void gw_e2b_add_routes(gw_e2b_t *e2b, gw_route_table_t *table)
{
    /* where E2B's SDK carries its sandbox's tokens: the traffic token on every route, the envd token on /execute */
    static const char *const traffic[] = {"e2b-traffic-access-token", NULL};
    static const char *const execute[] = {"e2b-traffic-access-token", "x-access-token", NULL};
    const struct {
        const char *method, *pattern;
        gw_route_handler_t handler;
        int is_public;
        const char *const *token_headers;
    } rows[] = {
        {"POST", "/execute", gw_e2b_execute, 0, execute},
        {"POST", "/contexts", gw_e2b_context_create, 0, traffic},
        {"GET", "/contexts", gw_e2b_context_list, 0, traffic},
        {"POST", "/contexts/{}/restart", gw_e2b_context_restart, 0, traffic},
        {"DELETE", "/contexts/{}", gw_e2b_context_delete, 0, traffic},
        /* E2B's template waits for 200 here before the sandbox counts as ready: no credential, as /healthz */
        {"GET", "/health", gw_e2b_health, 1, NULL},
        /* a browser's preflight carries no credential */
        {"OPTIONS", "/execute", gw_e2b_preflight, 1, NULL},
        {"OPTIONS", "/contexts", gw_e2b_preflight, 1, NULL},
        {"OPTIONS", "/contexts/{}", gw_e2b_preflight, 1, NULL},
        {"OPTIONS", "/contexts/{}/restart", gw_e2b_preflight, 1, NULL},
        {"OPTIONS", "/health", gw_e2b_preflight, 1, NULL},
    };

    for (size_t i = 0; i != sizeof(rows) / sizeof(rows[0]); ++i) {
        gw_route_t route = {.method = rows[i].method,
                            .pattern = rows[i].pattern,
                            .handler = rows[i].handler,
                            .is_public = rows[i].is_public,
                            .max_body_bytes = e2b->host->config->max_body_bytes,
                            .door = &e2b->super,
                            .token_headers = rows[i].token_headers};
        gw_route_table_add(table, &route);
    }
}
