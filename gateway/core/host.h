/* core/host.h: what every feature borrows from the server: the loop, the configuration, shared timeouts. */
#ifndef GW_HOST_H
#define GW_HOST_H

#include <h2o.h>
#include "ksys/util.h"
#include "core/config.h"
#include "core/stats.h"

/**
 * The host of every feature. The server (app/) owns it and initialises it before any feature;
 * features keep a pointer for their whole life. h2o 2.2.5 has one h2o_timeout_t per fixed duration
 * (PLATFORM.md), so the durations several features share live here.
 */
typedef struct st_gw_host_t {
    h2o_loop_t *loop;
    const gw_config_t *config;
    h2o_timeout_t zero_timeout;  /* "later in this loop iteration": deferred work */
    h2o_timeout_t yield_timeout; /* 1 ms: after the next poll for I/O */
    h2o_timeout_t ping_timeout;  /* config->ping_interval_ms: keep-alive events */
    int shutting_down;           /* set once by the server; features refuse new work afterwards */
    /* "KGATE_INSTANCE=<token>" (kmgr_manager_instance_env), set by the server before any feature starts a
     * process: every child gets it in its environment (gw_spawn_env), so that a leftover of a dead kgate is found */
    const char *instance_env;
    /* --sandbox bwrap: the bwrap executable (resolved), set by the server once bwrap is known to work; NULL: shells,
     * commands and PTYs run as plain children. With it, the directories their sandbox hides and shows. */
    const char *sandbox_bwrap;
    const char *runtime_dir; /* kgate's: keys, connection files, logs (hidden in a sandbox) */
    const char *workspace;   /* the files root (bound read-write in a sandbox) */
    gw_stats_t stats;        /* the figures every feature counts into (core/stats.h; rendered by metrics/prometheus.h) */
} gw_host_t;

/** Initialises the timeouts on `loop`; `config` is borrowed for the host's life. */
void gw_host_init(gw_host_t *host, h2o_loop_t *loop, const gw_config_t *config);
/** Disposes the timeouts (every entry must be unlinked by then) and the figures. */
void gw_host_dispose(gw_host_t *host);

/** Schedules `entry` to run from the loop, later in this iteration (never inside the caller); no-op when already linked. */
void gw_host_defer(gw_host_t *host, h2o_timeout_entry_t *entry);

/** Monotonic milliseconds, the clock the kernel manager and the tick use (not wall time). */
static inline int64_t gw_now_ms(void)
{
    return (int64_t)ksys_now_ms();
}

#endif
