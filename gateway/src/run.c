/* A run's bounded event log and its readers: SSE responses that each write at their own pace. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include "wire/alloc.h"
#include "gateway/json_out.h"
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

static void on_ping(h2o_timeout_entry_t *entry)
{
    gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, ping, entry);
    json_t *ev = gw_event_new("ping");

    json_object_set_new(ev, "text", json_string("pong"));
    gw_run_append(run, ev);
    if (run->state != GW_RUN_FINISHED)
        h2o_timeout_link(run->server->ctx.loop, &run->server->ping_timeout, &run->ping);
}

gw_run_t *gw_run_create(gw_server_t *server, const char *init_text, const gw_run_limits_t *limits)
{
    gw_run_t *run = wire_calloc(1, sizeof(*run));
    json_t *ev;

    wire_uuid4(run->id);
    run->server = server;
    run->state = GW_RUN_QUEUED;
    run->limits = *limits;
    h2o_linklist_init_anchor(&run->log);
    h2o_linklist_init_anchor(&run->readers);
    h2o_linklist_insert(&server->runs, &run->link);
    run->created_at_ms = run->started_at_ms = gw_unix_ms();
    run->ping.cb = on_ping;

    ev = gw_event_new("init");
    json_object_set_new(ev, "text", json_string(init_text != NULL ? init_text : run->id));
    json_object_set_new(ev, "execution_id", json_string(run->id));
    gw_run_append(run, ev);
    on_ping(&run->ping); /* API.md: a ping right after init, then every ping interval */
    return run;
}

void gw_run_mark_started(gw_run_t *run)
{
    if (run->state == GW_RUN_QUEUED) {
        run->state = GW_RUN_RUNNING;
        run->started_at_ms = gw_unix_ms();
    }
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
    (void)run;
    h2o_linklist_unlink(&reader->link);
    reader->run = NULL;
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
    is_final = run->state == GW_RUN_FINISHED && ev == NULL;
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

/*
 * A reader whose write is stuck (the client stopped reading) and whose next event was just trimmed
 * can never catch up. Its h2o_send is still in flight, so it cannot be ended with another send:
 * shut its socket down instead, which fails the write; h2o then closes the connection and
 * disposes the request (on_reader_dispose). Over HTTP/2 this ends the whole connection.
 */
static void cut_off_stuck_reader(gw_reader_t *reader)
{
    h2o_conn_t *conn = reader->req->conn;
    h2o_socket_t *sock = conn->callbacks->get_socket != NULL ? conn->callbacks->get_socket(conn) : NULL;

    reader_detach(reader);
    if (sock != NULL)
        shutdown(h2o_socket_get_fd(sock), SHUT_RDWR);
}

static void trim_log(gw_run_t *run)
{
    size_t limit = run->server->config->max_run_log_bytes;
    h2o_linklist_t *node, *next;
    uint64_t head_id;
    int trimmed = 0;

    /* the newest event always stays, so a run can always be finished and read to its end */
    while (run->log_bytes > limit && run->log.next != run->log.prev) {
        gw_event_t *oldest = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next);
        h2o_linklist_unlink(&oldest->link);
        oldest->in_log = 0;
        run->log_bytes -= oldest->len;
        gw_event_release(oldest);
        trimmed = 1;
    }
    if (!trimmed)
        return;
    head_id = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next)->id;
    for (node = run->readers.next; node != &run->readers; node = next) {
        gw_reader_t *reader = H2O_STRUCT_FROM_MEMBER(gw_reader_t, link, node);
        uint64_t wanted = reader->last != NULL ? reader->last->id + 1 : reader->after_id + 1;
        next = node->next;
        if (reader->sending && wanted < head_id)
            cut_off_stuck_reader(reader);
    }
}

static void report_truncation(gw_run_t *run)
{
    json_t *ev;

    if (run->truncation_reported)
        return;
    run->truncation_reported = 1;
    ev = gw_event_new("status");
    json_object_set_new(ev, "text", json_string("output_truncated"));
    json_object_set_new(ev, "output_limit", json_integer((json_int_t)run->limits.output_bytes));
    json_object_set_new(ev, "result_limit", json_integer((json_int_t)run->limits.result_bytes));
    gw_run_append(run, ev);
}

/* Length of the longest prefix of `s` no longer than `max` that does not split a UTF-8 character. */
static size_t utf8_prefix(const char *s, size_t max)
{
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        --max;
    return max;
}

/* Applies the run's output limits to `event`; returns it (possibly shortened) or NULL when dropped. */
static json_t *apply_limits(gw_run_t *run, json_t *event, int *truncated)
{
    const char *type = json_string_value(json_object_get(event, "type"));

    *truncated = 0;
    if (type == NULL)
        return event;
    if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        json_t *text = json_object_get(event, "text");
        size_t len = json_string_length(text), room = run->limits.output_bytes - run->output_bytes, keep;
        if (len <= room) {
            run->output_bytes += len;
            return event;
        }
        *truncated = 1;
        keep = utf8_prefix(json_string_value(text), room);
        run->output_bytes += keep;
        run->output_dropped_bytes += len - keep;
        if (keep == 0) {
            json_decref(event);
            return NULL;
        }
        json_object_set_new(event, "text", json_stringn_nocheck(json_string_value(text), keep));
        return event;
    }
    if (strcmp(type, "result") == 0) {
        /* measured with the event writer (jansson's encoder takes tens of ms for a big image) */
        size_t size = gw_json_render(json_object_get(event, "results"), NULL);
        if (size > run->limits.result_bytes) {
            *truncated = 1;
            ++run->results_dropped;
            json_decref(event);
            return NULL;
        }
    }
    return event;
}

