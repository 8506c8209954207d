/* kernelmgr/src/bytebuf.h: a growable byte queue: bytes are added at its end (or, rarely, its front) and consumed from its front.
 */
#ifndef KMGR_BYTEBUF_H
#define KMGR_BYTEBUF_H

#include <stddef.h>
#include <stdint.h>
#include "wire/buf.h"

/* The smallest allocation of a buffer. */
#define KMGR_BYTEBUF_MIN_BYTES ((size_t)16 * 1024)

/**
 * `data[start, end)` is what is pending; consuming is `start += n`. Zero-filled is empty. The storage is a wire_buf_t
 * (`buf`, `data` is buf->data): a holder of the bytes already read (a message's view) may keep a reference to it. The
 * queue then never writes, moves or grows that storage again: its next write (reserve, append, prepend) or clear takes
 * new storage, with what is pending copied there, and drops its own reference.
 */
typedef struct st_kmgr_bytebuf_t {
    wire_buf_t *buf;
    uint8_t *data;
    size_t start, end, cap;
} kmgr_bytebuf_t;

static inline size_t kmgr_bytebuf_size(const kmgr_bytebuf_t *b)
{
    return b->end - b->start;
}

/** Drops the storage (the queue's reference to it); the buffer is empty (and zero-filled) after. */
void kmgr_bytebuf_free(kmgr_bytebuf_t *b);
/** Empties the queue: its storage stays for reuse unless another holder keeps it (then the queue lets it go). */
void kmgr_bytebuf_clear(kmgr_bytebuf_t *b);
/** Makes room for `n` more bytes at the end, moving what is pending to the front first; grows by doubling. */
void kmgr_bytebuf_reserve(kmgr_bytebuf_t *b, size_t n);
/** Appends `n` bytes. */
void kmgr_bytebuf_append(kmgr_bytebuf_t *b, const void *p, size_t n);
/** Puts `n` bytes before what is pending. */
void kmgr_bytebuf_prepend(kmgr_bytebuf_t *b, const void *p, size_t n);

#endif
