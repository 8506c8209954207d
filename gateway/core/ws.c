/* WebSocket connections: h2o's upgrade and socket, wslay's framing, kgate's bounds and lifetimes. */
#include <stdlib.h>
#include <string.h>
#include <h2o/websocket.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "core/http.h"
#include "core/ws.h"
#include "core/ws_frames.h"

/* A message this big or bigger is framed by kgate and written from its one copy (see direct_t). */
#define DIRECT_MIN ((size_t)64 << 10)
#define DEFAULT_MAX_MESSAGE (64u << 20)
#define DEFAULT_MAX_QUEUED (16u << 20)
/* With over_bound_ms, how far past max_queued_bytes the queue may ever go (this many times it). */
#define HARD_BOUND_FACTOR 4
/* Ping intervals of silence after which the peer is presumed gone. */
#define SILENT_PINGS 3
/* What one message waiting in wslay costs besides its payload (its frame header, wslay's bookkeeping): control
 * frames count against the bound too */
#define QUEUED_MSG_COST 64

struct st_gw_ws_t {
    h2o_websocket_conn_t *conn;
    gw_host_t *host;
    gw_ws_callbacks_t callbacks;
    void *data;
    size_t max_queued_bytes, hard_queued_bytes;
    unsigned over_bound_ms;      /* gw_ws_limits_t's */
    int64_t over_bound_since_ms; /* when the queue went past max_queued_bytes; 0: it is not */
    int64_t last_recv_ms;
    h2o_timeout_entry_t flush_entry; /* h2o_websocket_proceed from the loop */
    h2o_timeout_entry_t ping_entry;  /* keep-alive, silence, and the closing handshake's grace */
    h2o_timeout_entry_t cut_entry;   /* ends the connection from the loop (cut off, grace over) */
    h2o_timeout_entry_t drain_entry; /* gw_ws_close waiting for the queued messages to leave */
    uint16_t cut_code;
    uint8_t close_reason[123];
    size_t close_reason_len;
    unsigned closing : 1;        /* gw_ws_close was called or a close frame was received: no more messages */
    unsigned closed : 1;         /* on_close was called */
    h2o_linklist_t direct;       /* direct_t waiting or being written, oldest first */
    size_t direct_bytes;         /* their bytes */
    unsigned direct_writing : 1; /* the head of `direct` is being written */
    unsigned peer_gone : 1;      /* h2o reported the end while a direct write was in flight */
    unsigned pong_queued : 1;    /* a pong of ours waits in wslay: a newer ping waits for it (pings.pong_wanted) */
    unsigned ping_queued : 1;    /* a keep-alive ping of ours waits in wslay: no second one */
    gw_ws_pings_t pings;         /* the peer's pings, taken out before wslay sees them (see on_wslay_recv) */
    gw_ws_scan_t sent;           /* the frames wslay hands h2o, to see our pings and pongs leave */
    wslay_event_send_callback h2o_send;
    gw_stats_series_t *open_gauge; /* kgate_websockets_open{door} */
    gw_stats_series_t *sent_bytes; /* kgate_sent_bytes_total{door} */
};

/*
 * A message kgate frames and writes itself, from its one copy. wslay_event_queue_msg copies a
 * message whole, and h2o 2.2.5's send callback copies whatever wslay hands it, whole again: a 50 MB
 * kernel output held three copies at once. wslay's fragmented messages avoid the copies but cut the
 * message into 4 KiB frames, which clients that join frames by concatenation (tornado, Python's
 * websocket-client) take in quadratic time. So a big message is one frame, written here while wslay
 * has nothing to write; the socket is then busy, and wslay waits (h2o's send callback would block).
 * Once one message waits here, later ones queue behind it, so that order is kept.
 */
typedef struct st_direct_t {
    h2o_linklist_t link; /* in ws->direct */
    h2o_iovec_t bufs[2]; /* the frame header, the payload */
    uint8_t header[10];
    size_t len; /* header and payload */
    uint8_t data[];
} direct_t;

