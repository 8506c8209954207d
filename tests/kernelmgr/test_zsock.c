/* tests/kernelmgr/test_zsock.c: kgate's own ZMTP connection (kernelmgr/src/zsock.c) against real libzmq peers.
 * Over 600 lines on purpose: one fixture (loop, libzmq peers, recorder) and its helpers serve every test. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>
#include <criterion/criterion.h>
#include "support/base.h"
#include "wire/alloc.h"
#include "wire/zmtp.h"
#include "ksys/errors.h"
#include "ksys/util.h"
#include "poll_loop.h"
#include "zsock.h"

#define MIB ((size_t)1024 * 1024)

/* What one kmgr_zsock_recv returned: its code and, for a message, copies of its first frames. */
typedef struct st_zt_got_t {
    int r;
    size_t nframes;
    wire_frame_t frames[4];
} zt_got_t;

typedef struct st_zt_t {
    poll_loop_t *loop;
    kmgr_loop_ops_t ops; /* poll_loop_ops, counting the waits for a writable socket */
    int n_writable_waits;
    void *ctx;
    void *peers[4]; /* libzmq sockets the fixture closes if the test did not */
    kmgr_zsock_t z;
    int manual; /* the test calls kmgr_zsock_recv itself */
    zt_got_t got[16];
    size_t ngot;
    int n_lost; /* recv returned 0 and left the connection WAITING (lost, or refused by us) */
    /* a message over the cap as it passed: its start (frames before the one over the cap, that frame's size), its pieces */
    int over_starts;
    size_t over_nframes, over_size, over_piece_bytes;
    char dir[256]; /* a temp dir for ipc endpoints, "" if none */
    uint8_t *big_out, *big_in;
} zt_t;

static zt_t zt;

static void counting_notify_writable(void *loop, void *handle, void (*cb)(void *arg), void *arg)
{
    ++zt.n_writable_waits;
    poll_loop_ops.notify_writable(loop, handle, cb, arg);
}

static void setup(void)
{
    memset(&zt, 0, sizeof(zt));
    wire_global_init();
    zt.loop = poll_loop_create();
    zt.ops = poll_loop_ops;
    zt.ops.notify_writable = counting_notify_writable;
    zt.ctx = zmq_ctx_new();
    cr_assert_not_null(zt.ctx);
}

static void teardown(void)
{
    kmgr_zsock_close(&zt.z);
    for (size_t i = 0; i != sizeof(zt.peers) / sizeof(zt.peers[0]); ++i)
        if (zt.peers[i] != NULL)
            zmq_close(zt.peers[i]);
    zmq_ctx_term(zt.ctx);
    poll_loop_destroy(zt.loop);
    free(zt.big_out);
    free(zt.big_in);
    for (size_t i = 0; i != zt.ngot; ++i)
        for (size_t j = 0; j != zt.got[i].nframes && j != 4; ++j)
            free(zt.got[i].frames[j].base);
    if (zt.dir[0] != '\0') {
        char path[300];
        snprintf(path, sizeof(path), "%s/sock", zt.dir);
        unlink(path); /* libzmq unlinks its own at close; this is for a test that failed before that */
        rmdir(zt.dir);
    }
}

TestSuite(zsock, .init = setup, .fini = teardown, .timeout = 60);

static void on_readable(void *arg)
{
    zt_t *t = arg;
    kmgr_zsock_msg_t msg;
    int r;

    if (t->manual)
        return;
    while ((r = kmgr_zsock_recv(&t->z, &msg)) != 0) {
        if (r == KMGR_ZSOCK_OVER_START) {
            ++t->over_starts;
            t->over_nframes = msg.nframes;
            t->over_size = msg.bytes;
            t->over_piece_bytes = 0;
            continue;
        }
        if (r == KMGR_ZSOCK_OVER_PIECE) {
            cr_assert(msg.nframes == 1 && msg.frames[0].len == msg.bytes && msg.bytes != 0);
            t->over_piece_bytes += msg.bytes;
            continue;
        }
        cr_assert_lt(t->ngot, sizeof(t->got) / sizeof(t->got[0]));
        zt_got_t *g = &t->got[t->ngot++];
        g->r = r;
        if (r != 1)
            continue;
        g->nframes = msg.nframes;
        for (size_t i = 0; i != msg.nframes && i != 4; ++i) {
            g->frames[i].base = wire_malloc(msg.frames[i].len + 1);
            memcpy(g->frames[i].base, msg.frames[i].base, msg.frames[i].len);
            g->frames[i].len = msg.frames[i].len;
        }
        kmgr_zsock_release(&t->z);
    }
    if (t->z.state == KMGR_ZSOCK_WAITING)
        ++t->n_lost;
}

