/* support/events.h: the events of one response stream, each kept with its JSON, for assertions. */
#ifndef KGATE_SUPPORT_EVENTS_H
#define KGATE_SUPPORT_EVENTS_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "support/sse.h"

#define TS_MAX_EVENTS 200000     /* events kept from one stream */
#define TS_MAX_TEXT (512u << 20) /* concatenated text of one stream (ts_events_text) */

typedef struct st_ts_event_t {
    long long id;     /* value of the `id:` field, -1 when absent */
    char *data;       /* the event's data (data: lines joined by \n, or the bare JSON line), NUL-terminated */
    json_t *json;     /* data parsed as JSON, or NULL */
    const char *type; /* json's "type" if a string, else "" (points into json) */
    int bare;         /* 1 when framed as a bare JSON line (execd compat), 0 for SSE data: lines */
    int64_t recv_ms;  /* ts_now_ms() when the event was complete */
} ts_event_t;

typedef struct st_ts_events_t {
    ts_event_t *v;
    size_t n, cap;
    int ended;      /* the response ended cleanly (final chunk / Content-Length / close) */
    int timed_out;  /* the deadline passed first */
    int truncated;  /* more than TS_MAX_EVENTS, or than the caller's max_events, arrived */
    int64_t end_ms; /* when reading stopped */
    char error[256];
} ts_events_t;

/** Appends a copy of `ev`, parsed as JSON, stamped now; past TS_MAX_EVENTS it sets `truncated` instead. */
void ts_events_push(ts_events_t *evs, const ts_sse_event_t *ev);

/** Frees every event and zeroes the list; a zeroed list is fine. */
void ts_events_dispose(ts_events_t *evs);

/** Index of the first event of `type` at or after `from`, or -1. */
long ts_events_find(const ts_events_t *evs, const char *type, size_t from);

size_t ts_events_count(const ts_events_t *evs, const char *type);

/** Concatenation of the `text` of every event of `type` (e.g. "stdout"), in order, up to TS_MAX_TEXT; caller frees. */
char *ts_events_text(const ts_events_t *evs, const char *type);

/** Writes a one-line-per-event summary into `buf` (for assertion messages); returns buf. */
const char *ts_events_summary(const ts_events_t *evs, char *buf, size_t size);

#endif
