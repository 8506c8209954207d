/* tests/gateway/test_ws_client.c: the client end of a WebSocket (core/ws_client.h) on a real h2o loop against a raw peer. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "core/errors.h"
#include "core/ws_client.h"
#include "gw_test.h"

#define PING_MS 150
#define WAIT_MS 5000

/* The loop runs on the test's thread; the peer is the other end of a socketpair, spoken to with raw frames. */
static struct {
    gw_config_t config;
    gw_host_t host;
    h2o_evloop_t *loop;
    int peer;
    gw_ws_client_t *wc;
    int close_code; /* -1 until on_close */
    char messages[8][4096];
    size_t lens[8];
    int binary[8];
    size_t num_messages;
} t;

static void on_message(gw_ws_client_t *wc, int is_binary, const uint8_t *data, size_t len)
{
    (void)wc;
    cr_assert_lt(t.num_messages, 8);
    cr_assert_lt(len, sizeof(t.messages[0]));
    memcpy(t.messages[t.num_messages], data, len);
    t.lens[t.num_messages] = len;
    t.binary[t.num_messages++] = is_binary;
}

static void on_close(gw_ws_client_t *wc, uint16_t code)
{
    (void)wc;
    t.close_code = code;
    t.wc = NULL;
}

static void setup(void)
{
    gw_test_init();
    signal(SIGPIPE, SIG_IGN); /* as kgate: a write to a peer that has gone is an error, not a signal */
    memset(&t, 0, sizeof(t));
    t.close_code = -1;
    gw_config_init(&t.config);
    t.config.ping_interval_ms = PING_MS;
    t.loop = h2o_evloop_create();
    gw_host_init(&t.host, t.loop, &t.config);
}

/* Starts a client on one end of a socketpair; `early` (may be NULL) is already in its input, as after a 101. */
static void start(const gw_ws_limits_t *limits, const void *early, size_t early_len)
{
    static const gw_ws_client_callbacks_t callbacks = {on_message, on_close};
    int fds[2];
    h2o_socket_t *sock;

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    t.peer = fds[1];
    sock = h2o_evloop_socket_create(t.loop, fds[0], 0);
    if (early != NULL) {
        h2o_iovec_t room = h2o_buffer_reserve(&sock->input, early_len);
        memcpy(room.base, early, early_len);
        sock->input->size += early_len;
    }
    t.wc = gw_ws_client_start(sock, &t.host, limits, &callbacks, NULL);
}

/* Runs the loop until `*flag` changes from `from` (or the wait ends). */
static void run_until_changed(const int *flag, int from)
{
    for (int64_t deadline = gw_now_ms() + WAIT_MS; *flag == from && gw_now_ms() < deadline;)
        h2o_evloop_run(t.loop, 10);
}

static void run_ms(int ms)
{
    for (int64_t deadline = gw_now_ms() + ms; gw_now_ms() < deadline;)
        h2o_evloop_run(t.loop, 10);
}

static void teardown(void)
{
    if (t.wc != NULL) {
        close(t.peer);
        t.peer = -1;
        run_until_changed(&t.close_code, -1);
    }
    cr_assert_null(t.wc, "the client never closed");
    if (t.peer >= 0)
        close(t.peer);
    for (int i = 0; i != 5; ++i)
        h2o_evloop_run(t.loop, 1);
    gw_host_dispose(&t.host);
    h2o_evloop_destroy(t.loop);
    gw_config_dispose(&t.config);
}

TestSuite(ws_client, .init = setup, .fini = teardown, .timeout = 30);

/* A server frame: unmasked. Returns its length in `out`. */
static size_t frame(uint8_t *out, int opcode, const void *payload, size_t len)
{
    size_t h = 0;

    out[h++] = (uint8_t)(0x80 | opcode);
    if (len < 126) {
        out[h++] = (uint8_t)len;
    } else {
        out[h++] = 126;
        out[h++] = (uint8_t)(len >> 8);
        out[h++] = (uint8_t)len;
    }
    memcpy(out + h, payload, len);
    return h + len;
}

static void peer_send(int opcode, const void *payload, size_t len)
{
    uint8_t buf[8192];
    size_t n = frame(buf, opcode, payload, len);
    cr_assert_eq(write(t.peer, buf, n), (ssize_t)n);
}

/* Reads one client frame at the peer (running the loop meanwhile); it must be masked. Returns the opcode, payload unmasked. */
static int peer_recv(uint8_t *payload, size_t *len)
{
    uint8_t buf[8192];
    size_t have = 0, h = 2, plen = 0;

    for (int64_t deadline = gw_now_ms() + WAIT_MS;;) {
        struct pollfd pfd = {t.peer, POLLIN, 0};
        ssize_t n;
        if (have >= 2) {
            plen = buf[1] & 0x7f;
            h = 2 + (plen == 126 ? 2 : 0) + 4;
            if (plen == 126 && have >= 4)
                plen = (size_t)buf[2] << 8 | buf[3];
            if (have >= h && have >= h + plen)
                break;
        }
        cr_assert_lt(gw_now_ms(), deadline, "no frame reached the peer");
        h2o_evloop_run(t.loop, 5);
        if (poll(&pfd, 1, 0) == 1 && (n = read(t.peer, buf + have, sizeof(buf) - have)) > 0)
            have += (size_t)n;
    }
    cr_assert(buf[1] & 0x80, "a client frame was not masked");
    for (size_t i = 0; i != plen; ++i)
        payload[i] = buf[h + i] ^ buf[h - 4 + i % 4];
    *len = plen;
    return buf[0] & 0x0f;
}