static void direct_free(gw_ws_t *ws, direct_t *m)
{
    ws->direct_bytes -= m->len;
    h2o_linklist_unlink(&m->link);
    free(m);
}

int gw_ws_is_upgrade(h2o_req_t *req)
{
    const char *key;
    return req->version < 0x200 && h2o_is_websocket_handshake(req, &key) == 0 && key != NULL;
}

int gw_ws_offers_protocol(h2o_req_t *req, const char *protocol)
{
    size_t want = strlen(protocol);
    ssize_t i = -1;

    while ((i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("sec-websocket-protocol"), i)) != -1) {
        h2o_iovec_t v = req->headers.entries[i].value;
        const char *p = v.base, *end = v.base + v.len;
        while (p < end) {
            const char *comma = memchr(p, ',', (size_t)(end - p)), *stop = comma != NULL ? comma : end, *q = stop;
            while (p < q && (*p == ' ' || *p == '\t'))
                ++p;
            while (q > p && (q[-1] == ' ' || q[-1] == '\t'))
                --q;
            if ((size_t)(q - p) == want && memcmp(p, protocol, want) == 0)
                return 1;
            p = stop + 1;
        }
    }
    return 0;
}

void *gw_ws_data(gw_ws_t *ws)
{
    return ws->data;
}

size_t gw_ws_queued_bytes(gw_ws_t *ws)
{
    wslay_event_context_ptr ctx;

    if (ws->conn == NULL)
        return 0;
    ctx = ws->conn->ws_ctx;
    return wslay_event_get_queued_msg_length(ctx) + wslay_event_get_queued_msg_count(ctx) * QUEUED_MSG_COST + ws->direct_bytes;
}

static void unlink_entry(h2o_timeout_entry_t *entry)
{
    if (h2o_timeout_is_linked(entry))
        h2o_timeout_unlink(entry);
}

/* The one release path: h2o's side closed, the owner told, the WebSocket freed. */
static void finish(gw_ws_t *ws, uint16_t code)
{
    if (ws->closed)
        return;
    ws->closed = 1;
    unlink_entry(&ws->flush_entry);
    unlink_entry(&ws->ping_entry);
    unlink_entry(&ws->cut_entry);
    unlink_entry(&ws->drain_entry);
    if (ws->conn != NULL) {
        h2o_websocket_close(ws->conn);
        ws->conn = NULL;
    }
    /* the socket is gone, and any write of these with it (h2o calls a disposed socket's callbacks no more) */
    while (!h2o_linklist_is_empty(&ws->direct))
        direct_free(ws, H2O_STRUCT_FROM_MEMBER(direct_t, link, ws->direct.next));
    gw_stats_inc(ws->open_gauge, -1);
    ws->callbacks.on_close(ws, code);
    free(ws);
}

/* The code the peer closed with, or GW_WS_ABNORMAL when it sent none. */
static uint16_t peer_code(gw_ws_t *ws)
{
    if (ws->conn == NULL || !wslay_event_get_close_received(ws->conn->ws_ctx))
        return GW_WS_ABNORMAL;
    return wslay_event_get_status_code_received(ws->conn->ws_ctx);
}

static void schedule_cut(gw_ws_t *ws, uint16_t code)
{
    ws->closing = 1;
    ws->cut_code = code;
    gw_host_defer(ws->host, &ws->cut_entry);
}

static void on_cut(h2o_timeout_entry_t *entry)
{
    gw_ws_t *ws = H2O_STRUCT_FROM_MEMBER(gw_ws_t, cut_entry, entry);
    finish(ws, ws->cut_code);
}

static void write_direct(gw_ws_t *ws);

