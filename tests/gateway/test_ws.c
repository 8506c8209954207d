/* tests/gateway/test_ws.c: the WebSocket core against a real h2o loop and a real client: frames, pings, close codes, bounds. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "core/errors.h"
#include "core/ws.h"
#include "gw_test.h"
#include "support/ws_client.h"

#define PING_MS 150
#define MAX_QUEUED (1u << 20)
#define MAX_MESSAGE (256u << 10)
#define WAIT_MS 5000
/* /burst's grace over the queue bound: shorter than three silent pings, so its cut (1008) comes before theirs (1001) */
#define OVER_BOUND_MS 200
/* /burst's queue bound: above what loopback sockets' buffers take from a peer that does not read */
#define BURST_QUEUED (8u << 20)

/* One in-process server: an h2o loop on its own thread, a handler that upgrades by path. */
static struct {
    gw_config_t config;
    gw_host_t host;
    h2o_globalconf_t globalconf;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    h2o_socket_t *listener;
    unsigned short port;
    pthread_t thread;
    volatile int stop;
    int parked;     /* the server's thread has taken everything down (read with __atomic) */
    int close_code; /* last on_close code, -1 before (read with __atomic) */
    int sent;       /* /flood: messages queued before the cut-off */
} srv;

static void on_echo_message(gw_ws_t *ws, int is_binary, const uint8_t *data, size_t len)
{
    if (!is_binary && len == 5 && memcmp(data, "close", 5) == 0) {
        gw_ws_close(ws, 4001, "bye");
        return;
    }
    if (!is_binary && len == 9 && memcmp(data, "last word", 9) == 0) {
        /* a message and the close right after it: wslay would send the close frame first */
        gw_ws_send(ws, 0, "over", 4);
        gw_ws_close(ws, 4002, "out");
        return;
    }
    gw_ws_send(ws, is_binary, data, len);
}

static void on_flood_message(gw_ws_t *ws, int is_binary, const uint8_t *data, size_t len)
{
    static char chunk[64 << 10];
    (void)is_binary, (void)data, (void)len;
    /* a client that never reads: the queue must end at its bound, with the peer cut off */
    for (int i = 0; i != 1000; ++i) {
        if (gw_ws_send(ws, 1, chunk, sizeof(chunk)) != 0)
            break;
        __atomic_add_fetch(&srv.sent, 1, __ATOMIC_SEQ_CST);
    }
}

static void on_burst_message(gw_ws_t *ws, int is_binary, const uint8_t *data, size_t len)
{
    static char chunk[64 << 10];
    (void)is_binary, (void)data, (void)len;
    /* three times the queue's bound, within its hard bound (four times), then quiet: what the sockets' buffers take of it
     * leaves the queue past its bound, and only the grace (OVER_BOUND_MS) can cut the peer off */
    for (int i = 0; i != 1000 && gw_ws_queued_bytes(ws) + sizeof(chunk) <= 3 * BURST_QUEUED; ++i) {
        if (gw_ws_send(ws, 1, chunk, sizeof(chunk)) != 0)
            break;
        __atomic_add_fetch(&srv.sent, 1, __ATOMIC_SEQ_CST);
    }
}

static void on_close(gw_ws_t *ws, uint16_t code)
{
    (void)ws;
    __atomic_store_n(&srv.close_code, code, __ATOMIC_SEQ_CST);
}

static int on_req(h2o_handler_t *self, h2o_req_t *req)
{
    static const gw_ws_callbacks_t echo = {on_echo_message, on_close}, flood = {on_flood_message, on_close},
                                   burst = {on_burst_message, on_close};
    gw_ws_limits_t limits = {MAX_MESSAGE, MAX_QUEUED, 0, 0, NULL};
    int is_flood = h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/flood"));
    int is_burst = h2o_memis(req->path_normalized.base, req->path_normalized.len, H2O_STRLIT("/burst"));
    (void)self;

    if (is_burst)
        limits = (gw_ws_limits_t){MAX_MESSAGE, BURST_QUEUED, OVER_BOUND_MS, 0, NULL}; /* a relay's socket, as a kernel's */
    gw_ws_upgrade(req, &srv.host, gw_ws_offers_protocol(req, "v1.test") ? "v1.test" : NULL, &limits,
                  is_burst   ? &burst
                  : is_flood ? &flood
                             : &echo,
                  NULL);
    return 0;
}

static void on_accept(h2o_socket_t *listener, const char *err)
{
    h2o_socket_t *sock;
    if (err == NULL && (sock = h2o_evloop_socket_accept(listener)) != NULL)
        h2o_accept(&srv.accept_ctx, sock);
}

/*
 * The server's thread runs the loop, then takes everything down itself and parks: h2o 2.2.5 keeps
 * freed memory in thread-local free lists, which an exited thread would leave unreachable (and
 * LeakSanitizer would report).
 */
