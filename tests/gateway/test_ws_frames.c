/* tests/gateway/test_ws_frames.c: frame boundaries in a WebSocket byte stream and the pings taken out of it, at every split. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "core/ws_frames.h"
#include "gw_test.h"

TestSuite(ws_frames, .init = gw_test_init);

typedef struct {
    uint8_t bytes[4096];
    size_t len;
    uint8_t want[4096]; /* the stream without the pings an end answers */
    size_t want_len;
} stream_t;

static const uint8_t MASK[4] = {0x37, 0xfa, 0x21, 0x3d};

/* Appends one frame: masked when `masked`, its payload length in the shortest form. */
static void frame(stream_t *s, uint8_t first, int masked, const uint8_t *payload, size_t n, int answered)
{
    uint8_t *p = s->bytes + s->len, *start = p;

    *p++ = first;
    if (n < 126) {
        *p++ = (uint8_t)((masked ? 0x80 : 0) | n);
    } else {
        *p++ = (uint8_t)((masked ? 0x80 : 0) | 126);
        *p++ = (uint8_t)(n >> 8);
        *p++ = (uint8_t)n;
    }
    if (masked) {
        memcpy(p, MASK, 4);
        p += 4;
    }
    for (size_t i = 0; i != n; ++i)
        *p++ = masked ? payload[i] ^ MASK[i % 4] : payload[i];
    if (!answered) {
        memcpy(s->want + s->want_len, start, (size_t)(p - start));
        s->want_len += (size_t)(p - start);
    }
    s->len = (size_t)(p - s->bytes);
}

/* A client's stream: messages, pings between them and inside a fragmented one, pings the parser must see. */
static void client_stream(stream_t *s)
{
    static uint8_t big[300], long_ping[126];
    memset(s, 0, sizeof(*s));
    memset(big, 'b', sizeof(big));
    memset(long_ping, 'p', sizeof(long_ping));
    frame(s, 0x81, 1, (const uint8_t *)"abc", 3, 0);
    frame(s, 0x89, 1, (const uint8_t *)"hi", 2, 1);
    frame(s, 0x82, 1, big, sizeof(big), 0);
    frame(s, 0x89, 1, NULL, 0, 1);
    frame(s, 0x01, 1, (const uint8_t *)"frag", 4, 0); /* a text message in two fragments, a ping between */
    frame(s, 0x89, 1, (const uint8_t *)"mid", 3, 1);
    frame(s, 0x80, 1, (const uint8_t *)"ment", 4, 0);
    frame(s, 0x89, 1, long_ping, sizeof(long_ping), 0); /* over 125 bytes: the parser rejects it */
    frame(s, 0x09, 1, (const uint8_t *)"nofin", 5, 0);  /* a fragmented ping: the same */
    frame(s, 0x89, 0, (const uint8_t *)"bare", 4, 0);   /* unmasked from a client: the same */
    frame(s, 0x89, 1, (const uint8_t *)"last ping", 9, 1);
    frame(s, 0x81, 1, NULL, 0, 0);
}

/* Runs the filter over the stream in pieces split at `cut` and `cut2`, with `out_cap` bytes of room per call. */
static void run(const stream_t *s, size_t cut, size_t cut2, size_t out_cap)
{
    gw_ws_pings_t f;
    uint8_t out[4096];
    size_t pieces[3][2] = {{0, cut}, {cut, cut2}, {cut2, s->len}}, o = 0;

    gw_ws_pings_init(&f, 1);
    for (int i = 0; i != 3; ++i) {
        size_t at = pieces[i][0], end = pieces[i][1];
        for (;;) {
            size_t taken, n = gw_ws_pings_filter(&f, s->bytes + at, end - at, &taken, out + o, out_cap);
            o += n;
            at += taken;
            if (n == 0) {
                cr_assert_eq(at, end, "nothing written while input was left (cut %zu/%zu, room %zu)", cut, cut2, out_cap);
                break;
            }
        }
    }
    cr_assert_eq(o, s->want_len, "cut %zu/%zu, room %zu: %zu bytes out, %zu expected", cut, cut2, out_cap, o, s->want_len);
    cr_assert(memcmp(out, s->want, o) == 0, "cut %zu/%zu, room %zu: the frames passed differ", cut, cut2, out_cap);
    cr_assert_eq(f.pings_taken, 4, "cut %zu/%zu: %llu pings taken", cut, cut2, (unsigned long long)f.pings_taken);
    cr_assert(f.pong_wanted);
    cr_assert_eq(f.pong_len, 9);
    cr_assert(memcmp(f.pong, "last ping", 9) == 0, "the pong does not carry the newest ping, unmasked");
}

Test(ws_frames, pings_are_taken_out_and_the_rest_passes_whole_at_every_split)
{
    stream_t s;

    client_stream(&s);
    /* every first split, with a second one at three places after it */
    for (size_t cut = 0; cut <= s.len; ++cut) {
        run(&s, cut, cut, 4096);
        run(&s, cut, cut + (s.len - cut) / 2, 4096);
        run(&s, cut, cut + (s.len - cut > 0), 4096);
    }
}

Test(ws_frames, a_small_output_buffer_takes_the_same_bytes)
{
    stream_t s;

    client_stream(&s);
    for (size_t room = 1; room <= 16; ++room)
        run(&s, s.len / 3, s.len / 2, room);
}

Test(ws_frames, a_server_ping_is_taken_out_unmasked_and_a_masked_one_passes)
{
    stream_t s;
    gw_ws_pings_t f;
    uint8_t out[64];
    size_t taken, n;

    memset(&s, 0, sizeof(s));
    frame(&s, 0x89, 0, (const uint8_t *)"srv", 3, 1);
    frame(&s, 0x89, 1, (const uint8_t *)"cli", 3, 0);
    gw_ws_pings_init(&f, 0);
    n = gw_ws_pings_filter(&f, s.bytes, s.len, &taken, out, sizeof(out));
    cr_assert_eq(taken, s.len);
    cr_assert_eq(n, s.want_len);
    cr_assert(memcmp(out, s.want, n) == 0);
    cr_assert_eq(f.pings_taken, 1);
    cr_assert(f.pong_len == 3 && memcmp(f.pong, "srv", 3) == 0);
}

Test(ws_frames, the_scan_reports_each_header_once_whatever_the_pieces)
{
    stream_t s;

    memset(&s, 0, sizeof(s));
    static uint8_t big[300];
    memset(big, 'x', 300);
    frame(&s, 0x8A, 0, (const uint8_t *)"pong", 4, 0);
    frame(&s, 0x82, 0, big, 300, 0);
    frame(&s, 0x89, 0, NULL, 0, 0);
    frame(&s, 0x8A, 0, NULL, 0, 0);
    for (size_t step = 1; step <= s.len; ++step) {
        gw_ws_scan_t scan;
        int ops[8], nops = 0, done;
        memset(&scan, 0, sizeof(scan));
        for (size_t at = 0; at < s.len;) {
            size_t end = at + step < s.len ? at + step : s.len;
            while (at != end) {
                size_t k = gw_ws_scan_feed(&scan, s.bytes + at, end - at, &done);
                cr_assert_neq(k, 0);
                at += k;
                if (done) {
                    cr_assert_lt(nops, 8);
                    ops[nops++] = scan.hdr[0] & 0x0f;
                }
            }
        }
        cr_assert_eq(nops, 4, "step %zu: %d headers", step, nops);
        cr_assert(ops[0] == GW_WS_OP_PONG && ops[1] == 0x2 && ops[2] == GW_WS_OP_PING && ops[3] == GW_WS_OP_PONG, "step %zu", step);
    }
}
