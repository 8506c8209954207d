/* One HTTP exchange relayed: h2o's HTTP/1 client upstream, the core's writer downstream, the upstream paused while the client lags.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include "core/http.h"
#include "core/stream.h"
#include "proxy/internal.h"
#include "ksys/log.h"

/*
 * Back-pressure. The writer holds at most one batch (--max-reader-batch-bytes) in flight; behind it
 * the exchange keeps what the upstream sent and the writer has not taken yet. Past PAUSE_BYTES
 * reading stops (h2o 2.2.5's HTTP/1 client has no pause of its own: its socket's reading is stopped
 * and its read callback kept to start it again), and starts again when the writer has taken all
 * but RESUME_BYTES. The upstream socket's receive buffer is kept small too, so that one read, which
 * h2o makes as large as the kernel has data, stays small.
 */
#define PAUSE_BYTES (1u << 20)
#define RESUME_BYTES (256u << 10)
#define UPSTREAM_RCVBUF (256 << 10)
/*
 * The largest answer head taken from an upstream. h2o 2.2.5's HTTP/1 client keeps reading a head
 * until it is whole, without a bound of its own: an upstream that never ends its head (one endless
 * header line) grew kgate by hundreds of MiB until --proxy-timeout-ms. h2o's server takes ~420 KiB
 * of request head at most; an answer's gets 1 MiB.
 */
#define MAX_HEAD_BYTES (1u << 20)

typedef struct st_exchange_t {
    gw_event_source_t super; /* the answer's body, for the writer */
    gw_proxy_t *proxy;
    h2o_linklist_t link; /* in proxy->exchanges */
    h2o_req_t *req;
    h2o_timeout_entry_t head_entry; /* on proxy->io_timeout until the upstream's head is whole: connect, send and answer */
    h2o_http1client_t *client;      /* NULL once it is done (it frees itself) or cancelled */
    h2o_iovec_t reqbufs[2];         /* the head, and the body h2o buffered */
    size_t num_reqbufs;
    uint16_t port;
    h2o_socket_cb paused_reader;     /* the client's read callback, while reading is paused */
    h2o_timeout_entry_t guard_entry; /* deferred from on_connect: puts the head's guard on the client's socket */
    h2o_socket_cb head_writer;       /* h2o's callbacks the guard wraps until the head is whole */
    h2o_socket_cb head_reader;
    h2o_linklist_t queue; /* body chunks (events) not yet taken by the writer */
    size_t queued_bytes;
    unsigned is_upgrade : 1;
    unsigned chunked : 1;       /* the upstream's body is chunked: its close before the last chunk is a cut */
    unsigned responded : 1;     /* the request has its answer (an error, the upstream's head, or the upgrade) */
    unsigned started : 1;       /* the upstream's head is out: the writer owns the body */
    unsigned eos : 1;           /* the upstream's body is complete */
    unsigned failed : 1;        /* the upstream failed mid-body, or kgate shut down: the answer is cut */
    unsigned in_callback : 1;   /* inside one of the client's callbacks: it cannot be cancelled now */
    unsigned cancel_asked : 1;  /* ... so it is told to stop when the callback returns */
    unsigned writer_closed : 1; /* the writer closed the source */
} exchange_t;

/* Unlinks the oldest chunk and drops the exchange's reference; returns it (it may be freed: compare, never read). */
static const gw_event_t *pop_chunk(exchange_t *ex)
{
    gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, ex->queue.next);

    h2o_linklist_unlink(&ev->link);
    ev->in_log = 0;
    ex->queued_bytes -= ev->len;
    gw_event_release(ev);
    return ev;
}

static void drop_queue(exchange_t *ex)
{
    while (!h2o_linklist_is_empty(&ex->queue))
        pop_chunk(ex);
}

static void stop_client(exchange_t *ex)
{
    if (ex->client == NULL)
        return;
    if (ex->in_callback) {
        ex->cancel_asked = 1;
        return;
    }
    h2o_http1client_cancel(ex->client);
    ex->client = NULL;
}

