/* jupyter/replay.h: what a kernel sent to a Jupyter client while its WebSocket was away, kept for its return (pure: no I/O). */
#ifndef GW_JUPYTER_REPLAY_H
#define GW_JUPYTER_REPLAY_H

#include <stddef.h>
#include <stdint.h>
#include <h2o/linklist.h>
#include "core/idmap.h"
#include "wire/frames.h"
#include "wire/message.h"
#include "jupyter/framing.h"

/* ---- the requests a client awaits ---- */

/** Requests one client awaits replies to; beyond it the oldest is forgotten (a client that sent this many is not waiting). */
#define GW_JASKED_MAX 4096

/**
 * The msg_ids of the requests a client sent and whose replies are its own: a shell or control reply,
 * and a stdin input request, with that parent go to this client only (Jupyter Server gives each
 * connection its own shell, control and stdin sockets). Embedded: _init / _dispose.
 */
typedef struct st_gw_jasked_t {
    gw_idmap_t by_id;
    h2o_linklist_t fifo; /* oldest first */
    size_t count;
} gw_jasked_t;

void gw_jasked_init(gw_jasked_t *asked);
/** Forgets every request and frees the table. */
void gw_jasked_dispose(gw_jasked_t *asked);
/** Remembers request `msg_id` (copied); a known one is kept as it is. */
void gw_jasked_add(gw_jasked_t *asked, const char *msg_id);
/**
 * Whether a kernel message on `channel` with parent `parent_id` is this client's: iopub always is; a
 * shell or control reply, or a stdin request, when its parent is awaited. A shell or control reply
 * ends the wait (one reply per request); an input request does not (the reply follows it).
 */
int gw_jasked_claim(gw_jasked_t *asked, wire_channel_t channel, const char *parent_id);
/** Forgets every request (a restart: their replies will never come). */
void gw_jasked_clear(gw_jasked_t *asked);
/** Moves every request of `from` into `to` (oldest first, within GW_JASKED_MAX); `from` is left empty. */
void gw_jasked_move(gw_jasked_t *to, gw_jasked_t *from);

/* ---- the buffer of an absent client ---- */

/** The bytes kept for a client away (--jupyter-replay-bytes) and for how long (--jupyter-replay-ms), by default. */
#define GW_JREPLAY_DEFAULT_BYTES ((size_t)16 << 20)
#define GW_JREPLAY_DEFAULT_MS 60000
/** Past the byte bound, replies and iopub `status` messages are still kept within this many more bytes (see below). */
#define GW_JREPLAY_RESERVE_BYTES ((size_t)64 << 10)

/**
 * The kernel's messages for one absent client (a session_id whose last WebSocket on a kernel
 * closed), in arrival order, each kept as the bytes the kernel sent (its four JSON parts and its
 * buffers: nothing is re-encoded, so a returning client may use either framing).
 *
 * Bounded: every kept message costs its bytes plus a fixed overhead against `max_bytes`. Once a
 * message does not fit, output is lost for good: later iopub messages other than `status` are
 * dropped, while replies, input requests and status messages are still kept within
 * GW_JREPLAY_RESERVE_BYTES more, so that the returning client learns its requests ended
 * (JupyterLab marks a cell finished on its execute_reply and idle; without them a cell would stay
 * busy forever, which is the failure this buffer exists to prevent); past the reserve nothing is
 * kept. The loss is told where it happened: replay yields, in place of the first dropped message,
 * an iopub `stream` to `stderr` naming how many messages and bytes were lost, whose parent header is
 * that message's parent (the request whose output was lost, so that JupyterLab shows the notice in
 * that cell's output, before its execute_reply ends the cell), rather than only logging it: the
 * person looking at the notebook is the one who needs to know the output is incomplete.
 */
typedef struct st_gw_jreplay_t gw_jreplay_t;

/**
 * A buffer for client `session_id` (copied), keeping at most `max_bytes` (plus the reserve), whose
 * content is worthless after `expires_at_ms` (the caller's clock: gw_jreplay_is_expired compares).
 * `asked`: the requests the client awaited, moved in (left empty). Destroy with gw_jreplay_destroy.
 */
gw_jreplay_t *gw_jreplay_create(const char *session_id, size_t max_bytes, int64_t expires_at_ms, gw_jasked_t *asked);
/** Frees the buffer and everything it kept; accepts NULL. */
void gw_jreplay_destroy(gw_jreplay_t *replay);

/** The session_id the buffer is for (NUL-terminated; lives as long as the buffer). */
const char *gw_jreplay_session(const gw_jreplay_t *replay);
/**
 * Whether a client connecting with `session_id` (NULL or "": it sent none) is the one the buffer is
 * for: the same non-empty session_id. Any other client of the kernel means the absent one is not
 * coming back (Jupyter Server's get_buffer): its owner drops the buffer.
 */
int gw_jreplay_is_for(const gw_jreplay_t *replay, const char *session_id);
/** True once `now_ms` has reached the buffer's expiry: its owner drops it. */
int gw_jreplay_is_expired(const gw_jreplay_t *replay, int64_t now_ms);

/**
 * Offers a message the kernel sent: `parts` are its four JSON parts then `nparts - 4` buffers, as
 * the tap hands them (borrowed; copied when kept), `msg_type` and `parent_id` from its decoded
 * header and parent header. What is not the client's (gw_jasked_claim) is ignored. Returns 1 when
 * kept, 0 when not the client's, or -1 when dropped over the bound (counted for the notice).
 */
int gw_jreplay_offer(gw_jreplay_t *replay, wire_channel_t channel, const char *msg_type, const char *parent_id,
                     const wire_frame_t *parts, size_t nparts);

/**
 * A message the kernel sent on `channel` was dropped over the message cap before kgate saw it whole
 * (gw_context_tap_t.on_dropped): counted as lost like one dropped over the bound, with `parent`
 * (`parent_len` bytes of JSON text, or NULL: unknown) as the loss notice's parent when it is the first.
 * Ignored when it is not the client's (a reply to another client's request).
 */
void gw_jreplay_note_dropped(gw_jreplay_t *replay, wire_channel_t channel, const char *parent, size_t parent_len);

/** Messages kept, and the bytes they are charged (overhead included: what `max_bytes` bounds). */
size_t gw_jreplay_count(const gw_jreplay_t *replay);
size_t gw_jreplay_bytes(const gw_jreplay_t *replay);
/** Messages dropped over the bound, and the bytes of their parts. */
size_t gw_jreplay_lost(const gw_jreplay_t *replay, size_t *lost_bytes);

/**
 * Hands every kept message to `fn`, oldest first, as a gw_jmsg_t ready for gw_jmsg_encode (its views
 * valid for the call only), with the loss notice in place of the first dropped message. A kept
 * message whose header cannot be read (it was relayed before, so never in practice) is skipped.
 * Then moves the requests still awaited into `asked` (the returning connection's), so that the
 * replies still to come reach it. The buffer is left empty of messages; destroy it afterwards.
 */
void gw_jreplay_drain(gw_jreplay_t *replay, void (*fn)(void *data, const gw_jmsg_t *msg), void *data, gw_jasked_t *asked);

#endif
