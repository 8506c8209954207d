/* kernelmgr/src/request.c: a kernel's requests: sending, routing what comes back, completion on reply + idle, failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/json_scan.h"
#include "ksys/errors.h"
#include "kernel_private.h"
#include "manager_private.h"
#include "ksys/log.h"

static void request_free(kmgr_request_t *req)
{
    wire_msg_destroy(req->unsent);
    json_decref(req->input_header);
    free(req->late_tag);
    free(req->msg_id);
    free(req);
}

static void deliver(kmgr_request_t *req, kmgr_req_event_t ev, const wire_msg_t *msg, int err)
{
    if (req->cb != NULL)
        req->cb(req, ev, msg, err, req->data);
}

/* Remembers a request that ended, so that a message for it afterwards is known as late output (KMGR_ENDED_KEPT). */
static void remember_ended(kmgr_kernel_t *k, kmgr_request_t *req)
{
    kmgr_ended_t *slot = &k->ended[k->ended_next];

    free(slot->msg_id);
    free(slot->late_tag);
    slot->msg_id = wire_strdup(req->msg_id);
    slot->logged = 0;
    slot->late_cb = req->late_cb;
    slot->late_data = req->late_data;
    slot->late_tag = req->late_tag; /* the slot owns it now */
    req->late_tag = NULL;
    slot->last_heard_at = req->last_heard_at != 0 ? req->last_heard_at : ksys_now_ms();
    k->ended_next = (k->ended_next + 1) % KMGR_ENDED_KEPT;
}

/* Delivers the final event of a request; it is unlinked first so that nothing can free it twice. */
static void finish(kmgr_request_t *req, kmgr_req_event_t ev, int err)
{
    if (ev == KMGR_REQ_DONE)
        remember_ended(req->kernel, req);
    kmgr_reqtable_remove(&req->kernel->table, req);
    kmgr_link_unlink(&req->link);
    req->finished = 1;
    deliver(req, ev, NULL, err);
    request_free(req);
}

int kmgr_kernel_publishes_late(const kmgr_kernel_t *k)
{
    return k->spec->late_output || k->publishes_after_idle;
}

uint64_t kmgr_kernel_late_messages(const kmgr_kernel_t *k)
{
    return k->late_lost;
}

unsigned kmgr_kernel_late_quiet_ms(const kmgr_kernel_t *k)
{
    uint64_t quiet = k->late_gap_ms * KMGR_LATE_GAP_FACTOR;

    return quiet < KMGR_LATE_QUIET_MS ? KMGR_LATE_QUIET_MS : quiet > KMGR_LATE_CAP_MS ? KMGR_LATE_CAP_MS : (unsigned)quiet;
}

/* The quiet that ends `req`'s wait for late output: its kernel's window, or more after a long flow of late output. */
static uint64_t late_quiet_of(const kmgr_request_t *req)
{
    uint64_t quiet = kmgr_kernel_late_quiet_ms(req->kernel);
    uint64_t flow = req->late_gap_ms != 0 && req->last_heard_at > req->complete_at ? req->last_heard_at - req->complete_at : 0;

    return flow / KMGR_LATE_FLOW_DIVISOR > quiet ? flow / KMGR_LATE_FLOW_DIVISOR : quiet;
}

/* A message published after idle came `gap` ms after the one before it (the idle, or the last late one). */
static void note_late_gap(kmgr_kernel_t *k, uint64_t gap)
{
    if (gap > k->late_gap_ms)
        k->late_gap_ms = gap;
}

/*
 * The request has its reply and its status idle: it ends (DONE), unless its kernel publishes late, when it lingers for
 * late output (KMGR_LATE_QUIET_MS; kmgr_requests_finish_replied_without_idle ends it). May run callbacks.
 */
static void complete(kmgr_request_t *req)
{
    if (!kmgr_kernel_publishes_late(req->kernel)) {
        finish(req, KMGR_REQ_DONE, 0);
        return;
    }
    if (!req->lingering) {
        req->lingering = 1;
        req->complete_at = req->last_heard_at = ksys_now_ms();
        if (req->is_execute && req->kernel->spec->late_flush)
            kmgr_late_flush_send(req->kernel, req);
    }
}

/* The decoded bytes of a stream message's text, as far as it was read (kmgr_late_sink_cb): its content raw or parsed, or
 * cut to its head over the cap (the rest counted in text_dropped); 0 for another type or content not read. */
