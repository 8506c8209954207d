/* procs/reaper.h: sandboxes still there after their SIGKILL's grace (a process in uninterruptible sleep on a slow disk): reaped
 * from the tick at a slow rate, their directories removed only once they are gone. */
#ifndef GW_REAPER_H
#define GW_REAPER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Sandboxes held at most at once: past it a sandbox is logged and left as it is (a zombie, its directory kept). */
#define GW_REAPER_MAX 64
/* How often the held sandboxes are checked (at most: the tick decides when). */
#define GW_REAPER_INTERVAL_MS 1000

typedef struct st_gw_reaper_entry_t {
    pid_t child; /* a child of kgate, waited for; 0: reaped */
    pid_t other; /* a process that is not kgate's child (a sandbox's pid 1), watched until gone; 0: gone */
    char *dir;   /* removed once both are gone; NULL: none */
} gw_reaper_entry_t;

typedef struct st_gw_reaper_t {
    gw_reaper_entry_t entries[GW_REAPER_MAX];
    size_t count;
    unsigned interval_ms; /* GW_REAPER_INTERVAL_MS; tests lower it */
    int64_t next_ms;      /* gw_now_ms: the next check */
} gw_reaper_t;

void gw_reaper_init(gw_reaper_t *r);
/**
 * Takes over a sandbox that SIGKILL did not end in time: `child` (kgate's child, not reaped yet; 0: none), `other` (0: none)
 * and `dir` (taken over, NULL: none). Never waits. When GW_REAPER_MAX are held already, logs it and frees `dir`'s string
 * without removing the directory (a live sandbox may still use it).
 */
void gw_reaper_adopt(gw_reaper_t *r, pid_t child, pid_t other, char *dir);
/**
 * Every interval_ms (`now`: gw_now_ms): SIGKILL again and a waitpid(WNOHANG) for each held sandbox; one that is gone has its
 * directory handed to ksys_rmtree_detached and is forgotten.
 */
void gw_reaper_tick(gw_reaper_t *r, int64_t now);
/** How many sandboxes are held. */
size_t gw_reaper_count(const gw_reaper_t *r);
/** kgate's exit: a last check, then the directories of sandboxes that never went are removed now, in the caller. */
void gw_reaper_dispose(gw_reaper_t *r);

#endif
