/* runs/internal.h: the run itself, shared by the files of runs/ only (others use runs/run.h). */
#ifndef GW_RUNS_INTERNAL_H
#define GW_RUNS_INTERNAL_H

#include <h2o.h>
#include "wire/ids.h"
#include "runs/run.h"

struct st_gw_run_t {
    char id[WIRE_UUID_STRLEN + 1];
    char context_id[WIRE_UUID_STRLEN + 1]; /* "" for a run outside any context */
    gw_runs_t *runs;
    const gw_run_producer_t *producer; /* NULL once the producer is done */
    void *producer_data;
    gw_run_state_t state;
    h2o_linklist_t log; /* gw_event_t, oldest first */
    size_t log_bytes;
    uint64_t last_event_id;
    h2o_linklist_t cursors;   /* gw_run_cursor_t */
    h2o_linklist_t link;      /* in runs->live or runs->finished (oldest first) */
    gw_idmap_entry_t by_id;   /* in runs->by_id */
    h2o_timeout_entry_t ping; /* keep-alive events while running */
    /* wall-clock times for clients; durations and retention use the gw_now_ms clock, which no clock step moves */
    int64_t created_at_ms;
    int64_t started_at_ms;  /* when it left the queue (== created_at for unqueued runs) */
    int64_t finished_at_ms; /* 0 while not finished */
    int64_t started_mono_ms;
    int64_t finished_mono_ms;
    gw_run_limits_t limits;
    size_t output_bytes;         /* stream text relayed so far */
    size_t output_dropped_bytes; /* stream text dropped by the limit */
    size_t results_dropped;      /* results dropped by the limit */
    size_t messages_dropped;     /* kernel messages over max_message_bytes while the run was in flight */
    const char *outcome;         /* once finished */
    unsigned truncation_reported : 1;
    unsigned oversized_reported : 1;
};

/** Wakes every cursor's writer (log.c, run.c). */
void gw_run_notify_cursors(gw_run_t *run);
/** Detaches every cursor (the run is going away; their writers see no more events). */
void gw_run_detach_cursors(gw_run_t *run);
/** Drops every event of the log. */
void gw_run_clear_log(gw_run_t *run);
/** Unlinks the run from the registry and frees it with its log (registry.c; cursors must be detached). */
void gw_run_free(gw_run_t *run);

#endif