static void zt_open(const char *endpoint, const char *type, const char *identity, uint64_t cap)
{
    cr_assert_eq(kmgr_zsock_open(&zt.z, &zt.ops, zt.loop, endpoint, type, identity, cap, on_readable, &zt, "test zsock"), 0,
                 "open %s", endpoint);
}

/* One turn of the host loop, then the tick the manager would give the connection. */
static void zt_turn(void)
{
    poll_loop_run_once(zt.loop, 5);
    kmgr_zsock_tick(&zt.z, ksys_now_ms());
}

static int zt_wait(int (*done)(void *arg), void *arg, unsigned ms)
{
    uint64_t deadline = ksys_now_ms() + ms;

    while (!done(arg)) {
        if (ksys_now_ms() >= deadline)
            return 0;
        zt_turn();
    }
    return 1;
}

static void zt_run_for(unsigned ms)
{
    for (uint64_t deadline = ksys_now_ms() + ms; ksys_now_ms() < deadline;)
        zt_turn();
}

static int is_ready(void *arg)
{
    (void)arg;
    return kmgr_zsock_is_ready(&zt.z);
}

static int got_n(void *arg)
{
    return zt.ngot >= (size_t)(uintptr_t)arg;
}

/* A libzmq socket bound to `endpoint` (with '*' for a free port); the bound endpoint into `out`. */
static void *zt_peer(int type, const char *endpoint, char *out, size_t outsize)
{
    void *s = zmq_socket(zt.ctx, type);
    int zero = 0;
    size_t i = 0;

    cr_assert_not_null(s);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    while (zt.peers[i] != NULL)
        cr_assert_lt(++i, sizeof(zt.peers) / sizeof(zt.peers[0]));
    zt.peers[i] = s;
    if (endpoint != NULL) {
        cr_assert_eq(zmq_bind(s, endpoint), 0, "bind %s: %s", endpoint, zmq_strerror(zmq_errno()));
        cr_assert_eq(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, out, &outsize), 0);
    }
    return s;
}

static void zt_peer_close(void *s)
{
    for (size_t i = 0; i != sizeof(zt.peers) / sizeof(zt.peers[0]); ++i)
        if (zt.peers[i] == s)
            zt.peers[i] = NULL;
    zmq_close(s);
}

/* Sends `n` frames (`lens[i]` bytes at `parts[i]`; a length of -1 means strlen) as one message from a libzmq socket. */
static void peer_send(void *s, const void *const *parts, const long *lens, size_t n)
{
    for (size_t i = 0; i != n; ++i) {
        size_t len = lens == NULL || lens[i] < 0 ? strlen((const char *)parts[i]) : (size_t)lens[i];
        cr_assert_eq(zmq_send(s, parts[i], len, i + 1 != n ? ZMQ_SNDMORE : 0), (int)len, "%s", zmq_strerror(zmq_errno()));
    }
}

/* A message being received by a libzmq socket without blocking the loop. */
typedef struct st_peer_rx_t {
    void *sock;
    wire_frames_t frames;
    int done;
} peer_rx_t;

static int peer_rx_done(void *arg)
{
    peer_rx_t *rx = arg;

    while (!rx->done) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        if (zmq_msg_recv(&m, rx->sock, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&m);
            return 0;
        }
        wire_frames_push_copy(&rx->frames, zmq_msg_data(&m), zmq_msg_size(&m));
        rx->done = !zmq_msg_more(&m);
        zmq_msg_close(&m);
    }
    return 1;
}

/* Waits (bounded) for the next message at libzmq socket `s`, into `rx` (dispose its frames). */
static void peer_recv(void *s, peer_rx_t *rx, unsigned ms)
{
    memset(rx, 0, sizeof(*rx));
    rx->sock = s;
    cr_assert(zt_wait(peer_rx_done, rx, ms), "the peer got no message within %u ms", ms);
}

static void assert_frame(const wire_frame_t *f, const char *want)
{
    cr_assert_eq(f->len, strlen(want), "frame of %zu bytes, want \"%s\"", f->len, want);
    cr_assert_eq(memcmp(f->base, want, f->len), 0, "frame is not \"%s\"", want);
}

static void zt_send(const char *a, const char *b)
{
    wire_frame_t f[2] = {{(void *)a, strlen(a)}, {(void *)b, b != NULL ? strlen(b) : 0}};
    cr_assert_eq(kmgr_zsock_send(&zt.z, f, b != NULL ? 2 : 1, NULL, 0), 0);
}

/* Connects the zsock (identity "zt") to a bound ROUTER and has it say hello, so the ROUTER can route to it. */
static void zt_router_hello(void *router)
{
    peer_rx_t rx;

    cr_assert(zt_wait(is_ready, NULL, 2000), "no handshake with the ROUTER");
    zt_send("hello", NULL);
    peer_recv(router, &rx, 2000);
    cr_assert_eq(rx.frames.size, 2);
    assert_frame(&rx.frames.entries[0], "zt");
    wire_frames_dispose(&rx.frames);
}

