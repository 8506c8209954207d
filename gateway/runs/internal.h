/* runs/internal.h: the run itself, shared by the files of runs/ only (others use runs/run.h). */
#ifndef GW_RUNS_INTERNAL_H
#define GW_RUNS_INTERNAL_H

#include <h2o.h>
#include "wire/ids.h"
#include "runs/run.h"
#include "runs/store.h"

/* Events in RAM per run once written: enough for a reader that keeps up, small beside a run's output. */
#define GW_RUNLOG_TAIL_BYTES ((size_t)256 << 10)
/* One index mark per this many events: finding an event reads at most this many record headers. */
#define GW_RUNLOG_INDEX_STRIDE 64
/* The largest piece of a frame read back at once (an allocation below malloc's mmap threshold). */
#define GW_RUNLOG_READ_BYTES (((size_t)64 << 10) - offsetof(gw_event_t, frame))

/* Room kept in a run's log, beyond its biggest event, for the events that end the run (a status, an error, execution_complete):
 * one event may take the log's bound less this (gw_run_event_max), so that it and those after it stay readable together. */
#define GW_RUNLOG_END_RESERVE ((size_t)64 << 10)

/** What precedes each frame in the file: enough to walk the log without an index entry per event. */
typedef struct st_gw_runlog_header_t {
    uint64_t id;
    uint32_t len;   /* of the frame that follows */
    uint32_t magic; /* GW_RUNLOG_MAGIC: a read that lands elsewhere is noticed */
} gw_runlog_header_t;
#define GW_RUNLOG_MAGIC 0x6b67726cu

/** Where an event's record starts. */
typedef struct st_gw_runlog_mark_t {
    uint64_t id;
    uint64_t off;
} gw_runlog_mark_t;

struct st_gw_run_t {
    char id[WIRE_UUID_STRLEN + 1];
    char context_id[WIRE_UUID_STRLEN + 1]; /* "" for a run outside any context */
    gw_runs_t *runs;
    const gw_run_producer_t *producer; /* NULL once the producer is done */
    void *producer_data;
    gw_run_state_t state;
    /*
     * The log: events [first_id, last_event_id], whose records lie at logical offsets [first_off,
     * end_off) of the run's file in the store; each record is a gw_runlog_header_t and the frame.
     * Records before written_off are on disk. The newest ones are also in `tail`, in RAM: a
     * contiguous suffix of the log, bounded by GW_RUNLOG_TAIL_BYTES plus the newest event (a
     * reader that keeps up is served from it without a read). A finished run's tail is empty
     * unless its file failed.
     */
    h2o_linklist_t tail; /* gw_event_t, oldest first */
    size_t tail_bytes;   /* frame bytes in the tail */
    size_t log_bytes;    /* frame bytes of the whole log (what max_run_log_bytes bounds) */
    uint64_t first_id;   /* the oldest event retained; last_event_id + 1 when none is */
    uint64_t last_event_id;
    uint64_t first_off, end_off, written_off;
    gw_runstore_file_t file;
    H2O_VECTOR(gw_runlog_mark_t) index; /* every GW_RUNLOG_INDEX_STRIDE-th event from first_id on, oldest first */
    int log_error;                      /* 0, or the -errno that stopped the log being written */
    h2o_linklist_t cursors;             /* gw_run_cursor_t */
    h2o_linklist_t link;                /* in runs->live or runs->finished (oldest first) */
    gw_idmap_entry_t by_id;             /* in runs->by_id */
    h2o_timeout_entry_t ping;           /* keep-alive events while running */
    /* wall-clock times for clients; durations and retention use the gw_now_ms clock, which no clock step moves */
    int64_t created_at_ms;
    int64_t started_at_ms;  /* when it left the queue (== created_at for unqueued runs) */
    int64_t finished_at_ms; /* 0 while not finished */
    int64_t started_mono_ms;
    int64_t finished_mono_ms;
    gw_run_call_record_t *call_records; /* its tool calls, once its producer handed them (gw_run_keep_call_records) */
    size_t num_call_records;
    gw_run_limits_t limits;
    size_t output_bytes;         /* stream text relayed so far */
    size_t output_dropped_bytes; /* stream text dropped by the limit, or that came after the run finished */
    size_t results_dropped;      /* results dropped by the limit */
    size_t messages_dropped;     /* kernel messages over max_message_bytes while the run was in flight, or after it finished */
    const char *outcome;         /* once finished */
    unsigned truncation_reported : 1;
    unsigned oversized_reported : 1;
    unsigned cut_reported : 1;       /* a kernel message over the cap cut to its head (gw_run_report_cut_message) was reported */
    unsigned log_error_reported : 1; /* the run's stream says its log failed (its outcome is then "error") */
    unsigned log_cut_reported : 1;   /* an event was cut (or a result dropped) to fit the log: its status was appended */
};

