/* A run's bounded event log and its readers: SSE responses that each write at their own pace. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "gateway/run.h"
#include "gateway/server.h"
#include "gateway/translate.h"

/* Events handed to one h2o_send at most (the byte bound is config->max_reader_batch_bytes). */
#define READER_BATCH_EVENTS 64

typedef struct st_gw_reader_t {
    h2o_generator_t super;
    h2o_req_t *req;
    gw_run_t *run;                             /* NULL once detached */
    h2o_linklist_t link;                       /* in run->readers while attached */
    gw_event_t *last;                          /* last event handed to h2o (a reference); NULL before the first */
    uint64_t after_id;                         /* before the first send: resume after this event id */
    gw_event_t *inflight[READER_BATCH_EVENTS]; /* references kept until h2o is done with the bytes */
    h2o_iovec_t bufs[READER_BATCH_EVENTS];
    size_t num_inflight;
    unsigned sending : 1;
    unsigned done : 1; /* FINAL or ERROR sent, or stopped: h2o_send must not be called again */
} gw_reader_t;

static void schedule_release(gw_run_t *run);

static void on_ping(h2o_timeout_entry_t *entry)
{
    gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, ping, entry);
    json_t *ev = gw_event_new("ping");

    json_object_set_new(ev, "text", json_string("pong"));
    gw_run_append(run, ev);
    if (!run->finished)
        h2o_timeout_link(run->server->ctx.loop, &run->server->ping_timeout, &run->ping);
}

gw_run_t *gw_run_create(gw_server_t *server, const char *init_text)
{
    gw_run_t *run = wire_calloc(1, sizeof(*run));
    json_t *ev;

    wire_uuid4(run->id);
    run->server = server;
    h2o_linklist_init_anchor(&run->log);
    h2o_linklist_init_anchor(&run->readers);
    h2o_linklist_insert(&server->runs, &run->link);
    run->started_at_ms = gw_unix_ms();
    run->ping.cb = on_ping;

    ev = gw_event_new("init");
    json_object_set_new(ev, "text", json_string(init_text != NULL ? init_text : run->id));
    gw_run_append(run, ev);
    on_ping(&run->ping); /* API.md: a ping right after init, then every ping interval */
    return run;
}

void gw_run_set_producer(gw_run_t *run, const gw_run_producer_t *producer, void *data)
{
    run->producer = producer;
    run->producer_data = data;
}

static void reader_release_inflight(gw_reader_t *reader)
{
    size_t i;
    for (i = 0; i != reader->num_inflight; ++i)
        gw_event_release(reader->inflight[i]);
    reader->num_inflight = 0;
}

static void reader_detach(gw_reader_t *reader)
{
    gw_run_t *run = reader->run;

    if (run == NULL)
        return;
    h2o_linklist_unlink(&reader->link);
    reader->run = NULL;
    if (run->finished && h2o_linklist_is_empty(&run->readers))
        schedule_release(run);
}

/*
 * The first event this reader has not yet written, or NULL when it is up to date. Sets *behind
 * when events it still needed were trimmed from the log.
 */
static gw_event_t *reader_next_event(gw_reader_t *reader, int *behind)
{
    gw_run_t *run = reader->run;
    uint64_t wanted = reader->last != NULL ? reader->last->id + 1 : reader->after_id + 1;
    gw_event_t *head;
    h2o_linklist_t *node;

    *behind = 0;
    if (reader->last != NULL && reader->last->in_log) {
        node = reader->last->link.next;
        return node == &run->log ? NULL : H2O_STRUCT_FROM_MEMBER(gw_event_t, link, node);
    }
    if (h2o_linklist_is_empty(&run->log))
        return NULL;
    head = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next);
    if (head->id > wanted) {
        *behind = 1;
        return NULL;
    }
    /* a resume point inside the log: walk to it once; later sends continue from `last` */
    for (node = run->log.next; node != &run->log; node = node->next) {
        gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, node);
        if (ev->id >= wanted)
            return ev;
    }
    return NULL;
}