static uint64_t stream_text_bytes(const wire_msg_t *msg)
{
    uint64_t bytes = msg->content_cut ? msg->text_dropped : 0;
    wire_stream_fields_t f;

    if (strcmp(wire_msg_type(msg), "stream") != 0)
        return 0;
    if (!msg->content_raw)
        return bytes + json_string_length(json_object_get(msg->content, "text"));
    if (wire_json_scan_stream(msg->raw_content.base, msg->raw_content.len, &f) && f.name != NULL)
        return bytes + f.text_decoded_len;
    json_t *content = wire_msg_raw_content_parse(msg); /* not simple: parsed, as a run would */
    bytes += json_string_length(json_object_get(content, "text"));
    json_decref(content);
    return bytes;
}

/*
 * A message (not a status) for no registered request (`parent`): if it is for one that ended, it is late output, lost to
 * the request: counted, told to the request's late sink, and logged once per request.
 */
static void on_unclaimed(kmgr_kernel_t *k, const wire_msg_t *msg, const char *parent)
{
    if (parent[0] == '\0' || strcmp(wire_msg_type(msg), "status") == 0)
        return;
    for (size_t i = 0; i != KMGR_ENDED_KEPT; ++i) {
        kmgr_ended_t *ended = &k->ended[i];
        int told;
        if (ended->msg_id == NULL || strcmp(ended->msg_id, parent) != 0)
            continue;
        ++k->late_lost;
        ++k->mgr->lost_output.late;                             /* the operators' total, which outlives the kernel */
        note_late_gap(k, ksys_now_ms() - ended->last_heard_at); /* the next requests wait this long, and more */
        ended->last_heard_at = ksys_now_ms();
        told = ended->late_cb != NULL &&
               ended->late_cb(ended->late_tag, wire_msg_type(msg), stream_text_bytes(msg), ended->late_data) != 0;
        if (!ended->logged) {
            ended->logged = 1;
            ksys_log_warn("kernel %s (%s): published output (%s) for request %s after it had ended: not delivered, %s "
                          "(%llu such message(s) so far); its requests now wait for %u ms of quiet after idle (at most %d "
                          "ms) for late output",
                          k->session, k->spec->name, wire_msg_type(msg), parent,
                          told ? "reported to its owner" : "not reported to the caller", (unsigned long long)k->late_lost,
                          kmgr_kernel_late_quiet_ms(k), KMGR_LATE_CAP_MS);
        }
        k->publishes_after_idle = 1;
        return;
    }
}

/* ---- the public calls ---- */

static int request_send(kmgr_kernel_t *k, const char *msg_type, json_t *content, int raw_stream, kmgr_request_cb cb, void *data,
                        kmgr_request_t **out)
{
    kmgr_request_t *req;
    wire_msg_t *msg;

    if (k->destroyed || k->state == KMGR_KERNEL_DEAD) {
        json_decref(content);
        return KSYS_EDIED;
    }
    msg = wire_msg_create(msg_type, k->session, content);
    req = wire_calloc(1, sizeof(*req));
    req->kernel = k;
    req->msg_id = wire_strdup(wire_msg_id(msg));
    req->cb = cb;
    req->data = data;
    req->raw_stream = raw_stream;
    req->text_room = UINT64_MAX;
    req->is_execute = strcmp(msg_type, "execute_request") == 0;
    if (k->state == KMGR_KERNEL_IDLE || k->state == KMGR_KERNEL_BUSY) {
        int ret = kmgr_channels_send(&k->proc->channels, WIRE_CHANNEL_SHELL, msg);
        wire_msg_destroy(msg);
        if (ret != 0) {
            request_free(req);
            return ret;
        }
        req->seq = ++k->sent;
        req->sent_at = ksys_now_ms();
    } else {
        req->unsent = msg;
    }
    kmgr_list_append(&k->requests, &req->link);
    kmgr_reqtable_insert(&k->table, req);
    if (out != NULL)
        *out = req;
    return 0;
}

void kmgr_request_set_text_room(kmgr_request_t *req, uint64_t bytes)
{
    req->text_room = bytes;
}

