/* core/ws_frames.h: frame boundaries in a WebSocket byte stream, and the pings an end answers itself (pure). */
#ifndef GW_WS_FRAMES_H
#define GW_WS_FRAMES_H

#include <stddef.h>
#include <stdint.h>

#define GW_WS_OP_PING 0x9
#define GW_WS_OP_PONG 0xA
/* RFC 6455 5.5: a control frame's payload is at most this long */
#define GW_WS_MAX_CONTROL 125

/**
 * Where a byte stream of frames (RFC 6455 5.2) is: in a frame's header (its bytes kept in `hdr`) or in
 * its payload. It trusts the stream to be frames: what a malformed one does to the boundaries is left
 * to the frame parser reading the same bytes, which rejects it.
 */
typedef struct st_gw_ws_scan_t {
    uint8_t hdr[14];       /* the current frame's header, as far as it has come */
    uint8_t hdr_len;       /* bytes of it in hdr */
    uint8_t hdr_done;      /* hdr is whole; the next header byte starts a new frame */
    uint64_t payload_left; /* of the current frame, once its header is whole */
} gw_ws_scan_t;

/** Bytes in a frame header, from its first two. */
size_t gw_ws_header_size(const uint8_t *hdr);

/** The payload length a whole header says. */
uint64_t gw_ws_payload_size(const uint8_t *hdr);

/**
 * Takes bytes of the stream: header bytes until the header is whole, or payload bytes up to the
 * frame's end. Returns how many of `len` it took (0 only when `len` is 0); sets `*header_done` when a
 * header became whole with them (it is in s->hdr until the next frame's first byte), so the caller
 * calls again with the rest.
 */
size_t gw_ws_scan_feed(gw_ws_scan_t *s, const uint8_t *p, size_t len, int *header_done);

/**
 * A peer's frames on their way to the frame parser, without the pings this end answers itself, so
 * that a peer sending pings faster than it reads costs one pong, not one per ping (RFC 6455 5.5.3:
 * an end may answer only the most recent ping). A ping taken out is a whole one the parser would
 * accept: FIN set, no reserved bit, at most 125 bytes, masked as `from_client` says; any other frame
 * (a malformed ping too) passes as it came, for the parser to take or reject.
 */
typedef struct st_gw_ws_pings_t {
    gw_ws_scan_t scan;
    uint8_t from_client; /* the peer's frames are masked (this end is the server) */
    uint8_t taking;      /* the current frame is a ping taken out */
    uint8_t held_given;  /* of a passed frame's header, bytes given to the parser so far */
    uint8_t ping[GW_WS_MAX_CONTROL];
    uint8_t ping_len; /* the taken ping's payload so far */
    uint8_t pong[GW_WS_MAX_CONTROL];
    uint8_t pong_len;     /* the newest whole ping's payload, unmasked: what the pong carries */
    uint8_t pong_wanted;  /* a ping was taken since the owner last cleared it */
    uint64_t pings_taken; /* all of them */
} gw_ws_pings_t;

/** A filter for frames from a client (`from_client` 1) or from a server. */
void gw_ws_pings_init(gw_ws_pings_t *f, int from_client);

/**
 * Moves bytes from `in` to `out` until `in` is taken whole or `out` is full, leaving pings out.
 * `*taken` is set to the bytes of `in` taken (held header bytes and pings' bytes included); returns
 * the bytes written to `out`.
 */
size_t gw_ws_pings_filter(gw_ws_pings_t *f, const uint8_t *in, size_t in_len, size_t *taken, uint8_t *out, size_t out_cap);

#endif
