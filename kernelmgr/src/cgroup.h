/* kernelmgr/src/cgroup.h: control groups for kernels (memory, pids, cpu) where kgate may create them: v1 or v2. */
#ifndef KMGR_CGROUP_H
#define KMGR_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include "kmgr/sandbox.h"

enum { KMGR_CG_MEMORY, KMGR_CG_PIDS, KMGR_CG_CPU, KMGR_CG_COUNT };

/**
 * The parents kgate made for its kernels' groups, one per controller ("<controller's mount><kgate's
 * group>/kgate-<pid>-<start time>-<pid namespace>" in v1; one directory for all three in v2, where kgate first moves itself into a
 * leaf of its own group, as a delegated manager must). A NULL parent: that controller is unusable.
 */
typedef struct st_kmgr_cgroups_t {
    int version; /* 1, 2, or 0: none */
    char *parents[KMGR_CG_COUNT];
    /* groups whose last processes were still exiting when their kernel went: removed by kmgr_cgroups_tick */
    char **stale;
    size_t nstale;
    char mechanism[512]; /* for the start-up log line: which mechanism enforces memory and process limits */
} kmgr_cgroups_t;

/** One kernel incarnation's groups (a directory per usable controller, NULL otherwise). */
typedef struct st_kmgr_cgroup_t {
    kmgr_cgroups_t *owner;
    char *dirs[KMGR_CG_COUNT];
} kmgr_cgroup_t;

/**
 * Finds out what this host allows and creates the parents. Never fails: what cannot be used is left
 * NULL. First it sweeps (kmgr_cgroups_sweep): what a kgate killed with SIGKILL left goes; what is
 * not gone within about 100 ms is retried by kmgr_cgroups_tick.
 */
void kmgr_cgroups_init(kmgr_cgroups_t *cgs);
/**
 * Removes, in this process's own groups (each v1 controller's, or v2's), the groups of kgates that are
 * provably gone, killing what is still in them first; never a live kgate's (nor one of another pid
 * namespace, whose pids cannot be told from here). Waits up to about 100 ms for the killed processes.
 * For the watchdog, once its kgate has died.
 */
void kmgr_cgroups_sweep(void);
/** Removes what is left (killing what remains in it) and the parents. */
void kmgr_cgroups_dispose(kmgr_cgroups_t *cgs);
/** Retries the removal of stale groups. */
void kmgr_cgroups_tick(kmgr_cgroups_t *cgs);
/** Whether memory (pids) limits go to a cgroup rather than RLIMIT_AS (RLIMIT_NPROC). */
int kmgr_cgroups_has(const kmgr_cgroups_t *cgs, int controller);

/**
 * Creates `name`'s groups with `limits` applied (memory, pids; cpu gets the default weight, so that a
 * kernel's whole tree competes with kgate as one). Opens each group's cgroup.procs for writing into
 * `fds` (O_CLOEXEC; -1 where none; the caller closes them): a child joins by writing "0" before exec.
 * Returns 0, or KMGR_EIO with `why` set (nothing left behind).
 */
int kmgr_cgroup_create(kmgr_cgroups_t *cgs, const char *name, const kmgr_limits_t *limits, kmgr_cgroup_t *cg,
                       int fds[KMGR_CG_COUNT], char *why, size_t whylen);
/** How many processes of the group the kernel's OOM killer killed (memory.events / memory.oom_control). */
uint64_t kmgr_cgroup_oom_kills(const kmgr_cgroup_t *cg);
/** Kills everything left in the group and removes it (later, from kmgr_cgroups_tick, if it is not empty yet). Accepts an empty one.
 */
void kmgr_cgroup_release(kmgr_cgroup_t *cg);

#endif
