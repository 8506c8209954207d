/* The listening socket: accepting within a bound on connections, pausing instead of spinning when fds run out. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "app/listener.h"
#include "ksys/log.h"

/* Connections accepted per readiness callback at most; h2o calls back while the backlog is non-empty. */
#define ACCEPT_BURST 16

/* One accepted connection, known until h2o closes its socket. */
typedef struct st_gw_listener_conn_t {
    h2o_linklist_t link; /* in listener->conns, oldest first */
    h2o_socket_t *sock;
    gw_listener_t *listener;
    uint64_t head_since;  /* when a partial request head was first seen (0: none is being read) */
    void *http1;          /* sock->data as h2o_accept left it: the HTTP/1 connection, until an upgrade hands the socket on */
    unsigned evicted : 1; /* shut down to make room; its slot frees when h2o closes it */
} gw_listener_conn_t;

static void on_accept(h2o_socket_t *sock, const char *err);

static void start_reading(gw_listener_t *listener)
{
    if (listener->sock != NULL && !listener->reading) {
        listener->reading = 1;
        h2o_socket_read_start(listener->sock, on_accept);
    }
}

static void stop_reading(gw_listener_t *listener)
{
    if (listener->reading) {
        listener->reading = 0;
        h2o_socket_read_stop(listener->sock);
    }
}

static void on_conn_close(void *data)
{
    gw_listener_conn_t *conn = data;
    gw_listener_t *listener = conn->listener;

    h2o_linklist_unlink(&conn->link);
    --listener->num_conns;
    listener->num_evicting -= conn->evicted;
    free(conn);
    if (!h2o_timeout_is_linked(&listener->pause_entry))
        start_reading(listener);
}

/*
 * At the bound: makes room by shutting down the oldest connection that has not sent a byte (h2o
 * then closes it, and on_conn_close frees its slot). Returns 0 when one was found.
 */
static int evict_silent(gw_listener_t *listener)
{
    for (h2o_linklist_t *node = listener->conns.next; node != &listener->conns; node = node->next) {
        gw_listener_conn_t *conn = H2O_STRUCT_FROM_MEMBER(gw_listener_conn_t, link, node);
        if (!conn->evicted && conn->sock->bytes_read == 0 && conn->sock->input->size == 0) {
            conn->evicted = 1;
            ++listener->num_evicting;
            shutdown(h2o_socket_get_fd(conn->sock), SHUT_RDWR);
            return 0;
        }
    }
    return -1;
}

/*
 * True while h2o reads a request head: an HTTP/1 connection reading, with bytes that hold no empty
 * line yet. h2o keeps the request being handled at the front of the socket's input until its
 * answer is sent (and stops reading meanwhile), and the body follows the head there, so the scan
 * ends at the head of a request whose body is arriving. HTTP/2 connections keep no head there.
 */
static int reads_head(gw_listener_conn_t *conn)
{
    h2o_socket_t *sock = conn->sock;
    const char *p;
    size_t len = sock->input->size < H2O_MAX_REQLEN ? sock->input->size : H2O_MAX_REQLEN;

    /* a socket upgraded to a WebSocket or HTTP/2 belongs to another kind of connection (sock->data is no h2o_conn_t) */
    if (sock->data != conn->http1 || !h2o_socket_is_reading(sock) || len == 0)
        return 0;
    /* picohttpparser accepts bare LF line ends: a head ends at "\n\n" or "\n\r\n" */
    for (p = sock->input->bytes; (p = memchr(p, '\n', len - (size_t)(p - sock->input->bytes))) != NULL; ++p) {
        size_t rest = len - (size_t)(p - sock->input->bytes);
        if ((rest >= 2 && p[1] == '\n') || (rest >= 3 && p[1] == '\r' && p[2] == '\n'))
            return 0;
    }
    return 1;
}

