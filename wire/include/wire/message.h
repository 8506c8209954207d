/* wire/message.h: the Jupyter message model (identities, header, parent, metadata, content, buffers). */
#ifndef WIRE_MESSAGE_H
#define WIRE_MESSAGE_H

#include <jansson.h>
#include "wire/buf.h"
#include "wire/frames.h"

/** Protocol version kgate speaks and puts in every header it creates. */
#define WIRE_PROTOCOL_VERSION "5.3"

/**
 * One message. Every member is owned by the message: the JSON members are references held by it
 * (never NULL once created or decoded; empty objects where the protocol has nothing), the frame
 * lists own their bytes. For iopub messages the first identity is the topic.
 */
typedef struct st_wire_msg_t {
    wire_frames_t identities;
    json_t *header;
    json_t *parent_header;
    json_t *metadata;
    json_t *content;
    wire_frames_t buffers;
    /* set by wire_decode when the content frame could not be decoded (malformed, or JSON kgate cannot
     * represent, such as an integer beyond 64 bits): content is then an empty object */
    int content_undecodable;
    /* set by wire_decode_ex with WIRE_DECODE_SKIP_CONTENT: the content was verified, not parsed, and is an empty object */
    int content_skipped;
    /* set by wire_decode_ex with WIRE_DECODE_RAW_STREAM for a "stream" message (WIRE_DECODE_RAW_RESULT: a result): the content was
     * verified, not parsed, and is an empty object; its bytes are in raw_content until wire_msg_parse_raw_content turns them into
     * content. raw_content is a view of bytes in raw_storage, a reference the message holds (released by wire_msg_destroy or
     * wire_msg_parse_raw_content): the kernel connection's receive buffer the message was decoded from, or a copy of its own. A
     * holder that keeps the bytes past the message (an event that relays the text) takes its own reference to raw_storage. */
    int content_raw;
    wire_frame_t raw_content;
    wire_buf_t *raw_storage;
    /* set for a `stream` message that was over the message cap (kernelmgr/src/overcap.h): its raw content is
     * {"name": ..., "text": <the head of its text, as the kernel encoded it>}, and text_dropped the decoded bytes of the text
     * that were dropped after the head (what the user printed, not its JSON escapes) */
    int content_cut;
    uint64_t text_dropped;
} wire_msg_t;

/**
 * Creates a message of `msg_type` with a fresh header (new msg_id, `session`, username "kgate",
 * current date, protocol version), empty parent_header and metadata. Takes ownership of the
 * reference `content` (NULL means an empty object).
 */
wire_msg_t *wire_msg_create(const char *msg_type, const char *session, json_t *content);
/** Releases a message and everything it owns; accepts NULL. */
void wire_msg_destroy(wire_msg_t *msg);

/**
 * Makes `len` bytes at `bytes` the message's raw content (content_raw set), as a view of `storage` when it is not NULL
 * (the bytes lie in it; the message takes a reference), or a copy of its own otherwise. Any raw content it had goes.
 */
void wire_msg_set_raw_content(wire_msg_t *msg, const void *bytes, size_t len, wire_buf_t *storage);

/**
 * Makes `msg` a reply to `parent`: copies parent's header into msg's parent_header and parent's
 * identities into msg's identities (replacing what msg had). Used by kernels (server side).
 */
void wire_msg_set_parent(wire_msg_t *msg, const wire_msg_t *parent);

/** header.msg_type, or "" if absent. The string lives as long as the message. */
const char *wire_msg_type(const wire_msg_t *msg);
/** header.msg_id, or "" if absent. */
const char *wire_msg_id(const wire_msg_t *msg);
/** parent_header.msg_id, or "" if absent. */
const char *wire_msg_parent_id(const wire_msg_t *msg);

#endif
