/* runs/run.h: runs: each an ordered, bounded, resumable log of events, read through cursors. */
#ifndef GW_RUN_H
#define GW_RUN_H

#include <stdint.h>
#include <jansson.h>
#include <h2o/linklist.h>
#include "wire/ids.h"
#include "core/event.h"
#include "core/host.h"
#include "core/idmap.h"
#include "core/stream.h"
#include "runs/store.h"

typedef struct st_gw_run_t gw_run_t;

/**
 * The registry of runs: live ones, and finished ones retained for resumption (oldest first). The
 * bounds come from the host's configuration: max_run_log_bytes per run, max_retained_bytes and
 * run_retention_ms for finished runs, ping_interval_ms for keep-alive events.
 */
typedef struct st_gw_runs_t {
    gw_host_t *host;
    h2o_linklist_t live;     /* gw_run_t, not finished */
    h2o_linklist_t finished; /* gw_run_t, finished and retained, oldest first */
    size_t retained_bytes;   /* log bytes of `finished` */
    gw_idmap_t by_id;        /* every registered run, live or finished */
    gw_runstore_t store;     /* where the logs are (runs/store.h) */
} gw_runs_t;

/** What produces a run's events (a kernel request or a shell process), seen from the run. */
typedef struct st_gw_run_producer_t {
    /** The run is being finished from outside (server shutdown): stop calling back into it. Called
     * at most once; the producer is detached afterwards. */
    void (*cancel)(gw_run_t *run, void *data);
    /** gw_run_stop: cancel the run if it is queued, interrupt it if it runs. */
    void (*stop)(gw_run_t *run, void *data);
    /** gw_run_input: answers the run's pending input_request with `value`. Returns 0 or GW_ENOINPUT. */
    int (*input)(gw_run_t *run, void *data, const char *value);
    /** gw_run_tool_result: answers one of the run's tool calls. NULL: the producer makes none. */
    int (*tool_result)(gw_run_t *run, void *data, const char *call_id, const json_t *result, const char *error);
} gw_run_producer_t;

/** Where a run is in its life. */
typedef enum { GW_RUN_QUEUED, GW_RUN_RUNNING, GW_RUN_FINISHED } gw_run_state_t;

/** Per-run output bounds (docs/API.md Part 2): stream text and the size of each rich result. */
typedef struct st_gw_run_limits_t {
    size_t output_bytes; /* stdout + stderr text kept; the rest is dropped and reported */
    size_t result_bytes; /* one result's MIME bundle, serialised; larger ones are dropped and reported */
} gw_run_limits_t;

/**
 * A reader's position in one run's log: an event source (core/stream.h) that a front door's
 * writer pulls from. The cursor's memory belongs to the reader (a request's pool, usually); it is
 * linked into the run from gw_run_cursor_open until its source's `close` (which the writer calls
 * exactly once) or until the run goes away (then it reads as detached: no more events, no end).
 */
typedef struct st_gw_run_cursor_t {
    gw_event_source_t super;
    gw_run_t *run;       /* NULL once detached */
    h2o_linklist_t link; /* in the run's cursors while attached */
    uint64_t after_id;   /* the first event wanted is after_id + 1 */
    struct {
        uint64_t start_off;  /* where event after_id + 1 starts in the log */
        gw_event_t *piece;   /* the last piece read back from the file (a reference), or NULL */
        uint64_t piece_from; /* the position it was read for */
        uint64_t rec_off;    /* the record being read back: [rec_off, rec_end), event rec_id */
        uint64_t rec_end;
        uint64_t rec_id;
        int read_error; /* the -errno of a failed read: the reader gets one error event, then the end */
        unsigned error_sent : 1;
    } _private;
} gw_run_cursor_t;

/** Initialises the registry (lists empty). The logs go to a file in $TMPDIR (or /tmp) unless gw_runs_set_log_dir says where. */
void gw_runs_init(gw_runs_t *runs, gw_host_t *host);
/** The directory of the runs' log file (copied): kgate's runtime dir. Call before the first run. */
void gw_runs_set_log_dir(gw_runs_t *runs, const char *dir);
/** Collects finished runs past their retention or over the retained-bytes budget (server tick). */
void gw_runs_collect(gw_runs_t *runs);
/** Ends every live run now (server shutdown): producers cancelled, readers finished. */
void gw_runs_shutdown(gw_runs_t *runs);
/** Frees every run (after the loop has stopped); cursors still attached are detached. */
void gw_runs_dispose(gw_runs_t *runs);

