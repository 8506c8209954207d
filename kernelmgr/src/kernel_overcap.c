/* kernelmgr/src/kernel_overcap.c: a kernel's messages over the message cap: who reads a big iopub message, how much of a
 * stream message's text is kept for its head, and a lost message's resynchronisation (kmgr_resync_t). */
#include <string.h>
#include "wire/json_in.h"
#include "kernel_private.h"
#include "manager_private.h"

static void send_probe(kmgr_kernel_t *k)
{
    kmgr_resync_t *r = &k->resync;
    wire_msg_t *msg = wire_msg_create("kernel_info_request", k->session, NULL);

    memcpy(r->id, wire_msg_id(msg), sizeof(r->id) - 1);
    r->id[sizeof(r->id) - 1] = '\0';
    r->seq = ++k->sent;
    kmgr_kernel_send(k, WIRE_CHANNEL_SHELL, msg);
}

void kmgr_kernel_resync_on(kmgr_kernel_t *k, const wire_msg_t *msg, wire_channel_t channel)
{
    kmgr_resync_t *r = &k->resync;

    if (strcmp(wire_msg_parent_id(msg), r->id) != 0)
        return;
    if (channel == WIRE_CHANNEL_IOPUB)
        r->got_iopub = 1;
    else
        r->got_reply = 1;
    if (r->got_iopub && r->got_reply)
        r->active = 0;
    kmgr_requests_sync(k, r->seq, channel == WIRE_CHANNEL_IOPUB);
}

/*
 * An iopub message could matter to someone while the kernel starts (any message proves iopub live)
 * and while any request is registered; otherwise only status messages matter, and a big message
 * is not one: a relay passes it on unread, and without one nobody sees it.
 */
kmgr_big_iopub_t kmgr_kernel_big_iopub(void *data)
{
    kmgr_kernel_t *k = data;

    if ((k->state != KMGR_KERNEL_IDLE && k->state != KMGR_KERNEL_BUSY) || !kmgr_list_empty(&k->requests))
        return KMGR_BIG_IOPUB_READ;
    if (k->tap != NULL)
        return KMGR_BIG_IOPUB_HEADERS;
    ++k->unawaited;
    ++k->mgr->lost_output.unawaited; /* the operators' total, which outlives the kernel */
    return KMGR_BIG_IOPUB_PASS_OVER;
}

/*
 * A message over the cap was skipped. A verified stream message cut to its head (`head`) is output like any other, to its
 * request: nothing was lost that tracks the kernel's state. Otherwise, starting, the handshake retries by itself; ready, the
 * requests in flight are told and a resynchronisation begins (kmgr_resync_t): the lost message may have been a reply or a
 * status that ended something. A loss during one restarts it. A relay hears either: the head as a message with no signed
 * parts (kmgr_tap_cb), or that a message was lost.
 */
void kmgr_kernel_on_oversized(void *data, wire_channel_t channel, wire_msg_t *head, const char *parent, size_t parent_len)
{
    kmgr_kernel_t *k = data;
    uint64_t generation;

    kmgr_kernel_flush_deferred(k);
    if (k->destroyed) {
        wire_msg_destroy(head);
        return;
    }
    generation = k->generation;
    ++k->oversized;
    if (head != NULL) {
        if (k->state == KMGR_KERNEL_IDLE || k->state == KMGR_KERNEL_BUSY)
            kmgr_requests_on_iopub(k, head);
        if (k->generation == generation && !k->destroyed && k->tap != NULL)
            k->tap(k, channel, head, NULL, 0, k->tap_data);
        wire_msg_destroy(head);
        return;
    }
    if (k->state != KMGR_KERNEL_IDLE && k->state != KMGR_KERNEL_BUSY)
        return;
    memset(&k->resync, 0, sizeof(k->resync));
    k->resync.active = 1;
    /* Kernels send nothing but input_request on stdin: the lost one leaves its kernel waiting for
     * an answer nobody can give. An empty line, as for a cancelled request, rather than a hang. */
    if (channel == WIRE_CHANNEL_STDIN)
        kmgr_kernel_send(k, WIRE_CHANNEL_STDIN, wire_msg_create("input_reply", k->session, json_pack("{s:s}", "value", "")));
    send_probe(k);
    kmgr_requests_on_oversized(k, k->sent);
    if (k->generation == generation && !k->destroyed && k->tap != NULL) {
        wire_frame_t part = {(void *)parent, parent_len};
        k->tap(k, channel, NULL, parent != NULL ? &part : NULL, parent != NULL ? 1 : 0, k->tap_data);
    }
}

/*
 * Who reads a stream message over the cap whose parent is `parent` (unverified: it only sizes the head): a relay reads every
 * message, as much as it can pass on (kmgr_kernel_set_tap_text_room); a request, what it said it keeps
 * (kmgr_request_set_text_room); nobody else. The head is the larger of the two.
 */
uint64_t kmgr_kernel_text_room(void *data, const char *parent, size_t parent_len)
{
    kmgr_kernel_t *k = data;
    json_t *json;
    kmgr_request_t *req;
    uint64_t room = k->tap != NULL ? k->tap_text_room : 0;

    if (room == UINT64_MAX || (json = wire_json_parse(parent, parent_len)) == NULL)
        return room;
    const char *msg_id = json_string_value(json_object_get(json, "msg_id"));
    if (msg_id != NULL && (req = kmgr_reqtable_find(&k->table, msg_id)) != NULL && req->cb != NULL && req->text_room > room)
        room = req->text_room;
    json_decref(json);
    return room;
}
