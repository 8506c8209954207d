/* kernelmgr/src/bytebuf.c: a growable byte queue (a connection's bytes in and out). */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "bytebuf.h"

void kmgr_bytebuf_free(kmgr_bytebuf_t *b)
{
    free(b->data);
    memset(b, 0, sizeof(*b));
}

void kmgr_bytebuf_reserve(kmgr_bytebuf_t *b, size_t n)
{
    size_t size = kmgr_bytebuf_size(b);

    if (b->cap - b->end >= n)
        return;
    if (b->start != 0) {
        memmove(b->data, b->data + b->start, size);
        b->start = 0;
        b->end = size;
        if (b->cap - b->end >= n)
            return;
    }
    size_t cap = b->cap != 0 ? b->cap : KMGR_BYTEBUF_MIN_BYTES;
    while (cap - size < n)
        cap *= 2;
    b->data = wire_realloc(b->data, cap);
    b->cap = cap;
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
