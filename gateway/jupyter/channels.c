/*
 * GET /api/kernels/{id}/channels: the kernel WebSocket. Each connection is a tap on the kernel's
 * context: client messages go to the kernel verbatim (kgate signs them on the ZeroMQ side), and
 * what the kernel sends comes back verbatim: iopub to every connection of the kernel, a shell or
 * control reply and a stdin request only to the connection whose request caused it (its parent's
 * msg_id), as Jupyter Server's per-connection sockets do.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "kmgr/errors.h"
#include "core/errors.h"
#include "core/http.h"
#include "core/idmap.h"
#include "core/ws.h"
#include "jupyter/framing.h"
#include "jupyter/jupyter.h"

/* Requests of one connection awaiting their reply; beyond it the oldest is forgotten (its reply then
 * reaches nobody): a client that sends this many without reading is not waiting for them. */
#define MAX_ASKED 4096
/* Messages a connection may send while its kernel starts or restarts, and their bytes; beyond them it
 * is closed (GW_WS_POLICY_VIOLATION): they would wait in kgate's memory. */
#define MAX_PENDING 256
#define MAX_PENDING_BYTES ((size_t)16 << 20)

/* Close codes of this door (4000-4999: the application's own). */
#define CLOSE_KERNEL_GONE 4004

typedef struct st_asked_t {
    gw_idmap_entry_t by_id;
    h2o_linklist_t fifo;
    char id[]; /* the request's msg_id */
} asked_t;

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
    gw_idmap_t asked;    /* asked_t by msg_id */
    h2o_linklist_t asked_fifo;
    size_t nasked;
    h2o_linklist_t pending; /* pending_t, oldest first */
    size_t npending, pending_bytes;
} gw_jconn_t;

static gw_jmsg_encoded_t *scratch(gw_jupyter_t *jupyter)
{
    if (jupyter->encoded == NULL)
        jupyter->encoded = wire_malloc(sizeof(*jupyter->encoded));
    return jupyter->encoded;
}

/* ---- what this connection asked ---- */

static void forget_asked(gw_jconn_t *conn, asked_t *a)
{
    gw_idmap_remove(&conn->asked, &a->by_id);
    h2o_linklist_unlink(&a->fifo);
    --conn->nasked;
    free(a);
}

static void remember_asked(gw_jconn_t *conn, const char *msg_id)
{
    size_t len = strlen(msg_id);
    asked_t *a;

    if (gw_idmap_find(&conn->asked, msg_id) != NULL)
        return;
    if (conn->nasked == MAX_ASKED)
        forget_asked(conn, H2O_STRUCT_FROM_MEMBER(asked_t, fifo, conn->asked_fifo.next));
    a = wire_calloc(1, sizeof(*a) + len + 1);
    memcpy(a->id, msg_id, len + 1);
    gw_idmap_insert(&conn->asked, &a->by_id, a->id);
    h2o_linklist_insert(&conn->asked_fifo, &a->fifo);
    ++conn->nasked;
}

static void forget_all(gw_jconn_t *conn)
{
    while (!h2o_linklist_is_empty(&conn->asked_fifo))
        forget_asked(conn, H2O_STRUCT_FROM_MEMBER(asked_t, fifo, conn->asked_fifo.next));
    gw_idmap_dispose(&conn->asked);
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
        fprintf(stderr, "kgate: jupyter: a kernel message was not relayed: %s\n", gw_strerror(ret));
        return;
    }
    /* GW_EWSFULL: the client stopped reading; it is cut off (on_ws_close follows) rather than buffered without limit */
    gw_ws_sendv(conn->ws, enc->is_binary, enc->iov, enc->iovcnt);
}