/**
 * Creates a run registered with `runs` and appends its `init` event (`text`: `init_text`, the id
 * DELETE /code?id= takes; NULL: the run's own id) and a first `ping`. `context_id` (copied) is the
 * context it runs in, NULL for none. Pings follow every ping interval until the run finishes.
 * Events are rendered in execd's framing when the configuration's compat_execd says so.
 *
 * Lifetime: a run is registered (gw_run_find) from creation until it is collected: finished,
 * without cursors, and either older than run_retention_ms or evicted because finished runs hold
 * more than max_retained_bytes. Collection happens from the server tick only, never inside a
 * callback that may still use the run.
 */
gw_run_t *gw_run_create(gw_runs_t *runs, const char *context_id, const char *init_text, const gw_run_limits_t *limits);

/** The registered run with `id` (live or retained), or NULL. */
gw_run_t *gw_run_find(gw_runs_t *runs, const char *id);

/** The run's id (a UUID string, valid for the run's life). */
const char *gw_run_id(const gw_run_t *run);
/** Where the run is in its life. */
gw_run_state_t gw_run_state(const gw_run_t *run);

/** Marks a queued run as started: execution_time counts from here. */
void gw_run_mark_started(gw_run_t *run);

/** Makes `producer` (with `data`) the run's event source, until gw_run_finish or its cancel. */
void gw_run_set_producer(gw_run_t *run, const gw_run_producer_t *producer, void *data);

/**
 * Appends an event (steals the reference to `event`, adds `timestamp` if absent) and wakes the
 * cursors. Ignored once the run has finished. `stdout`/`stderr` text beyond the run's output
 * limit and `result` bundles beyond its result limit are dropped here; the first drop appends one
 * `status` event with text `output_truncated`. The log keeps at most max_run_log_bytes of frames:
 * when full the oldest events are dropped, and a reader that still needed them is cut off (it
 * has fallen behind; it is never allowed to grow memory; it may resume later).
 */
void gw_run_append(gw_run_t *run, json_t *event);

/**
 * Appends a `stdout` (or, with `is_stderr`, `stderr`) event whose text is the JSON string token
 * `text_token` (`token_len` bytes, quotes included, already validated: wire_json_scan_stream), which
 * decodes to `decoded_len` bytes, without decoding it: as gw_run_append would append
 * {"type", "timestamp", "text"} (same output accounting, same frame once parsed; core/event.h
 * gw_event_render_text: a big token that lies in `storage`, when not NULL, is held by reference, not
 * copied). Text beyond the run's remaining output room is cut between characters without decoding it
 * (wire_json_string_prefix), the rest counted as dropped and reported (`output_truncated`) as gw_run_append does;
 * a cut head that lies in `storage` is still held by reference. Counted as dropped when the run's log failed;
 * ignored once the run has finished.
 */
void gw_run_append_stream(gw_run_t *run, int is_stderr, const char *text_token, size_t token_len, size_t decoded_len,
                          wire_buf_t *storage);

/**
 * Appends a `result` event whose `results` is `results_json` (`len` bytes: the text of a JSON object
 * on one line, validated by the caller: code/translate.h gw_translate_raw_bundle) copied as it is, so
 * that numbers keep the kernel's text; `is_display` (a display_data, not the execute_result) adds
 * `"display": true` before it, as gw_translate_iopub does, so that a door can tell the run's value
 * from what it displayed (E2B's is_main_result). The run's result limit applies as in gw_run_append (a bundle
 * over it is dropped, counted and reported once as `output_truncated`). Ignored once the run has finished.
 */
void gw_run_append_result_json(gw_run_t *run, const char *results_json, size_t len, int is_display);

/**
 * How many decoded bytes of stream text the run can still keep: its output budget left, and never more than one event can
 * hold in its log (--max-run-log-bytes less room for the events that end the run: gw_run_append cuts a longer text there).
 * 0 once the run has finished. What a producer tells the kernel, so that a message over the cap is read no further
 * (kmgr_request_set_text_room).
 */
size_t gw_run_text_room(const gw_run_t *run);