static void reader_pump(gw_reader_t *reader)
{
    gw_run_t *run = reader->run;
    size_t batch_bytes = 0, max_bytes;
    gw_event_t *ev;
    int behind, is_final;

    if (reader->sending || reader->done || run == NULL)
        return;
    max_bytes = run->server->config->max_reader_batch_bytes;
    ev = reader_next_event(reader, &behind);
    if (behind) {
        /* a slow reader loses its connection rather than growing memory; it may resume later */
        reader->done = 1;
        reader_detach(reader);
        h2o_send(reader->req, NULL, 0, H2O_SEND_STATE_ERROR);
        return;
    }
    while (ev != NULL && reader->num_inflight < READER_BATCH_EVENTS &&
           (reader->num_inflight == 0 || batch_bytes + ev->len <= max_bytes)) {
        gw_event_addref(ev);
        reader->inflight[reader->num_inflight] = ev;
        reader->bufs[reader->num_inflight] = h2o_iovec_init(ev->frame, ev->len);
        ++reader->num_inflight;
        batch_bytes += ev->len;
        ev = ev->link.next == &run->log ? NULL : H2O_STRUCT_FROM_MEMBER(gw_event_t, link, ev->link.next);
    }
    is_final = run->finished && ev == NULL;
    if (reader->num_inflight == 0 && !is_final)
        return;
    if (reader->num_inflight != 0) {
        gw_event_t *newest = reader->inflight[reader->num_inflight - 1];
        gw_event_addref(newest);
        gw_event_release(reader->last);
        reader->last = newest;
    }
    reader->sending = 1;
    if (is_final) {
        reader->done = 1;
        reader_detach(reader);
    }
    h2o_send(reader->req, reader->bufs, reader->num_inflight, is_final ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

static void on_reader_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
    gw_reader_t *reader = H2O_STRUCT_FROM_MEMBER(gw_reader_t, super, generator);
    (void)req;

    reader_release_inflight(reader);
    reader->sending = 0;
    reader_pump(reader);
}

static void on_reader_stop(h2o_generator_t *generator, h2o_req_t *req)
{
    gw_reader_t *reader = H2O_STRUCT_FROM_MEMBER(gw_reader_t, super, generator);
    (void)req;

    reader->done = 1;
    reader_detach(reader);
}

/* The request's pool is going away: the last word on the reader, whatever happened before. */
static void on_reader_dispose(void *p)
{
    gw_reader_t *reader = p;

    reader_detach(reader);
    reader_release_inflight(reader);
    gw_event_release(reader->last);
    reader->last = NULL;
}

int gw_run_attach_reader(gw_run_t *run, h2o_req_t *req, uint64_t after_id)
{
    gw_reader_t *reader;
    gw_event_t *head;

    if (after_id > run->last_event_id)
        after_id = run->last_event_id;
    if (!h2o_linklist_is_empty(&run->log)) {
        head = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next);
        if (head->id > after_id + 1)
            return -1;
    }
    reader = h2o_mem_alloc_shared(&req->pool, sizeof(*reader), on_reader_dispose);
    memset(reader, 0, sizeof(*reader));
    reader->super.proceed = on_reader_proceed;
    reader->super.stop = on_reader_stop;
    reader->req = req;
    reader->run = run;
    reader->after_id = after_id;
    h2o_linklist_insert(&run->readers, &reader->link);

    req->res.status = 200;
    req->res.reason = "OK";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/event-stream"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-cache"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-accel-buffering"), 0, NULL, H2O_STRLIT("no"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-kgate-execution-id"), 0, NULL, run->id, strlen(run->id));
    h2o_start_response(req, &reader->super);
    reader_pump(reader);
    return 0;
}

size_t gw_run_num_readers(const gw_run_t *run)
{
    size_t n = 0;
    const h2o_linklist_t *node;
    for (node = run->readers.next; node != &run->readers; node = node->next)
        ++n;
    return n;
}

static void trim_log(gw_run_t *run)
{
    size_t limit = run->server->config->max_run_log_bytes;

    /* the newest event always stays, so a run can always be finished and read to its end */
    while (run->log_bytes > limit && run->log.next != run->log.prev) {
        gw_event_t *oldest = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next);
        h2o_linklist_unlink(&oldest->link);
        oldest->in_log = 0;
        run->log_bytes -= oldest->len;
        gw_event_release(oldest);
    }
}

