/*
 * wire/zmtp_reader.h: a ZMTP 3.0 peer's byte stream into items (its greeting, commands, whole messages, messages passed over),
 * with no socket and no buffer of its own: the caller holds the bytes, and drops from their front what each item consumed.
 * kernelmgr's connection (kernelmgr/src/zsock.c) is its one user; tests/wire/test_zmtp_reader.c feeds it every split.
 */
#ifndef WIRE_ZMTP_READER_H
#define WIRE_ZMTP_READER_H

#include <stddef.h>
#include <stdint.h>
#include "wire/frames.h"

/* A command the peer sends is small (READY, PING, ERROR); a bigger one is a broken peer. */
#define WIRE_ZMTP_COMMAND_MAX_BYTES ((size_t)64 * 1024)
/* The longest parent_header of a message passed over that is kept (wire_zmtp_item_t.parent). */
#define WIRE_ZMTP_PARENT_MAX 2048

typedef enum {
    WIRE_ZMTP_NEED,            /* more bytes: at least `need` after what this item consumed */
    WIRE_ZMTP_GREETED,         /* the peer's greeting, checked */
    WIRE_ZMTP_CMD,             /* a command: `body`, `len` */
    WIRE_ZMTP_MESSAGE,         /* a whole message: `frames`, `nframes`, `bytes` */
    WIRE_ZMTP_OVER_START,      /* a message goes over max_message_bytes: its whole frames before the one that does (`frames`,
                                * `nframes`: until the next call) and that frame's size (`bytes`) */
    WIRE_ZMTP_OVER_PIECE,      /* the next bytes of that frame as they came (`body`, `len`: until the next call) */
    WIRE_ZMTP_OVERSIZED,       /* the message over max_message_bytes ended, passed over as its bytes came: `parent` */
    WIRE_ZMTP_TOO_MANY_FRAMES, /* a message of more than max_frames frames, passed over */
    WIRE_ZMTP_BROKEN,          /* the peer broke the protocol (`why`): the connection must go, and the reader be reset */
} wire_zmtp_kind_t;

/** What wire_zmtp_reader_next found. Its pointers point into the bytes given (or the reader) until the next call. */
typedef struct st_wire_zmtp_item_t {
    wire_zmtp_kind_t kind;
    size_t consumed; /* bytes at the front of the input this item used: the caller drops them (a MESSAGE's once it is done) */
    size_t need;
    const uint8_t *body;
    size_t len;
    const wire_frame_t *frames;
    size_t nframes, bytes;
    /* OVERSIZED: the message's parent_header frame as it came (unverified), when it arrived before the frame over the cap
     * and fit WIRE_ZMTP_PARENT_MAX; NULL otherwise */
    const char *parent;
    size_t parent_len;
    const char *why;
} wire_zmtp_item_t;

/** The reader's state between calls: where in the stream it is. Zero-filled then wire_zmtp_reader_init. */
typedef struct st_wire_zmtp_reader_t {
    uint64_t max_message_bytes;
    size_t max_frames;
    int greeted;
    wire_zmtp_kind_t skipping; /* OVERSIZED or TOO_MANY_FRAMES while passing over a message; NEED otherwise */
    uint64_t skip_left;
    int skip_more;
    int giving; /* the frame being skipped is the one that went over the cap: its bytes go out as OVER_PIECE items */
    wire_frame_t *frames;
    size_t frames_cap;
    char parent[WIRE_ZMTP_PARENT_MAX];
    size_t parent_len;
} wire_zmtp_reader_t;

/** A reader at the start of a stream; messages up to `max_message_bytes` (their frames together) and `max_frames` frames. */
void wire_zmtp_reader_init(wire_zmtp_reader_t *r, uint64_t max_message_bytes, size_t max_frames);
/** Back to the start of a stream (a new connection); keeps the bounds. */
void wire_zmtp_reader_reset(wire_zmtp_reader_t *r);
/** Frees the frame list. */
void wire_zmtp_reader_dispose(wire_zmtp_reader_t *r);

/**
 * The next item of the `len` bytes at `p` (what the caller holds of the stream after what earlier items consumed). Messages
 * are allowed only once `ready` (the handshake done: the caller decides it from the commands): one before is BROKEN. A
 * message over the bounds is passed over without holding it. One over max_message_bytes: an OVER_START item (its frames
 * before the one that crossed the cap, whole), OVER_PIECE items with that frame's bytes as they come (a caller may read
 * them on the fly: kernelmgr keeps the head of a stream message's text), NEED items that consume the frames after it,
 * then one OVERSIZED item ends it. One over max_frames: NEED items, then TOO_MANY_FRAMES. The reader never reads outside
 * [p, p + len).
 */
void wire_zmtp_reader_next(wire_zmtp_reader_t *r, const uint8_t *p, size_t len, int ready, wire_zmtp_item_t *item);

#endif