static void *serve(void *arg)
{
    (void)arg;
    while (!srv.stop)
        h2o_evloop_run(srv.ctx.loop, 20);
    /* the clients are gone: let h2o notice and release their connections, then take it all down */
    h2o_socket_close(srv.listener);
    for (int i = 0; i != 20; ++i)
        h2o_evloop_run(srv.ctx.loop, 10);
    gw_host_dispose(&srv.host);
    h2o_context_dispose(&srv.ctx);
    free(srv.ctx.queue); /* h2o 2.2.5 leaves it to evloop users */
    h2o_evloop_destroy(srv.ctx.loop);
    h2o_config_dispose(&srv.globalconf);
    gw_config_dispose(&srv.config);
    __atomic_store_n(&srv.parked, 1, __ATOMIC_SEQ_CST);
    for (;;)
        pause();
    return NULL;
}

static void start(void)
{
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sin);
    int fd, on = 1;

    gw_test_init();
    memset(&srv, 0, sizeof(srv));
    srv.close_code = -1;
    gw_config_init(&srv.config);
    srv.config.ping_interval_ms = PING_MS;
    h2o_config_init(&srv.globalconf);
    h2o_pathconf_t *pathconf =
        h2o_config_register_path(h2o_config_register_host(&srv.globalconf, h2o_iovec_init(H2O_STRLIT("default")), 65535), "/", 0);
    h2o_create_handler(pathconf, sizeof(h2o_handler_t))->on_req = on_req;
    h2o_context_init(&srv.ctx, h2o_evloop_create(), &srv.globalconf);
    srv.accept_ctx.ctx = &srv.ctx;
    srv.accept_ctx.hosts = srv.globalconf.hosts;
    gw_host_init(&srv.host, srv.ctx.loop, &srv.config);
    fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    cr_assert_eq(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    cr_assert_eq(listen(fd, 16), 0);
    getsockname(fd, (struct sockaddr *)&sin, &len);
    srv.port = ntohs(sin.sin_port);
    srv.listener = h2o_evloop_socket_create(srv.ctx.loop, fd, H2O_SOCKET_FLAG_DONT_READ);
    h2o_socket_read_start(srv.listener, on_accept);
    cr_assert_eq(pthread_create(&srv.thread, NULL, serve, NULL), 0);
}

static void stop(void)
{
    srv.stop = 1;
    while (!__atomic_load_n(&srv.parked, __ATOMIC_SEQ_CST))
        usleep(1000);
}

TestSuite(ws, .init = start, .fini = stop, .timeout = 30);

static int wait_close_code(int64_t deadline)
{
    int code;
    while ((code = __atomic_load_n(&srv.close_code, __ATOMIC_SEQ_CST)) == -1 && wsc_now_ms() < deadline)
        usleep(5000);
    return code;
}

static void connect_ok(wsc_t *ws, const char *path, const char *const *headers)
{
    int rc = wsc_connect(ws, srv.port, path, headers, wsc_now_ms() + WAIT_MS);
    cr_assert_eq(rc, 0, "upgrade of %s failed: HTTP %d, %s", path, ws->status, ws->error);
}

Test(ws, text_and_binary_round_trip_with_the_offered_subprotocol)
{
    const char *headers[] = {"Sec-WebSocket-Protocol: chat, v1.test", NULL};
    static const uint8_t bin[] = {0, 1, 2, 0xff, 0};
    char proto[64];
    wsc_msg_t m;
    wsc_t ws;

    connect_ok(&ws, "/echo", headers);
    cr_assert_str_eq(wsc_header(&ws, "sec-websocket-protocol", proto, sizeof(proto)), "v1.test");
    cr_assert_eq(wsc_send(&ws, WSC_TEXT, "héllo", strlen("héllo")), 0);
    cr_assert_eq(wsc_recv(&ws, wsc_now_ms() + WAIT_MS, &m), 0, "%s", ws.error);
    cr_assert_eq(m.opcode, WSC_TEXT);
    cr_assert_str_eq((char *)m.data, "héllo");
    free(m.data);
    cr_assert_eq(wsc_send(&ws, WSC_BINARY, bin, sizeof(bin)), 0);
    cr_assert_eq(wsc_recv(&ws, wsc_now_ms() + WAIT_MS, &m), 0, "%s", ws.error);
    cr_assert_eq(m.opcode, WSC_BINARY);
    cr_assert_eq(m.len, sizeof(bin));
    cr_assert_arr_eq(m.data, bin, sizeof(bin));
    free(m.data);
    /* without the offer, no subprotocol is claimed */
    wsc_close(&ws);
    connect_ok(&ws, "/echo", NULL);
    cr_assert_null(wsc_header(&ws, "sec-websocket-protocol", proto, sizeof(proto)));
    wsc_close(&ws);
}

