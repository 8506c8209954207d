/* support/stream.h: SSE responses read where they arrive: the reader the benchmark times, and e2e streams on it. */
#ifndef KGATE_SUPPORT_STREAM_H
#define KGATE_SUPPORT_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include "support/events.h"
#include "support/http.h"
#include "support/sse.h"

#define TS_END_GRACE_MS 2000 /* after execution_complete, waiting for the end of the response */

/**
 * Reads a response body into one growable buffer and parses each event where it lies: every
 * byte is copied once, from the connection's buffer into this one (for the benchmark, the
 * client's own cost must stay small next to kgate's).
 */
typedef struct st_ts_sse_reader_t {
    ts_sse_parser_t parser;
    char *buf; /* allocated on the first read; unparsed bytes are [start, end) */
    size_t start, end, capacity;
    size_t initial; /* first capacity */
    size_t max;     /* the buffer grows up to this: an event must fit in it */
} ts_sse_reader_t;

/** Prepares a reader whose buffer starts at `initial` bytes (allocated on first use) and stops growing at `max`. */
void ts_sse_reader_init(ts_sse_reader_t *r, size_t initial, size_t max);

void ts_sse_reader_dispose(ts_sse_reader_t *r);

/** The next event among the bytes already read, without reading: 1 with *ev filled, else 0. */
int ts_sse_reader_parse(ts_sse_reader_t *r, ts_sse_event_t *ev);

/**
 * The next event, reading the body of `resp` from `c` (ts_http_read_body) until one is complete.
 * Returns 1 with *ev filled (valid until the next call on the reader), 0 once the body has ended,
 * or a TS_E* with resp->error set: TS_ETOOBIG when an event would not fit in `max` bytes, or what
 * reading the body returned. After TS_ETIMEDOUT it may be called again with a later deadline.
 */
int ts_sse_reader_next(ts_sse_reader_t *r, ts_http_t *c, ts_response_t *resp, int64_t deadline_ms, ts_sse_event_t *ev);

/** A streamed response on its own connection (Connection: close), read incrementally. */
typedef struct st_ts_stream_t ts_stream_t;

/**
 * Sends a request and reads the response head (bounded by `deadline_ms`). Returns NULL only on
 * transport failure (message in `err`, may be NULL, 256 bytes). If the response is not an event
 * stream (no text/event-stream Content-Type), its whole body is read into ts_stream_response(s)
 * and no events follow.
 */
ts_stream_t *ts_stream_open(unsigned short port, const char *method, const char *path, const char *const *headers, const char *body,
                            int64_t deadline_ms, char *err);

/** The response head (and, for non-stream responses, body and json). Owned by the stream. */
const ts_response_t *ts_stream_response(const ts_stream_t *s);

/** 1 if the response is an event stream. */
int ts_stream_is_sse(const ts_stream_t *s);

/** Moves the response out of the stream into `out` (the caller disposes it); the stream then only closes. */
void ts_stream_take_response(ts_stream_t *s, ts_response_t *out);

/**
 * Reads until at least one more event is parsed, the response ends, or the deadline passes, then
 * appends every event already received to `out`. Returns the number of events appended (> 0; a
 * newly set `truncated` counts as one), 0 at the end of the response (out->ended set), or a TS_E*
 * on timeout (out->timed_out; reading may resume with a later deadline) or transport error (out->error).
 */
int ts_stream_next(ts_stream_t *s, int64_t deadline_ms, ts_events_t *out);

/**
 * Reads every event until the response ends, the deadline passes, or `max_events` (0 = the
 * default bound) are collected. Once an `execution_complete` event has arrived it waits at most
 * TS_END_GRACE_MS more for the end of the response. Returns 0 when the response ended, else a TS_E*
 * (TS_ETOOBIG when truncated).
 */
int ts_stream_collect(ts_stream_t *s, int64_t deadline_ms, size_t max_events, ts_events_t *out);

/** Closes the connection (early or not) and frees the stream. NULL is fine. */
void ts_stream_close(ts_stream_t *s);

#endif