/* The request's pool is going away (and the writer, if any, has closed the source). */
static void on_dispose(void *p)
{
    exchange_t *ex = p;

    if (h2o_timeout_is_linked(&ex->head_entry))
        h2o_timeout_unlink(&ex->head_entry);
    if (h2o_timeout_is_linked(&ex->guard_entry))
        h2o_timeout_unlink(&ex->guard_entry);
    stop_client(ex);
    drop_queue(ex);
    h2o_linklist_unlink(&ex->link);
    --ex->proxy->num_active;
}

/* ---- the body, as the writer's event source --------------------------------------------------- */

static void resume_reading(exchange_t *ex)
{
    if (ex->paused_reader == NULL || ex->client == NULL || ex->queued_bytes > RESUME_BYTES)
        return;
    h2o_socket_read_start(ex->client->sock, ex->paused_reader);
    ex->paused_reader = NULL;
}

static gw_event_t *body_next(gw_event_source_t *source, const gw_event_t *prev, int *lost)
{
    exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, super, source);

    /* everything up to `prev` has been taken (the writer holds its own references) */
    if (prev != NULL && prev->in_log)
        while (pop_chunk(ex) != prev)
            ;
    if (ex->failed) {
        *lost = 1;
        return NULL;
    }
    resume_reading(ex);
    return h2o_linklist_is_empty(&ex->queue) ? NULL : H2O_STRUCT_FROM_MEMBER(gw_event_t, link, ex->queue.next);
}

static int body_is_end(gw_event_source_t *source, const gw_event_t *prev)
{
    exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, super, source);

    return ex->eos && (h2o_linklist_is_empty(&ex->queue) || (prev != NULL && &prev->link == ex->queue.prev));
}

static void body_close(gw_event_source_t *source)
{
    exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, super, source);

    ex->writer_closed = 1;
    stop_client(ex);
    drop_queue(ex);
    h2o_mem_release_shared(ex); /* the writer's reference */
}

static const gw_event_source_ops_t body_ops = {body_next, body_is_end, body_close};

static void notify_writer(exchange_t *ex)
{
    if (ex->started && !ex->writer_closed)
        gw_event_source_notify(&ex->super);
}

/* The client's HTTP/1 socket (NULL over HTTP/2, whose connection carries other streams). */
static h2o_socket_t *client_socket(exchange_t *ex)
{
    h2o_conn_t *conn = ex->req->conn;

    return ex->req->version < 0x200 && conn->callbacks->get_socket != NULL ? conn->callbacks->get_socket(conn) : NULL;
}

/*
 * The answer is cut (the upstream failed mid-body, the client went, kgate shuts down): the writer
 * ends it with an error, and over HTTP/1 the connection is shut down first, so that the client
 * reads an end of file where the rest of the body should be (curl: error 18), never a last chunk
 * or h2o's marker after it; nginx and h2o's own proxy do the same.
 */
static void cut_answer(exchange_t *ex)
{
    h2o_socket_t *sock = client_socket(ex);

    stop_client(ex);
    ex->failed = 1;
    drop_queue(ex);
    if (sock != NULL)
        shutdown(h2o_socket_get_fd(sock), SHUT_RDWR);
    notify_writer(ex);
}

/* ---- the upstream ----------------------------------------------------------------------------- */

