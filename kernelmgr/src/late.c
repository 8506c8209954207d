/* kernelmgr/src/late.c: Deno's flush, which tells when a request's late output has all been published (KMGR_LATE_FLUSH_CODE). */
#include <stdio.h>
#include <string.h>
#include "wire/codec.h"
#include "ksys/log.h"
#include "kernel_private.h"

/* Whether `parent` is the flush's (1), the one's before (2), or neither (0). */
static int is_flush(const kmgr_kernel_t *k, const char *parent)
{
    if (k->flush.id[0] != '\0' && strcmp(parent, k->flush.id) == 0)
        return 1;
    return k->flush.prev_id[0] != '\0' && strcmp(parent, k->flush.prev_id) == 0 ? 2 : 0;
}

/* The latest the flush is waited for after `req`'s idle: longer for a request that ran (printed) longer. */
static uint64_t flush_cap(const kmgr_request_t *req)
{
    uint64_t ran = req->complete_at > req->sent_at && req->sent_at != 0 ? req->complete_at - req->sent_at : 0;

    return KMGR_LATE_FLUSH_CAP_MS + KMGR_LATE_FLUSH_CAP_FACTOR * ran;
}

void kmgr_late_flush_send(kmgr_kernel_t *k, const kmgr_request_t *req)
{
    kmgr_flush_t *f = &k->flush;
    wire_msg_t *msg;

    if (f->active && !f->failed)
        return; /* its marker sends the next one */
    msg = wire_msg_create("execute_request", k->session,
                          json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code", KMGR_LATE_FLUSH_CODE, "silent", 1, "store_history",
                                    0, "user_expressions", "allow_stdin", 0, "stop_on_error", 0));
    if (f->id[0] != '\0') {
        memcpy(f->prev_id, f->id, sizeof(f->prev_id));
        memcpy(f->prev_for_id, f->for_id, sizeof(f->prev_for_id));
    }
    f->active = f->failed = 0;
    snprintf(f->id, sizeof(f->id), "%s", wire_msg_id(msg));
    snprintf(f->for_id, sizeof(f->for_id), "%s", req->msg_id);
    f->heard_at = ksys_now_ms();
    if (kmgr_kernel_send(k, WIRE_CHANNEL_SHELL, msg) != 0) {
        f->id[0] = '\0'; /* the kernel is going: its requests end by the quiet window, or its death */
        return;
    }
    f->seq = ++k->sent;
    f->active = 1;
}

int kmgr_late_flush_waits(kmgr_kernel_t *k, const kmgr_request_t *req, uint64_t now)
{
    kmgr_flush_t *f = &k->flush;
    uint64_t heard = f->heard_at > req->last_heard_at ? f->heard_at : req->last_heard_at;

    if (!f->active || f->failed || !req->is_execute)
        return 0;
    if (now - heard < KMGR_LATE_FLUSH_QUIET_MS && now - req->complete_at < flush_cap(req))
        return 1;
    /* given up: the request ends by the quiet window; what comes for it afterwards is counted as lost (on_unclaimed) */
    f->failed = 1;
    ksys_log_warn("kernel %s (%s): no flush marker for request %s after %llu ms (%llu ms of silence): its late output may be "
                  "cut",
                  k->session, k->spec->name, req->msg_id, (unsigned long long)(now - req->complete_at),
                  (unsigned long long)(now - heard));
    return 0;
}

int kmgr_late_flush_own(const kmgr_kernel_t *k, const wire_msg_t *msg)
{
    const char *type = wire_msg_type(msg);

    return is_flush(k, wire_msg_parent_id(msg)) != 0 &&
           (strcmp(type, "status") == 0 || strcmp(type, "execute_input") == 0 || strcmp(type, "execute_reply") == 0 ||
            strcmp(type, KMGR_LATE_FLUSH_TYPE) == 0);
}

int kmgr_late_flush_on_reply(kmgr_kernel_t *k, const wire_msg_t *msg)
{
    kmgr_flush_t *f = &k->flush;
    const char *status;

    switch (is_flush(k, wire_msg_parent_id(msg))) {
    case 0:
        return 0;
    case 2:
        return 1; /* the one before's, late */
    }
    f->heard_at = ksys_now_ms();
    status = json_string_value(json_object_get(msg->content, "status"));
    if (f->active && (status == NULL || strcmp(status, "ok") != 0)) {
        f->failed = 1; /* it did not run to its marker (an interrupt landed in it): the quiet window decides */
        ksys_log_warn("kernel %s (%s): the flush after request %s failed (%s): its late output ends by the quiet window",
                      k->session, k->spec->name, f->for_id, status != NULL ? status : "no status");
    }
    return 1;
}

/* The marker: everything queued before it has been published; the requests sent before the flush end, and the next
 * lingering execute request (one that completed meanwhile) gets its own flush. */
static void on_marker(kmgr_kernel_t *k)
{
    uint64_t generation = k->generation;
    kmgr_link_t *link;

    k->flush.active = 0;
    kmgr_requests_end_lingering(k, k->flush.seq);
    if (k->generation != generation || k->destroyed)
        return;
    for (link = k->requests.prev; link != &k->requests; link = link->prev) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, link);
        if (req->lingering && req->is_execute) {
            kmgr_late_flush_send(k, req);
            return;
        }
    }
}

int kmgr_late_flush_on_iopub(kmgr_kernel_t *k, wire_msg_t *msg)
{
    kmgr_flush_t *f = &k->flush;
    char for_id[sizeof(f->for_id)];
    int which = is_flush(k, wire_msg_parent_id(msg));

    if (which == 0)
        return 0;
    if (which == 1)
        f->heard_at = ksys_now_ms();
    if (strcmp(wire_msg_type(msg), KMGR_LATE_FLUSH_TYPE) == 0) {
        if (which == 1 && f->active)
            on_marker(k);
        return 1;
    }
    if (kmgr_late_flush_own(k, msg))
        return 1;
    /* Output Deno tagged with the flush: the request's it was sent for (queued before the marker), or output of that
     * request's code published later still (a timer's): routed to it, counted as lost if it has ended. */
    memcpy(for_id, which == 1 ? f->for_id : f->prev_for_id, sizeof(for_id));
    kmgr_requests_on_iopub_as(k, msg, for_id);
    return 1;
}
