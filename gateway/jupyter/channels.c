/*
 * GET /api/kernels/{id}/channels: the kernel WebSocket. Each connection is a tap on the kernel's
 * context: client messages go to the kernel verbatim (kgate signs them on the ZeroMQ side), and
 * what the kernel sends comes back verbatim: iopub to every connection of the kernel, a shell or
 * control reply and a stdin request only to the connection whose request caused it (its parent's
 * msg_id), as Jupyter Server's per-connection sockets do.
 *
 * A client that connects with `?session_id=` (JupyterLab's KernelConnection passes its clientId, and
 * reconnects with the same one) is kept for while it is away, as Jupyter Server does
 * (services/kernels/kernelmanager.py start_buffering / get_buffer): when the last WebSocket of that
 * session_id on a kernel closes (not when the kernel goes away, nor at shutdown), what would have gone
 * to it is kept (jupyter/away.h, jupyter/replay.h: bounded in bytes and, unlike Jupyter Server, in time); a WebSocket
 * of the same session_id gets it first, then goes live, and one with another session_id, or none,
 * drops it (one buffer per kernel, as there). A restart or the kernel's deletion drops it too. A WebSocket of a session_id
 * that still has an open one on the kernel replaces it (replace_stale), as Jupyter Server does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/json_scan.h"
#include "wire/text_scan.h"
#include "ksys/errors.h"
#include "core/errors.h"
#include "core/http.h"
#include "core/idmap.h"
#include "core/ws.h"
#include "jupyter/away.h"
#include "jupyter/framing.h"
#include "jupyter/jupyter.h"
#include "jupyter/replay.h"
#include "ksys/log.h"

/* Room kept in a client's send bound for the rest of a message whose head is cut to it (fit_head). */
#define HEAD_SLACK ((size_t)64 << 10)
/* The head of a message over the cap a client gets: its send bound less HEAD_SLACK. */
#define HEAD_ROOM(c) ((c)->ws_queue_bytes > 2 * HEAD_SLACK ? (c)->ws_queue_bytes - HEAD_SLACK : (c)->ws_queue_bytes / 2)

/* Messages a connection may send while its kernel starts or restarts, and their bytes; beyond them it
 * is closed (GW_WS_POLICY_VIOLATION): they would wait in kgate's memory. */
#define MAX_PENDING 256
#define MAX_PENDING_BYTES ((size_t)16 << 20)

/* Close codes of this door (4000-4999: the application's own). */
#define CLOSE_KERNEL_GONE 4004

typedef struct st_pending_t {
    h2o_linklist_t link;
    int is_binary;
    size_t len;
    uint8_t data[];
} pending_t;

typedef struct st_gw_jconn_t {
    gw_context_tap_t tap; /* attached while the WebSocket is open and the kernel exists */
    gw_jupyter_t *jupyter;
    gw_ws_t *ws; /* NULL once closed */
    gw_jframing_t framing;
    h2o_linklist_t link; /* in jupyter->conns */
    gw_jasked_t asked;
    char *session_id;       /* the client's ?session_id=, or NULL */
    h2o_linklist_t pending; /* pending_t, oldest first */
    size_t npending, pending_bytes;
} gw_jconn_t;

static gw_jmsg_encoded_t *scratch(gw_jupyter_t *jupyter)
{
    if (jupyter->encoded == NULL)
        jupyter->encoded = wire_malloc(sizeof(*jupyter->encoded));
    return jupyter->encoded;
}

static void forget_all(gw_jconn_t *conn)
{
    gw_jasked_dispose(&conn->asked);
    free(conn->session_id);
    conn->session_id = NULL;
    while (!h2o_linklist_is_empty(&conn->pending)) {
        pending_t *p = H2O_STRUCT_FROM_MEMBER(pending_t, link, conn->pending.next);
        h2o_linklist_unlink(&p->link);
        free(p);
    }
    conn->npending = conn->pending_bytes = 0;
}

/* ---- kernel to client ---- */