Test(ws, the_client_closing_is_reported_with_its_code)
{
    static const uint8_t close_1000[] = {0x03, 0xe8};
    wsc_msg_t m;
    wsc_t ws;

    connect_ok(&ws, "/echo", NULL);
    cr_assert_eq(wsc_send(&ws, WSC_CLOSE, close_1000, sizeof(close_1000)), 0);
    cr_assert_eq(wsc_recv(&ws, wsc_now_ms() + WAIT_MS, &m), 0, "the server answers the close frame: %s", ws.error);
    cr_assert_eq(m.opcode, WSC_CLOSE);
    free(m.data);
    cr_assert_eq(wait_close_code(wsc_now_ms() + WAIT_MS), 1000);
    wsc_close(&ws);
}

Test(ws, the_server_closing_sends_its_code_and_reason)
{
    wsc_msg_t m;
    wsc_t ws;

    connect_ok(&ws, "/echo", NULL);
    cr_assert_eq(wsc_send(&ws, WSC_TEXT, "close", 5), 0);
    cr_assert_eq(wsc_recv(&ws, wsc_now_ms() + WAIT_MS, &m), 0, "%s", ws.error);
    cr_assert_eq(m.opcode, WSC_CLOSE);
    cr_assert_eq(m.close_code, 4001);
    cr_assert(m.len == 5 && memcmp(m.data + 2, "bye", 3) == 0, "close reason: %.*s", (int)m.len, m.data);
    free(m.data);
    /* this client never answers the close frame: the server ends it after a ping interval anyway */
    cr_assert_eq(wait_close_code(wsc_now_ms() + WAIT_MS), 4001);
    wsc_close(&ws);
}

Test(ws, messages_queued_before_the_close_arrive_before_it)
{
    wsc_msg_t m;
    wsc_t ws;

    connect_ok(&ws, "/echo", NULL);
    cr_assert_eq(wsc_send(&ws, WSC_TEXT, "last word", 9), 0);
    cr_assert_eq(wsc_recv(&ws, wsc_now_ms() + WAIT_MS, &m), 0, "%s", ws.error);
    cr_assert(m.opcode == WSC_TEXT && m.len == 4 && memcmp(m.data, "over", 4) == 0, "opcode %d: %.*s", m.opcode, (int)m.len,
              m.data);
    free(m.data);
    cr_assert_eq(wsc_recv(&ws, wsc_now_ms() + WAIT_MS, &m), 0, "%s", ws.error);
    cr_assert_eq(m.opcode, WSC_CLOSE);
    cr_assert_eq(m.close_code, 4002);
    free(m.data);
    wsc_close(&ws);
    cr_assert_eq(wait_close_code(wsc_now_ms() + WAIT_MS), 4002);
}

Test(ws, a_silent_peer_is_closed_after_three_unanswered_pings)
{
    wsc_msg_t m;
    wsc_t ws;
    int64_t t0 = wsc_now_ms();

    connect_ok(&ws, "/echo", NULL);
    /* not reading means not answering the pings */
    cr_assert_eq(wait_close_code(t0 + 10 * PING_MS + WAIT_MS), GW_WS_GOING_AWAY);
    cr_assert_geq(wsc_now_ms() - t0, 3 * PING_MS, "closed before three ping intervals passed");
    /* what the client then reads: pings, then the close frame */
    int got_close = 0;
    while (!got_close && wsc_recv(&ws, wsc_now_ms() + WAIT_MS, &m) == 0) {
        got_close = m.opcode == WSC_CLOSE && m.close_code == GW_WS_GOING_AWAY;
        free(m.data);
    }
    cr_assert(got_close, "no close frame 1001 reached the client");
    wsc_close(&ws);
}

Test(ws, a_peer_that_answers_pings_stays)
{
    wsc_msg_t m;
    wsc_t ws;

    connect_ok(&ws, "/echo", NULL);
    /* wsc_recv answers pings while it waits: 6 intervals of quiet must not close anything */
    cr_assert_neq(wsc_recv(&ws, wsc_now_ms() + 6 * PING_MS, &m), 0, "no message was expected");
    cr_assert_eq(__atomic_load_n(&srv.close_code, __ATOMIC_SEQ_CST), -1, "the server closed a peer that answers pings");
    cr_assert_eq(wsc_send(&ws, WSC_TEXT, "still here", 10), 0);
    cr_assert_eq(wsc_recv(&ws, wsc_now_ms() + WAIT_MS, &m), 0, "%s", ws.error);
    cr_assert_str_eq((char *)m.data, "still here");
    free(m.data);
    wsc_close(&ws);
}