Test(zsock, dealer_sends_before_the_peer_binds_and_gets_the_reply)
{
    unsigned short port;
    char endpoint[64], bound[256];
    peer_rx_t rx;

    cr_assert_eq(ts_free_port(&port), 0);
    snprintf(endpoint, sizeof(endpoint), "tcp://127.0.0.1:%u", port);
    zt_open(endpoint, "DEALER", "kernel-7", 16 * MIB);
    zt_send("execute", "print(1)");
    zt_run_for(200);
    cr_assert_eq(zt.z.connects, 0, "nobody listens yet");
    cr_assert_neq(zt.z.state, KMGR_ZSOCK_CLOSED, "a refused connect is retried, not given up");

    void *router = zt_peer(ZMQ_ROUTER, endpoint, bound, sizeof(bound));
    peer_recv(router, &rx, 1000);
    cr_assert_eq(rx.frames.size, 3);
    assert_frame(&rx.frames.entries[0], "kernel-7");
    assert_frame(&rx.frames.entries[1], "execute");
    assert_frame(&rx.frames.entries[2], "print(1)");
    wire_frames_dispose(&rx.frames);

    peer_send(router, (const void *[]){"kernel-7", "reply", "", "status: ok"}, NULL, 4);
    cr_assert(zt_wait(got_n, (void *)1, 2000), "the ROUTER's reply never came back");
    cr_assert_eq(zt.got[0].r, 1);
    cr_assert_eq(zt.got[0].nframes, 3);
    assert_frame(&zt.got[0].frames[0], "reply");
    assert_frame(&zt.got[0].frames[1], "");
    assert_frame(&zt.got[0].frames[2], "status: ok");
    cr_assert_eq(zt.z.connects, 1);
}

Test(zsock, sub_receives_what_the_pub_publishes)
{
    char endpoint[256];
    void *pub = zt_peer(ZMQ_PUB, "tcp://127.0.0.1:*", endpoint, sizeof(endpoint));

    zt_open(endpoint, "SUB", NULL, 16 * MIB);
    cr_assert(zt_wait(is_ready, NULL, 2000), "no handshake with the PUB");
    /* a PUB drops what it sends before the subscription reached it: resend until one arrives */
    uint64_t deadline = ksys_now_ms() + 2000;
    while (zt.ngot == 0 && ksys_now_ms() < deadline) {
        peer_send(pub, (const void *[]){"stream", "early"}, NULL, 2);
        zt_run_for(20);
    }
    cr_assert_gt(zt.ngot, 0, "the subscription never took");
    size_t before = zt.ngot;
    for (int i = 0; i != 3; ++i)
        peer_send(pub, (const void *[]){"stream", (const char *[]){"one", "two", "three"}[i]}, NULL, 2);
    cr_assert(zt_wait(got_n, (void *)(uintptr_t)(before + 3), 2000), "published messages lost");
    for (int i = 0; i != 3; ++i) {
        cr_assert_eq(zt.got[before + i].nframes, 2);
        assert_frame(&zt.got[before + i].frames[0], "stream");
        assert_frame(&zt.got[before + i].frames[1], (const char *[]){"one", "two", "three"}[i]);
    }
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i != n; ++i)
        p[i] = (uint8_t)(i * 131 + seed + (i >> 16));
}