/* What a finished run counts against max_retained_bytes: its log's frames (on disk) and the tool-call records it keeps in
 * RAM (up to max_tool_calls of them; without them, a run's retention time alone bounded those). */
static inline size_t gw_run_retained_bytes(const gw_run_t *run)
{
    return run->log_bytes + run->num_call_records * sizeof(run->call_records[0]);
}

/** Wakes every cursor's writer (defined in log.c; log.c and run.c call it). */
void gw_run_notify_cursors(gw_run_t *run);
/** Detaches every cursor (the run is going away; their writers see no more events). */
void gw_run_detach_cursors(gw_run_t *run);
/** Drops every event of the log (RAM and file). */
void gw_run_clear_log(gw_run_t *run);
/** Appends execution_complete (rendered from `event`, stolen) whatever the run's bounds; the run is about to finish. */
void gw_run_append_last(gw_run_t *run, json_t *event);
/**
 * Writes the tail to the file (the run has finished); on a write error the tail stays in RAM. The
 * tail leaves RAM now if no reader is attached, else when the last one detaches (cursor.c), so that
 * the readers woken for the last events take them from RAM.
 */
void gw_run_flush_log(gw_run_t *run);
/** Drops the tail from RAM once the file holds all of it (a finished run with no reader attached). */
void gw_run_release_tail(gw_run_t *run);
/** The logical offset of event `id`'s record; `id` past the last: end_off. Returns 0, GW_EEVENTSGONE, or -errno (unreadable). */
int gw_run_find_event(gw_run_t *run, uint64_t id, uint64_t *off);
/** Reads the record header at `off` (in the file). Returns 0, or -errno (-EIO for a header that is not one). */
int gw_run_read_header(gw_run_t *run, uint64_t off, gw_runlog_header_t *header);
/** The tail's first event, or NULL. */
gw_event_t *gw_run_tail_first(gw_run_t *run);
/** Where a tail event's record starts. */
static inline uint64_t gw_run_record_off(const gw_event_t *ev)
{
    return ev->log_pos - ev->len - sizeof(gw_runlog_header_t);
}
/* limits.c: what one event may carry. */
/** The longest text one stream event may carry in the log, encoded or decoded. */
size_t gw_run_log_text_max(const gw_run_t *run);
/** Applies the run's output limits, and the log's bound for one event, to `event` (stolen); returns it (possibly shortened) or
 * NULL when dropped; `*truncated` says the output limits did it, `*log_cut` the log's bound. */
json_t *gw_run_apply_limits(gw_run_t *run, json_t *event, int *truncated, int *log_cut);
/** An event (stolen) the failed log has no room for: counted where the run's `dropped` can say so. */
void gw_run_drop_for_log(gw_run_t *run, json_t *event);
/** A stream event whose frame `ev` (rendered from `event`) is longer than the log keeps: its text cut to fit and rendered again
 * (`ev` released); returns the event to link, `*log_cut` set when cut. */
gw_event_t *gw_run_fit_stream_event(gw_run_t *run, json_t *event, gw_event_t *ev, int *log_cut);

/** Unlinks the run from the registry and frees it with its log (registry.c; cursors must be detached). */
void gw_run_free(gw_run_t *run);

#endif