Test(ws, a_peer_that_stops_reading_is_cut_off_at_the_queue_bound)
{
    wsc_t ws;

    connect_ok(&ws, "/flood", NULL);
    cr_assert_eq(wsc_send(&ws, WSC_TEXT, "go", 2), 0);
    cr_assert_eq(wait_close_code(wsc_now_ms() + WAIT_MS), GW_WS_POLICY_VIOLATION);
    int sent = __atomic_load_n(&srv.sent, __ATOMIC_SEQ_CST);
    /* 64 KiB messages: the queue bound (1 MiB) plus what the kernel's socket buffers took */
    cr_assert_lt(sent, 1000, "every message was queued: nothing bounded the queue");
    cr_assert_gt(sent, 0);
    wsc_close(&ws);
}

Test(ws, a_peer_that_stops_reading_past_the_bound_is_cut_off_after_the_grace_though_nothing_more_is_sent)
{
    wsc_t ws;
    int64_t t0;

    /* no send follows the burst: before, only the silence of three pings (1001) ended such a peer, past the grace */
    connect_ok(&ws, "/burst", NULL);
    t0 = wsc_now_ms();
    cr_assert_eq(wsc_send(&ws, WSC_TEXT, "go", 2), 0);
    cr_assert_eq(wait_close_code(t0 + WAIT_MS), GW_WS_POLICY_VIOLATION, "not cut off as a peer that stopped reading");
    cr_assert_geq(wsc_now_ms() - t0, OVER_BOUND_MS, "cut off before its grace over the bound");
    cr_assert_gt(__atomic_load_n(&srv.sent, __ATOMIC_SEQ_CST), 0);
    wsc_close(&ws);
}

Test(ws, a_peer_that_pings_and_never_reads_gets_pongs_coalesced_to_the_newest_ping)
{
    enum { PINGS = 200000, BATCH = 5000, PAYLOAD = 125 };
    uint8_t *frames = malloc((size_t)BATCH * (6 + PAYLOAD));
    uint32_t last = 0;
    size_t pongs = 0;
    wsc_msg_t m;
    wsc_t ws;

    connect_ok(&ws, "/echo", NULL);
    /* 26 MB of pings, nothing read meanwhile: one pong per ping would be 25 MB queued for this client */
    for (uint32_t seq = 0; seq != PINGS; seq += BATCH)
        cr_assert_eq(wsc_write(&ws, frames, wsc_ping_frames(frames, BATCH, seq, PAYLOAD)), 0, "%s", ws.error);
    while (last != PINGS - 1 && wsc_recv(&ws, wsc_now_ms() + WAIT_MS, &m) == 0) {
        if (m.opcode == WSC_PONG) {
            ++pongs;
            cr_assert_eq(m.len, PAYLOAD, "a pong carries its ping's payload");
            cr_assert_geq(wsc_pong_seq(&m), last, "pongs answer newer pings only");
            last = wsc_pong_seq(&m);
        }
        free(m.data);
    }
    cr_assert_eq(last, PINGS - 1, "the newest ping was not answered (last pong: %u)", last);
    /* what the sockets' buffers took while the client did not read, and one pong for the pings after that */
    cr_assert_lt(pongs, PINGS / 2, "%zu pongs for %d pings: every ping was answered, queued while the client did not read", pongs,
                 PINGS);
    cr_assert_eq(__atomic_load_n(&srv.close_code, __ATOMIC_SEQ_CST), -1, "the server closed a client that pings");
    free(frames);
    wsc_close(&ws);
}

Test(ws, a_message_over_the_size_bound_closes_with_1009)
{
    size_t len = MAX_MESSAGE + 1;
    char *big = calloc(1, len);
    wsc_msg_t m;
    wsc_t ws;

    connect_ok(&ws, "/echo", NULL);
    cr_assert_eq(wsc_send(&ws, WSC_BINARY, big, len), 0);
    cr_assert_eq(wsc_recv(&ws, wsc_now_ms() + WAIT_MS, &m), 0, "%s", ws.error);
    cr_assert_eq(m.opcode, WSC_CLOSE);
    cr_assert_eq(m.close_code, GW_WS_TOO_BIG);
    free(m.data);
    free(big);
    wsc_close(&ws);
}

Test(ws, a_plain_request_to_a_websocket_route_is_refused)
{
    wsc_t ws;
    /* a handshake without the key is not one: 400, and the connection stays HTTP */
    const char *headers[] = {NULL};
    (void)headers;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(srv.port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char buf[1024] = {0};
    cr_assert_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    const char *req = "GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    cr_assert_eq(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    cr_assert_gt(n, 0);
    cr_assert(strncmp(buf, "HTTP/1.1 400", 12) == 0, "%s", buf);
    cr_assert_not_null(strstr(buf, "INVALID_REQUEST_BODY"), "%s", buf);
    close(fd);
    (void)ws;
}
