/* ksys/cgroup.h: control groups for kernels (memory, pids, cpu) where kgate may create them: v1 or v2. */
#ifndef KSYS_CGROUP_H
#define KSYS_CGROUP_H

#include <stddef.h>
#include <stdint.h>
#include "ksys/sandbox.h"

enum { KSYS_CG_MEMORY, KSYS_CG_PIDS, KSYS_CG_CPU, KSYS_CG_COUNT };

/**
 * The parents kgate made for its kernels' groups, one per controller ("<controller's mount><kgate's
 * group>/kgate-<pid>-<start time>-<pid namespace>" in v1; one directory for all three in v2, where kgate first moves itself into a
 * leaf of its own group, as a delegated manager must). A NULL parent: that controller is unusable.
 */
typedef struct st_ksys_cgroups_t {
    int version; /* 1, 2, or 0: none */
    char *parents[KSYS_CG_COUNT];
    /* groups whose last processes were still exiting when their kernel went: removed by ksys_cgroups_tick */
    char **stale;
    size_t nstale;
    char mechanism[512]; /* for the start-up log line: which mechanism enforces memory and process limits */
} ksys_cgroups_t;

/** One kernel incarnation's groups (a directory per usable controller, NULL otherwise). */
typedef struct st_ksys_cgroup_t {
    ksys_cgroups_t *owner;
    char *dirs[KSYS_CG_COUNT];
} ksys_cgroup_t;

/**
 * Finds out what this host allows and creates the parents. Never fails: what cannot be used is left
 * NULL. First it sweeps (ksys_cgroups_sweep): what a kgate killed with SIGKILL left goes; what is
 * not gone within about 100 ms is retried by ksys_cgroups_tick.
 */
void ksys_cgroups_init(ksys_cgroups_t *cgs);
/**
 * Removes, in this process's own groups (each v1 controller's, or v2's), the groups of kgates that are
 * provably gone, killing what is still in them first; never a live kgate's (nor one of another pid
 * namespace, whose pids cannot be told from here). Waits up to about 100 ms for the killed processes.
 * For the watchdog, once its kgate has died.
 */
void ksys_cgroups_sweep(void);
/** Removes what is left (killing what remains in it) and the parents. */
void ksys_cgroups_dispose(ksys_cgroups_t *cgs);
/** Retries the removal of stale groups. */
void ksys_cgroups_tick(ksys_cgroups_t *cgs);
/** Whether memory (pids) limits go to a cgroup rather than RLIMIT_AS (RLIMIT_NPROC). */
int ksys_cgroups_has(const ksys_cgroups_t *cgs, int controller);

/**
 * Creates `name`'s groups with `limits` applied (memory, pids; cpu gets the default weight, so that a
 * kernel's whole tree competes with kgate as one). Opens each group's cgroup.procs for writing into
 * `fds` (O_CLOEXEC; -1 where none; the caller closes them): a child joins by writing "0" before exec.
 * Returns 0, or KSYS_EIO with `why` set (nothing left behind).
 */
int ksys_cgroup_create(ksys_cgroups_t *cgs, const char *name, const ksys_limits_t *limits, ksys_cgroup_t *cg,
                       int fds[KSYS_CG_COUNT], char *why, size_t whylen);
/** How many processes of the group the kernel's OOM killer killed (memory.events / memory.oom_control). */
uint64_t ksys_cgroup_oom_kills(const ksys_cgroup_t *cg);
/** Kills everything left in the group and removes it (later, from ksys_cgroups_tick, if it is not empty yet). Accepts an empty one.
 */
void ksys_cgroup_release(ksys_cgroup_t *cg);

#endif
