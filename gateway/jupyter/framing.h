/* jupyter/framing.h: Jupyter kernel WebSocket messages to message parts and back, in both framings (pure: no I/O). */
#ifndef GW_JUPYTER_FRAMING_H
#define GW_JUPYTER_FRAMING_H

#include <stddef.h>
#include <stdint.h>
#include <h2o/memory.h>
#include "wire/connfile.h"
#include "wire/frames.h"
#include "wire/message.h"

/** The subprotocol that selects GW_JFRAMING_V1 (offered in Sec-WebSocket-Protocol; without it, legacy). */
#define GW_JFRAMING_V1_PROTOCOL "v1.kernel.websocket.jupyter.org"

/**
 * The two framings of Jupyter Server's /api/kernels/{id}/channels (jupyter_server 1.23,
 * base/zmqhandlers.py and services/kernels/handlers.py; @jupyterlab/services' kernel/serialize.ts):
 * - GW_JFRAMING_V1: binary frames only. An offsets table of 8-byte little-endian integers: its
 *   count n, then n offsets from the start of the message: the channel name's start (always the
 *   table's end, 8 * (n + 1)), then the end of the channel name, of header, parent_header,
 *   metadata, content and of each buffer (so n = 6 + buffers); the last offset is the message's
 *   length. The channel name and the parts follow the table, back to back.
 * - GW_JFRAMING_LEGACY: a text frame holding one JSON object {"header", "parent_header",
 *   "metadata", "content", "channel", "buffers"} (Jupyter Server adds "msg_id" and "msg_type"
 *   copied from the header), or, for a message with buffers, a binary frame: a big-endian 4-byte
 *   count k, k big-endian 4-byte offsets (the first is the table's end, 4 * (k + 1)), then the
 *   message's JSON object without "buffers" and the k - 1 buffers; the last part runs to the end.
 */
typedef enum { GW_JFRAMING_LEGACY, GW_JFRAMING_V1 } gw_jframing_t;

/** Indexes of gw_jmsg_t.parts, in the order of the wire. */
enum { GW_JMSG_PART_HEADER, GW_JMSG_PART_PARENT_HEADER, GW_JMSG_PART_METADATA, GW_JMSG_PART_CONTENT, GW_JMSG_NUM_PARTS };

/** Most buffers in one message, both ways (a count beyond it is refused: GW_EJMSG_TOOMANYBUFFERS). */
#define GW_JMSG_MAX_BUFFERS 1024
/** Longest header.msg_id and header.msg_type accepted, in bytes (the relay keys requests on them). */
#define GW_JMSG_ID_MAX 255
#define GW_JMSG_TYPE_MAX 127

/**
 * One Jupyter message as parts: its channel, the JSON texts of its header, parent_header, metadata
 * and content, and its binary buffers. `parts` and `buffers` are views: into the decoded WebSocket
 * message, into the caller's frames, or into `_storage` when the bytes had to be produced (legacy
 * JSON re-rendered compactly, a kgate message rendered). A gw_jmsg_t filled by a function below
 * must be released with gw_jmsg_dispose; the views it holds of the caller's bytes live as long as
 * those bytes.
 */
typedef struct st_gw_jmsg_t {
    wire_channel_t channel; /* shell, control or stdin from a client; any but hb from a kernel */
    wire_frame_t parts[GW_JMSG_NUM_PARTS];
    const wire_frame_t *buffers;
    size_t nbuffers;
    /* header.msg_id and header.msg_type, NUL-terminated, neither empty nor holding a NUL */
    char msg_id[GW_JMSG_ID_MAX + 1];
    char msg_type[GW_JMSG_TYPE_MAX + 1];
    char *_storage;              /* owned (wire_malloc) or NULL */
    wire_frame_t *_buffer_views; /* owned (wire_malloc) or NULL */
} gw_jmsg_t;

/**
 * Decodes one WebSocket message a client sent (`is_binary`: the frame's opcode) in `framing` into
 * `out` (overwritten). Returns 0 or a GW_EJMSG_* code (core/errors.h; gw_strerror describes it, in
 * fewer than 123 bytes, fit for a close reason). On error `out` holds nothing to dispose.
 * - V1: a binary frame laid out exactly as above (nothing before, between or after the parts);
 *   `parts` and `buffers` are views into `data`, which must outlive `out`: nothing is copied.
 * - LEGACY, text: the JSON object is parsed and each part rendered compactly into `_storage`.
 *   "channel" absent or null means shell, as in Jupyter Server; "parent_header", "metadata" and
 *   "content" absent or null become {}; "buffers" must be absent, null or [] (a text frame has no
 *   room for bytes); other members ("msg_id", "msg_type") are ignored.
 * - LEGACY, binary: the same for its JSON part ("buffers" in it ignored, as Jupyter Server does);
 *   the buffers are views into `data`.
 * Checks, in order: the framing (GW_EJMSG_NOTBINARY: a v1 text frame; GW_EJMSG_TRUNCATED: shorter
 * than its table; GW_EJMSG_PARTCOUNT: fewer offsets than parts; GW_EJMSG_TOOMANYBUFFERS; GW_EJMSG_OFFSETS:
 * the first offset is not the table's end, offsets decrease or pass the end, or v1's last is not the
 * end), then JSON (GW_EJMSG_NOTJSON: the legacy message or a part is no JSON object, invalid UTF-8
 * included; GW_EJMSG_TEXTBUFFERS), then the header (GW_EJMSG_HEADER: msg_id or msg_type missing,
 * not a string, empty, holding "\u0000" or longer than GW_JMSG_ID_MAX / GW_JMSG_TYPE_MAX), and last
 * the channel (GW_EJMSG_CHANNEL: not shell, control or stdin, iopub and hb included). So
 * GW_EJMSG_CHANNEL alone means a well-formed message on a channel a client cannot send on: Jupyter
 * Server logs such a message and drops it, and closes the connection on the other errors.
 */
