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
 * What produces a run's events (a kernel request or a shell process). The run calls `cancel`
 * exactly once, when the run is released before the producer finished (server shutdown), so the
 * producer stops calling back into it.
 */
typedef struct st_gw_run_producer_t {
    void (*cancel)(gw_run_t *run);
} gw_run_producer_t;

/**
 * A run owns its events. Producers append; readers (SSE responses) each keep a cursor into the
 * log and write at their own pace. The log keeps at most `max_log_bytes` of frames: when full,
 * the oldest events are dropped, and a reader that had not yet written them is disconnected (it
 * has fallen behind; it is never allowed to grow memory).
 *
 * Lifetime: the run lives while it is producing or has readers. Once finished (its
 * execution_complete appended) and without readers, it is freed from the loop (never inside a
 * callback that still uses it).
 */
struct st_gw_run_t {
    char id[WIRE_UUID_STRLEN + 1];
    gw_server_t *server;
    const gw_run_producer_t *producer; /* NULL once the producer is done */
    void *producer_data;
    h2o_linklist_t log; /* gw_event_t, oldest first */
    size_t log_bytes;
    uint64_t last_event_id;
    h2o_linklist_t readers;   /* gw_reader_t */
    h2o_linklist_t link;      /* in server->runs */
    h2o_timeout_entry_t ping; /* keep-alive events while running */
    int64_t started_at_ms;
    unsigned finished : 1;
    unsigned saw_error : 1;
    unsigned release_scheduled : 1;
};

/**
 * Creates a run registered with the server and appends its `init` event (`text`: `init_text`,
 * the id DELETE /code?id= takes; NULL: the run's own id) and a first `ping`.
 */
gw_run_t *gw_run_create(gw_server_t *server, const char *init_text);

/** Adds `producer` as the run's event source. */
void gw_run_set_producer(gw_run_t *run, const gw_run_producer_t *producer, void *data);

/**
 * Appends an event (steals the reference to `event`, adds `timestamp` if absent) and wakes the
 * readers. Ignored once the run has finished.
 */
void gw_run_append(gw_run_t *run, json_t *event);

/**
 * Appends `execution_complete` (with execution_time in ms, and `execution_count` when >= 0) as the
 * last event, detaches the producer and lets readers end their responses after it.
 */
void gw_run_finish(gw_run_t *run, int execution_count);

/**
 * Starts streaming `run` as the response to `req` (200, text/event-stream, no-cache,
 * X-Accel-Buffering: no), from the first event after `after_id` (0: from the start). The reader
 * lives in `req`'s pool and detaches itself when the request goes away. Returns 0, or -1 when the
 * events after `after_id` are no longer retained (nothing was sent).
 */
int gw_run_attach_reader(gw_run_t *run, h2o_req_t *req, uint64_t after_id);

/** Number of readers attached (tests, metrics). */
size_t gw_run_num_readers(const gw_run_t *run);

/** Initialises the server's run lists (called once by gw_server_init). */
void gw_runs_init(gw_server_t *server);

/** Ends every run now (server shutdown): producers cancelled, readers finished. */
void gw_runs_shutdown(gw_server_t *server);

#endif