static int on_body(h2o_http1client_t *client, const char *errstr)
{
    exchange_t *ex = client->data;
    h2o_buffer_t **input = &client->sock->input;

    if ((*input)->size != 0) {
        if (!ex->failed && !ex->writer_closed) {
            gw_event_t *ev = gw_event_from_bytes((*input)->bytes, (*input)->size);
            ev->in_log = 1;
            h2o_linklist_insert(&ex->queue, &ev->link);
            ex->queued_bytes += ev->len;
        }
        h2o_buffer_consume(input, (*input)->size);
    }
    if (errstr != NULL) {
        /* the client frees itself when this returns */
        ex->client = NULL;
        /* h2o's client reports an upstream that closed between two chunks as the body's end (browsers
         * ignore a missing last chunk); it does so from a read that brought no byte, while a real last
         * chunk always comes with the read that carried it */
        if (errstr == h2o_http1client_error_is_eos && ex->chunked && client->sock->bytes_read == 0)
            errstr = "the connection closed before the last chunk";
        if (errstr == h2o_http1client_error_is_eos) {
            ex->eos = 1;
        } else {
            /* cut, not ended: the client must not take a truncated body for a whole one */
            ksys_log_warn("proxy: 127.0.0.1:%u: %s (the answer is cut)", ex->port, errstr);
            cut_answer(ex);
        }
    } else if (ex->queued_bytes >= PAUSE_BYTES && ex->paused_reader == NULL) {
        ex->paused_reader = client->sock->_cb.read;
        h2o_socket_read_stop(client->sock);
    }
    ex->in_callback = 1;
    notify_writer(ex);
    ex->in_callback = 0;
    if (ex->cancel_asked && errstr == NULL) {
        ex->client = NULL;
        return -1; /* the client closes itself */
    }
    return 0;
}

/* 502 or 504 for an upstream that failed before its answer began. */
static void send_upstream_error(exchange_t *ex, const char *errstr, int saved_errno)
{
    unsigned timeout_ms = ex->proxy->host->config->proxy_timeout_ms;

    ex->responded = 1;
    if (strcmp(errstr, "I/O timeout") == 0 || strcmp(errstr, "connection timeout") == 0)
        gw_send_error(ex->req, GW_HTTP_GATEWAY_TIMEOUT, "127.0.0.1:%u did not answer within %u ms (--proxy-timeout-ms)", ex->port,
                      timeout_ms);
    else if (errstr == h2o_socket_error_conn_fail)
        gw_send_error(ex->req, GW_HTTP_BAD_GATEWAY, "nothing accepts connections on 127.0.0.1:%u (connection refused)", ex->port);
    else if (strcmp(errstr, "socket create error") == 0 && saved_errno != 0)
        gw_send_error(ex->req, GW_HTTP_BAD_GATEWAY, "cannot connect to 127.0.0.1:%u: %s", ex->port, strerror(saved_errno));
    else
        gw_send_error(ex->req, GW_HTTP_BAD_GATEWAY, "127.0.0.1:%u: %s", ex->port, errstr);
}

static h2o_http1client_body_cb on_head(h2o_http1client_t *client, const char *errstr, int minor_version, int status,
                                       h2o_iovec_t msg, h2o_header_t *headers, size_t num_headers, int rlen)
{
    exchange_t *ex = client->data;
    h2o_req_t *req = ex->req;
    h2o_iovec_t te;
    (void)minor_version;

    h2o_timeout_unlink(&ex->head_entry);
    if (errstr != NULL && errstr != h2o_http1client_error_is_eos) {
        ex->client = NULL;
        send_upstream_error(ex, errstr, 0);
        return NULL;
    }
    if (status == 101) {
        h2o_iovec_t proto = gw_proxy_find_header(headers, num_headers, "sec-websocket-protocol");
        h2o_socket_t *sock;
        ex->client = NULL;
        ex->responded = 1;
        if (!ex->is_upgrade) {
            gw_send_error(req, GW_HTTP_BAD_GATEWAY, "127.0.0.1:%u switched protocols on a request that asked for none", ex->port);
            return NULL;
        }
        /* the socket is the tunnel's now; what follows the 101's head is the upstream's first frames */
        sock = h2o_http1client_steal_socket(client);
        h2o_buffer_consume(&sock->input, (size_t)rlen);
        gw_proxy_tunnel_start(ex->proxy, req, sock, proto.base != NULL ? h2o_strdup(&req->pool, proto.base, proto.len).base : NULL);
        return NULL;
    }
    ex->responded = 1;
    if (gw_proxy_response_head(req, status, msg, headers, num_headers) != 0) {
        ex->client = NULL;
        gw_send_error(req, GW_HTTP_BAD_GATEWAY, "127.0.0.1:%u answered with a malformed Content-Length", ex->port);
        return NULL;
    }
    if (errstr == h2o_http1client_error_is_eos) {
        ex->client = NULL;
        ex->eos = 1;
    }
    te = gw_proxy_find_header(headers, num_headers, "transfer-encoding");
    ex->chunked = te.base != NULL && h2o_memis(te.base, te.len, H2O_STRLIT("chunked"));
    gw_add_common_headers(req);
    if (!ex->eos) {
        /* an empty first chunk: the head leaves now, not with the first bytes of a body that may take its time */
        gw_event_t *ev = gw_event_from_bytes("", 0);
        ev->in_log = 1;
        h2o_linklist_insert(&ex->queue, &ev->link);
    }
    ex->started = 1;
    h2o_mem_addref_shared(ex); /* the writer's, released by body_close */
    gw_stream_start(req, &ex->super, ex->proxy->host->config->max_reader_batch_bytes);
    return ex->eos ? NULL : on_body;
}

