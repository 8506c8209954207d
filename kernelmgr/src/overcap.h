/*
 * kernelmgr/src/overcap.h: a kernel message over the message cap, read as it is passed over (never held whole): when it is a
 * signed `stream` message, its text's head up to the cap is kept and delivered, with the exact count of what was dropped.
 *
 * The connection gives the message's frames before the one over the cap, whole (KMGR_ZSOCK_OVER_START), then that frame's bytes
 * as they arrive (KMGR_ZSOCK_OVER_PIECE). When that frame is the content (the delimiter, the signature, header, parent_header
 * and metadata came before it, together within KMGR_OVERCAP_HEADERS_MAX bytes), the HMAC runs over the four signed frames as
 * their bytes pass (wire/signer.h's stream) and the content is scanned (wire/text_scan.h), the head of its text written into a
 * buffer of at most the cap (kmgr_overcap_head_max), and of no more than its reader keeps: a run with 1 MiB of output budget
 * left has a head of at most 1 MiB decoded (kmgr_overcap_start's `room`), so the memory a message over the cap costs follows
 * what its reader can keep, not the cap. At the message's end the signature is checked, in constant time, and only then
 * is anything parsed or delivered: a message that does not verify (dropped as forged), is not a stream, or whose content is not a
 * stream's, delivers nothing (its owner reports it as any message over the cap). Memory: the head (at most the cap, at most
 * KMGR_OVERCAP_ESCAPE_MAX times `room`) plus KMGR_OVERCAP_HEADERS_MAX, for one message at a time per kernel.
 */
#ifndef KMGR_OVERCAP_H
#define KMGR_OVERCAP_H

#include <stddef.h>
#include <stdint.h>
#include "wire/buf.h"
#include "wire/frames.h"
#include "wire/message.h"
#include "wire/signer.h"
#include "wire/text_scan.h"

/* The header, parent_header and metadata frames of a message over the cap, together, beyond which it is passed over unread
 * (they are a few hundred bytes; the content is what is big). */
#define KMGR_OVERCAP_HEADERS_MAX ((size_t)64 * 1024)

/**
 * The longest head kept of a message over `cap`: the cap less KMGR_OVERCAP_HEADERS_MAX (half the cap when that leaves less than
 * half). The head and the message's other frames together then fit the cap, so what is delivered is no bigger than a message
 * the cap admits, and a consumer bound sized like the cap holds it with room to spare: a run's log (--max-run-log-bytes, the
 * same 64 MiB as the cap by default) keeps the head's event and the events that end its run, where an event of the cap's size
 * would push itself out as they come.
 */
static inline size_t kmgr_overcap_head_max(uint64_t cap)
{
    return (size_t)(cap / 2 > KMGR_OVERCAP_HEADERS_MAX ? cap - KMGR_OVERCAP_HEADERS_MAX : cap / 2);
}

/* The most encoded bytes one decoded byte of text takes (\u0001): a head of `room` decoded bytes fits this many times it. */
#define KMGR_OVERCAP_ESCAPE_MAX 6

/** One message over the cap being read (zero-filled: none). Owned by the channel's connection's owner (kmgr_channels_t). */
typedef struct st_kmgr_overcap_t {
    int active; /* the frame over the cap is a content being read */
    wire_signer_stream_t hmac;
    char sig[WIRE_SIG_HEX_LEN];
    size_t sig_len;
    char *headers; /* header, parent_header, metadata as they came, one after the other */
    size_t header_len, parent_len, metadata_len;
    wire_buf_t *content; /* {"name":"stdout","text":" then the head, closed at the end */
    wire_text_scan_t scan;
    uint64_t left; /* bytes of the content yet to come */
} kmgr_overcap_t;

/**
 * A message over the cap begins (KMGR_ZSOCK_OVER_START): `frames` (`nframes`, borrowed for the call) are its whole frames before
 * the one over the cap, `size` that frame's size. Starts reading it when it may be a stream message's content, keeping a head
 * of at most kmgr_overcap_head_max(`cap`) encoded bytes that decodes to at most `room` bytes (what the message's reader can
 * keep: UINT64_MAX for the cap alone, 0 to count only); anything left of an earlier one (its connection was lost) is let go.
 * Returns 1 when reading, 0 when the message is to be passed over unread.
 */
int kmgr_overcap_start(kmgr_overcap_t *oc, const wire_signer_t *signer, const wire_frame_t *frames, size_t nframes, uint64_t size,
                       uint64_t cap, uint64_t room);
/**
 * The parent_header frame among `frames` (a message over the cap's whole frames before the one over the cap), unverified, when
 * that one may be a stream's content: its owner asks who reads the message, to size the head (kmgr_overcap_start's `room`).
 * NULL when the message will be passed over unread.
 */
const wire_frame_t *kmgr_overcap_parent(const wire_frame_t *frames, size_t nframes);
/** The next `len` bytes of the frame over the cap (KMGR_ZSOCK_OVER_PIECE); nothing when not reading. */
void kmgr_overcap_piece(kmgr_overcap_t *oc, const void *p, size_t len);
/**
 * The message ended (KSYS_EMSGSIZE): a new message the caller owns when it was a verified stream message whose content was
 * read whole: header, parent_header and metadata parsed, its content raw (content_raw: {"name": ..., "text": <the head>}, in
 * a buffer of its own), `content_cut` set and `text_dropped` the decoded bytes of its text beyond the head. NULL otherwise:
 * `*forged` is then 1 when the message was read whole and its signature did not verify (whatever its type: it is not the
 * kernel's, and is dropped as any message with a bad signature is), else 0. Either way the reading is over and what it held
 * is released.
 */
wire_msg_t *kmgr_overcap_end(kmgr_overcap_t *oc, int *forged);
/** Releases what a reading in progress holds (a close, a lost connection); the state is zero-filled after. */
void kmgr_overcap_dispose(kmgr_overcap_t *oc);

#endif