Test(ws_client, messages_cross_both_ways_masked_upstream)
{
    uint8_t got[8192];
    size_t len;

    start(NULL, NULL, 0);
    peer_send(0x1, "hello", 5);
    peer_send(0x2, "\x00\x01\x02", 3);
    for (int64_t deadline = gw_now_ms() + WAIT_MS; t.num_messages < 2 && gw_now_ms() < deadline;)
        h2o_evloop_run(t.loop, 10);
    cr_assert_eq(t.num_messages, 2);
    cr_assert(t.lens[0] == 5 && memcmp(t.messages[0], "hello", 5) == 0 && !t.binary[0]);
    cr_assert(t.lens[1] == 3 && memcmp(t.messages[1], "\x00\x01\x02", 3) == 0 && t.binary[1]);
    cr_assert_eq(gw_ws_client_send(t.wc, 1, "abc", 3), 0);
    cr_assert_eq(peer_recv(got, &len), 0x2);
    cr_assert(len == 3 && memcmp(got, "abc", 3) == 0);
}

Test(ws_client, frames_that_came_with_the_handshake_are_read)
{
    uint8_t early[64];
    size_t n = frame(early, 0x1, "early", 5);

    start(NULL, early, n);
    for (int64_t deadline = gw_now_ms() + WAIT_MS; t.num_messages < 1 && gw_now_ms() < deadline;)
        h2o_evloop_run(t.loop, 10);
    cr_assert_eq(t.num_messages, 1);
    cr_assert(t.lens[0] == 5 && memcmp(t.messages[0], "early", 5) == 0);
}

Test(ws_client, the_peers_close_is_answered_and_reported)
{
    uint8_t got[8192];
    size_t len;

    start(NULL, NULL, 0);
    peer_send(0x8, "\x0f\xa1", 2); /* 4001 */
    cr_assert_eq(peer_recv(got, &len), 0x8);
    cr_assert(len >= 2 && got[0] == 0x0f && got[1] == 0xa1, "the close answer carries the code");
    run_until_changed(&t.close_code, -1);
    cr_assert_eq(t.close_code, 4001);
}

Test(ws_client, the_owners_close_waits_for_the_answer)
{
    uint8_t got[8192];
    size_t len;

    start(NULL, NULL, 0);
    gw_ws_client_close(t.wc, 1000, "bye");
    cr_assert_eq(gw_ws_client_send(t.wc, 0, "late", 4), GW_EWSCLOSED, "a closing client takes no more messages");
    cr_assert_eq(peer_recv(got, &len), 0x8);
    cr_assert(len == 5 && got[0] == 0x03 && got[1] == 0xe8 && memcmp(got + 2, "bye", 3) == 0);
    cr_assert_eq(t.close_code, -1, "closed before the peer answered");
    peer_send(0x8, "\x03\xe8", 2);
    run_until_changed(&t.close_code, -1);
    cr_assert_eq(t.close_code, 1000);
}

Test(ws_client, a_peer_that_never_answers_the_close_is_dropped_after_the_grace)
{
    uint8_t got[8192];
    size_t len;
    int64_t t0;

    start(NULL, NULL, 0);
    gw_ws_client_close(t.wc, 1001, NULL);
    cr_assert_eq(peer_recv(got, &len), 0x8);
    t0 = gw_now_ms();
    run_until_changed(&t.close_code, -1);
    cr_assert_eq(t.close_code, 1001);
    cr_assert_geq(gw_now_ms() - t0, PING_MS / 2, "no grace was given");
}

Test(ws_client, a_message_over_the_bound_closes_with_1009)
{
    gw_ws_limits_t limits = {1024, 0, 0, 0, NULL};
    static char big[2000];
    uint8_t got[8192];
    size_t len;

    start(&limits, NULL, 0);
    peer_send(0x2, big, sizeof(big));
    cr_assert_eq(peer_recv(got, &len), 0x8);
    cr_assert(len >= 2 && (got[0] << 8 | got[1]) == 1009, "close code %d", len >= 2 ? got[0] << 8 | got[1] : -1);
    /* wslay stops reading at once: the connection ends without waiting for the peer's answer */
    run_until_changed(&t.close_code, -1);
    cr_assert_eq(t.close_code, 1009);
    cr_assert_eq(t.num_messages, 0);
}

Test(ws_client, a_peer_that_stops_reading_is_cut_off_at_the_bound)
{
    gw_ws_limits_t limits = {0, 256u << 10, 0, 0, NULL};
    static char chunk[32u << 10];
    int ret = 0, sent = 0;

    start(&limits, NULL, 0);
    /* the peer reads nothing: the socket's buffers fill, then the queue, then the bound cuts it off */
    for (int i = 0; i != 10000 && ret == 0; ++i) {
        if ((ret = gw_ws_client_send(t.wc, 1, chunk, sizeof(chunk))) == 0)
            ++sent;
        h2o_evloop_run(t.loop, 0);
    }
    cr_assert_eq(ret, GW_EWSFULL, "after %d messages", sent);
    run_until_changed(&t.close_code, -1);
    cr_assert_eq(t.close_code, GW_WS_POLICY_VIOLATION);
}

Test(ws_client, a_peer_that_vanishes_is_reported_abnormal)
{
    start(NULL, NULL, 0);
    run_ms(20);
    close(t.peer);
    t.peer = -1;
    run_until_changed(&t.close_code, -1);
    cr_assert_eq(t.close_code, GW_WS_ABNORMAL);
}