void kmgr_request_set_late_sink(kmgr_request_t *req, kmgr_late_sink_cb cb, void *data, const char *tag)
{
    free(req->late_tag);
    req->late_cb = cb;
    req->late_data = data;
    req->late_tag = cb != NULL && tag != NULL ? wire_strdup(tag) : NULL;
}

int kmgr_kernel_request(kmgr_kernel_t *k, const char *msg_type, json_t *content, kmgr_request_cb cb, void *data,
                        kmgr_request_t **out)
{
    return request_send(k, msg_type, content, 0, cb, data, out);
}

int kmgr_kernel_execute(kmgr_kernel_t *k, const char *code, const kmgr_execute_options_t *opts, kmgr_request_cb cb, void *data,
                        kmgr_request_t **out)
{
    static const kmgr_execute_options_t defaults = {.silent = 0, .store_history = 1, .allow_stdin = 0, .stop_on_error = 1};
    json_t *jcode = json_string(code);

    if (jcode == NULL)
        return KSYS_EINVAL; /* not UTF-8 */
    if (opts == NULL)
        opts = &defaults;
    return request_send(k, "execute_request",
                        json_pack("{s:o, s:b, s:b, s:{}, s:b, s:b}", "code", jcode, "silent", opts->silent, "store_history",
                                  opts->store_history, "user_expressions", "allow_stdin", opts->allow_stdin, "stop_on_error",
                                  opts->stop_on_error),
                        opts->raw_stream, cb, data, out);
}

uint64_t kmgr_request_sent_at(const kmgr_request_t *req)
{
    return req->sent_at;
}

const char *kmgr_request_msg_id(const kmgr_request_t *req)
{
    return req->msg_id;
}

int kmgr_request_input_reply(kmgr_request_t *req, const char *value)
{
    kmgr_kernel_t *k = req->kernel;
    json_t *jvalue;
    wire_msg_t *msg;

    if (req->finished || req->input_header == NULL || k->destroyed || k->proc == NULL || k->state == KMGR_KERNEL_DEAD)
        return KSYS_ENOINPUT;
    if ((jvalue = json_string(value)) == NULL)
        return KSYS_EINVAL;
    msg = wire_msg_create("input_reply", k->session, json_pack("{s:o}", "value", jvalue));
    json_decref(msg->parent_header);
    msg->parent_header = req->input_header;
    req->input_header = NULL;
    kmgr_kernel_send(k, WIRE_CHANNEL_STDIN, msg);
    return 0;
}

void kmgr_request_cancel(kmgr_request_t *req)
{
    kmgr_kernel_t *k = req->kernel;

    req->cb = NULL;
    kmgr_request_set_late_sink(req, NULL, NULL, NULL); /* its owner hears nothing of it any more, late output included */
    /* Never sent: nothing can arrive for it, so it can go now (it has had no callback to be inside). */
    if (!req->finished && req->unsent != NULL && !k->destroyed) {
        kmgr_reqtable_remove(&k->table, req);
        kmgr_link_unlink(&req->link);
        request_free(req);
    }
}

/* ---- routing: what the kernel sent back, by its parent's msg_id ---- */

int kmgr_requests_on_reply(kmgr_kernel_t *k, const wire_msg_t *msg)
{
    uint64_t generation = k->generation;
    kmgr_request_t *req = kmgr_reqtable_find(&k->table, wire_msg_parent_id(msg));

    if (req == NULL)
        return 0;
    req->got_reply = 1;
    req->last_heard_at = ksys_now_ms();
    deliver(req, KMGR_REQ_REPLY, msg, 0);
    if (k->generation == generation && req->got_idle)
        complete(req);
    return 1;
}

void kmgr_requests_on_iopub(kmgr_kernel_t *k, wire_msg_t *msg)
{
    kmgr_requests_on_iopub_as(k, msg, wire_msg_parent_id(msg));
}

