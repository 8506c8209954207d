/* WebSocket frame boundaries in a byte stream, and the pings an end answers itself instead of its frame parser. */
#include <string.h>
#include "core/ws_frames.h"

size_t gw_ws_header_size(const uint8_t *hdr)
{
    uint8_t len7 = hdr[1] & 0x7f;
    return 2 + ((hdr[1] & 0x80) != 0 ? 4 : 0) + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0);
}

uint64_t gw_ws_payload_size(const uint8_t *hdr)
{
    uint8_t len7 = hdr[1] & 0x7f;
    uint64_t v = 0;

    if (len7 < 126)
        return len7;
    for (int i = 0, n = len7 == 126 ? 2 : 8; i != n; ++i)
        v = v << 8 | hdr[2 + i];
    return v;
}

size_t gw_ws_scan_feed(gw_ws_scan_t *s, const uint8_t *p, size_t len, int *header_done)
{
    size_t need, k;

    *header_done = 0;
    if (len == 0)
        return 0;
    if (s->hdr_done && s->payload_left != 0) {
        k = len < s->payload_left ? len : (size_t)s->payload_left;
        s->payload_left -= k;
        return k;
    }
    if (s->hdr_done) {
        s->hdr_done = 0;
        s->hdr_len = 0;
    }
    need = s->hdr_len < 2 ? 2 : gw_ws_header_size(s->hdr);
    k = need - s->hdr_len < len ? need - s->hdr_len : len;
    memcpy(s->hdr + s->hdr_len, p, k);
    s->hdr_len += (uint8_t)k;
    /* the first two bytes say how long the rest of the header is */
    if (s->hdr_len == 2 && gw_ws_header_size(s->hdr) > 2)
        return k;
    if (s->hdr_len < need)
        return k;
    s->hdr_done = 1;
    s->payload_left = gw_ws_payload_size(s->hdr);
    *header_done = 1;
    return k;
}

void gw_ws_pings_init(gw_ws_pings_t *f, int from_client)
{
    memset(f, 0, sizeof(*f));
    f->from_client = from_client != 0;
}

static int is_answerable(const gw_ws_pings_t *f)
{
    const uint8_t *h = f->scan.hdr;
    return h[0] == (0x80 | GW_WS_OP_PING) && ((h[1] & 0x80) != 0) == f->from_client && (h[1] & 0x7f) <= GW_WS_MAX_CONTROL;
}

static void ping_taken(gw_ws_pings_t *f)
{
    /* a client's payload is masked with the key after the two header bytes (no extended length under 126) */
    for (uint8_t i = 0; i != f->ping_len; ++i)
        f->pong[i] = f->from_client ? f->ping[i] ^ f->scan.hdr[2 + i % 4] : f->ping[i];
    f->pong_len = f->ping_len;
    f->pong_wanted = 1;
    f->taking = 0;
    f->held_given = f->scan.hdr_len; /* its header is not the parser's either */
    ++f->pings_taken;
}

size_t gw_ws_pings_filter(gw_ws_pings_t *f, const uint8_t *in, size_t in_len, size_t *taken, uint8_t *out, size_t out_cap)
{
    gw_ws_scan_t *s = &f->scan;
    size_t i = 0, o = 0, k;
    int done;

    while (o != out_cap) {
        if (s->hdr_done && !f->taking && f->held_given < s->hdr_len) {
            /* a passed frame's header was held until it was whole: it goes first */
            k = (size_t)(s->hdr_len - f->held_given);
            k = k < out_cap - o ? k : out_cap - o;
            memcpy(out + o, s->hdr + f->held_given, k);
            o += k;
            f->held_given += (uint8_t)k;
            continue;
        }
        if (i == in_len)
            break;
        if (s->hdr_done && s->payload_left != 0) {
            k = in_len - i < s->payload_left ? in_len - i : (size_t)s->payload_left;
            if (f->taking) {
                memcpy(f->ping + f->ping_len, in + i, k); /* at most 125 bytes in all: is_answerable */
                f->ping_len += (uint8_t)k;
            } else {
                k = k < out_cap - o ? k : out_cap - o;
                memcpy(out + o, in + i, k);
                o += k;
            }
            gw_ws_scan_feed(s, in + i, k, &done);
            i += k;
            if (f->taking && s->payload_left == 0)
                ping_taken(f);
            continue;
        }
        i += gw_ws_scan_feed(s, in + i, in_len - i, &done);
        if (done) {
            f->held_given = 0;
            f->ping_len = 0;
            f->taking = (uint8_t)is_answerable(f);
            if (f->taking && s->payload_left == 0)
                ping_taken(f);
        }
    }
    *taken = i;
    return o;
}