/* 8 MiB out through the writable notifications, 4 MiB in through a growing buffer, both whole. */
static void big_both_ways(const char *endpoint_pattern)
{
    char endpoint[256];
    size_t out_len = 8 * MIB, in_len = 4 * MIB, elen = sizeof(endpoint);
    uint8_t *out = zt.big_out = wire_malloc(out_len), *in = zt.big_in = wire_malloc(in_len);
    void *router = zt_peer(ZMQ_ROUTER, NULL, NULL, 0);
    int small = 64 * 1024;
    peer_rx_t rx;

    /* Small buffers on both ends: loopback TCP with a peer that reads in its own thread can otherwise take 8 MiB in
     * one send, and the writable notifications would go untested. */
    zmq_setsockopt(router, ZMQ_RCVBUF, &small, sizeof(small));
    cr_assert_eq(zmq_bind(router, endpoint_pattern), 0);
    cr_assert_eq(zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, endpoint, &elen), 0);
    fill(out, out_len, 7);
    fill(in, in_len, 99);
    zt_open(endpoint, "DEALER", "zt", 16 * MIB);
    zt_router_hello(router);
    setsockopt(zt.z.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));

    wire_frame_t f[2] = {{"big", 3}, {out, out_len}};
    cr_assert_eq(kmgr_zsock_send(&zt.z, f, 2, NULL, 0), 0);
    peer_recv(router, &rx, 10000);
    cr_assert_gt(zt.n_writable_waits, 0, "precondition: the socket never refused part of 8 MiB");
    cr_assert_eq(rx.frames.size, 3);
    assert_frame(&rx.frames.entries[1], "big");
    cr_assert_eq(rx.frames.entries[2].len, out_len);
    cr_assert_eq(memcmp(rx.frames.entries[2].base, out, out_len), 0, "the 8 MiB message arrived altered");
    wire_frames_dispose(&rx.frames);
    cr_assert_leq(zt.z.out.cap, KMGR_ZSOCK_KEEP_BYTES, "the send buffer stays at the biggest message");

    peer_send(router, (const void *[]){"zt", in}, (const long[]){-1, (long)in_len}, 2);
    cr_assert(zt_wait(got_n, (void *)1, 10000), "the 4 MiB message never arrived");
    cr_assert_eq(zt.got[0].r, 1);
    cr_assert_eq(zt.got[0].nframes, 1);
    cr_assert_eq(zt.got[0].frames[0].len, in_len);
    cr_assert_eq(memcmp(zt.got[0].frames[0].base, in, in_len), 0, "the 4 MiB message arrived altered");
    zt_turn();
    cr_assert_leq(zt.z.in.cap, KMGR_ZSOCK_KEEP_BYTES, "the receive buffer stays at the biggest message");
}

Test(zsock, big_messages_both_ways_over_tcp)
{
    big_both_ways("tcp://127.0.0.1:*");
}

static void make_ipc_dir(char *endpoint, size_t size)
{
    const char *tmp = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : P_tmpdir;
    snprintf(zt.dir, sizeof(zt.dir), "%s/kgate-zsock-XXXXXX", tmp);
    cr_assert_not_null(mkdtemp(zt.dir));
    snprintf(endpoint, size, "ipc://%s/sock", zt.dir);
}

Test(zsock, big_messages_both_ways_over_ipc)
{
    char endpoint[300];

    make_ipc_dir(endpoint, sizeof(endpoint));
    big_both_ways(endpoint);
}

/* A connect refused (the kernel has not bound yet) is tried again at the next tick, even one that comes a little short of
 * KMGR_TICK_MS after it: a kernel's channels are connected a tick after it binds, not two (100 ms apart before). */
Test(zsock, a_refused_connect_is_tried_again_at_the_next_tick)
{
    char endpoint[300], bound[300];
    uint64_t refused;

    make_ipc_dir(endpoint, sizeof(endpoint));
    zt_open(endpoint, "DEALER", "kernel-7", 16 * MIB);
    refused = ksys_now_ms(); /* the open's connect was refused at this time or before */
    cr_assert_eq(zt.z.state, KMGR_ZSOCK_WAITING, "nobody listens yet: the connect is refused");
    zt_peer(ZMQ_ROUTER, endpoint, bound, sizeof(bound));
    /* the next tick, come 10 ms short of a whole tick after the refusal (a timer's jitter on a loaded machine) */
    kmgr_zsock_tick(&zt.z, refused + KMGR_TICK_MS - 10);
    cr_assert_neq(zt.z.state, KMGR_ZSOCK_WAITING, "the next tick made no new attempt: the kernel waits a tick more");
    cr_assert(zt_wait(is_ready, NULL, 2000), "the connection never became ready");
}

/* Word that the kernel listens (its template's fork answer) retries a refused connect at once, not at the next tick. */
Test(zsock, a_refused_connect_is_tried_again_at_once_when_asked)
{
    char endpoint[300], bound[300];

    make_ipc_dir(endpoint, sizeof(endpoint));
    zt_open(endpoint, "DEALER", "kernel-8", 16 * MIB);
    cr_assert_eq(zt.z.state, KMGR_ZSOCK_WAITING, "nobody listens yet: the connect is refused");
    kmgr_zsock_retry_now(&zt.z);
    cr_assert_eq(zt.z.state, KMGR_ZSOCK_WAITING, "still nobody listens: it waits again");
    zt_peer(ZMQ_ROUTER, endpoint, bound, sizeof(bound));
    kmgr_zsock_retry_now(&zt.z);
    cr_assert_neq(zt.z.state, KMGR_ZSOCK_WAITING, "asked to retry, it waited for its tick");
    cr_assert(zt_wait(is_ready, NULL, 2000), "the connection never became ready");
}