static void on_flush(h2o_timeout_entry_t *entry)
{
    gw_ws_t *ws = H2O_STRUCT_FROM_MEMBER(gw_ws_t, flush_entry, entry);

    if (ws->conn == NULL || ws->conn->sock == NULL)
        return;
    if (ws->pings.pong_wanted && !ws->pong_queued && !ws->closing) {
        /* the newest ping's payload (RFC 6455 5.5.3); the pings that came while a pong waited get this one */
        struct wslay_event_msg pong = {WSLAY_PONG, ws->pings.pong, ws->pings.pong_len};
        ws->pings.pong_wanted = 0;
        ws->pong_queued = wslay_event_queue_msg(ws->conn->ws_ctx, &pong) == 0;
    }
    /* wslay first (control frames, the messages queued before the direct ones), then a direct write */
    if (!ws->direct_writing && !h2o_linklist_is_empty(&ws->direct) && !h2o_socket_is_writing(ws->conn->sock) &&
        !wslay_event_want_write(ws->conn->ws_ctx)) {
        write_direct(ws);
        return;
    }
    /* may end in on_h2o_message(NULL), which frees ws: nothing may touch it afterwards */
    h2o_websocket_proceed(ws->conn);
}

static void schedule_flush(gw_ws_t *ws)
{
    gw_host_defer(ws->host, &ws->flush_entry);
}

static void on_direct_written(h2o_socket_t *sock, const char *err)
{
    h2o_websocket_conn_t *conn = sock->data;
    gw_ws_t *ws = conn->data;

    ws->direct_writing = 0;
    if (err == NULL)
        gw_stats_inc(ws->sent_bytes, (double)H2O_STRUCT_FROM_MEMBER(direct_t, link, ws->direct.next)->len);
    direct_free(ws, H2O_STRUCT_FROM_MEMBER(direct_t, link, ws->direct.next));
    if (err != NULL || ws->peer_gone) {
        finish(ws, ws->cut_code != 0 ? ws->cut_code : peer_code(ws));
        return;
    }
    /* what waited behind it: wslay's frames (pings, pongs), the next direct message */
    schedule_flush(ws);
}

static void write_direct(gw_ws_t *ws)
{
    direct_t *m = H2O_STRUCT_FROM_MEMBER(direct_t, link, ws->direct.next);

    ws->direct_writing = 1;
    h2o_socket_write(ws->conn->sock, m->bufs, 2, on_direct_written);
}

/* Queues a message for write_direct: a server's frame (RFC 6455 5.2: unmasked, FIN set), one copy. */
static void queue_direct(gw_ws_t *ws, int opcode, const h2o_iovec_t *bufs, size_t n, size_t len)
{
    direct_t *m = wire_malloc(sizeof(*m) + len);
    size_t hlen = 2, off = 0;

    memset(m, 0, sizeof(*m));
    m->header[0] = (uint8_t)(0x80 | opcode);
    if (len < 126) {
        m->header[1] = (uint8_t)len;
    } else if (len < 65536) {
        m->header[1] = 126;
        m->header[2] = (uint8_t)(len >> 8);
        m->header[3] = (uint8_t)len;
        hlen = 4;
    } else {
        m->header[1] = 127;
        for (int i = 0; i != 8; ++i)
            m->header[2 + i] = (uint8_t)((uint64_t)len >> (56 - 8 * i));
        hlen = 10;
    }
    for (size_t i = 0; i != n; ++i) {
        memcpy(m->data + off, bufs[i].base, bufs[i].len);
        off += bufs[i].len;
    }
    m->bufs[0] = h2o_iovec_init(m->header, hlen);
    m->bufs[1] = h2o_iovec_init(m->data, len);
    m->len = hlen + len;
    h2o_linklist_insert(&ws->direct, &m->link);
    ws->direct_bytes += m->len;
    schedule_flush(ws);
}

/*
 * The peer stopped reading when more than max_queued_bytes waits for it (a message of any size
 * still goes to an empty queue). With over_bound_ms, the queue may stay past the bound that long and
 * grow to hard_queued_bytes: a relay's peer that reads takes a big message (a kernel's 50 MB output)
 * and what follows it without being cut off.
 */
