/* kernelmgr/src/bytebuf.c: a growable byte queue (a connection's bytes in and out). */
#include <string.h>
#include "bytebuf.h"

static void set_storage(kmgr_bytebuf_t *b, wire_buf_t *buf)
{
    b->buf = buf;
    b->data = buf != NULL ? buf->data : NULL;
    b->cap = buf != NULL ? buf->cap : 0;
}

void kmgr_bytebuf_free(kmgr_bytebuf_t *b)
{
    wire_buf_unref(b->buf);
    memset(b, 0, sizeof(*b));
}

void kmgr_bytebuf_clear(kmgr_bytebuf_t *b)
{
    if (b->buf != NULL && wire_buf_shared(b->buf))
        kmgr_bytebuf_free(b);
    b->start = b->end = 0;
}

static size_t grown_cap(size_t cap, size_t size, size_t n)
{
    if (cap == 0)
        cap = KMGR_BYTEBUF_MIN_BYTES;
    while (cap < size || cap - size < n)
        cap *= 2;
    return cap;
}

/* Another holder keeps the storage: what is pending moves to new storage with room for `n` more, the other keeps the old. */
static void unshare(kmgr_bytebuf_t *b, size_t n)
{
    size_t size = kmgr_bytebuf_size(b);
    wire_buf_t *buf = wire_buf_new(grown_cap(KMGR_BYTEBUF_MIN_BYTES, size, n));

    memcpy(buf->data, b->data + b->start, size);
    wire_buf_unref(b->buf);
    set_storage(b, buf);
    b->start = 0;
    b->end = size;
}

void kmgr_bytebuf_reserve(kmgr_bytebuf_t *b, size_t n)
{
    size_t size = kmgr_bytebuf_size(b);

    if (b->buf != NULL && wire_buf_shared(b->buf)) {
        unshare(b, n);
        return;
    }
    if (b->cap - b->end >= n)
        return;
    if (b->start != 0) {
        memmove(b->data, b->data + b->start, size);
        b->start = 0;
        b->end = size;
        if (b->cap - b->end >= n)
            return;
    }
    size_t cap = grown_cap(b->cap, size, n);
    set_storage(b, b->buf != NULL ? wire_buf_grow(b->buf, cap) : wire_buf_new(cap));
}

void kmgr_bytebuf_append(kmgr_bytebuf_t *b, const void *p, size_t n)
{
    kmgr_bytebuf_reserve(b, n);
    memcpy(b->data + b->end, p, n);
    b->end += n;
}

void kmgr_bytebuf_prepend(kmgr_bytebuf_t *b, const void *p, size_t n)
{
    size_t size = kmgr_bytebuf_size(b);

    if (b->buf != NULL && wire_buf_shared(b->buf))
        unshare(b, n);
    if (b->start >= n) {
        b->start -= n;
        memcpy(b->data + b->start, p, n);
        return;
    }
    kmgr_bytebuf_reserve(b, n); /* room for n more after what is pending, which may have moved to the front */
    memmove(b->data + b->start + n, b->data + b->start, size);
    memcpy(b->data + b->start, p, n);
    b->end = b->start + n + size;
}
