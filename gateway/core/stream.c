/* The stream writer (SSE and relayed bodies): pulls events from a source and writes them with one h2o_send in flight. */
#include <string.h>
#include <sys/socket.h>
#include "core/http.h"
#include "core/stream.h"

/* Events handed to one h2o_send at most (the byte bound is the caller's max_batch_bytes). */
#define BATCH_EVENTS 64

typedef struct st_gw_sse_writer_t {
    h2o_generator_t super;
    h2o_req_t *req;
    gw_event_source_t *source; /* NULL once closed */
    size_t max_batch_bytes;
    gw_event_t *last;                   /* last event handed to h2o (a reference); NULL before the first */
    gw_event_t *inflight[BATCH_EVENTS]; /* references kept until h2o is done with the bytes */
    h2o_iovec_t bufs[BATCH_EVENTS * GW_EVENT_MAX_PIECES];
    size_t num_inflight, num_bufs;
    h2o_timeout_entry_t deferred; /* a pump at the end of this loop iteration (see on_source_ready) */
    unsigned sending : 1;
    unsigned done : 1; /* FINAL or ERROR sent, or stopped: h2o_send must not be called again */
} gw_sse_writer_t;

void gw_sse_prepare_response(h2o_req_t *req)
{
    req->res.status = 200;
    req->res.reason = "OK";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/event-stream"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-cache"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-accel-buffering"), 0, NULL, H2O_STRLIT("no"));
    gw_add_common_headers(req);
}

static void writer_close_source(gw_sse_writer_t *writer)
{
    gw_event_source_t *source = writer->source;

    if (source == NULL)
        return;
    writer->source = NULL;
    source->on_ready = NULL;
    source->writer = NULL;
    source->ops->close(source);
}

static void release_inflight(gw_sse_writer_t *writer)
{
    for (size_t i = 0; i != writer->num_inflight; ++i)
        gw_event_release(writer->inflight[i]);
    writer->num_inflight = writer->num_bufs = 0;
}

/*
 * A writer whose write is stuck (the client stopped reading) and whose next event was dropped can
 * never catch up. Its h2o_send is still in flight, so it cannot be ended with another send: shut
 * its socket down instead, which fails the write; h2o then closes the connection and disposes the
 * request. Over HTTP/2 this ends the whole connection.
 */
static void cut_off_stuck(gw_sse_writer_t *writer)
{
    h2o_conn_t *conn = writer->req->conn;
    h2o_socket_t *sock = conn->callbacks->get_socket != NULL ? conn->callbacks->get_socket(conn) : NULL;

    writer_close_source(writer);
    if (sock != NULL)
        shutdown(h2o_socket_get_fd(sock), SHUT_RDWR);
}

static void pump(gw_sse_writer_t *writer)
{
    gw_event_source_t *source = writer->source;
    size_t batch_bytes = 0;
    gw_event_t *ev;
    int lost = 0, is_final;

    if (source == NULL)
        return;
    if (writer->sending) {
        if (source->ops->next(source, writer->last, &lost), lost)
            cut_off_stuck(writer);
        return;
    }
    if (writer->done)
        return;
    ev = source->ops->next(source, writer->last, &lost);
    if (lost) {
        /* a slow reader loses its connection rather than growing memory; it may resume later */
        writer->done = 1;
        writer_close_source(writer);
        h2o_send(writer->req, NULL, 0, H2O_SEND_STATE_ERROR);
        return;
    }
    while (ev != NULL && writer->num_inflight < BATCH_EVENTS &&
           (writer->num_inflight == 0 || batch_bytes + ev->len <= writer->max_batch_bytes)) {
        gw_event_addref(ev);
        writer->inflight[writer->num_inflight] = ev;
        writer->num_bufs += gw_event_pieces(ev, writer->bufs + writer->num_bufs);
        ++writer->num_inflight;
        batch_bytes += ev->len;
        ev = source->ops->next(source, ev, &lost);
    }
    is_final = ev == NULL && !lost &&
               source->ops->is_end(source, writer->num_inflight != 0 ? writer->inflight[writer->num_inflight - 1] : writer->last);
    if (writer->num_inflight == 0 && !is_final)
        return;
    if (writer->num_inflight != 0) {
        gw_event_t *newest = writer->inflight[writer->num_inflight - 1];
        gw_event_addref(newest);
        gw_event_release(writer->last);
        writer->last = newest;
    }
    writer->sending = 1;
    if (is_final) {
        writer->done = 1;
        writer_close_source(writer);
    }
    h2o_send(writer->req, writer->bufs, writer->num_bufs, is_final ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

static void on_deferred(h2o_timeout_entry_t *entry)
{
    pump(H2O_STRUCT_FROM_MEMBER(gw_sse_writer_t, deferred, entry));
}

/*
 * New events are written at the end of the loop iteration that produced them, not one by one as they
 * are appended: a kernel's messages for one request (status, execute_input, execute_result, reply)
 * often arrive in one drain of its sockets, and then go out in one write, which wakes the client once.
 * (h2o runs the zero timeout in the same iteration, after the I/O callbacks: no added latency.)
 */
static void on_source_ready(gw_event_source_t *source)
{
    gw_sse_writer_t *writer = source->writer;
    h2o_context_t *ctx = writer->req->conn->ctx;

    if (!h2o_timeout_is_linked(&writer->deferred))
        h2o_timeout_link(ctx->loop, &ctx->zero_timeout, &writer->deferred);
}

static void on_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
    gw_sse_writer_t *writer = H2O_STRUCT_FROM_MEMBER(gw_sse_writer_t, super, generator);
    (void)req;

    release_inflight(writer);
    writer->sending = 0;
    pump(writer);
}

static void on_stop(h2o_generator_t *generator, h2o_req_t *req)
{
    gw_sse_writer_t *writer = H2O_STRUCT_FROM_MEMBER(gw_sse_writer_t, super, generator);
    (void)req;

    writer->done = 1;
    writer_close_source(writer);
}

/* The request's pool is going away: the last word on the writer, whatever happened before. */
static void on_dispose(void *p)
{
    gw_sse_writer_t *writer = p;

    if (h2o_timeout_is_linked(&writer->deferred))
        h2o_timeout_unlink(&writer->deferred);
    writer_close_source(writer);
    release_inflight(writer);
    gw_event_release(writer->last);
    writer->last = NULL;
}

void gw_stream_start(h2o_req_t *req, gw_event_source_t *source, size_t max_batch_bytes)
{
    gw_sse_writer_t *writer = h2o_mem_alloc_shared(&req->pool, sizeof(*writer), on_dispose);

    memset(writer, 0, sizeof(*writer));
    writer->super.proceed = on_proceed;
    writer->super.stop = on_stop;
    writer->req = req;
    writer->source = source;
    writer->max_batch_bytes = max_batch_bytes;
    writer->deferred.cb = on_deferred;
    source->writer = writer;
    source->on_ready = on_source_ready;
    h2o_start_response(req, &writer->super);
    pump(writer);
}

void gw_sse_stream_start(h2o_req_t *req, gw_event_source_t *source, size_t max_batch_bytes, const char *extra_name,
                         const char *extra_value)
{
    gw_sse_prepare_response(req);
    if (extra_name != NULL)
        h2o_add_header_by_str(&req->pool, &req->res.headers, extra_name, strlen(extra_name), 0, NULL,
                              h2o_strdup(&req->pool, extra_value, SIZE_MAX).base, strlen(extra_value));
    gw_stream_start(req, source, max_batch_bytes);
}