static int is_over_bound(gw_ws_t *ws, size_t len)
{
    size_t queued = gw_ws_queued_bytes(ws);
    int64_t now;

    if (queued <= ws->max_queued_bytes) {
        ws->over_bound_since_ms = 0;
        return 0;
    }
    if (ws->over_bound_ms == 0 || queued + len > ws->hard_queued_bytes)
        return 1;
    now = gw_now_ms();
    if (ws->over_bound_since_ms == 0)
        ws->over_bound_since_ms = now;
    return now - ws->over_bound_since_ms > (int64_t)ws->over_bound_ms;
}

static void on_ping(h2o_timeout_entry_t *entry)
{
    gw_ws_t *ws = H2O_STRUCT_FROM_MEMBER(gw_ws_t, ping_entry, entry);
    struct wslay_event_msg ping = {WSLAY_PING, NULL, 0};

    if (ws->closing) {
        /* the peer did not finish the closing handshake within a ping interval */
        finish(ws, ws->cut_code != 0 ? ws->cut_code : peer_code(ws));
        return;
    }
    if (ws->over_bound_ms != 0 && is_over_bound(ws, 0)) {
        /* past its grace over the bound with nothing more to send: a peer that stopped reading while the sender went
         * quiet is cut off here, not at a next send that may never come */
        schedule_cut(ws, GW_WS_POLICY_VIOLATION);
        return;
    }
    if (gw_now_ms() - ws->last_recv_ms > (int64_t)SILENT_PINGS * ws->host->config->ping_interval_ms) {
        gw_ws_close(ws, GW_WS_GOING_AWAY, "no answer to pings"); /* re-arms this timer as the closing grace */
        return;
    }
    if (ws->conn != NULL && !ws->ping_queued && wslay_event_queue_msg(ws->conn->ws_ctx, &ping) == 0) {
        ws->ping_queued = 1;
        schedule_flush(ws);
    }
    h2o_timeout_link(ws->host->loop, &ws->host->ping_timeout, &ws->ping_entry);
}

static void on_h2o_message(h2o_websocket_conn_t *conn, const struct wslay_event_on_msg_recv_arg *arg)
{
    gw_ws_t *ws = conn->data;

    if (arg == NULL) {
        /* the closing handshake is over, the peer is gone, or the socket failed. h2o 2.2.5 reports the
         * end while the last frame (our close reply) may still be being written, and closing the
         * socket then leaks that write: wait, h2o calls back again once the write completes */
        if (conn->sock != NULL && h2o_socket_is_writing(conn->sock) && !ws->closed) {
            ws->peer_gone = ws->direct_writing; /* then on_direct_written finishes it, h2o's callback will not */
            return;
        }
        finish(ws, ws->cut_code != 0 ? ws->cut_code : peer_code(ws));
        return;
    }
    ws->last_recv_ms = gw_now_ms();
    switch (arg->opcode) {
    case WSLAY_TEXT_FRAME:
    case WSLAY_BINARY_FRAME:
        if (!ws->closing)
            ws->callbacks.on_message(ws, arg->opcode == WSLAY_BINARY_FRAME, arg->msg, arg->msg_length);
        break;
    case WSLAY_CONNECTION_CLOSE:
        ws->closing = 1; /* wslay answers the close frame itself */
        break;
    default: /* pong (pings never reach wslay: on_wslay_recv) */
        break;
    }
}

/*
 * wslay sends a queued control frame before any queued message, and nothing after a close frame:
 * the close frame waits until the messages queued before it have left, checked once per loop
 * iteration (their writes complete inside h2o, which tells nobody).
 */
static void queue_close(gw_ws_t *ws)
{
    if (ws->conn == NULL)
        return;
    if (wslay_event_get_queued_msg_count(ws->conn->ws_ctx) != 0 || !h2o_linklist_is_empty(&ws->direct)) {
        h2o_timeout_link(ws->host->loop, &ws->host->yield_timeout, &ws->drain_entry);
        return;
    }
    wslay_event_queue_close(ws->conn->ws_ctx, ws->cut_code, ws->close_reason, ws->close_reason_len);
    schedule_flush(ws);
}