Test(zsock, over_the_caps_is_skipped_and_the_connection_stays)
{
    char endpoint[256];
    void *router = zt_peer(ZMQ_ROUTER, "tcp://127.0.0.1:*", endpoint, sizeof(endpoint));
    size_t big_len = 2 * MIB;
    uint8_t *big = wire_calloc(1, big_len);

    zt_open(endpoint, "DEALER", "zt", 1 * MIB);
    zt_router_hello(router);
    peer_send(router, (const void *[]){"zt", "head", big}, (const long[]){-1, -1, (long)big_len}, 3);
    peer_send(router, (const void *[]){"zt", "small"}, NULL, 2);
    cr_assert(zt_wait(got_n, (void *)2, 5000), "%zu results, want 2", zt.ngot);
    cr_assert_eq(zt.got[0].r, KSYS_EMSGSIZE, "the 2 MiB message is reported, once");
    cr_assert_eq(zt.over_starts, 1, "its start is reported, once");
    cr_assert_eq(zt.over_nframes, 1, "the frame before the one over the cap");
    cr_assert_eq(zt.over_size, big_len);
    cr_assert_eq(zt.over_piece_bytes, big_len, "every byte of the frame over the cap went by as a piece");
    cr_assert_eq(zt.got[1].r, 1, "the next message still arrives");
    assert_frame(&zt.got[1].frames[0], "small");
    cr_assert_eq(zt.z.connects, 1, "an oversized message does not cost the connection");
    cr_assert_eq(zt.z.state, KMGR_ZSOCK_READY);
    cr_assert_leq(zt.z.in.cap, MIB, "a skipped message is never buffered");
    free(big);

    /* one frame more than KMGR_ZSOCK_MAX_FRAMES allows, each small */
    const void *parts[1101];
    parts[0] = "zt";
    for (size_t i = 1; i != 1101; ++i)
        parts[i] = "f";
    peer_send(router, parts, NULL, 1101);
    peer_send(router, (const void *[]){"zt", "after"}, NULL, 2);
    cr_assert(zt_wait(got_n, (void *)4, 5000), "%zu results, want 4", zt.ngot);
    cr_assert_eq(zt.got[2].r, KSYS_EINVAL, "the 1100-frame message is reported");
    cr_assert_eq(zt.got[3].r, 1);
    assert_frame(&zt.got[3].frames[0], "after");
    cr_assert_eq(zt.z.connects, 1);
    cr_assert_eq(zt.z.state, KMGR_ZSOCK_READY);
}

static int not_ready(void *arg)
{
    (void)arg;
    return !kmgr_zsock_is_ready(&zt.z);
}

static int reconnected(void *arg)
{
    (void)arg;
    return zt.z.connects == 2 && kmgr_zsock_is_ready(&zt.z);
}

Test(zsock, reconnects_when_the_peer_comes_back)
{
    char endpoint[256];
    void *router = zt_peer(ZMQ_ROUTER, "tcp://127.0.0.1:*", endpoint, sizeof(endpoint));
    peer_rx_t rx;

    zt_open(endpoint, "DEALER", "zt", 16 * MIB);
    zt_router_hello(router);
    zt_peer_close(router);
    cr_assert(zt_wait(not_ready, NULL, 2000), "the peer's close went unnoticed");

    /* libzmq closes the old listener in its I/O thread, after zmq_close returned: the port may still be taken a moment */
    router = zt_peer(ZMQ_ROUTER, NULL, NULL, 0);
    uint64_t deadline = ksys_now_ms() + 2000;
    while (zmq_bind(router, endpoint) != 0) {
        cr_assert_lt(ksys_now_ms(), deadline, "cannot bind %s again: %s", endpoint, zmq_strerror(zmq_errno()));
        zt_run_for(20);
    }
    cr_assert(zt_wait(reconnected, NULL, 2000), "no new connection (connects %" PRIu64 ")", zt.z.connects);
    zt_send("again", NULL);
    peer_recv(router, &rx, 2000);
    cr_assert_eq(rx.frames.size, 2);
    assert_frame(&rx.frames.entries[0], "zt");
    assert_frame(&rx.frames.entries[1], "again");
    wire_frames_dispose(&rx.frames);
}

/* A plain TCP listener on 127.0.0.1: its fd, its port in `*port`. */
static int tcp_listener(unsigned short *port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

    cr_assert_geq(fd, 0);
    cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(fd, 8), 0);
    cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

/* A peer that is no ZMTP: what it does with each connection it accepts. */
typedef struct st_bad_peer_t {
    int listener;
    int conns[16];
    size_t nconns;
    int close_at_once;
    int silent;           /* accept and say nothing, as a hung process would */
    const char *speak_as; /* a ZMTP peer of this socket type: greeting and READY, then nothing */
    size_t want_lost, want_connects;
} bad_peer_t;

