/* The kernel messages of a Jupyter client whose WebSocket went away, kept for its return, and the requests a client awaits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "jupyter/replay.h"

/* ---- gw_jasked_t ---- */

typedef struct st_asked_t {
    gw_idmap_entry_t by_id;
    h2o_linklist_t fifo;
    char id[]; /* the request's msg_id */
} asked_t;

void gw_jasked_init(gw_jasked_t *asked)
{
    gw_idmap_init(&asked->by_id);
    h2o_linklist_init_anchor(&asked->fifo);
    asked->count = 0;
}

static void forget(gw_jasked_t *asked, asked_t *a)
{
    gw_idmap_remove(&asked->by_id, &a->by_id);
    h2o_linklist_unlink(&a->fifo);
    --asked->count;
    free(a);
}

void gw_jasked_clear(gw_jasked_t *asked)
{
    while (!h2o_linklist_is_empty(&asked->fifo))
        forget(asked, H2O_STRUCT_FROM_MEMBER(asked_t, fifo, asked->fifo.next));
}

void gw_jasked_dispose(gw_jasked_t *asked)
{
    gw_jasked_clear(asked);
    gw_idmap_dispose(&asked->by_id);
}

void gw_jasked_add(gw_jasked_t *asked, const char *msg_id)
{
    size_t len = strlen(msg_id);
    asked_t *a;

    if (gw_idmap_find(&asked->by_id, msg_id) != NULL)
        return;
    if (asked->count == GW_JASKED_MAX)
        forget(asked, H2O_STRUCT_FROM_MEMBER(asked_t, fifo, asked->fifo.next));
    a = wire_calloc(1, sizeof(*a) + len + 1);
    memcpy(a->id, msg_id, len + 1);
    gw_idmap_insert(&asked->by_id, &a->by_id, a->id);
    h2o_linklist_insert(&asked->fifo, &a->fifo);
    ++asked->count;
}

int gw_jasked_claim(gw_jasked_t *asked, wire_channel_t channel, const char *parent_id)
{
    gw_idmap_entry_t *e;

    if (channel == WIRE_CHANNEL_IOPUB)
        return 1;
    if ((e = gw_idmap_find(&asked->by_id, parent_id)) == NULL)
        return 0;
    if (channel == WIRE_CHANNEL_SHELL || channel == WIRE_CHANNEL_CONTROL)
        forget(asked, H2O_STRUCT_FROM_MEMBER(asked_t, by_id, e));
    return 1;
}

void gw_jasked_move(gw_jasked_t *to, gw_jasked_t *from)
{
    while (!h2o_linklist_is_empty(&from->fifo)) {
        asked_t *a = H2O_STRUCT_FROM_MEMBER(asked_t, fifo, from->fifo.next);
        gw_jasked_add(to, a->id);
        forget(from, a);
    }
}

/* ---- gw_jreplay_t ---- */

typedef struct st_kept_t {
    h2o_linklist_t link;
    wire_channel_t channel;
    int is_notice; /* where the first message was dropped: the loss notice goes here */
    size_t nparts;
    wire_frame_t *parts; /* into `bytes` after them */
} kept_t;

struct st_gw_jreplay_t {
    gw_jasked_t asked;
    h2o_linklist_t kept; /* kept_t, oldest first */
    size_t count, bytes, max_bytes;
    int64_t expires_at_ms;
    size_t lost, lost_bytes;
    char *lost_parent; /* the parent header (JSON text) of the first message dropped, NUL-terminated */
    char session_id[];
};

/* What one message is charged: its bytes, its frame table and its list entry, so that many tiny
 * messages are bounded as honestly as one big one. */
static size_t charge(const wire_frame_t *parts, size_t nparts)
{
    size_t n = sizeof(kept_t) + nparts * sizeof(wire_frame_t);
    for (size_t i = 0; i != nparts; ++i)
        n += parts[i].len;
    return n;
}

