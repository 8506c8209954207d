/* WebSocket client connections: wslay in client mode over an h2o socket, bounded and closed like core/ws.c's. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <wslay/wslay.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "core/ws_client.h"
#include "core/ws_frames.h"

#define DEFAULT_MAX_MESSAGE (64u << 20)
#define DEFAULT_MAX_QUEUED (16u << 20)
/* Bytes of frames handed to one socket write (h2o keeps a pointer to them until the write completes). */
#define WRITE_CHUNK (64u << 10)
/* What one message waiting in wslay costs besides its payload (as core/ws.c counts it) */
#define QUEUED_MSG_COST 64

struct st_gw_ws_client_t {
    h2o_socket_t *sock;
    wslay_event_context_ptr ctx;
    gw_host_t *host;
    gw_ws_client_callbacks_t callbacks;
    void *data;
    size_t max_queued_bytes;
    h2o_timeout_entry_t flush_entry; /* proceed() from the loop: frames already read, messages queued */
    h2o_timeout_entry_t grace_entry; /* the closing handshake's grace */
    h2o_timeout_entry_t cut_entry;   /* ends the connection from the loop (cut off) */
    uint16_t cut_code;               /* the owner's close code, or why it was cut; 0: neither */
    uint8_t *wbuf;
    size_t wlen;
    unsigned writing : 1;           /* wbuf is being written */
    unsigned peer_closed_first : 1; /* the peer's close frame came before any of ours */
    unsigned closing : 1;           /* no more messages either way */
    unsigned pong_queued : 1;       /* a pong of ours waits in wslay: a newer ping waits for it (pings.pong_wanted) */
    gw_ws_pings_t pings;            /* the peer's pings, answered here with one pong at a time (core/ws_frames.h) */
    gw_ws_scan_t sent;              /* the frames wslay hands the socket, to see our pong leave */
};

static void unlink_entry(h2o_timeout_entry_t *entry)
{
    if (h2o_timeout_is_linked(entry))
        h2o_timeout_unlink(entry);
}

/* Why the connection ended, as on_close reports it. */
static uint16_t end_code(gw_ws_client_t *wc)
{
    if (wc->cut_code != 0)
        return wc->cut_code;
    if (wslay_event_get_close_received(wc->ctx) && wc->peer_closed_first)
        return wslay_event_get_status_code_received(wc->ctx);
    if (wslay_event_get_close_sent(wc->ctx)) /* wslay's own: a message too big, a protocol error */
        return wslay_event_get_status_code_sent(wc->ctx);
    return GW_WS_ABNORMAL;
}

/* The one release path: the owner told, the socket closed (a write in flight is abandoned), wc freed. */
static void finish(gw_ws_client_t *wc, uint16_t code)
{
    unlink_entry(&wc->flush_entry);
    unlink_entry(&wc->grace_entry);
    unlink_entry(&wc->cut_entry);
    wc->callbacks.on_close(wc, code);
    h2o_socket_close(wc->sock);
    wslay_event_context_free(wc->ctx);
    free(wc->wbuf);
    free(wc);
}

static void on_write(h2o_socket_t *sock, const char *err);