/*
 * h2o's recv callback with the peer's pings taken out: wslay would queue a pong for each of them, and a
 * peer that sends pings and reads nothing grew kgate by a queued pong per ping (200 bytes each). h2o
 * calls wslay again while its input holds bytes, so every byte is taken here, a ping's or a header's
 * first bytes included (the filter holds those).
 */
static ssize_t on_wslay_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
    h2o_websocket_conn_t *conn = user;
    gw_ws_t *ws = conn->data;
    uint64_t pings = ws->pings.pings_taken;
    size_t taken, n;
    (void)flags;

    n = gw_ws_pings_filter(&ws->pings, (const uint8_t *)conn->sock->input->bytes, conn->sock->input->size, &taken, buf, len);
    h2o_buffer_consume(&conn->sock->input, taken);
    if (ws->pings.pings_taken != pings) {
        ws->last_recv_ms = gw_now_ms();
        schedule_flush(ws);
    }
    if (n == 0) {
        wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
        return -1;
    }
    return (ssize_t)n;
}

/* h2o's send callback, watched: it takes a header whole or nothing, and the scan sees our pongs and pings leave. */
static ssize_t on_wslay_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user)
{
    h2o_websocket_conn_t *conn = user;
    gw_ws_t *ws = conn->data;
    ssize_t r = ws->h2o_send(ctx, data, len, flags, user);
    size_t off = 0;
    int done;

    if (r > 0)
        gw_stats_inc(ws->sent_bytes, (double)r);
    while (r > 0 && off != (size_t)r) {
        off += gw_ws_scan_feed(&ws->sent, data + off, (size_t)r - off, &done);
        if (done && (ws->sent.hdr[0] & 0x0f) == GW_WS_OP_PONG) {
            ws->pong_queued = 0;
            if (ws->pings.pong_wanted)
                schedule_flush(ws);
        } else if (done && (ws->sent.hdr[0] & 0x0f) == GW_WS_OP_PING) {
            ws->ping_queued = 0;
        }
    }
    return r;
}

static void on_drain(h2o_timeout_entry_t *entry)
{
    queue_close(H2O_STRUCT_FROM_MEMBER(gw_ws_t, drain_entry, entry));
}

gw_ws_t *gw_ws_upgrade(h2o_req_t *req, gw_host_t *host, const char *subprotocol, const gw_ws_limits_t *limits,
                       const gw_ws_callbacks_t *callbacks, void *data)
{
    struct wslay_event_callbacks wslay_callbacks;
    const char *key, *door;
    gw_ws_t *ws;

    if (req->version >= 0x200 || h2o_is_websocket_handshake(req, &key) != 0 || key == NULL) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "a WebSocket upgrade (HTTP/1.1 GET with Upgrade: websocket) is required");
        return NULL;
    }
    ws = wire_calloc(1, sizeof(*ws));
    ws->host = host;
    h2o_linklist_init_anchor(&ws->direct);
    ws->callbacks = *callbacks;
    ws->data = data;
    ws->max_queued_bytes = limits != NULL && limits->max_queued_bytes != 0 ? limits->max_queued_bytes : DEFAULT_MAX_QUEUED;
    ws->over_bound_ms = limits != NULL ? limits->over_bound_ms : 0;
    ws->hard_queued_bytes = ws->over_bound_ms != 0 ? ws->max_queued_bytes * HARD_BOUND_FACTOR : ws->max_queued_bytes;
    ws->last_recv_ms = gw_now_ms();
    ws->flush_entry.cb = on_flush;
    ws->ping_entry.cb = on_ping;
    ws->cut_entry.cb = on_cut;
    ws->drain_entry.cb = on_drain;
    door = limits != NULL && limits->door != NULL ? limits->door : "other";
    ws->open_gauge = gw_stats_gauge(&host->stats, "kgate_websockets_open", "WebSockets open, by front door", "door", door);
    ws->sent_bytes = gw_stats_counter(&host->stats, GW_STATS_SENT_BYTES, GW_STATS_SENT_BYTES_HELP, "door", door);
    gw_stats_inc(ws->open_gauge, 1);
    if (subprotocol != NULL)
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("sec-websocket-protocol"), 0, NULL, subprotocol,
                              strlen(subprotocol));
    gw_add_common_headers(req);
    ws->conn = h2o_upgrade_to_websocket(req, key, ws, on_h2o_message);
    gw_ws_pings_init(&ws->pings, 1);
    ws->h2o_send = ws->conn->ws_callbacks.send_callback;
    wslay_callbacks = ws->conn->ws_callbacks;
    wslay_callbacks.recv_callback = on_wslay_recv;
    wslay_callbacks.send_callback = on_wslay_send;
    wslay_event_config_set_callbacks(ws->conn->ws_ctx, &wslay_callbacks); /* wslay keeps a copy */
    wslay_event_config_set_max_recv_msg_length(
        ws->conn->ws_ctx, limits != NULL && limits->max_message_bytes != 0 ? limits->max_message_bytes : DEFAULT_MAX_MESSAGE);
    h2o_timeout_link(host->loop, &host->ping_timeout, &ws->ping_entry);
    return ws;
}