void gw_run_append(gw_run_t *run, json_t *event)
{
    gw_event_t *ev;
    h2o_linklist_t *node, *next;
    int truncated;

    if (run->state == GW_RUN_FINISHED) {
        json_decref(event);
        return;
    }
    event = apply_limits(run, event, &truncated);
    if (event != NULL) {
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
    if (truncated)
        report_truncation(run);
}

void gw_run_finish(gw_run_t *run, int execution_count, const char *outcome)
{
    gw_server_t *server = run->server;
    h2o_linklist_t *node, *next;
    json_t *ev;

    if (run->state == GW_RUN_FINISHED)
        return;
    ev = gw_event_new("execution_complete");
    json_object_set_new(ev, "execution_time", json_integer(gw_unix_ms() - run->started_at_ms));
    if (execution_count >= 0)
        json_object_set_new(ev, "execution_count", json_integer(execution_count));
    if (run->output_dropped_bytes != 0 || run->results_dropped != 0)
        json_object_set_new(ev, "dropped",
                            json_pack("{s:I, s:I}", "output_bytes", (json_int_t)run->output_dropped_bytes, "results",
                                      (json_int_t)run->results_dropped));
    gw_run_append(run, ev);
    run->state = GW_RUN_FINISHED;
    run->outcome = outcome;
    run->finished_at_ms = gw_unix_ms();
    run->producer = NULL;
    run->producer_data = NULL;
    if (h2o_timeout_is_linked(&run->ping))
        h2o_timeout_unlink(&run->ping);
    h2o_linklist_unlink(&run->link);
    h2o_linklist_insert(&server->finished_runs, &run->link);
    server->retained_bytes += run->log_bytes;
    /* readers that were waiting for more now see the end */
    for (node = run->readers.next; node != &run->readers; node = next) {
        next = node->next;
        reader_pump(H2O_STRUCT_FROM_MEMBER(gw_reader_t, link, node));
    }
}

static gw_run_t *find_in(h2o_linklist_t *list, const char *id)
{
    h2o_linklist_t *node;
    for (node = list->next; node != list; node = node->next) {
        gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, link, node);
        if (strcmp(run->id, id) == 0)
            return run;
    }
    return NULL;
}

gw_run_t *gw_run_find(gw_server_t *server, const char *id)
{
    gw_run_t *run = find_in(&server->runs, id);
    return run != NULL ? run : find_in(&server->finished_runs, id);
}

json_t *gw_run_to_json(gw_run_t *run)
{
    static const char *const states[] = {"queued", "running", "finished"};
    json_t *obj = json_pack("{s:s, s:s, s:I, s:I, s:I}", "id", run->id, "state", states[run->state], "created_at",
                            (json_int_t)run->created_at_ms, "last_event_id", (json_int_t)run->last_event_id, "output_bytes",
                            (json_int_t)run->output_bytes);
    json_object_set_new(obj, "context_id", run->context_id[0] != '\0' ? json_string(run->context_id) : json_null());
    if (run->state != GW_RUN_QUEUED)
        json_object_set_new(obj, "started_at", json_integer(run->started_at_ms));
    if (run->state == GW_RUN_FINISHED) {
        json_object_set_new(obj, "finished_at", json_integer(run->finished_at_ms));
        json_object_set_new(obj, "outcome", json_string(run->outcome));
    }
    if (!h2o_linklist_is_empty(&run->log))
        json_object_set_new(obj, "first_retained_event_id",
                            json_integer((json_int_t)H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next)->id));
    json_object_set_new(obj, "dropped",
                        json_pack("{s:I, s:I}", "output_bytes", (json_int_t)run->output_dropped_bytes, "results",
                                  (json_int_t)run->results_dropped));
    return obj;
}

static void run_free(gw_run_t *run)
{
    h2o_linklist_unlink(&run->link);
    while (!h2o_linklist_is_empty(&run->log)) {
        gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next);
        h2o_linklist_unlink(&ev->link);
        ev->in_log = 0;
        gw_event_release(ev);
    }
    free(run);
}

void gw_runs_init(gw_server_t *server)
{
    h2o_linklist_init_anchor(&server->runs);
    h2o_linklist_init_anchor(&server->finished_runs);
}

void gw_runs_collect(gw_server_t *server)
{
    int64_t now = gw_unix_ms();
    h2o_linklist_t *node, *next;

    for (node = server->finished_runs.next; node != &server->finished_runs; node = next) {
        gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, link, node);
        next = node->next;
        if (!h2o_linklist_is_empty(&run->readers))
            continue; /* still being written out; collected once its readers are gone */
        if (!server->shutting_down && now - run->finished_at_ms < (int64_t)server->config->run_retention_ms &&
            server->retained_bytes <= server->config->max_retained_bytes)
            break; /* oldest first: every later run is younger */
        server->retained_bytes -= run->log_bytes;
        run_free(run);
    }
}

void gw_runs_shutdown(gw_server_t *server)
{
    while (!h2o_linklist_is_empty(&server->runs)) {
        gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, link, server->runs.next);
        if (run->producer != NULL)
            run->producer->cancel(run);
        gw_run_append(run, gw_error_event("ServerShutdown", "kgate is shutting down"));
        gw_run_finish(run, -1, "cancelled");
    }
}

void gw_runs_dispose(gw_server_t *server)
{
    gw_runs_shutdown(server);
    while (!h2o_linklist_is_empty(&server->finished_runs)) {
        gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, link, server->finished_runs.next);
        h2o_linklist_t *node;
        /* readers outlive nothing here: detach them so their pools' dispose hooks find no run */
        for (node = run->readers.next; node != &run->readers; node = run->readers.next)
            reader_detach(H2O_STRUCT_FROM_MEMBER(gw_reader_t, link, node));
        run_free(run);
    }
    server->retained_bytes = 0;
}