void kmgr_requests_on_iopub_as(kmgr_kernel_t *k, wire_msg_t *msg, const char *parent)
{
    uint64_t generation = k->generation;
    kmgr_request_t *req = kmgr_reqtable_find(&k->table, parent);

    if (req == NULL) {
        /* tagged with a flush (its own, or Deno's late output of the request it was sent for): late.c routes it */
        if (parent != wire_msg_parent_id(msg) || !kmgr_late_flush_on_iopub(k, msg))
            on_unclaimed(k, msg, parent);
        return;
    }
    /* the channels keep every stream message raw (nothing else reads its content): parsed here for
     * a request that reads it, so that only the ones that asked ever see raw content. A cancelled
     * request reads nothing. */
    if (msg->content_raw && !req->raw_stream && req->cb != NULL)
        wire_msg_parse_raw_content(msg);
    if (strcmp(wire_msg_type(msg), "status") == 0) {
        const char *state = json_string_value(json_object_get(msg->content, "execution_state"));
        if (state != NULL && strcmp(state, "idle") == 0)
            req->got_idle = 1;
    } else if (req->got_idle) {
        /* output after its idle: this kernel publishes late (it still reaches this request) */
        k->publishes_after_idle = 1;
        uint64_t gap = ksys_now_ms() - req->last_heard_at;
        if (gap >= req->late_gap_ms)
            req->late_gap_ms = gap != 0 ? gap : 1; /* not 0: it heard late output */
        note_late_gap(k, gap);
    }
    req->last_heard_at = ksys_now_ms();
    deliver(req, KMGR_REQ_IOPUB, msg, 0);
    if (k->generation == generation && req->got_idle && req->got_reply)
        complete(req);
}

void kmgr_requests_on_input(kmgr_kernel_t *k, const wire_msg_t *msg)
{
    kmgr_request_t *req;

    if (strcmp(wire_msg_type(msg), "input_request") != 0 || (req = kmgr_reqtable_find(&k->table, wire_msg_parent_id(msg))) == NULL)
        return;
    json_decref(req->input_header);
    req->input_header = json_incref(msg->header);
    /* Nobody will answer a cancelled request, and the kernel would wait for input forever,
     * wedging every later request: give it an empty line. */
    if (req->cb == NULL) {
        kmgr_request_input_reply(req, "");
        return;
    }
    deliver(req, KMGR_REQ_INPUT, msg, 0);
}

/*
 * A kernel's PUB socket drops messages when kgate falls more than its high-water mark behind
 * (kgate reads its iopub connection only as fast as its loop relays). Should the lost one be a request's
 * status idle, the request would never end: one that has its reply and has heard nothing for
 * KMGR_IDLE_GRACE_MS is finished anyway. Any iopub message for it restarts the wait, so output
 * still queued is never cut short. The other way round, a request with its status idle and no reply
 * (the kernel lost it: KMGR_REPLY_GRACE_MS) is finished after a shorter silence: it ends with DONE and
 * no KMGR_REQ_REPLY.
 */
void kmgr_requests_finish_replied_without_idle(kmgr_kernel_t *k, uint64_t now)
{
    uint64_t generation = k->generation;
    kmgr_link_t *link, *next;

    for (link = k->requests.next; link != &k->requests; link = next) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, link);
        next = link->next;
        if (req->lingering) {
            if (kmgr_late_flush_waits(k, req, now) ||
                (now - req->last_heard_at < late_quiet_of(req) && now - req->complete_at < KMGR_LATE_CAP_MS))
                continue;
            /* the window follows the recent gaps: it shrinks back towards KMGR_LATE_QUIET_MS as they do */
            k->late_gap_ms = req->late_gap_ms > k->late_gap_ms / 2 ? req->late_gap_ms : k->late_gap_ms / 2;
        } else if (req->got_reply == req->got_idle ||
                   now - req->last_heard_at < (req->got_reply ? KMGR_IDLE_GRACE_MS : KMGR_REPLY_GRACE_MS)) {
            continue;
        }
        finish(req, KMGR_REQ_DONE, 0);
        /* the callback may have destroyed or restarted the kernel, and with it the list */
        if (k->generation != generation || k->destroyed)
            return;
        next = k->requests.next;
    }
}

void kmgr_requests_end_lingering(kmgr_kernel_t *k, uint64_t seq)
{
    uint64_t generation = k->generation;
    kmgr_link_t *link, *next;

    for (link = k->requests.next; link != &k->requests; link = next) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, link);
        next = link->next;
        if (!req->lingering || req->seq >= seq)
            continue;
        finish(req, KMGR_REQ_DONE, 0);
        if (k->generation != generation || k->destroyed)
            return;
        next = k->requests.next;
    }
}