static int bad_peer_done(void *arg)
{
    bad_peer_t *p = arg;
    int fd;

    while ((fd = accept4(p->listener, NULL, NULL, SOCK_CLOEXEC)) >= 0) {
        if (p->close_at_once || p->nconns == sizeof(p->conns) / sizeof(p->conns[0])) {
            close(fd);
            continue;
        }
        uint8_t garbage[64];
        memset(garbage, 0x5a, sizeof(garbage));
        if (p->speak_as != NULL) {
            uint8_t hs[WIRE_ZMTP_GREETING_LEN + 64];
            wire_zmtp_greeting(hs);
            int n = wire_zmtp_ready(hs + WIRE_ZMTP_GREETING_LEN, sizeof(hs) - WIRE_ZMTP_GREETING_LEN, p->speak_as, NULL);
            cr_assert_gt(n, 0);
            cr_assert_eq(write(fd, hs, WIRE_ZMTP_GREETING_LEN + (size_t)n), (ssize_t)(WIRE_ZMTP_GREETING_LEN + (size_t)n));
        } else if (!p->silent) {
            cr_assert_eq(write(fd, garbage, sizeof(garbage)), (ssize_t)sizeof(garbage));
        }
        p->conns[p->nconns++] = fd;
    }
    return (size_t)zt.n_lost >= p->want_lost && zt.z.connects >= p->want_connects;
}

/* Listens as the bad peer `p` on a free loopback port and opens the zsock (a DEALER) to it. */
static void zt_open_to_bad_peer(bad_peer_t *p)
{
    char endpoint[64];
    unsigned short port;

    p->listener = tcp_listener(&port);
    snprintf(endpoint, sizeof(endpoint), "tcp://127.0.0.1:%u", port);
    zt_open(endpoint, "DEALER", "zt", 16 * MIB);
}

static void bad_peer_dispose(bad_peer_t *p)
{
    for (size_t i = 0; i != p->nconns; ++i)
        close(p->conns[i]);
    close(p->listener);
}

/* Runs the loop with stderr going to a file; what was written there into `out`. */
static int wait_capturing_stderr(int (*done)(void *), void *arg, unsigned ms, char *out, size_t size)
{
    FILE *f = tmpfile();
    int saved = dup(2), ok;
    size_t n;

    cr_assert_not_null(f);
    fflush(stderr);
    dup2(fileno(f), 2);
    ok = zt_wait(done, arg, ms);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    rewind(f);
    n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    fclose(f);
    return ok;
}

Test(zsock, a_peer_that_speaks_no_zmtp_is_dropped_and_retried)
{
    bad_peer_t p = {.want_lost = 1, .want_connects = 1};
    char log[4096];

    zt_open_to_bad_peer(&p);
    cr_assert(wait_capturing_stderr(bad_peer_done, &p, 2000, log, sizeof(log)), "the garbage went unnoticed");
    cr_assert_eq(zt.ngot, 0, "garbage never makes a message");
    cr_assert_not_null(strstr(log, "test zsock: the kernel's socket does not speak ZMTP 3"), "logged: %s", log);
    bad_peer_dispose(&p);
}

Test(zsock, a_peer_that_never_finishes_the_handshake_is_dropped_and_retried)
{
    bad_peer_t p = {.silent = 1, .want_connects = 2};
    char log[4096];

    zt_open_to_bad_peer(&p);
    zt.z.handshake_ms = 200; /* KMGR_ZSOCK_HANDSHAKE_MS, shortened for the test */
    cr_assert(wait_capturing_stderr(bad_peer_done, &p, 3000, log, sizeof(log)),
              "still waiting for the handshake (connects %" PRIu64 ")", zt.z.connects);
    cr_assert_not_null(strstr(log, "did not finish the ZMTP handshake in time"), "logged: %s", log);
    cr_assert(!kmgr_zsock_is_ready(&zt.z));
    bad_peer_dispose(&p);
}

Test(zsock, a_peer_of_the_wrong_socket_type_is_refused_at_the_handshake)
{
    /* a PUB where the shell's ROUTER should be (two ports swapped in a connection file) */
    bad_peer_t p = {.speak_as = "PUB", .want_lost = 1, .want_connects = 2};
    char log[4096];

    zt_open_to_bad_peer(&p);
    cr_assert(wait_capturing_stderr(bad_peer_done, &p, 3000, log, sizeof(log)), "the PUB was taken for a ROUTER");
    cr_assert_not_null(strstr(log, "of a type this channel cannot talk to"), "logged: %s", log);
    cr_assert(!kmgr_zsock_is_ready(&zt.z));
    bad_peer_dispose(&p);
}