int gw_jmsg_decode(gw_jframing_t framing, int is_binary, const uint8_t *data, size_t len, gw_jmsg_t *out);

/**
 * Fills `out` (overwritten) with views of a kernel's message: `parts` the four JSON frames after
 * the signature, as the kernel sent them, and the `nbuffers` frames after them; the caller's
 * frames must outlive `out`. Only the header is parsed, for msg_id and msg_type; the other parts
 * are trusted to be JSON texts (wire_decode checked them), which legacy framing embeds as they are.
 * Returns 0, GW_EJMSG_NOTJSON (a header that is no JSON object), GW_EJMSG_HEADER (as for
 * gw_jmsg_decode) or GW_EJMSG_CHANNEL (hb or out of range); on error `out` holds nothing to dispose.
 */
int gw_jmsg_from_parts(gw_jmsg_t *out, wire_channel_t channel, const wire_frame_t parts[GW_JMSG_NUM_PARTS],
                       const wire_frame_t *buffers, size_t nbuffers);

/**
 * Fills `out` (overwritten) from a message kgate holds as JSON (one it created, such as the iopub
 * status {"execution_state": "restarting"} Jupyter Server sends when a kernel restarts or dies):
 * the four members are rendered compactly into `_storage`; the buffers are views of
 * `msg->buffers`, which must outlive `out`. Returns 0, GW_EJMSG_HEADER or GW_EJMSG_CHANNEL (as for
 * gw_jmsg_from_parts); on error `out` holds nothing to dispose.
 */
int gw_jmsg_from_wire(gw_jmsg_t *out, wire_channel_t channel, const wire_msg_t *msg);

/** Releases what `msg` owns and zeroes it; accepts a zeroed struct (and may be called twice). */
void gw_jmsg_dispose(gw_jmsg_t *msg);

/** The most iovecs one encoded message takes (legacy with buffers: 9 + one per buffer). */
#define GW_JMSG_ENCODED_IOV_MAX (9 + GW_JMSG_MAX_BUFFERS)

/**
 * One message encoded for a client: `iov[0..iovcnt)`, concatenated, is the WebSocket message, a
 * binary frame if `is_binary`. The iovecs point into the message's parts and buffers (never
 * copied) and into this struct's private scratch (the offsets table, the legacy JSON around the
 * parts). About 27 KiB: a local of the sending function, or one per connection.
 */
typedef struct st_gw_jmsg_encoded_t {
    int is_binary;
    size_t iovcnt;
    h2o_iovec_t iov[GW_JMSG_ENCODED_IOV_MAX];
    /* the offsets table and what directly follows it (v1: the channel name; legacy: `{"header":`) */
    uint8_t _head[8 * (1 + 6 + GW_JMSG_MAX_BUFFERS) + 16];
    /* legacy: `,"msg_id":"...","msg_type":"...","parent_header":` (an escaped character takes at most 6 bytes), then the
     * closing `,"buffers":[],"channel":"..."}` */
    char _glue[128 + 6 * (GW_JMSG_ID_MAX + GW_JMSG_TYPE_MAX)];
} gw_jmsg_encoded_t;

/**
 * Encodes `msg` (filled by a gw_jmsg_* function above) for a client in `framing`, into `out`, whose
 * iovecs are then valid as long as `out` and the bytes `msg` views; send them with gw_ws_sendv
 * (core/ws.h), which copies. Nothing is allocated.
 * - V1: the layout above, always a binary frame.
 * - LEGACY: without buffers, a text frame: the object Jupyter Server sends, compact, in its member
 *   order: {"header":H,"msg_id":"..","msg_type":"..","parent_header":P,"metadata":M,"content":C,
 *   "buffers":[],"channel":"iopub"} (H, P, M and C verbatim; Jupyter Server in gateway mode reads
 *   the top-level msg_id and msg_type); with buffers, the legacy binary frame, whose JSON part is
 *   the same object without "buffers".
 * Returns 0, GW_EJMSG_CHANNEL (hb or out of range), GW_EJMSG_TOOMANYBUFFERS (more than
 * GW_JMSG_MAX_BUFFERS) or GW_EJMSG_TOOBIG (legacy binary: an offset beyond 32 bits).
 */
int gw_jmsg_encode(gw_jframing_t framing, const gw_jmsg_t *msg, gw_jmsg_encoded_t *out);

#endif