/**
 * A kernel message larger than max_message_bytes was dropped while the run was in flight (its
 * output, or its reply, may be among what was lost). The first time appends a `status` event with
 * text `output_truncated`, `message_limit` and a `reason` naming the cap; each time counts one in
 * `dropped.messages`. Ignored once the run has finished.
 */
void gw_run_report_oversized_message(gw_run_t *run);

/**
 * A kernel stream message larger than max_message_bytes reached the run cut to the head of its text (appended before this
 * call), and `dropped_bytes` of its text after the head (decoded bytes: what the code printed) were lost. Counts them in
 * `dropped.output_bytes`; the first time appends a `status` event with text `output_truncated`, `message_limit`,
 * `dropped_bytes` and a `reason` naming the cap. Ignored once the run has finished.
 */
void gw_run_report_cut_message(gw_run_t *run, uint64_t dropped_bytes);

/**
 * A kernel message for the run reached kgate after the run had finished (late output: docs/kernels.md, "Late output"), with
 * `text_bytes` decoded bytes of stdout/stderr text (0 for another message): counts one in `dropped.messages` and the text in
 * `dropped.output_bytes`, which gw_run_to_json shows from then on. Nothing is appended: the run's log ended with
 * `execution_complete`, whose `dropped` says what was lost up to then. Returns 1, or 0 (nothing counted) while the run has
 * not finished: its producer still delivers what comes for it.
 */
int gw_run_report_late(gw_run_t *run, uint64_t text_bytes);

/**
 * Appends `execution_complete` (with execution_time in ms, `execution_count` when >= 0, and
 * `dropped` {output_bytes, results, messages} when anything was dropped) as the last event, records
 * `outcome` (a static string: "ok", "error", "timeout", "cancelled", "kernel_died"), detaches the
 * producer and lets readers end their responses after it. No-op on a finished run.
 */
void gw_run_finish(gw_run_t *run, int execution_count, const char *outcome);

/** Asks the producer to stop the run (cancel it if queued, interrupt it if running); no-op once finished. */
void gw_run_stop(gw_run_t *run);

/** Answers the run's pending input_request. Returns 0, or GW_ENOINPUT when none is pending. */
int gw_run_input(gw_run_t *run, const char *value);

/**
 * Answers the run's tool call `call_id` (code mode) with `result` (borrowed, any JSON) or, when
 * `error` is not NULL, with an error the code raises. Returns 0, GW_ETOOLCALLNOTFOUND (no such
 * call), GW_ETOOLCALLANSWERED (answered before, whether or not the run has finished since) or
 * GW_ETOOLCALLCLOSED (no longer awaited: the run was interrupted or has finished before its answer).
 */
int gw_run_tool_result(gw_run_t *run, const char *call_id, const json_t *result, const char *error);

/** What a finished run remembers of one tool call it emitted (code mode), so that a late answer is still told apart. */
typedef struct st_gw_run_call_record_t {
    char id[WIRE_UUID_STRLEN + 1];
    unsigned char answered; /* 1: answered; 0: closed before its answer (the kernel stopped waiting) */
} gw_run_call_record_t;

/**
 * Hands the run the record of the tool calls it emitted (`records`, taken; `n` of them, at most --max-tool-calls), which
 * it keeps for as long as it is retained: once its producer is done, gw_run_tool_result answers from it, so that a second
 * answer is GW_ETOOLCALLANSWERED whether or not the run has ended, and an id it never emitted GW_ETOOLCALLNOTFOUND.
 * A record handed before replaces the earlier one.
 */
void gw_run_keep_call_records(gw_run_t *run, gw_run_call_record_t *records, size_t n);

/** The run's state for GET /code/executions/{id}. */
json_t *gw_run_to_json(gw_run_t *run);

/**
 * Attaches `cursor` to `run`, positioned after event `after_id` (0: from the start; an id past the
 * last event waits for the next one). Returns 0, or GW_EEVENTSGONE when the events right after
 * `after_id` are no longer retained (nothing attached). The caller then hands &cursor->super to a
 * writer, which sets its on_ready before the loop runs again.
 */
int gw_run_cursor_open(gw_run_t *run, gw_run_cursor_t *cursor, uint64_t after_id);

/** Number of cursors attached (tests, metrics). */
size_t gw_run_num_cursors(const gw_run_t *run);

#endif