Test(zsock, a_peer_that_closes_at_once_is_retried)
{
    bad_peer_t p = {.close_at_once = 1, .want_connects = 3};

    zt_open_to_bad_peer(&p);
    cr_assert(zt_wait(bad_peer_done, &p, 2000), "not retried (connects %" PRIu64 ")", zt.z.connects);
    cr_assert_eq(zt.ngot, 0);
    cr_assert(!kmgr_zsock_is_ready(&zt.z));
    bad_peer_dispose(&p);
}

Test(zsock, malformed_endpoints_are_refused)
{
    char long_ipc[300];
    const char *bad[] = {"tcp://localhost:1",
                         "tcp://1.2.3.4:0",
                         "tcp://1.2.3.4:65536",
                         "tcp://1.2.3.4:",
                         "tcp://:5555",
                         "tcp://1.2.3.4",
                         "ipc://",
                         "udp://x",
                         "",
                         long_ipc};

    memset(long_ipc, 'a', sizeof(long_ipc) - 1);
    memcpy(long_ipc, "ipc://", 6);
    long_ipc[sizeof(long_ipc) - 1] = '\0';
    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        int r = kmgr_zsock_open(&zt.z, &zt.ops, zt.loop, bad[i], "DEALER", NULL, MIB, on_readable, &zt, "test zsock");
        cr_assert_eq(r, KSYS_EZMQ, "\"%.40s\" gave %d", bad[i], r);
        cr_assert_eq(poll_loop_num_watches(zt.loop), 0);
        kmgr_zsock_close(&zt.z);
    }
}

static int manual_recv(void *arg)
{
    kmgr_zsock_msg_t *msg = arg;
    return kmgr_zsock_recv(&zt.z, msg) == 1;
}

Test(zsock, close_keeps_a_lent_message_until_release)
{
    char endpoint[256];
    void *router = zt_peer(ZMQ_ROUTER, "tcp://127.0.0.1:*", endpoint, sizeof(endpoint));
    kmgr_zsock_msg_t msg;

    zt_open(endpoint, "DEALER", "zt", 16 * MIB);
    zt_router_hello(router);
    zt.manual = 1;
    peer_send(router, (const void *[]){"zt", "lent-a", "lent-b"}, NULL, 3);
    cr_assert(zt_wait(manual_recv, &msg, 2000));
    kmgr_zsock_close(&zt.z);
    cr_assert_eq(poll_loop_num_watches(zt.loop), 0, "closed: nothing is watched");
    cr_assert_eq(msg.nframes, 2);
    assert_frame(&msg.frames[0], "lent-a");
    assert_frame(&msg.frames[1], "lent-b");
    kmgr_zsock_release(&zt.z);
    cr_assert_null(zt.z.reader.frames, "release frees what the close kept");
}

Test(zsock, a_lent_message_outlives_a_lost_connection_and_a_tick)
{
    char endpoint[256];
    void *router = zt_peer(ZMQ_ROUTER, "tcp://127.0.0.1:*", endpoint, sizeof(endpoint));
    size_t len = 4 * KMGR_ZSOCK_KEEP_BYTES; /* a buffer big enough for the tick to give back */
    uint8_t *big = zt.big_out = wire_malloc(len);
    kmgr_zsock_msg_t msg;

    fill(big, len, 3);
    zt_open(endpoint, "DEALER", "zt", 16 * MIB);
    zt_router_hello(router);
    zt.manual = 1;
    peer_send(router, (const void *[]){"zt", big}, (const long[]){-1, (long)len}, 2);
    cr_assert(zt_wait(manual_recv, &msg, 2000));
    /* the owner still holds the message when a send finds the peer gone */
    zt_peer_close(router);
    for (uint64_t deadline = ksys_now_ms() + 2000; kmgr_zsock_is_ready(&zt.z);) {
        cr_assert_lt(ksys_now_ms(), deadline, "sends to a closed peer never failed");
        zt_send("into the void", NULL);
        usleep(1000);
    }
    kmgr_zsock_tick(&zt.z, ksys_now_ms() + 1000);
    cr_assert_eq(msg.nframes, 1);
    cr_assert_eq(msg.frames[0].len, len);
    cr_assert_eq(memcmp(msg.frames[0].base, big, len), 0, "the lent message changed under its reader");
    kmgr_zsock_release(&zt.z);
}

Test(zsock, closing_a_zero_filled_zsock_leaves_descriptor_0_alone)
{
    kmgr_zsock_t z;
    int saved = dup(0);

    cr_assert_geq(saved, 0);
    memset(&z, 0, sizeof(z)); /* as kmgr_channels_init leaves the connections of channels never opened */
    kmgr_zsock_close(&z);
    kmgr_zsock_close(&z);
    cr_expect_neq(fcntl(0, F_GETFD), -1, "descriptor 0 was closed");
    dup2(saved, 0);
    close(saved);
}