static void on_sweep(h2o_timeout_entry_t *entry)
{
    gw_listener_t *listener = H2O_STRUCT_FROM_MEMBER(gw_listener_t, sweep_entry, entry);
    uint64_t now = h2o_now(listener->loop);

    for (h2o_linklist_t *node = listener->conns.next; node != &listener->conns; node = node->next) {
        gw_listener_conn_t *conn = H2O_STRUCT_FROM_MEMBER(gw_listener_conn_t, link, node);
        if (conn->evicted || !reads_head(conn)) {
            conn->head_since = 0;
        } else if (conn->head_since == 0) {
            conn->head_since = now;
        } else if (now - conn->head_since >= listener->header_timeout_ms) {
            /* h2o fails its next read and closes the connection (the slot frees in on_conn_close) */
            conn->evicted = 1;
            ++listener->num_evicting;
            shutdown(h2o_socket_get_fd(conn->sock), SHUT_RDWR);
        }
    }
    h2o_timeout_link(listener->loop, &listener->sweep_timeout, &listener->sweep_entry);
}

static void on_pause_end(h2o_timeout_entry_t *entry)
{
    gw_listener_t *listener = H2O_STRUCT_FROM_MEMBER(gw_listener_t, pause_entry, entry);
    start_reading(listener);
}

static void on_accept(h2o_socket_t *sock, const char *err)
{
    gw_listener_t *listener = sock->data;
    h2o_socket_t *client;
    int on = 1;

    if (err != NULL)
        return;
    for (int i = 0; i != ACCEPT_BURST; ++i) {
        /* a connection being evicted still holds its descriptor until h2o closes it, but no slot */
        if (listener->num_conns - listener->num_evicting >= listener->max_conns && evict_silent(listener) != 0) {
            /* every slot holds a talking client: wait for one to close rather than spin on a readable listener */
            stop_reading(listener);
            return;
        }
        if ((client = h2o_evloop_socket_accept(listener->sock)) == NULL) {
            if (errno == EMFILE || errno == ENFILE) {
                if (!listener->starved)
                    ksys_log_warn("out of file descriptors (%s) with %zu client connections: accepting pauses %d ms at a time",
                                  errno == EMFILE ? "EMFILE" : "ENFILE", listener->num_conns, GW_LISTENER_PAUSE_MS);
                listener->starved = 1;
                stop_reading(listener);
                h2o_timeout_link(listener->loop, &listener->pause_timeout, &listener->pause_entry);
            }
            return;
        }
        listener->starved = 0;
        /* small events must leave at once, not wait for Nagle and delayed ACKs (PLATFORM.md: +40 ms) */
        setsockopt(h2o_socket_get_fd(client), IPPROTO_TCP, TCP_NODELAY, &on, sizeof(on));
        gw_listener_conn_t *conn = wire_calloc(1, sizeof(*conn));
        conn->sock = client;
        conn->listener = listener;
        h2o_linklist_insert(&listener->conns, &conn->link);
        ++listener->num_conns;
        client->on_close.cb = on_conn_close;
        client->on_close.data = conn;
        h2o_accept(listener->accept_ctx, client);
        /* without TLS or a PROXY line h2o_accept makes the HTTP/1 connection at once, and closes nothing */
        conn->http1 = client->data;
    }
}

static int open_listener(const char *host, uint16_t port)
{
    struct sockaddr_storage ss;
    socklen_t sslen;
    int fd, on = 1;

    memset(&ss, 0, sizeof(ss));
    if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
        ((struct sockaddr_in *)&ss)->sin_port = htons(port);
        sslen = sizeof(struct sockaddr_in);
    } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons(port);
        sslen = sizeof(struct sockaddr_in6);
    } else if (strcmp(host, "localhost") == 0) {
        ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
        ((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ((struct sockaddr_in *)&ss)->sin_port = htons(port);
        sslen = sizeof(struct sockaddr_in);
    } else {
        ksys_log_error("--listen host must be a numeric IPv4/IPv6 address or localhost, got \"%s\"", host);
        return -1;
    }
    if ((fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) == -1 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on)) != 0 || bind(fd, (struct sockaddr *)&ss, sslen) != 0 ||
        listen(fd, SOMAXCONN) != 0) {
        ksys_log_error("cannot listen on %s:%u: %s", host, port, strerror(errno));
        if (fd != -1)
            close(fd);
        return -1;
    }
    return fd;
}