/*
 * The head's guard. h2o's client sends the request once on_connect returns and starts reading the
 * head once it is sent, in callbacks of its own on the socket; the guard wraps them (its read
 * callback as the pause above keeps it) and fails an answer whose head passes MAX_HEAD_BYTES, with
 * 502, at the read that passes it. The socket's `data` is h2o's client, whose `data` is the exchange.
 */
static exchange_t *exchange_of(h2o_socket_t *sock)
{
    return ((h2o_http1client_t *)sock->data)->data;
}

static void on_guarded_head_read(h2o_socket_t *sock, const char *err)
{
    exchange_t *ex = exchange_of(sock);

    if (err == NULL && sock->input->size > MAX_HEAD_BYTES) {
        h2o_timeout_unlink(&ex->head_entry);
        stop_client(ex);
        ex->responded = 1;
        gw_send_error(ex->req, GW_HTTP_BAD_GATEWAY, "127.0.0.1:%u: the answer's head is over %u bytes", ex->port, MAX_HEAD_BYTES);
        return;
    }
    /* once the head is whole h2o reads the body with a callback of its own: the guard is gone */
    ex->head_reader(sock, err);
}

static void guard_head(exchange_t *ex, h2o_socket_t *sock);

static void on_guarded_request_sent(h2o_socket_t *sock, const char *err)
{
    exchange_t *ex = exchange_of(sock);
    h2o_socket_cb writer = ex->head_writer;

    ex->head_writer = NULL;
    writer(sock, err);
    /* on an error h2o has closed the client, and the socket with it */
    if (err == NULL && ex->client != NULL)
        guard_head(ex, sock);
}

static void guard_head(exchange_t *ex, h2o_socket_t *sock)
{
    if (sock->_cb.read != NULL) {
        ex->head_reader = sock->_cb.read;
        sock->_cb.read = on_guarded_head_read;
    } else if (sock->_cb.write != NULL) {
        ex->head_writer = sock->_cb.write;
        sock->_cb.write = on_guarded_request_sent;
    }
}

static void on_guard(h2o_timeout_entry_t *entry)
{
    exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, guard_entry, entry);

    if (ex->client != NULL && !ex->responded)
        guard_head(ex, ex->client->sock);
}

