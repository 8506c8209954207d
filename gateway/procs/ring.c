/* An in-memory output ring with absolute offsets, growing on demand up to its bound. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "procs/cmdlog.h"
#include "procs/ring.h"

/* the first allocation: most sessions print little */
#define RING_MIN_ALLOC 4096

void gw_ring_init(gw_ring_t *ring, size_t cap)
{
    memset(ring, 0, sizeof(*ring));
    ring->cap = cap;
}

void gw_ring_dispose(gw_ring_t *ring)
{
    free(ring->buf);
    ring->buf = NULL;
    ring->size = 0;
}

void gw_ring_append(gw_ring_t *ring, const void *bytes, size_t len)
{
    const char *p = bytes;
    gw_cmdlog_span_t span;

    if (len == 0)
        return;
    /* while the ring is smaller than its bound, the bytes lie at [0, total): the byte at offset o is
     * at o % cap whether or not the ring is full, which is what gw_cmdlog_plan addresses */
    if (ring->size < ring->cap && ring->total + len > ring->size) {
        size_t want = ring->size * 2 > RING_MIN_ALLOC ? ring->size * 2 : RING_MIN_ALLOC;
        if (want < ring->total + len)
            want = (size_t)ring->total + len;
        ring->size = want < ring->cap ? want : ring->cap;
        ring->buf = wire_realloc(ring->buf, ring->size);
    }
    /* where the appended bytes will be read from is where they go (the oldest of them skipped past `cap`) */
    gw_cmdlog_plan(ring->total + len, ring->cap, ring->total, len, &span);
    memcpy(ring->buf + span.file_off[0], p + span.skipped, span.seg_len[0]);
    memcpy(ring->buf, p + span.skipped + span.seg_len[0], span.seg_len[1]);
    ring->total += len;
}

size_t gw_ring_read(const gw_ring_t *ring, uint64_t since, uint64_t *start, h2o_iovec_t segs[2])
{
    gw_cmdlog_span_t span;

    /* the same ring arithmetic as a command's log file, here over memory */
    gw_cmdlog_plan(ring->total, ring->cap, since, SIZE_MAX, &span);
    *start = span.start;
    if (span.len == 0) {
        segs[0] = segs[1] = h2o_iovec_init(NULL, 0);
        return 0;
    }
    segs[0] = h2o_iovec_init(ring->buf + span.file_off[0], span.seg_len[0]);
    segs[1] = h2o_iovec_init(ring->buf + span.file_off[1], span.seg_len[1]);
    return span.len;
}
