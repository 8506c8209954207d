/* core/stream.h: the one way streamed bytes leave over HTTP: a bounded writer with one send in flight (SSE and relayed bodies). */
#ifndef GW_STREAM_H
#define GW_STREAM_H

#include <stddef.h>
#include <h2o.h>
#include "core/event.h"

typedef struct st_gw_event_source_t gw_event_source_t;

/**
 * What a writer asks of the events it streams (a run's cursor, for instance). The events are
 * borrowed: the writer takes its own references while h2o holds their bytes.
 */
typedef struct st_gw_event_source_ops_t {
    /** The event after `prev` (NULL: the first one wanted), or NULL when none is there yet. Sets
     * `*lost` when events the reader still needs were dropped (it fell behind): the stream ends. */
    gw_event_t *(*next)(gw_event_source_t *source, const gw_event_t *prev, int *lost);
    /** True when no event will ever follow `prev` (NULL: none at all): the response ends after it. */
    int (*is_end)(gw_event_source_t *source, const gw_event_t *prev);
    /** The writer is done with the source (response ended or request gone). Called exactly once. */
    void (*close)(gw_event_source_t *source);
} gw_event_source_ops_t;

struct st_gw_event_source_t {
    const gw_event_source_ops_t *ops;
    /** Set by the writer: the source calls gw_event_source_notify when events arrive or it ends. */
    void (*on_ready)(gw_event_source_t *source);
    void *writer; /* the writer's, opaque to the source */
};

/** Tells the source's writer (if any) that events arrived or the source ended. */
static inline void gw_event_source_notify(gw_event_source_t *source)
{
    if (source->on_ready != NULL)
        source->on_ready(source);
}

/**
 * Sets the head of an SSE response on `req`: 200, Content-Type text/event-stream, Cache-Control
 * no-cache, X-Accel-Buffering no, and the headers every kgate response carries. The one place
 * that knows them; the caller then starts the response its own way.
 */
void gw_sse_prepare_response(h2o_req_t *req);

/**
 * Streams `source` as the body of `req`, whose head (status, headers, content_length) the caller
 * has set: each event's bytes as they are, in batches of at most `max_batch_bytes` with one h2o_send
 * in flight. The response ends after the source's last event. A source that reports `lost` ends
 * the response abnormally (h2o closes the connection: a truncated body is never passed off as
 * whole); when a send is then still in flight (the reader stopped reading) its socket is shut
 * down. The writer lives in `req`'s pool and closes the source exactly once. `source` must stay
 * valid until its close. The one writer under every streamed response: SSE, relayed bodies.
 */
void gw_stream_start(h2o_req_t *req, gw_event_source_t *source, size_t max_batch_bytes);

/**
 * Streams `source` as the SSE response to `req` (headers of gw_sse_prepare_response plus
 * `extra_name: extra_value` when given; copied). Events go out in batches of at most
 * `max_batch_bytes` with one h2o_send in flight. The response ends after the source's last event;
 * a reader that falls behind is cut off: its stream ends early (a stuck socket is shut down), and
 * it may resume with its last event id. The writer lives in `req`'s pool and closes the source
 * exactly once. `source` must stay valid until its close.
 */
void gw_sse_stream_start(h2o_req_t *req, gw_event_source_t *source, size_t max_batch_bytes, const char *extra_name,
                         const char *extra_value);

#endif