/* Reads the frames the socket holds, writes what wslay has queued, and ends the connection once both directions are done. */
static void proceed(gw_ws_client_t *wc)
{
    /* on_message runs inside wslay_event_recv; the owner's calls from there only queue and defer */
    if (wslay_event_want_read(wc->ctx) && wc->sock->input->size != 0 && wslay_event_recv(wc->ctx) != 0) {
        finish(wc, GW_WS_ABNORMAL);
        return;
    }
    if (wc->pings.pong_wanted && !wc->pong_queued && !wc->closing) {
        /* the newest ping's payload (RFC 6455 5.5.3): a peer that pings and reads nothing costs one pong */
        struct wslay_event_msg pong = {WSLAY_PONG, wc->pings.pong, wc->pings.pong_len};
        wc->pings.pong_wanted = 0;
        wc->pong_queued = wslay_event_queue_msg(wc->ctx, &pong) == 0;
    }
    if (!wc->writing) {
        if (wslay_event_want_write(wc->ctx) && wslay_event_send(wc->ctx) != 0) {
            finish(wc, GW_WS_ABNORMAL);
            return;
        }
        if (wc->wlen != 0) {
            h2o_iovec_t buf = h2o_iovec_init(wc->wbuf, wc->wlen);
            wc->writing = 1;
            h2o_socket_write(wc->sock, &buf, 1, on_write);
        }
    }
    if (wslay_event_get_close_sent(wc->ctx) && !h2o_timeout_is_linked(&wc->grace_entry)) {
        /* a peer that never answers our close frame does not hold the connection open */
        wc->closing = 1;
        h2o_timeout_link(wc->host->loop, &wc->host->ping_timeout, &wc->grace_entry);
    }
    if (!wc->writing && !wslay_event_want_read(wc->ctx) && !wslay_event_want_write(wc->ctx))
        finish(wc, end_code(wc));
}

static void on_write(h2o_socket_t *sock, const char *err)
{
    gw_ws_client_t *wc = sock->data;

    wc->writing = 0;
    wc->wlen = 0;
    if (err != NULL) {
        finish(wc, end_code(wc));
        return;
    }
    proceed(wc);
}

static void on_read(h2o_socket_t *sock, const char *err)
{
    gw_ws_client_t *wc = sock->data;

    if (err != NULL) {
        /* the peer is gone; what it sent before counts (a close frame read with the EOF, say) */
        if (wslay_event_want_read(wc->ctx) && wc->sock->input->size != 0)
            wslay_event_recv(wc->ctx);
        finish(wc, end_code(wc));
        return;
    }
    proceed(wc);
}

static void on_flush(h2o_timeout_entry_t *entry)
{
    proceed(H2O_STRUCT_FROM_MEMBER(gw_ws_client_t, flush_entry, entry));
}

static void on_grace(h2o_timeout_entry_t *entry)
{
    gw_ws_client_t *wc = H2O_STRUCT_FROM_MEMBER(gw_ws_client_t, grace_entry, entry);
    finish(wc, end_code(wc));
}

static void on_cut(h2o_timeout_entry_t *entry)
{
    gw_ws_client_t *wc = H2O_STRUCT_FROM_MEMBER(gw_ws_client_t, cut_entry, entry);
    finish(wc, wc->cut_code);
}

