/* procs/proctree.h: a process's descendants as /proc tells them, for children that leave their group (a sandbox's shell). */
#ifndef GW_PROCTREE_H
#define GW_PROCTREE_H

#include <stddef.h>
#include <sys/types.h>

/* Descendants signalled at most at once by gw_proctree_signal. */
#define GW_PROCTREE_MAX 4096

/** The first child of `pid` (of its main thread), or 0. */
pid_t gw_proctree_first_child(pid_t pid);
/** Every descendant of `pid` (not itself), breadth first, at most `max` of them into `out`; returns how many. */
size_t gw_proctree_descendants(pid_t pid, pid_t *out, size_t max);
/** Sends `sig` to every descendant of `root` (at most GW_PROCTREE_MAX of them); nothing for root <= 0. */
void gw_proctree_signal(pid_t root, int sig);
/**
 * True once `pid` is gone or a zombie (dead, its namespaces and mounts released, whoever its parent is); a process that lives
 * on after SIGKILL (uninterruptible sleep) is not.
 */
int gw_proctree_gone(pid_t pid);

#endif