static void send_to_client(gw_jconn_t *conn, const gw_jmsg_t *msg)
{
    gw_jmsg_encoded_t *enc = scratch(conn->jupyter);
    int ret;

    if (conn->ws == NULL)
        return;
    if ((ret = gw_jmsg_encode(conn->framing, msg, enc)) != 0) {
        ksys_log_warn("jupyter: a kernel message was not relayed: %s", gw_strerror(ret));
        return;
    }
    /* GW_EWSFULL: the client stopped reading; it is cut off (on_ws_close follows) rather than buffered without limit */
    gw_ws_sendv(conn->ws, enc->is_binary, enc->iov, enc->iovcnt);
}

static void on_kernel_message(gw_context_tap_t *tap, wire_channel_t channel, const wire_msg_t *msg, const wire_frame_t *parts,
                              size_t nparts)
{
    gw_jconn_t *conn = H2O_STRUCT_FROM_MEMBER(gw_jconn_t, tap, tap);
    gw_jmsg_t jmsg;

    if (!gw_jasked_claim(&conn->asked, channel, wire_msg_parent_id(msg)))
        return;
    if (gw_jmsg_from_decoded(&jmsg, channel, msg->header, parts, parts + 4, nparts - 4) != 0)
        return;
    send_to_client(conn, &jmsg);
    gw_jmsg_dispose(&jmsg);
}

/* The parent header of a message dropped over the cap, as a JSON object (NULL: unknown or not an object). */
static json_t *dropped_parent(const char *parent, size_t parent_len)
{
    json_t *obj = parent != NULL ? json_loadb(parent, parent_len, 0, NULL) : NULL;

    if (obj != NULL && !json_is_object(obj)) {
        json_decref(obj);
        obj = NULL;
    }
    return obj;
}

/* kgate's word on iopub, a `stream` on stderr with `parent_header` (taken; NULL: none) as its parent, so that a notebook shows
 * it in the cell it is about. */
static void send_notice(gw_jconn_t *conn, json_t *parent_header, const char *text)
{
    wire_msg_t *msg = wire_msg_create("stream", "kgate", json_pack("{s:s, s:s}", "name", "stderr", "text", text));
    gw_jmsg_t jmsg;

    if (parent_header != NULL) {
        json_decref(msg->parent_header);
        msg->parent_header = parent_header;
    }
    if (gw_jmsg_from_wire(&jmsg, WIRE_CHANNEL_IOPUB, msg) == 0) {
        send_to_client(conn, &jmsg);
        gw_jmsg_dispose(&jmsg);
    }
    wire_msg_destroy(msg);
}

/*
 * A kernel message was over the message cap and never reached kgate whole (kernelmgr skipped it): the
 * client whose message it was (any client for iopub, the asker for a reply) gets an iopub `stream` on
 * stderr in its place, with the dropped message's parent as its own, so that a notebook shows it in the
 * cell whose output is incomplete (as the replay buffer's loss notice does).
 */
static void on_kernel_dropped(gw_context_tap_t *tap, wire_channel_t channel, const char *parent, size_t parent_len)
{
    gw_jconn_t *conn = H2O_STRUCT_FROM_MEMBER(gw_jconn_t, tap, tap);
    json_t *parent_header = dropped_parent(parent, parent_len);
    const char *parent_id = json_string_value(json_object_get(parent_header, "msg_id"));
    size_t cap = conn->jupyter->host->config->max_message_bytes;
    char text[320];

    if (!gw_jasked_claim(&conn->asked, channel, parent_id != NULL ? parent_id : "")) {
        json_decref(parent_header);
        return;
    }
    snprintf(text, sizeof(text),
             "[kgate] a kernel message on %s was larger than the message cap (%zu bytes, --max-message-bytes) and was dropped: "
             "output of this request is missing\n",
             wire_channel_name(channel), cap);
    send_notice(conn, parent_header, text);
}

