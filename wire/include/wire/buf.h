/* wire/buf.h: bytes shared by reference: a kernel connection's receive storage that a message's views, and an event, may keep. */
#ifndef WIRE_BUF_H
#define WIRE_BUF_H

#include <stddef.h>
#include <stdint.h>

/**
 * `cap` bytes at `data`, shared by counted references. Whoever holds a reference may read the bytes; only a sole holder
 * (refcnt 1) may write them, move them or grow them (wire_buf_grow): a view that another holder keeps never changes
 * under it. The last wire_buf_unref frees the storage. This is how one big message crosses kgate without a copy: the
 * connection reads it into a buffer, and what must outlive the connection's next read (an event that holds its text)
 * takes a reference instead of copying the bytes.
 */
typedef struct st_wire_buf_t {
    unsigned refcnt;
    size_t cap;
    uint8_t data[];
} wire_buf_t;

/** A new buffer of `cap` bytes (uninitialised) with refcnt 1. Out of memory aborts. */
wire_buf_t *wire_buf_new(size_t cap);
/** Takes a reference; returns `b`. */
wire_buf_t *wire_buf_ref(wire_buf_t *b);
/** Drops a reference; frees the buffer at zero. Accepts NULL. */
void wire_buf_unref(wire_buf_t *b);
/** The sole holder's buffer grown to `cap` bytes (its bytes kept; it may move: the old pointer is gone). refcnt must be 1. */
wire_buf_t *wire_buf_grow(wire_buf_t *b, size_t cap);
/** Nonzero when another holder keeps a reference: the bytes must not be written, moved or grown. */
static inline int wire_buf_shared(const wire_buf_t *b)
{
    return b->refcnt > 1;
}

#endif
