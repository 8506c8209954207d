/* wire/codec.h: encoding messages to ZMQ frame lists and decoding them back, with signatures. */
#ifndef WIRE_CODEC_H
#define WIRE_CODEC_H

#include "wire/frames.h"
#include "wire/message.h"
#include "wire/signer.h"

/** The frame that separates routing identities from the signed part of a message. */
#define WIRE_DELIMITER "<IDS|MSG>"

/**
 * Encodes `msg` as: identities..., "<IDS|MSG>", signature, header, parent_header, metadata,
 * content, buffers... The frames are appended to `out` (initialised by the caller), which owns
 * them afterwards. JSON is compact UTF-8.
 */
void wire_encode(const wire_signer_t *signer, const wire_msg_t *msg, wire_frames_t *out);

/**
 * Decodes the `n` frames of one multipart message. The signature is verified over the raw frames
 * before any JSON is parsed. On success returns 0 and stores a new message in `*out` (the caller
 * owns it). Errors: WIRE_ENODELIM (no delimiter), WIRE_ETRUNCATED (fewer than five frames after
 * the delimiter), WIRE_EBADSIG, WIRE_EBADJSON (a header, parent header or metadata frame that is
 * not a JSON object), WIRE_EBADHEADER (no string msg_id / msg_type). On error `*out` is untouched.
 * A content frame that cannot be decoded (not a JSON object, or one holding what jansson cannot
 * represent, such as an integer beyond 64 bits) does not fail the message: it is decoded with an
 * empty content and msg->content_undecodable set, so that its receiver can report the loss to
 * whoever awaited it (the headers still say which request it belongs to).
 */
int wire_decode(const wire_signer_t *signer, const wire_frame_t *frames, size_t n, wire_msg_t **out);

/** wire_decode_ex flags. */
enum {
    /**
     * Verify the whole message but parse no content: the message gets an empty content object and
     * content_skipped set. For a receiver that relays the content's bytes without reading them (a big
     * output whose text nobody in kgate needs): parsing it would cost as much as relaying it.
     */
    WIRE_DECODE_SKIP_CONTENT = 1,
    /**
     * Verify the whole message, but keep the content of a message whose header msg_type is "stream"
     * as bytes instead of parsing it (msg->content_raw, msg->raw_content; content is an empty object):
     * for a receiver that relays stream text without decoding and re-encoding it (wire/json_scan.h
     * finds the text in those bytes). Other messages decode as without the flag. SKIP_CONTENT wins.
     */
    WIRE_DECODE_RAW_STREAM = 2,
    /**
     * The same for `execute_result` and `display_data`: their MIME bundles are relayed as the kernel
     * encoded them (wire_json_scan_bundle), numbers of any size and precision included.
     */
    WIRE_DECODE_RAW_RESULT = 4,
};

/** wire_decode with `flags` (WIRE_DECODE_*). Raw content is a copy of its own (wire_decode_in with no storage). */
int wire_decode_ex(const wire_signer_t *signer, const wire_frame_t *frames, size_t n, int flags, wire_msg_t **out);

/**
 * wire_decode_ex for frames whose bytes lie in `storage` (a kernel connection's receive buffer): raw content is then a
 * view of the frames and the message holds a reference to `storage` (msg->raw_storage) instead of a copy, so that one
 * big stream message is in memory once. NULL `storage`: a copy, as wire_decode_ex.
 */
int wire_decode_in(const wire_signer_t *signer, const wire_frame_t *frames, size_t n, int flags, wire_buf_t *storage,
                   wire_msg_t **out);

/**
 * Parses the content that a decode with WIRE_DECODE_RAW_STREAM kept as bytes, with exactly the result
 * wire_decode would have had: on return msg->content is the parsed object, or an empty object with
 * msg->content_undecodable set, and the raw bytes are let go (raw_storage released, content_raw cleared). No-op on a message
 * without raw content.
 */
void wire_msg_parse_raw_content(wire_msg_t *msg);

/**
 * The same parse, leaving `msg` as it is (a receiver that holds it borrowed): returns a new reference
 * to the parsed content object, or NULL when wire_decode would have marked it content_undecodable.
 * `msg` must have raw content (content_raw).
 */
json_t *wire_msg_raw_content_parse(const wire_msg_t *msg);

/** The signed parts (header, parent_header, metadata, content, buffers...) of the decoded frames, which are `frames + n` of them.
 */
const wire_frame_t *wire_signed_parts(const wire_msg_t *msg, const wire_frame_t *frames, size_t *n);

#endif
