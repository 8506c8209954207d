/* procs/ring.h: output kept in memory, in a bounded ring addressed by ever-growing byte offsets. */
#ifndef GW_RING_H
#define GW_RING_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>

/**
 * The newest `cap` bytes of a stream. Offsets count every byte ever appended, so they only grow:
 * the byte at offset `o` is retained while `o >= total - cap`. Memory grows with the output, up
 * to `cap`, never beyond.
 */
typedef struct st_gw_ring_t {
    char *buf;
    size_t size; /* allocated; reaches cap once that much output arrived */
    size_t cap;
    uint64_t total; /* bytes appended so far: the offset of the end */
} gw_ring_t;

/** An empty ring that will keep at most `cap` (> 0) bytes. */
void gw_ring_init(gw_ring_t *ring, size_t cap);
/** Frees the bytes. */
void gw_ring_dispose(gw_ring_t *ring);
/** Appends `len` bytes; past `cap`, the oldest are dropped. */
void gw_ring_append(gw_ring_t *ring, const void *bytes, size_t len);

/**
 * The retained bytes from offset `since` to the end, as at most two views into the ring (valid
 * until the next append). `*start` is the offset of the first byte: larger than `since` when the
 * bytes in between were dropped, the end when `since` is at or past it. Returns the byte count.
 */
size_t gw_ring_read(const gw_ring_t *ring, uint64_t since, uint64_t *start, h2o_iovec_t segs[2]);

#endif