void kmgr_requests_on_oversized(kmgr_kernel_t *k, uint64_t sent)
{
    uint64_t generation = k->generation;
    kmgr_link_t *link;

    for (link = k->requests.next; link != &k->requests; link = link->next) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, link);
        if (req->seq == 0 || req->seq > sent || req->told_oversized == k->oversized)
            continue;
        req->told_oversized = k->oversized;
        deliver(req, KMGR_REQ_DROPPED, NULL, KSYS_EMSGSIZE);
        if (k->generation != generation || k->destroyed)
            return;
        /* the callback may have changed the list: start over (told requests are skipped) */
        link = &k->requests;
    }
}

void kmgr_requests_sync(kmgr_kernel_t *k, uint64_t seq, int iopub)
{
    uint64_t generation = k->generation;
    kmgr_link_t *link, *next;

    for (link = k->requests.next; link != &k->requests; link = next) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, link);
        next = link->next;
        if (req->seq == 0 || req->seq >= seq)
            continue;
        if (iopub)
            req->got_idle = 1;
        else
            req->got_reply = 1;
        if (!req->got_idle || !req->got_reply || req->lingering)
            continue;
        complete(req);
        if (k->generation != generation || k->destroyed)
            return;
        next = k->requests.next;
    }
}

/* ---- the kernel's state machine acting on all its requests ---- */

void kmgr_requests_send_unsent(kmgr_kernel_t *k)
{
    kmgr_link_t *link, *next;
    int failed = 0;

    for (link = k->requests.next; link != &k->requests; link = next) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, link);
        int ret;
        next = link->next;
        if (req->unsent == NULL)
            continue;
        ret = kmgr_channels_send(&k->proc->channels, WIRE_CHANNEL_SHELL, req->unsent);
        wire_msg_destroy(req->unsent);
        req->unsent = NULL;
        if (ret == 0) {
            req->seq = ++k->sent;
            req->sent_at = ksys_now_ms();
            continue;
        }
        /* never sent, so never answered: it fails (from the loop, as kmgr_requests_fail_all's do) */
        kmgr_reqtable_remove(&k->table, req);
        kmgr_link_unlink(&req->link);
        req->fail_err = ret;
        kmgr_list_append(&k->failing, &req->link);
        failed = 1;
    }
    if (failed)
        kmgr_manager_schedule(k->mgr);
}

void kmgr_requests_fail_all(kmgr_kernel_t *k, int err)
{
    while (!kmgr_list_empty(&k->requests)) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, k->requests.next);
        kmgr_reqtable_remove(&k->table, req);
        kmgr_link_unlink(&req->link);
        wire_msg_destroy(req->unsent);
        req->unsent = NULL;
        req->fail_err = err;
        kmgr_list_append(&k->failing, &req->link);
    }
}

/* One at a time, since each callback may destroy or restart the kernel. */
void kmgr_requests_process_failing(kmgr_kernel_t *k)
{
    while (!k->destroyed && !kmgr_list_empty(&k->failing)) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, k->failing.next);
        kmgr_link_unlink(&req->link);
        req->finished = 1;
        /* a lingering request had completed: the kernel's death or restart ends only its wait for late output */
        if (req->lingering)
            deliver(req, KMGR_REQ_DONE, NULL, 0);
        else
            deliver(req, KMGR_REQ_FAILED, NULL, req->fail_err);
        request_free(req);
    }
}

/* Requests stay allocated (freed with the kernel) so that a handle held by a callback further up
 * the stack stays valid until the loop frees the kernel. */
void kmgr_requests_silence(kmgr_kernel_t *k)
{
    kmgr_link_t *link;

    for (link = k->requests.next; link != &k->requests; link = link->next)
        KMGR_FROM_MEMBER(kmgr_request_t, link, link)->cb = NULL;
    for (link = k->failing.next; link != &k->failing; link = link->next)
        KMGR_FROM_MEMBER(kmgr_request_t, link, link)->cb = NULL;
}

void kmgr_requests_free_all(kmgr_kernel_t *k)
{
    while (!kmgr_list_empty(&k->requests)) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, k->requests.next);
        kmgr_link_unlink(&req->link);
        request_free(req);
    }
    while (!kmgr_list_empty(&k->failing)) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, k->failing.next);
        kmgr_link_unlink(&req->link);
        request_free(req);
    }
    kmgr_reqtable_dispose(&k->table);
    for (size_t i = 0; i != KMGR_ENDED_KEPT; ++i) {
        free(k->ended[i].msg_id);
        free(k->ended[i].late_tag);
    }
}
