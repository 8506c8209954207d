/* gateway/run.h: one execution: an ordered, bounded log of its events, followed by SSE readers. */
#ifndef GW_RUN_H
#define GW_RUN_H

#include <stdint.h>
#include <jansson.h>
#include <h2o.h>
#include "wire/ids.h"
#include "gateway/sse.h"

typedef struct st_gw_server_t gw_server_t;
typedef struct st_gw_run_t gw_run_t;

/**
 * What produces a run's events (a kernel request or a shell process), seen from the run.
 */
typedef struct st_gw_run_producer_t {
    /** The run is being finished from outside (server shutdown): stop calling back into it. Called
     * at most once; the producer is detached afterwards. */
    void (*cancel)(gw_run_t *run);
    /** DELETE /code/executions/{id}: cancel the run if it is queued, interrupt it if it runs. */
    void (*stop)(gw_run_t *run);
    /** Answers the run's pending input_request with `value`. Returns 0, or -1 when none is pending. */
    int (*input)(gw_run_t *run, const char *value);
} gw_run_producer_t;

/** Where a run is in its life. */
typedef enum { GW_RUN_QUEUED, GW_RUN_RUNNING, GW_RUN_FINISHED } gw_run_state_t;

/** Per-run output bounds (API.md Part 2): stream text and the size of each rich result. */
typedef struct st_gw_run_limits_t {
    size_t output_bytes; /* stdout + stderr text kept; the rest is dropped and reported */
    size_t result_bytes; /* one result's MIME bundle, serialised; larger ones are dropped and reported */
} gw_run_limits_t;

/**
 * A run owns its events. Producers append; readers (SSE responses) each keep a cursor into the
 * log and write at their own pace. The log keeps at most `max_run_log_bytes` of frames: when full,
 * the oldest events are dropped, and a reader that had not yet written them is disconnected (it
 * has fallen behind; it is never allowed to grow memory).
 *
 * Lifetime: a run is registered (gw_run_find) from creation until it is collected: finished,
 * without readers, and either older than `run_retention_ms` or evicted because finished runs
 * hold more than `max_retained_bytes`. Collection happens from the server tick only, never
 * inside a callback that may still use the run.
 */
struct st_gw_run_t {
    char id[WIRE_UUID_STRLEN + 1];
    char context_id[WIRE_UUID_STRLEN + 1]; /* "" for a stateless shell run */
    gw_server_t *server;
    const gw_run_producer_t *producer; /* NULL once the producer is done */
    void *producer_data;
    gw_run_state_t state;
    h2o_linklist_t log; /* gw_event_t, oldest first */
    size_t log_bytes;
    uint64_t last_event_id;
    h2o_linklist_t readers;   /* gw_reader_t */
    h2o_linklist_t link;      /* in server->runs (live) or server->finished_runs (oldest first) */
    h2o_timeout_entry_t ping; /* keep-alive events while running */
    int64_t created_at_ms;
    int64_t started_at_ms;  /* when it left the queue (== created_at for unqueued runs) */
    int64_t finished_at_ms; /* 0 while not finished */
    gw_run_limits_t limits;
    size_t output_bytes;         /* stream text relayed so far */
    size_t output_dropped_bytes; /* stream text dropped by the limit */
    size_t results_dropped;      /* results dropped by the limit */
    const char *outcome;         /* once finished: "ok", "error", "timeout", "cancelled", "kernel_died" */
    unsigned saw_error : 1;
    unsigned truncation_reported : 1;
};

/**
 * Creates a run registered with the server and appends its `init` event (`text`: `init_text`,
 * the id DELETE /code?id= takes; NULL: the run's own id) and a first `ping`.
 */
gw_run_t *gw_run_create(gw_server_t *server, const char *init_text, const gw_run_limits_t *limits);

/** Marks a queued run as started: execution_time counts from here. */
void gw_run_mark_started(gw_run_t *run);

/** Adds `producer` as the run's event source. */
void gw_run_set_producer(gw_run_t *run, const gw_run_producer_t *producer, void *data);

/**
 * Appends an event (steals the reference to `event`, adds `timestamp` if absent) and wakes the
 * readers. Ignored once the run has finished. `stdout`/`stderr` text beyond the run's output
 * limit and `result` bundles beyond its result limit are dropped here; the first drop appends one
 * `status` event with text `output_truncated`.
 */
void gw_run_append(gw_run_t *run, json_t *event);

/**
 * Appends `execution_complete` (with execution_time in ms, `execution_count` when >= 0, and
 * `dropped` {output_bytes, results} when the limits dropped anything) as the last event, records
 * `outcome` (a static string), detaches the producer and lets readers end their responses after it.
 */
void gw_run_finish(gw_run_t *run, int execution_count, const char *outcome);

/** The registered run with `id` (live or retained), or NULL. */
gw_run_t *gw_run_find(gw_server_t *server, const char *id);

/** The run's state for GET /code/executions/{id}. */
json_t *gw_run_to_json(gw_run_t *run);

/**
 * Starts streaming `run` as the response to `req` (200, text/event-stream, no-cache,
 * X-Accel-Buffering: no), from the first event after `after_id` (0: from the start; an id past
 * the last event waits for the next one). The reader lives in `req`'s pool and detaches itself
 * when the request goes away. Returns 0, or -1 when the events right after `after_id` are no
 * longer retained (nothing was sent).
 */
int gw_run_attach_reader(gw_run_t *run, h2o_req_t *req, uint64_t after_id);

/** Number of readers attached (tests, metrics). */
size_t gw_run_num_readers(const gw_run_t *run);

/** Initialises the server's run lists (called once by gw_server_init). */
void gw_runs_init(gw_server_t *server);

/** Collects finished runs past their retention or over the retained-bytes budget (server tick). */
void gw_runs_collect(gw_server_t *server);

/** Ends every run now (server shutdown): producers cancelled, readers finished. */
void gw_runs_shutdown(gw_server_t *server);

/** Frees every run (after the loop has stopped). */
void gw_runs_dispose(gw_server_t *server);

#endif