static void on_kernel_message(gw_context_tap_t *tap, wire_channel_t channel, const wire_msg_t *msg, const wire_frame_t *parts,
                              size_t nparts)
{
    gw_jconn_t *conn = H2O_STRUCT_FROM_MEMBER(gw_jconn_t, tap, tap);
    gw_idmap_entry_t *e = NULL;
    gw_jmsg_t jmsg;

    if (channel != WIRE_CHANNEL_IOPUB) {
        /* a reply or an input request goes to the connection whose request it answers, only */
        if ((e = gw_idmap_find(&conn->asked, wire_msg_parent_id(msg))) == NULL)
            return;
        if (channel == WIRE_CHANNEL_SHELL || channel == WIRE_CHANNEL_CONTROL)
            forget_asked(conn, H2O_STRUCT_FROM_MEMBER(asked_t, by_id, e));
    }
    if (gw_jmsg_from_decoded(&jmsg, channel, msg->header, parts, parts + 4, nparts - 4) != 0)
        return;
    send_to_client(conn, &jmsg);
    gw_jmsg_dispose(&jmsg);
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

/* ---- client to kernel ---- */

static void close_conn(gw_jconn_t *conn, uint16_t code, const char *reason)
{
    if (conn->ws != NULL)
        gw_ws_close(conn->ws, code, reason);
}

/* Returns 0, or KMGR_ENOTREADY when the kernel cannot take it yet (the caller keeps it). */
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
        remember_asked(conn, jmsg.msg_id);
    gw_jmsg_dispose(&jmsg);
    if (ret == KMGR_ENOTREADY)
        return ret;
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
        if (relay_to_kernel(conn, p->is_binary, p->data, p->len) == KMGR_ENOTREADY)
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
    if (!h2o_linklist_is_empty(&conn->pending) || relay_to_kernel(conn, is_binary, data, len) == KMGR_ENOTREADY)
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
        while (!h2o_linklist_is_empty(&conn->asked_fifo))
            forget_asked(conn, H2O_STRUCT_FROM_MEMBER(asked_t, fifo, conn->asked_fifo.next));
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

static void on_ws_close(gw_ws_t *ws, uint16_t code)
{
    gw_jconn_t *conn = gw_ws_data(ws);
    (void)code;

    conn->ws = NULL;
    gw_context_tap_detach(&conn->tap);
    forget_all(conn);
    h2o_linklist_unlink(&conn->link);
    free(conn);
}

static const gw_ws_callbacks_t ws_callbacks = {on_ws_message, on_ws_close};

GW_JUPYTER_HANDLER(kernel_channels)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    const char *id = gw_path_param(req, params, 0);
    gw_context_t *ctx = gw_jupyter_find_kernel(jupyter, id);
    int v1;
    /* a client that reads takes a kernel's big output (bigger than the queue bound) and what follows it */
    gw_ws_limits_t limits = {.max_message_bytes = jupyter->host->config->max_body_bytes, .over_bound_ms = 10000};
    gw_jconn_t *conn;

    /* refused before the upgrade, as Jupyter Server does: the client sees the status */
    if (ctx == NULL) {
        gw_jupyter_error(req, 404, "Kernel does not exist: %.64s", id != NULL ? id : "");
        return;
    }
    if (!gw_ws_is_upgrade(req)) {
        gw_jupyter_error(req, 400, "this route takes a WebSocket upgrade (GET with Upgrade: websocket over HTTP/1.1)");
        return;
    }
    v1 = gw_ws_offers_protocol(req, GW_JFRAMING_V1_PROTOCOL);
    conn = wire_calloc(1, sizeof(*conn));
    conn->jupyter = jupyter;
    conn->framing = v1 ? GW_JFRAMING_V1 : GW_JFRAMING_LEGACY;
    gw_idmap_init(&conn->asked);
    h2o_linklist_init_anchor(&conn->asked_fifo);
    h2o_linklist_init_anchor(&conn->pending);
    if ((conn->ws = gw_ws_upgrade(req, jupyter->host, v1 ? GW_JFRAMING_V1_PROTOCOL : NULL, &limits, &ws_callbacks, conn)) == NULL) {
        free(conn);
        return;
    }
    h2o_linklist_insert(&jupyter->conns, &conn->link);
    conn->tap.on_message = on_kernel_message;
    conn->tap.on_state = on_kernel_state;
    conn->tap.on_destroy = on_kernel_gone;
    gw_context_tap_attach(ctx, &conn->tap);
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
}

int gw_jupyter_is_drained(gw_jupyter_t *jupyter)
{
    return h2o_linklist_is_empty(&jupyter->conns);
}