void gw_run_append(gw_run_t *run, json_t *event)
{
    gw_event_t *ev;
    h2o_linklist_t *node, *next;

    if (run->finished) {
        json_decref(event);
        return;
    }
    if (json_object_get(event, "timestamp") == NULL)
        json_object_set_new(event, "timestamp", json_integer(gw_unix_ms()));
    ev = gw_event_render(event, ++run->last_event_id, run->server->config->compat_execd);
    json_decref(event);
    ev->in_log = 1;
    h2o_linklist_insert(&run->log, &ev->link);
    run->log_bytes += ev->len;
    trim_log(run);
    for (node = run->readers.next; node != &run->readers; node = next) {
        next = node->next; /* a pump may detach this reader */
        reader_pump(H2O_STRUCT_FROM_MEMBER(gw_reader_t, link, node));
    }
}

void gw_run_finish(gw_run_t *run, int execution_count)
{
    h2o_linklist_t *node, *next;
    json_t *ev;

    if (run->finished)
        return;
    ev = gw_event_new("execution_complete");
    json_object_set_new(ev, "execution_time", json_integer(gw_unix_ms() - run->started_at_ms));
    if (execution_count >= 0)
        json_object_set_new(ev, "execution_count", json_integer(execution_count));
    gw_run_append(run, ev);
    run->finished = 1;
    run->producer = NULL;
    run->producer_data = NULL;
    if (h2o_timeout_is_linked(&run->ping))
        h2o_timeout_unlink(&run->ping);
    if (h2o_linklist_is_empty(&run->readers)) {
        schedule_release(run);
        return;
    }
    /* readers that were waiting for more now see the end */
    for (node = run->readers.next; node != &run->readers; node = next) {
        next = node->next;
        reader_pump(H2O_STRUCT_FROM_MEMBER(gw_reader_t, link, node));
    }
}

static void run_free(gw_run_t *run)
{
    while (!h2o_linklist_is_empty(&run->log)) {
        gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next);
        h2o_linklist_unlink(&ev->link);
        ev->in_log = 0;
        gw_event_release(ev);
    }
    free(run);
}

static void on_release(h2o_timeout_entry_t *entry)
{
    gw_server_t *server = H2O_STRUCT_FROM_MEMBER(gw_server_t, release_entry, entry);

    while (!h2o_linklist_is_empty(&server->released_runs)) {
        gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, link, server->released_runs.next);
        h2o_linklist_unlink(&run->link);
        /* a reader may have attached between scheduling and now (resumption): keep the run then */
        if (!h2o_linklist_is_empty(&run->readers)) {
            run->release_scheduled = 0;
            h2o_linklist_insert(&server->runs, &run->link);
            continue;
        }
        run_free(run);
    }
}

static void schedule_release(gw_run_t *run)
{
    gw_server_t *server = run->server;

    if (run->release_scheduled)
        return;
    run->release_scheduled = 1;
    h2o_linklist_unlink(&run->link);
    h2o_linklist_insert(&server->released_runs, &run->link);
    gw_server_defer(server, &server->release_entry);
}

void gw_runs_init(gw_server_t *server)
{
    h2o_linklist_init_anchor(&server->runs);
    h2o_linklist_init_anchor(&server->released_runs);
    server->release_entry.cb = on_release;
}

void gw_runs_shutdown(gw_server_t *server)
{
    while (!h2o_linklist_is_empty(&server->runs)) {
        gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, link, server->runs.next);
        if (run->producer != NULL)
            run->producer->cancel(run);
        if (!run->finished) {
            gw_run_append(run, gw_error_event("ServerShutdown", "kgate is shutting down"));
            gw_run_finish(run, -1);
        }
        if (!run->release_scheduled) {
            /* readers are still writing the end: park it; their detach releases it */
            h2o_linklist_unlink(&run->link);
            h2o_linklist_insert(&server->released_runs, &run->link);
            run->release_scheduled = 1;
            gw_server_defer(server, &server->release_entry);
        }
    }
}