static ssize_t recv_callback(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
    gw_ws_client_t *wc = user;
    size_t taken, n;
    (void)flags;

    /* the peer's pings are taken out: wslay would queue a pong for each */
    n = gw_ws_pings_filter(&wc->pings, (const uint8_t *)wc->sock->input->bytes, wc->sock->input->size, &taken, buf, len);
    h2o_buffer_consume(&wc->sock->input, taken);
    if (n == 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    return (ssize_t)n;
}

static ssize_t send_callback(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user)
{
    gw_ws_client_t *wc = user;
    size_t n = WRITE_CHUNK - wc->wlen < len ? WRITE_CHUNK - wc->wlen : len;
    (void)flags;

    /* one write in flight; wslay keeps the rest and calls again from the next proceed() */
    if (wc->writing || n == 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    memcpy(wc->wbuf + wc->wlen, data, n);
    wc->wlen += n;
    for (size_t off = 0; off != n;) {
        int done;
        off += gw_ws_scan_feed(&wc->sent, data + off, n - off, &done);
        if (done && (wc->sent.hdr[0] & 0x0f) == GW_WS_OP_PONG)
            wc->pong_queued = 0; /* the next proceed() queues a newer ping's pong */
    }
    return (ssize_t)n;
}

static int genmask_callback(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
    (void)user;
    /* RFC 6455 10.3: masks must be unpredictable to the page a proxy might cache for */
    if (getrandom(buf, len, 0) != (ssize_t)len) {
        wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
        return -1;
    }
    return 0;
}

static void on_msg_callback(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user)
{
    gw_ws_client_t *wc = user;

    switch (arg->opcode) {
    case WSLAY_TEXT_FRAME:
    case WSLAY_BINARY_FRAME:
        if (!wc->closing)
            wc->callbacks.on_message(wc, arg->opcode == WSLAY_BINARY_FRAME, arg->msg, arg->msg_length);
        break;
    case WSLAY_CONNECTION_CLOSE:
        /* wslay answers it; proceed() ends the connection once the answer is written */
        wc->peer_closed_first = !wslay_event_get_close_sent(ctx);
        wc->closing = 1;
        break;
    default: /* ping (wslay answers), pong */
        break;
    }
}

gw_ws_client_t *gw_ws_client_start(h2o_socket_t *sock, gw_host_t *host, const gw_ws_limits_t *limits,
                                   const gw_ws_client_callbacks_t *callbacks, void *data)
{
    static const struct wslay_event_callbacks wslay_callbacks = {
        recv_callback, send_callback, genmask_callback, NULL, NULL, NULL, on_msg_callback,
    };
    gw_ws_client_t *wc = wire_calloc(1, sizeof(*wc));

    wc->sock = sock;
    wc->host = host;
    wc->callbacks = *callbacks;
    wc->data = data;
    wc->max_queued_bytes = limits != NULL && limits->max_queued_bytes != 0 ? limits->max_queued_bytes : DEFAULT_MAX_QUEUED;
    wc->wbuf = wire_malloc(WRITE_CHUNK);
    wc->flush_entry.cb = on_flush;
    wc->grace_entry.cb = on_grace;
    wc->cut_entry.cb = on_cut;
    gw_ws_pings_init(&wc->pings, 0);
    if (wslay_event_context_client_init(&wc->ctx, &wslay_callbacks, wc) != 0)
        h2o_fatal("wslay_event_context_client_init: out of memory");
    wslay_event_config_set_max_recv_msg_length(wc->ctx, limits != NULL && limits->max_message_bytes != 0 ? limits->max_message_bytes
                                                                                                         : DEFAULT_MAX_MESSAGE);
    sock->data = wc;
    h2o_socket_read_start(sock, on_read);
    /* frames that came with the handshake's answer are read from the loop, like any others */
    gw_host_defer(host, &wc->flush_entry);
    return wc;
}

void *gw_ws_client_data(gw_ws_client_t *wc)
{
    return wc->data;
}

int gw_ws_client_send(gw_ws_client_t *wc, int is_binary, const void *data, size_t len)
{
    struct wslay_event_msg msg = {is_binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME, data, len};

    if (wc->closing)
        return GW_EWSCLOSED;
    if (wslay_event_get_queued_msg_length(wc->ctx) + wslay_event_get_queued_msg_count(wc->ctx) * QUEUED_MSG_COST + len >
        wc->max_queued_bytes) {
        /* the peer stopped reading: cut it off rather than buffer without limit */
        wc->closing = 1;
        wc->cut_code = GW_WS_POLICY_VIOLATION;
        gw_host_defer(wc->host, &wc->cut_entry);
        return GW_EWSFULL;
    }
    if (wslay_event_queue_msg(wc->ctx, &msg) != 0) /* wslay copies the payload */
        return GW_EWSCLOSED;
    gw_host_defer(wc->host, &wc->flush_entry);
    return 0;
}

void gw_ws_client_close(gw_ws_client_t *wc, uint16_t code, const char *reason)
{
    size_t len = reason != NULL ? strlen(reason) : 0;

    if (wc->closing)
        return;
    wc->closing = 1;
    wc->cut_code = code;
    wslay_event_queue_close(wc->ctx, code, (const uint8_t *)reason, len > 123 ? 123 : len);
    gw_host_defer(wc->host, &wc->flush_entry);
}
