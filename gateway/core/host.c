/* The host: shared timeouts on the server's loop. */
#include "core/host.h"

void gw_host_init(gw_host_t *host, h2o_loop_t *loop, const gw_config_t *config)
{
    host->loop = loop;
    host->config = config;
    host->shutting_down = 0;
    host->sandbox_bwrap = host->runtime_dir = host->workspace = NULL;
    gw_stats_init(&host->stats);
    h2o_timeout_init(loop, &host->zero_timeout, 0);
    h2o_timeout_init(loop, &host->yield_timeout, 1);
    h2o_timeout_init(loop, &host->ping_timeout, config->ping_interval_ms);
}

void gw_host_dispose(gw_host_t *host)
{
    h2o_timeout_dispose(host->loop, &host->zero_timeout);
    h2o_timeout_dispose(host->loop, &host->yield_timeout);
    h2o_timeout_dispose(host->loop, &host->ping_timeout);
    gw_stats_dispose(&host->stats);
}

void gw_host_defer(gw_host_t *host, h2o_timeout_entry_t *entry)
{
    if (!h2o_timeout_is_linked(entry))
        h2o_timeout_link(host->loop, &host->zero_timeout, entry);
}