/* A peer that stops reading: sends are refused at the bound instead of queueing without end, and go again once it reads. */
Test(zsock, a_peer_that_reads_nothing_bounds_what_waits_for_it)
{
    char endpoint[256];
    size_t elen = sizeof(endpoint), len = MIB, sent = 0;
    uint8_t *payload = zt.big_out = wire_malloc(len);
    void *router = zt_peer(ZMQ_ROUTER, NULL, NULL, 0);
    int small = 64 * 1024, one = 1, refused = 0;
    wire_frame_t f[1] = {{payload, len}};
    peer_rx_t rx;

    zmq_setsockopt(router, ZMQ_RCVBUF, &small, sizeof(small));
    zmq_setsockopt(router, ZMQ_RCVHWM, &one, sizeof(one));
    cr_assert_eq(zmq_bind(router, "tcp://127.0.0.1:*"), 0);
    cr_assert_eq(zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, endpoint, &elen), 0);
    zt_open(endpoint, "DEALER", "zt", 16 * MIB);
    zt_router_hello(router);
    setsockopt(zt.z.fd, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    zt.z.max_queued_bytes = 4 * MIB; /* KMGR_ZSOCK_MAX_QUEUED_BYTES, lowered for the test */
    fill(payload, len, 3);
    for (int i = 0; i != 64 && !refused; ++i) {
        int r = kmgr_zsock_send(&zt.z, f, 1, NULL, 0);
        if (r == KSYS_EBACKLOG) {
            refused = 1;
        } else {
            cr_assert_eq(r, 0);
            ++sent;
        }
        zt_turn();
    }
    cr_assert(refused, "64 MiB were queued for a peer that reads nothing");
    cr_assert_leq(kmgr_bytebuf_size(&zt.z.out), 4 * MIB + 16, "%zu bytes wait", kmgr_bytebuf_size(&zt.z.out));
    /* the peer reads: every message that was taken arrives whole, and the connection takes more */
    for (size_t i = 0; i != sent; ++i) {
        peer_recv(router, &rx, 10000);
        cr_assert_eq(rx.frames.size, 2);
        cr_assert_eq(rx.frames.entries[1].len, len);
        cr_assert_eq(memcmp(rx.frames.entries[1].base, payload, len), 0);
        wire_frames_dispose(&rx.frames);
    }
    cr_assert_eq(kmgr_zsock_send(&zt.z, f, 1, NULL, 0), 0);
    peer_recv(router, &rx, 10000);
    cr_assert_eq(rx.frames.entries[1].len, len);
    wire_frames_dispose(&rx.frames);
}

static int is_ready_or_lost(void *arg)
{
    bad_peer_t *p = arg;
    bad_peer_done(p);
    return kmgr_zsock_is_ready(&zt.z);
}

static int over_pieces_came(void *arg)
{
    return zt.over_piece_bytes >= *(size_t *)arg;
}

static int over_lost(void *arg)
{
    (void)arg;
    for (size_t i = 0; i != zt.ngot; ++i)
        if (zt.got[i].r == KMGR_ZSOCK_OVER_LOST)
            return 1;
    return 0;
}

/* The connection is lost in the middle of a message over the cap (a kernel's socket closed): its owner is told at once
 * (KMGR_ZSOCK_OVER_LOST), so that it lets go of the head it was keeping and tells the message's requests, where it used to
 * hear nothing and keep the head until the next message over the cap. */
Test(zsock, a_connection_lost_in_the_middle_of_a_message_over_the_cap_says_so)
{
    bad_peer_t p = {.speak_as = "ROUTER"};
    uint8_t head[9] = {0x02, 0, 0, 0, 0, 0x02, 0, 0, 0}; /* one long frame of 32 MiB: over the 16 MiB cap */
    size_t sent = 0, want = 256 * 1024;
    static uint8_t body[64 * 1024];

    zt_open_to_bad_peer(&p);
    cr_assert(zt_wait(is_ready_or_lost, &p, 5000), "no handshake");
    cr_assert_eq(write(p.conns[0], head, sizeof(head)), (ssize_t)sizeof(head));
    memset(body, 'x', sizeof(body));
    while (sent < want) {
        ssize_t n = write(p.conns[0], body, sizeof(body));
        if (n > 0)
            sent += (size_t)n;
        zt_run_for(10);
    }
    cr_assert(zt_wait(over_pieces_came, &want, 5000), "the message's pieces did not come (%zu bytes)", zt.over_piece_bytes);
    cr_expect_eq(zt.over_starts, 1);
    cr_expect_not(over_lost(NULL));
    close(p.conns[0]);
    p.conns[0] = p.conns[--p.nconns];
    cr_assert(zt_wait(over_lost, NULL, 5000), "the owner was not told the message over the cap ended unfinished");
    bad_peer_dispose(&p);
}