int gw_ws_sendv(gw_ws_t *ws, int is_binary, const h2o_iovec_t *bufs, size_t n)
{
    struct wslay_event_msg msg = {is_binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME, NULL, 0};
    uint8_t *joined = NULL;
    size_t len = 0, i;
    int ret;

    if (ws->closing || ws->conn == NULL)
        return GW_EWSCLOSED;
    for (i = 0; i != n; ++i)
        len += bufs[i].len;
    if (is_over_bound(ws, len)) {
        /* the peer stopped reading: cut it off rather than buffer without limit */
        schedule_cut(ws, GW_WS_POLICY_VIOLATION);
        return GW_EWSFULL;
    }
    /* behind a direct message, everything is direct: order is kept */
    if (len >= DIRECT_MIN || !h2o_linklist_is_empty(&ws->direct)) {
        queue_direct(ws, msg.opcode, bufs, n, len);
        return 0;
    }
    if (n == 1) {
        msg.msg = (const uint8_t *)bufs[0].base;
    } else {
        joined = wire_malloc(len != 0 ? len : 1);
        for (i = 0, len = 0; i != n; ++i) {
            memcpy(joined + len, bufs[i].base, bufs[i].len);
            len += bufs[i].len;
        }
        msg.msg = joined;
    }
    msg.msg_length = len;
    ret = wslay_event_queue_msg(ws->conn->ws_ctx, &msg); /* wslay copies the payload */
    free(joined);
    if (ret != 0)
        return GW_EWSCLOSED;
    schedule_flush(ws);
    return 0;
}

int gw_ws_send(gw_ws_t *ws, int is_binary, const void *data, size_t len)
{
    h2o_iovec_t buf = h2o_iovec_init(data, len);
    return gw_ws_sendv(ws, is_binary, &buf, 1);
}

void gw_ws_close(gw_ws_t *ws, uint16_t code, const char *reason)
{
    size_t len = reason != NULL ? strlen(reason) : 0;

    if (ws->closing || ws->conn == NULL)
        return;
    ws->closing = 1;
    ws->cut_code = code;
    ws->close_reason_len = len < sizeof(ws->close_reason) ? len : sizeof(ws->close_reason);
    if (ws->close_reason_len != 0)
        memcpy(ws->close_reason, reason, ws->close_reason_len);
    queue_close(ws);
    /* the peer has one ping interval to take the queued messages and answer; on_ping ends it otherwise */
    unlink_entry(&ws->ping_entry);
    h2o_timeout_link(ws->host->loop, &ws->host->ping_timeout, &ws->ping_entry);
}
