/* core/event.h: events as immutable, reference-counted, pre-rendered Server-Sent Events frames. */
#ifndef GW_SSE_H
#define GW_SSE_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <h2o/linklist.h>
#include <h2o/memory.h>
#include "wire/buf.h"

/* A stream event's text token this long or longer is not copied into the frame when its bytes lie in a buffer the event
 * can hold (gw_event_render_stream's `storage`): a shorter one is, so that the kernel connection keeps its buffer. */
#define GW_EVENT_VIEW_MIN_BYTES ((size_t)64 * 1024)
/* Most pieces of one event's bytes (gw_event_pieces). */
#define GW_EVENT_MAX_PIECES 3

/**
 * One event of a run, rendered once and shared by every reader. `frame` holds the bytes that go
 * on the wire: `id: <id>\ndata: <json>\n\n` (standard SSE) or `<json>\n\n` (execd framing).
 * While recent, the run's memory tail holds one reference; a reader holds one while the frame is
 * being written. A reader further back is served from the run's log file: its events are read
 * back in pieces of a bounded size (a large frame as several events with the same id, in order).
 */
typedef struct st_gw_event_t {
    uint64_t id;
    unsigned refcnt;
    unsigned in_log : 1; /* still linked in its run's memory tail (or a relayed body's queue) */
    h2o_linklist_t link; /* in the run's log */
    uint64_t log_pos;    /* a run's event: where its bytes end in the run's log (the reader's bookmark) */
    size_t len;          /* every byte of the event, its pieces together (gw_event_pieces) */
    /* NULL, or a big stream event's text token held in the kernel connection's buffer (a reference the event holds):
     * the bytes are then frame[0, head_len), body, frame[head_len, len - body_len), never copied together */
    wire_buf_t *body_storage;
    const char *body;
    size_t body_len, head_len;
    char frame[];
} gw_event_t;

/**
 * The event's bytes in order as up to GW_EVENT_MAX_PIECES pieces into `pieces`; returns how many (1, or 3 for an event
 * with a body). A writer writes them as they are: they stay valid while it holds a reference to the event.
 */
size_t gw_event_pieces(const gw_event_t *ev, h2o_iovec_t *pieces);
/** Copies the event's `len` bytes to `dst` (a small event into a packed block). */
void gw_event_copy(const gw_event_t *ev, char *dst);

/**
 * Renders `event` (a JSON object; borrowed) as event number `id`. The JSON is compact, so it is
 * one line. Returns a new event with refcnt 1.
 */
gw_event_t *gw_event_render(const json_t *event, uint64_t id, int compat_execd);
/**
 * Renders a `stdout` or `stderr` event whose text is `text_token` (`token_len` bytes: a JSON string
 * token, quotes included, that the caller has validated, such as wire_json_scan_stream finds) as it
 * is: the bytes are what gw_event_render makes of {"type", "timestamp", "text"} built by
 * gw_event_new, byte for byte except that the string keeps the kernel's escapes, so it parses to the
 * same event. When `storage` is not NULL the token lies in it, and a token of GW_EVENT_VIEW_MIN_BYTES
 * or more is not copied: the event takes a reference to `storage` and writes the token from there
 * (the event's body). Returns a new event with refcnt 1.
 */
gw_event_t *gw_event_render_stream(int is_stderr, int64_t timestamp, const char *text_token, size_t token_len, wire_buf_t *storage,
                                   uint64_t id, int compat_execd);
/**
 * gw_event_render_stream for a text given as the inside of its token (`inner`, `inner_len` bytes of valid JSON string text,
 * no quotes): a prefix of a validated token, cut between characters (wire_json_string_prefix), renders as well as the
 * whole. The quotes are the frame's; with `storage`, an inside of GW_EVENT_VIEW_MIN_BYTES or more is held by reference.
 */
gw_event_t *gw_event_render_text(int is_stderr, int64_t timestamp, const char *inner, size_t inner_len, wire_buf_t *storage,
                                 uint64_t id, int compat_execd);
/**
 * Renders {"type": type, "timestamp": timestamp, key: <value>} where the value is `value_json`
 * (`value_len` bytes of one-line JSON text the caller has validated) copied as it is: what
 * gw_event_render makes of the same object built by gw_event_new, except that the value keeps its
 * text (a number's digits, a string's escapes). `type` and `key` need no escaping. Returns a new
 * event with refcnt 1.
 */
gw_event_t *gw_event_render_member(const char *type, int64_t timestamp, const char *key, const char *value_json, size_t value_len,
                                   uint64_t id, int compat_execd);
/**
 * Copies `len` bytes (a chunk of a relayed body, say) into an event with no SSE framing: the writer
 * sends them as they are. Returns a new event with refcnt 1 and id 0.
 */
gw_event_t *gw_event_from_bytes(const void *data, size_t len);
/** Takes a reference. */
void gw_event_addref(gw_event_t *ev);
/** Drops a reference; frees the event (and lets its body's storage go) at zero. Accepts NULL. */
void gw_event_release(gw_event_t *ev);

/** Wall-clock Unix time in milliseconds (the `timestamp` of every event). */
int64_t gw_unix_ms(void);

/**
 * Creates `{"type": type, "timestamp": now}`; the caller adds fields. (Convenience for producers.)
 */
json_t *gw_event_new(const char *type);

/** Builds an `error` event {error: {ename, evalue, traceback: []}}. */
json_t *gw_error_event(const char *ename, const char *evalue);

#endif