static h2o_http1client_head_cb on_connect(h2o_http1client_t *client, const char *errstr, h2o_iovec_t **reqbufs, size_t *reqbufcnt,
                                          int *method_is_head)
{
    exchange_t *ex = client->data;
    int rcvbuf = UPSTREAM_RCVBUF;

    if (errstr != NULL) {
        /* a refused loopback connect fails at once, inside h2o_http1client_connect: errno still says why */
        int saved_errno = errno;
        h2o_timeout_unlink(&ex->head_entry);
        ex->client = NULL;
        send_upstream_error(ex, errstr, saved_errno);
        return NULL;
    }
    setsockopt(h2o_socket_get_fd(client->sock), SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    gw_host_defer(ex->proxy->host, &ex->guard_entry);
    *reqbufs = ex->reqbufs;
    *reqbufcnt = ex->num_reqbufs;
    *method_is_head = h2o_memis(ex->req->method.base, ex->req->method.len, H2O_STRLIT("HEAD"));
    return on_head;
}

/*
 * h2o's client times each read, so an upstream that sends its head a byte at a time would hold the
 * exchange for ever: the head (connect, request, answer) must be whole within --proxy-timeout-ms.
 */
static void on_head_timeout(h2o_timeout_entry_t *entry)
{
    exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, head_entry, entry);

    if (ex->responded)
        return;
    stop_client(ex);
    send_upstream_error(ex, "I/O timeout", 0);
}

void gw_proxy_http_watch(gw_proxy_t *proxy)
{
    h2o_linklist_t *node, *next;

    for (node = proxy->exchanges.next; node != &proxy->exchanges; node = next) {
        exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, link, node);
        next = node->next;
        if ((ex->responded && !ex->started) || ex->eos || ex->failed || ex->writer_closed || !gw_req_peer_gone(ex->req))
            continue;
        if (!ex->responded) {
            /* nobody reads this answer: it only makes h2o close the connection and dispose the request */
            stop_client(ex);
            ex->responded = 1;
            ex->req->http1_is_persistent = 0;
            gw_send_error(ex->req, GW_HTTP_BAD_GATEWAY, "the client closed its connection");
        } else {
            cut_answer(ex);
        }
    }
}

void gw_proxy_http_start(gw_proxy_t *proxy, h2o_req_t *req, const gw_proxy_target_t *target, int is_upgrade)
{
    exchange_t *ex = h2o_mem_alloc_shared(&req->pool, sizeof(*ex), on_dispose);

    memset(ex, 0, sizeof(*ex));
    ex->super.ops = &body_ops;
    ex->proxy = proxy;
    ex->req = req;
    ex->port = target->port;
    ex->is_upgrade = is_upgrade;
    h2o_linklist_init_anchor(&ex->queue);
    h2o_linklist_insert(&proxy->exchanges, &ex->link);
    ex->head_entry.cb = on_head_timeout;
    ex->guard_entry.cb = on_guard;
    h2o_timeout_link(proxy->host->loop, &proxy->io_timeout, &ex->head_entry);
    ++proxy->num_active;
    /* h2o has buffered the whole body by now (in a temporary file above --body-mmap-threshold) */
    ex->reqbufs[ex->num_reqbufs++] = gw_proxy_request_head(req, target, proxy->host->config->access_token, is_upgrade);
    if (req->entity.len != 0)
        ex->reqbufs[ex->num_reqbufs++] = req->entity;
    h2o_http1client_connect(&ex->client, ex, &proxy->client_ctx, h2o_iovec_init(H2O_STRLIT("127.0.0.1")), target->port, 0,
                            on_connect);
}

void gw_proxy_http_shutdown(gw_proxy_t *proxy)
{
    h2o_linklist_t *node, *next;

    /* what is said here is sent from the loop, and an exchange leaves the list only with its request */
    for (node = proxy->exchanges.next; node != &proxy->exchanges; node = next) {
        exchange_t *ex = H2O_STRUCT_FROM_MEMBER(exchange_t, link, node);
        next = node->next;
        if (!ex->responded) {
            stop_client(ex);
            ex->responded = 1;
            gw_send_error(ex->req, GW_HTTP_KERNEL_UNAVAILABLE, "kgate is shutting down");
        } else if (ex->started && !ex->eos && !ex->failed && !ex->writer_closed) {
            cut_answer(ex);
        }
    }
}