/*
 * The content of a head cut further to `budget` decoded bytes of text, whole characters, when it is longer (NULL: it is not,
 * or its content was parsed): a head of the cap's size would sit past the client's send bound (--ws-queue-bytes) for as long
 * as the client takes to read it, and a slow client would lose its connection. `*dropped` grows by what goes.
 */
static char *fit_head(const wire_msg_t *msg, size_t budget, uint64_t *dropped, size_t *len)
{
    wire_stream_fields_t f;
    size_t keep, kept_decoded;
    char *c;

    if (!msg->content_raw || !wire_json_scan_stream(msg->raw_content.base, msg->raw_content.len, &f) || f.name == NULL ||
        f.text_decoded_len <= budget)
        return NULL;
    keep = wire_json_string_prefix(f.text + 1, f.text_len - 2, budget, &kept_decoded);
    *dropped += f.text_decoded_len - kept_decoded;
    c = wire_malloc(f.name_len + keep + 32);
    *len = (size_t)sprintf(c, "{\"name\":\"%.*s\",\"text\":\"", (int)f.name_len, f.name);
    memcpy(c + *len, f.text + 1, keep);
    memcpy(c + *len + keep, "\"}", 2);
    *len += keep + 2;
    return c;
}

/*
 * A stream message over the message cap came cut to the head of its text (kernelmgr read it in pieces and verified it): the
 * client gets the head, within its send bound less 64 KiB (fit_head), as the kernel's stream message (its header, parent and
 * metadata as the kernel sent them), then kgate's notice of the exact count of what was dropped after it.
 */
static void on_kernel_cut(gw_context_tap_t *tap, const wire_msg_t *msg)
{
    gw_jconn_t *conn = H2O_STRUCT_FROM_MEMBER(gw_jconn_t, tap, tap);
    const gw_config_t *config = conn->jupyter->host->config;
    json_t *const members[GW_JMSG_NUM_PARTS] = {msg->header, msg->parent_header, msg->metadata, msg->content};
    char *rendered[GW_JMSG_NUM_PARTS] = {NULL}, text[320];
    size_t room = HEAD_ROOM(config);
    uint64_t dropped = msg->text_dropped;
    wire_frame_t parts[GW_JMSG_NUM_PARTS];
    gw_jmsg_t jmsg;

    if (!gw_jasked_claim(&conn->asked, WIRE_CHANNEL_IOPUB, wire_msg_parent_id(msg)))
        return;
    for (size_t i = 0; i != GW_JMSG_NUM_PARTS; ++i) {
        /* the content as it came, the head's escapes and all, unless a run parsed it */
        if (i == GW_JMSG_PART_CONTENT && msg->content_raw) {
            size_t len = 0;
            rendered[i] = fit_head(msg, room, &dropped, &len);
            parts[i] = rendered[i] != NULL ? (wire_frame_t){rendered[i], len} : msg->raw_content;
            continue;
        }
        rendered[i] = json_dumps(members[i], JSON_COMPACT);
        parts[i] = (wire_frame_t){rendered[i], rendered[i] != NULL ? strlen(rendered[i]) : 0};
    }
    if (gw_jmsg_from_decoded(&jmsg, WIRE_CHANNEL_IOPUB, msg->header, parts, NULL, 0) == 0) {
        send_to_client(conn, &jmsg);
        gw_jmsg_dispose(&jmsg);
    }
    for (size_t i = 0; i != GW_JMSG_NUM_PARTS; ++i)
        free(rendered[i]);
    snprintf(text, sizeof(text),
             "[kgate] a kernel message on iopub was larger than the message cap (%zu bytes, --max-message-bytes): its text was "
             "cut to its head, and the %llu bytes of text after it were dropped\n",
             config->max_message_bytes, (unsigned long long)dropped);
    send_notice(conn, json_incref(msg->parent_header), text);
}