gw_jreplay_t *gw_jreplay_create(const char *session_id, size_t max_bytes, int64_t expires_at_ms, gw_jasked_t *asked)
{
    size_t len = strlen(session_id);
    gw_jreplay_t *replay = wire_calloc(1, sizeof(*replay) + len + 1);

    memcpy(replay->session_id, session_id, len + 1);
    gw_jasked_init(&replay->asked);
    gw_jasked_move(&replay->asked, asked);
    h2o_linklist_init_anchor(&replay->kept);
    replay->max_bytes = max_bytes;
    replay->expires_at_ms = expires_at_ms;
    return replay;
}

static void free_kept(gw_jreplay_t *replay)
{
    while (!h2o_linklist_is_empty(&replay->kept)) {
        kept_t *k = H2O_STRUCT_FROM_MEMBER(kept_t, link, replay->kept.next);
        h2o_linklist_unlink(&k->link);
        free(k);
    }
    replay->count = replay->bytes = 0;
}

void gw_jreplay_destroy(gw_jreplay_t *replay)
{
    if (replay == NULL)
        return;
    free_kept(replay);
    gw_jasked_dispose(&replay->asked);
    free(replay->lost_parent);
    free(replay);
}

const char *gw_jreplay_session(const gw_jreplay_t *replay)
{
    return replay->session_id;
}

int gw_jreplay_is_for(const gw_jreplay_t *replay, const char *session_id)
{
    return session_id != NULL && session_id[0] != '\0' && strcmp(session_id, replay->session_id) == 0;
}

int gw_jreplay_is_expired(const gw_jreplay_t *replay, int64_t now_ms)
{
    return now_ms >= replay->expires_at_ms;
}

size_t gw_jreplay_count(const gw_jreplay_t *replay)
{
    return replay->count;
}

size_t gw_jreplay_bytes(const gw_jreplay_t *replay)
{
    return replay->bytes;
}

size_t gw_jreplay_lost(const gw_jreplay_t *replay, size_t *lost_bytes)
{
    if (lost_bytes != NULL)
        *lost_bytes = replay->lost_bytes;
    return replay->lost;
}

static void keep(gw_jreplay_t *replay, wire_channel_t channel, int is_notice, const wire_frame_t *parts, size_t nparts, size_t cost)
{
    kept_t *k = wire_malloc(cost);
    uint8_t *p;

    /* not calloc: the bytes are about to be written anyway, but h2o's list wants an unlinked node */
    k->link.next = k->link.prev = NULL;
    k->channel = channel;
    k->is_notice = is_notice;
    k->nparts = nparts;
    k->parts = (wire_frame_t *)(k + 1);
    p = (uint8_t *)(k->parts + nparts);
    for (size_t i = 0; i != nparts; ++i) {
        k->parts[i].base = p;
        k->parts[i].len = parts[i].len;
        if (parts[i].len != 0)
            memcpy(p, parts[i].base, parts[i].len);
        p += parts[i].len;
    }
    h2o_linklist_insert(&replay->kept, &k->link);
    ++replay->count;
    replay->bytes += cost;
}

static int drop(gw_jreplay_t *replay, const wire_frame_t *parts, size_t nparts)
{
    if (replay->lost++ == 0) {
        const wire_frame_t *parent = &parts[GW_JMSG_PART_PARENT_HEADER];
        replay->lost_parent = wire_malloc(parent->len + 1);
        memcpy(replay->lost_parent, parent->base, parent->len);
        replay->lost_parent[parent->len] = '\0';
        /* the notice's place in the order; it costs nothing against the bound (one per buffer) */
        keep(replay, WIRE_CHANNEL_IOPUB, 1, NULL, 0, sizeof(kept_t));
        --replay->count;
        replay->bytes -= sizeof(kept_t);
    }
    for (size_t i = 0; i != nparts; ++i)
        replay->lost_bytes += parts[i].len;
    return -1;
}