/* min(--max-connections, RLIMIT_NOFILE - --fd-reserve), at least 1. */
static size_t connection_bound(const gw_config_t *config)
{
    struct rlimit rl;
    size_t bound = config->max_connections;

    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        size_t usable = rl.rlim_cur > config->fd_reserve ? (size_t)(rl.rlim_cur - config->fd_reserve) : 1;
        if (usable < bound) {
            ksys_log_info("at most %zu client connections (RLIMIT_NOFILE %llu less --fd-reserve %u)", usable,
                          (unsigned long long)rl.rlim_cur, config->fd_reserve);
            bound = usable;
        }
    }
    return bound != 0 ? bound : 1;
}

int gw_listener_open(gw_listener_t *listener, const gw_config_t *config, h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx)
{
    return gw_listener_open_at(listener, config, config->listen_host, config->listen_port, loop, accept_ctx);
}

int gw_listener_open_at(gw_listener_t *listener, const gw_config_t *config, const char *host, uint16_t port, h2o_loop_t *loop,
                        h2o_accept_ctx_t *accept_ctx)
{
    int fd;

    memset(listener, 0, sizeof(*listener));
    h2o_linklist_init_anchor(&listener->conns);
    listener->loop = loop;
    listener->accept_ctx = accept_ctx;
    listener->max_conns = connection_bound(config);
    listener->header_timeout_ms = config->header_timeout_ms;
    h2o_timeout_init(loop, &listener->pause_timeout, GW_LISTENER_PAUSE_MS);
    listener->pause_entry.cb = on_pause_end;
    h2o_timeout_init(loop, &listener->sweep_timeout, GW_LISTENER_SWEEP_MS);
    listener->sweep_entry.cb = on_sweep;
    h2o_timeout_link(loop, &listener->sweep_timeout, &listener->sweep_entry);
    if ((fd = open_listener(host, port)) == -1)
        return -1;
    listener->sock = h2o_evloop_socket_create(loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    listener->sock->data = listener;
    start_reading(listener);
    return 0;
}

uint16_t gw_listener_port(const gw_listener_t *listener)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);

    if (listener->sock == NULL || getsockname(h2o_socket_get_fd(listener->sock), (struct sockaddr *)&ss, &len) != 0)
        return 0;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port : ((struct sockaddr_in *)&ss)->sin_port);
}

void gw_listener_close(gw_listener_t *listener)
{
    if (listener->sock == NULL)
        return;
    stop_reading(listener);
    if (h2o_timeout_is_linked(&listener->pause_entry))
        h2o_timeout_unlink(&listener->pause_entry);
    h2o_timeout_unlink(&listener->sweep_entry);
    h2o_socket_close(listener->sock);
    listener->sock = NULL;
}

size_t gw_listener_shutdown_conns(gw_listener_t *listener)
{
    for (h2o_linklist_t *node = listener->conns.next; node != &listener->conns; node = node->next)
        shutdown(h2o_socket_get_fd(H2O_STRUCT_FROM_MEMBER(gw_listener_conn_t, link, node)->sock), SHUT_RDWR);
    return listener->num_conns;
}

size_t gw_listener_num_conns(const gw_listener_t *listener)
{
    return listener->num_conns;
}

void gw_listener_dispose(gw_listener_t *listener, h2o_loop_t *loop)
{
    gw_listener_close(listener);
    /* connections still known are h2o's: forget them without touching their sockets */
    while (!h2o_linklist_is_empty(&listener->conns)) {
        gw_listener_conn_t *conn = H2O_STRUCT_FROM_MEMBER(gw_listener_conn_t, link, listener->conns.next);
        conn->sock->on_close.cb = NULL;
        h2o_linklist_unlink(&conn->link);
        free(conn);
    }
    h2o_timeout_unlink(&listener->sweep_entry);
    h2o_timeout_dispose(loop, &listener->sweep_timeout);
    h2o_timeout_dispose(loop, &listener->pause_timeout);
}