/* A status message kgate makes itself on iopub, as Jupyter Server does when a kernel dies. */
static void send_status(gw_jconn_t *conn, const char *state)
{
    wire_msg_t *msg = wire_msg_create("status", "kgate", json_pack("{s:s}", "execution_state", state));
    gw_jmsg_t jmsg;

    if (gw_jmsg_from_wire(&jmsg, WIRE_CHANNEL_IOPUB, msg) == 0) {
        send_to_client(conn, &jmsg);
        gw_jmsg_dispose(&jmsg);
    }
    wire_msg_destroy(msg);
}

/* ---- a client away (jupyter/away.h) ---- */

/* `conn` (of a session_id, its kernel still there) is closing: keep what would have gone to it, unless it is not the last. */
static void start_away(gw_jconn_t *conn)
{
    gw_jupyter_t *jupyter = conn->jupyter;
    gw_context_t *ctx = conn->tap.ctx;

    if (ctx == NULL || conn->session_id == NULL || jupyter->host->shutting_down)
        return;
    for (h2o_linklist_t *node = jupyter->conns.next; node != &jupyter->conns; node = node->next) {
        gw_jconn_t *other = H2O_STRUCT_FROM_MEMBER(gw_jconn_t, link, node);
        if (other != conn && other->ws != NULL && other->tap.ctx == ctx && other->session_id != NULL &&
            strcmp(other->session_id, conn->session_id) == 0) {
            /* the client is still there: the replies it awaited on this socket go to its other one */
            gw_jasked_move(&other->asked, &conn->asked);
            return;
        }
    }
    gw_jaway_start(jupyter, ctx, conn->session_id, &conn->asked);
}

static void replay_one(void *data, const gw_jmsg_t *msg)
{
    send_to_client(data, msg);
}

/* ---- client to kernel ---- */

static void close_conn(gw_jconn_t *conn, uint16_t code, const char *reason)
{
    if (conn->ws != NULL)
        gw_ws_close(conn->ws, code, reason);
}

/* Returns 0, or KSYS_ENOTREADY when the kernel cannot take it yet (the caller keeps it). */
static int relay_to_kernel(gw_jconn_t *conn, int is_binary, const uint8_t *data, size_t len)
{
    gw_context_t *ctx = conn->tap.ctx;
    wire_frame_t parts[4 + GW_JMSG_MAX_BUFFERS];
    gw_jmsg_t jmsg;
    int ret;

    if ((ret = gw_jmsg_decode(conn->framing, is_binary, data, len, &jmsg)) != 0) {
        /* a well-formed message on a channel clients do not send on is dropped, as Jupyter Server does */
        if (ret != GW_EJMSG_CHANNEL)
            close_conn(conn, GW_WS_PROTOCOL_ERROR, gw_strerror(ret));
        return 0;
    }
    memcpy(parts, jmsg.parts, sizeof(jmsg.parts));
    if (jmsg.nbuffers != 0)
        memcpy(parts + 4, jmsg.buffers, jmsg.nbuffers * sizeof(*jmsg.buffers));
    ret = gw_context_send_parts(ctx, jmsg.channel, parts, 4 + jmsg.nbuffers);
    if (ret == 0 && jmsg.channel != WIRE_CHANNEL_STDIN)
        gw_jasked_add(&conn->asked, jmsg.msg_id);
    gw_jmsg_dispose(&jmsg);
    if (ret == KSYS_ENOTREADY)
        return ret;
    /* a client that sends faster than its kernel reads is cut off rather than queued without bound */
    if (ret == KSYS_EBACKLOG)
        close_conn(conn, GW_WS_POLICY_VIOLATION, gw_strerror(ret));
    /* a dead kernel takes nothing; its clients were told (status dead) and the REST model says so */
    return 0;
}

static void keep_pending(gw_jconn_t *conn, int is_binary, const uint8_t *data, size_t len)
{
    pending_t *p;

    if (conn->npending == MAX_PENDING || conn->pending_bytes + len > MAX_PENDING_BYTES) {
        close_conn(conn, GW_WS_POLICY_VIOLATION, "too many messages while the kernel starts");
        return;
    }
    p = wire_calloc(1, sizeof(*p) + len);
    p->is_binary = is_binary;
    p->len = len;
    memcpy(p->data, data, len);
    h2o_linklist_insert(&conn->pending, &p->link);
    ++conn->npending;
    conn->pending_bytes += len;
}

