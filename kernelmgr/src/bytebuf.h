/* kernelmgr/src/bytebuf.h: a growable byte queue: bytes are added at its end (or, rarely, its front) and consumed from its front.
 */
#ifndef KMGR_BYTEBUF_H
#define KMGR_BYTEBUF_H

#include <stddef.h>
#include <stdint.h>

/* The smallest allocation of a buffer. */
#define KMGR_BYTEBUF_MIN_BYTES ((size_t)16 * 1024)

/** `data[start, end)` is what is pending; consuming is `start += n`. Zero-filled is empty. */
typedef struct st_kmgr_bytebuf_t {
    uint8_t *data;
    size_t start, end, cap;
} kmgr_bytebuf_t;

static inline size_t kmgr_bytebuf_size(const kmgr_bytebuf_t *b)
{
    return b->end - b->start;
}

/** Frees the storage; the buffer is empty (and zero-filled) after. */
void kmgr_bytebuf_free(kmgr_bytebuf_t *b);
/** Makes room for `n` more bytes at the end, moving what is pending to the front first; grows by doubling. */
void kmgr_bytebuf_reserve(kmgr_bytebuf_t *b, size_t n);
/** Appends `n` bytes. */
void kmgr_bytebuf_append(kmgr_bytebuf_t *b, const void *p, size_t n);
/** Puts `n` bytes before what is pending. */
void kmgr_bytebuf_prepend(kmgr_bytebuf_t *b, const void *p, size_t n);

#endif
