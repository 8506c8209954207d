/* Giving freed heap memory back to the system after a burst: one look per second from the tick, a trim when it pays. */
#include <malloc.h>
#include <string.h>
#include "app/memory.h"

void gw_memory_init(gw_memory_t *m)
{
    memset(m, 0, sizeof(*m));
    m->free_floor = mallinfo2().fordblks;
}

void gw_memory_tick(gw_memory_t *m, int64_t now_ms)
{
    size_t free_bytes;

    if (now_ms - m->checked_ms < GW_MEMORY_CHECK_MS)
        return;
    m->checked_ms = now_ms;
    /* free chunks stay counted as free once their pages are released: what is measured is the growth since the last trim */
    free_bytes = mallinfo2().fordblks;
    if (free_bytes < m->free_floor)
        m->free_floor = free_bytes;
    if (free_bytes - m->free_floor < GW_MEMORY_TRIM_FREE_BYTES)
        return;
    malloc_trim(0);
    ++m->trims;
    m->free_floor = mallinfo2().fordblks;
}