/* The kernel is ready: what waited goes, in order, until the kernel stops taking messages again. */
static void flush_pending(gw_jconn_t *conn)
{
    while (!h2o_linklist_is_empty(&conn->pending) && conn->tap.ctx != NULL && conn->ws != NULL) {
        pending_t *p = H2O_STRUCT_FROM_MEMBER(pending_t, link, conn->pending.next);
        if (relay_to_kernel(conn, p->is_binary, p->data, p->len) == KSYS_ENOTREADY)
            return;
        h2o_linklist_unlink(&p->link);
        --conn->npending;
        conn->pending_bytes -= p->len;
        free(p);
    }
}

static void on_ws_message(gw_ws_t *ws, int is_binary, const uint8_t *data, size_t len)
{
    gw_jconn_t *conn = gw_ws_data(ws);

    if (conn->tap.ctx == NULL)
        return;
    /* order is kept: nothing overtakes what waits for the kernel */
    if (!h2o_linklist_is_empty(&conn->pending) || relay_to_kernel(conn, is_binary, data, len) == KSYS_ENOTREADY)
        keep_pending(conn, is_binary, data, len);
}

static void on_kernel_state(gw_context_tap_t *tap, kmgr_kernel_state_t state)
{
    gw_jconn_t *conn = H2O_STRUCT_FROM_MEMBER(gw_jconn_t, tap, tap);

    switch (state) {
    case KMGR_KERNEL_IDLE:
    case KMGR_KERNEL_BUSY:
        flush_pending(conn);
        break;
    case KMGR_KERNEL_RESTARTING:
        /* the requests in flight die with the old process: their replies will never come */
        gw_jasked_clear(&conn->asked);
        /* Jupyter Server's restarter says so when a kernel that died on its own comes back (not for a restart asked for) */
        if (conn->tap.ctx != NULL && kmgr_kernel_last_death(conn->tap.ctx->kernel)[0] != '\0')
            send_status(conn, "restarting");
        break;
    case KMGR_KERNEL_DEAD:
        send_status(conn, "dead");
        break;
    case KMGR_KERNEL_STARTING:
        break;
    }
}

static void on_kernel_gone(gw_context_tap_t *tap, gw_context_t *ctx)
{
    gw_jconn_t *conn = H2O_STRUCT_FROM_MEMBER(gw_jconn_t, tap, tap);
    (void)ctx;

    close_conn(conn, CLOSE_KERNEL_GONE, "the kernel was shut down");
}

/*
 * A client that reconnected (its old TCP connection half-open after a laptop sleep or a NAT timeout) with the same session_id
 * replaces its older sockets of the kernel, as Jupyter Server's _register_session does ("Replacing stale connection"): kept, a
 * stale one would take every iopub message a second time, unread, until its send bound cut it off. It stops hearing the kernel
 * at once (no message reaches both), and the replies it awaited and what it sent that waits for the kernel go to `conn`: the
 * same client asked for them. Its on_ws_close then keeps nothing for the session (its tap is detached).
 */
static void replace_stale(gw_jconn_t *conn, gw_context_t *ctx)
{
    if (conn->session_id == NULL)
        return;
    for (h2o_linklist_t *node = conn->jupyter->conns.next; node != &conn->jupyter->conns; node = node->next) {
        gw_jconn_t *stale = H2O_STRUCT_FROM_MEMBER(gw_jconn_t, link, node);
        if (stale == conn || stale->ws == NULL || stale->tap.ctx != ctx || stale->session_id == NULL ||
            strcmp(stale->session_id, conn->session_id) != 0)
            continue;
        ksys_log_info("jupyter: replacing a stale connection of session_id %.64s on kernel %s", conn->session_id, ctx->id);
        gw_context_tap_detach(&stale->tap);
        gw_jasked_move(&conn->asked, &stale->asked);
        /* `conn` is new: nothing of its own waits yet, so the order the client sent in is kept */
        h2o_linklist_insert_list(&conn->pending, &stale->pending);
        conn->npending += stale->npending;
        conn->pending_bytes += stale->pending_bytes;
        stale->npending = stale->pending_bytes = 0;
        close_conn(stale, GW_WS_NORMAL, "replaced by a newer connection of the same session_id");
    }
}

