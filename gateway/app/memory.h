/* app/memory.h: memory kgate freed goes back to the system after a burst (a flood, a big message), from the tick. */
#ifndef GW_APP_MEMORY_H
#define GW_APP_MEMORY_H

#include <stddef.h>
#include <stdint.h>

/*
 * glibc keeps what is freed in its heap for later mallocs: after a burst that allocated many small
 * blocks (queued frames, a big message's pieces), RSS stayed where the burst took it. Trimming
 * gives the free pages back (malloc_trim releases whole free pages anywhere in the heap, not only
 * at its top).
 */
typedef struct st_gw_memory_t {
    int64_t checked_ms; /* the last look at the heap */
    size_t free_floor;  /* the fewest free heap bytes seen since the last trim (pages of them may be released already) */
    uint64_t trims;     /* how many times the heap was trimmed */
} gw_memory_t;

/* A trim follows once this many more bytes lie free in the heap than at the last trim (or the fewest since). */
#define GW_MEMORY_TRIM_FREE_BYTES ((size_t)4 << 20)
/* How often the tick looks at the heap (mallinfo2 walks its free lists). */
#define GW_MEMORY_CHECK_MS 1000

void gw_memory_init(gw_memory_t *m);

/** From the app's tick: trims the heap when a burst left GW_MEMORY_TRIM_FREE_BYTES more of it free. */
void gw_memory_tick(gw_memory_t *m, int64_t now_ms);

#endif