int gw_jreplay_offer(gw_jreplay_t *replay, wire_channel_t channel, const char *msg_type, const char *parent_id,
                     const wire_frame_t *parts, size_t nparts)
{
    size_t cost, room;

    if (nparts < GW_JMSG_NUM_PARTS || !gw_jasked_claim(&replay->asked, channel, parent_id))
        return 0;
    cost = charge(parts, nparts);
    room = replay->max_bytes;
    /* once output was lost, only what tells the client its requests ended may use the reserve */
    if (replay->lost != 0 || replay->bytes + cost > room) {
        if (channel == WIRE_CHANNEL_IOPUB && strcmp(msg_type, "status") != 0)
            return drop(replay, parts, nparts);
        room += GW_JREPLAY_RESERVE_BYTES;
    }
    if (replay->bytes + cost > room)
        return drop(replay, parts, nparts);
    keep(replay, channel, 0, parts, nparts, cost);
    return 1;
}

/* The iopub stream that tells the returning client what was lost; NULL when it cannot be made. */
static wire_msg_t *loss_notice(const gw_jreplay_t *replay)
{
    char text[256];
    json_t *parent;
    wire_msg_t *msg;

    snprintf(text, sizeof(text),
             "[kgate] output lost: %zu kernel messages (%zu bytes) sent while this client was disconnected did not fit "
             "its replay buffer (%zu bytes)\n",
             replay->lost, replay->lost_bytes, replay->max_bytes);
    msg = wire_msg_create("stream", "kgate", json_pack("{s:s, s:s}", "name", "stderr", "text", text));
    /* the parent was relayed from the kernel, so it is JSON; should it not be an object, the notice goes without one */
    if ((parent = json_loads(replay->lost_parent, 0, NULL)) != NULL && json_is_object(parent)) {
        json_decref(msg->parent_header);
        msg->parent_header = parent;
    } else {
        json_decref(parent);
    }
    return msg;
}

void gw_jreplay_note_dropped(gw_jreplay_t *replay, wire_channel_t channel, const char *parent, size_t parent_len)
{
    wire_frame_t parts[GW_JMSG_NUM_PARTS] = {{NULL, 0}};
    json_t *header = parent != NULL ? json_loadb(parent, parent_len, 0, NULL) : NULL;
    const char *parent_id = json_string_value(json_object_get(header, "msg_id"));

    if (gw_jasked_claim(&replay->asked, channel, parent_id != NULL ? parent_id : "")) {
        parts[GW_JMSG_PART_PARENT_HEADER] =
            (wire_frame_t){(void *)(parent != NULL ? parent : "{}"), parent != NULL ? parent_len : 2};
        drop(replay, parts, GW_JMSG_NUM_PARTS);
    }
    json_decref(header);
}

void gw_jreplay_drain(gw_jreplay_t *replay, void (*fn)(void *data, const gw_jmsg_t *msg), void *data, gw_jasked_t *asked)
{
    for (h2o_linklist_t *node = replay->kept.next; node != &replay->kept; node = node->next) {
        kept_t *k = H2O_STRUCT_FROM_MEMBER(kept_t, link, node);
        gw_jmsg_t jmsg;
        if (k->is_notice) {
            wire_msg_t *notice = loss_notice(replay);
            if (gw_jmsg_from_wire(&jmsg, WIRE_CHANNEL_IOPUB, notice) == 0) {
                fn(data, &jmsg);
                gw_jmsg_dispose(&jmsg);
            }
            wire_msg_destroy(notice);
            continue;
        }
        if (gw_jmsg_from_parts(&jmsg, k->channel, k->parts, k->parts + GW_JMSG_NUM_PARTS, k->nparts - GW_JMSG_NUM_PARTS) != 0)
            continue;
        fn(data, &jmsg);
        gw_jmsg_dispose(&jmsg);
    }
    free_kept(replay);
    gw_jasked_move(asked, &replay->asked);
}