static void on_ws_close(gw_ws_t *ws, uint16_t code)
{
    gw_jconn_t *conn = gw_ws_data(ws);
    (void)code;

    conn->ws = NULL;
    start_away(conn);
    gw_context_tap_detach(&conn->tap);
    forget_all(conn);
    h2o_linklist_unlink(&conn->link);
    free(conn);
}

static const gw_ws_callbacks_t ws_callbacks = {on_ws_message, on_ws_close};

void gw_jupyter_channels_open(gw_jupyter_t *jupyter, h2o_req_t *req, gw_context_t *ctx)
{
    const char *session_id;
    int v1;
    /* a client that reads takes a kernel's big output (bigger than the queue bound) and what follows it */
    gw_ws_limits_t limits = {.max_message_bytes = jupyter->host->config->max_body_bytes,
                             .max_queued_bytes = jupyter->host->config->ws_queue_bytes,
                             .over_bound_ms = 10000,
                             .door = jupyter->super.name};
    gw_jconn_t *conn;

    v1 = gw_ws_offers_protocol(req, GW_JFRAMING_V1_PROTOCOL);
    conn = wire_calloc(1, sizeof(*conn));
    conn->jupyter = jupyter;
    conn->framing = v1 ? GW_JFRAMING_V1 : GW_JFRAMING_LEGACY;
    gw_jasked_init(&conn->asked);
    h2o_linklist_init_anchor(&conn->pending);
    if ((conn->ws = gw_ws_upgrade(req, jupyter->host, v1 ? GW_JFRAMING_V1_PROTOCOL : NULL, &limits, &ws_callbacks, conn)) == NULL) {
        gw_jasked_dispose(&conn->asked);
        free(conn);
        return;
    }
    if ((session_id = gw_query_param(req, "session_id")) != NULL && session_id[0] != '\0')
        conn->session_id = wire_strdup(session_id);
    h2o_linklist_insert(&jupyter->conns, &conn->link);
    conn->tap.on_message = on_kernel_message;
    conn->tap.on_dropped = on_kernel_dropped;
    conn->tap.on_cut = on_kernel_cut;
    /* the head on_kernel_cut sends, and a byte so that fit_head renders it (v1 clients sent it raw heard nothing after) */
    conn->tap.text_room = HEAD_ROOM(jupyter->host->config) + 1;
    conn->tap.on_state = on_kernel_state;
    conn->tap.on_destroy = on_kernel_gone;
    gw_context_tap_attach(ctx, &conn->tap);
    /* the kernel's messages kept for its session_id come first; any other client's are dropped */
    gw_jaway_end(jupyter, ctx, conn->session_id, replay_one, conn, &conn->asked);
    replace_stale(conn, ctx);
    if (gw_context_is_dead(ctx))
        send_status(conn, "dead");
}

void gw_jupyter_shutdown(gw_jupyter_t *jupyter)
{
    for (h2o_linklist_t *node = jupyter->conns.next; node != &jupyter->conns; node = node->next) {
        gw_jconn_t *conn = H2O_STRUCT_FROM_MEMBER(gw_jconn_t, link, node);
        gw_context_tap_detach(&conn->tap);
        close_conn(conn, GW_WS_GOING_AWAY, "kgate is shutting down");
    }
    gw_jaway_free_all(jupyter);
}

int gw_jupyter_is_drained(gw_jupyter_t *jupyter)
{
    return h2o_linklist_is_empty(&jupyter->conns);
}
