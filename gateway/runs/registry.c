/* The registry of runs: lookup by id, retention of finished runs, shutdown. */
#include <stdlib.h>
#include <string.h>
#include "runs/internal.h"

void gw_runs_init(gw_runs_t *runs, gw_host_t *host)
{
    runs->host = host;
    h2o_linklist_init_anchor(&runs->live);
    h2o_linklist_init_anchor(&runs->finished);
    runs->retained_bytes = 0;
    gw_idmap_init(&runs->by_id);
    gw_runstore_init(&runs->store);
}

void gw_runs_set_log_dir(gw_runs_t *runs, const char *dir)
{
    gw_runstore_set_dir(&runs->store, dir);
}

void gw_run_free(gw_run_t *run)
{
    gw_idmap_remove(&run->runs->by_id, &run->by_id);
    h2o_linklist_unlink(&run->link);
    gw_run_clear_log(run);
    free(run->call_records);
    free(run);
}

gw_run_t *gw_run_find(gw_runs_t *runs, const char *id)
{
    gw_idmap_entry_t *e = gw_idmap_find(&runs->by_id, id);
    return e != NULL ? H2O_STRUCT_FROM_MEMBER(gw_run_t, by_id, e) : NULL;
}

void gw_runs_collect(gw_runs_t *runs)
{
    const gw_config_t *config = runs->host->config;
    int64_t now = gw_now_ms();
    h2o_linklist_t *node, *next;

    for (node = runs->finished.next; node != &runs->finished; node = next) {
        gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, link, node);
        next = node->next;
        if (!h2o_linklist_is_empty(&run->cursors))
            continue; /* still being written out; collected once its readers are gone */
        if (!runs->host->shutting_down && now - run->finished_mono_ms < (int64_t)config->run_retention_ms &&
            runs->retained_bytes <= config->max_retained_bytes)
            break; /* oldest first: every later run is younger */
        runs->retained_bytes -= gw_run_retained_bytes(run);
        gw_run_free(run);
    }
}

void gw_runs_shutdown(gw_runs_t *runs)
{
    while (!h2o_linklist_is_empty(&runs->live)) {
        gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, link, runs->live.next);
        if (run->producer != NULL)
            run->producer->cancel(run, run->producer_data);
        gw_run_append(run, gw_error_event("ServerShutdown", "kgate is shutting down"));
        gw_run_finish(run, -1, "cancelled");
    }
}

void gw_runs_dispose(gw_runs_t *runs)
{
    gw_runs_shutdown(runs);
    while (!h2o_linklist_is_empty(&runs->finished)) {
        gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, link, runs->finished.next);
        /* readers outlive nothing here: detach them so their writers find no run */
        gw_run_detach_cursors(run);
        gw_run_free(run);
    }
    runs->retained_bytes = 0;
    gw_idmap_dispose(&runs->by_id);
    gw_runstore_dispose(&runs->store);
}
