/* deploy/execd/launcher.h: what the launcher's two files share (launcher.c: unpacking and execd's flags; init.c: --init). */
#ifndef KGATE_EXECD_LAUNCHER_H
#define KGATE_EXECD_LAUNCHER_H

#include <signal.h>
#include <stddef.h>
#include <sys/types.h>

#define INIT_GRACE_S 10 /* upstream's init shutdown grace: kgate (its 5 s drain, then kernels) and a retired entrypoint */

/** Says what failed (and errno's text when set) and exits 127. */
__attribute__((noreturn)) void die(const char *what, const char *detail);
/** snprintf that dies rather than cut a path too long for `buf`. */
__attribute__((format(printf, 3, 4))) void fmt(char *buf, size_t size, const char *f, ...);
/** Forks and executes `path` (searched on PATH when `search`) with `args`, the signal mask `old` restored in the child. */
pid_t start(const char *path, char *const *args, const sigset_t *old, int search);
/** A wait status as a shell's exit status (128 + N for signal N). */
int status_of(int status);

/** Whether a lifecycle config is given (OPENSANDBOX_LIFECYCLE, EXECD_LIFECYCLE_CONFIG, ~/.execd/lifecycle.toml). */
int has_lifecycle(void);
/** Upstream's booleans: 1, true, yes, on (any case). */
int truthy(const char *v);
/**
 * PID 1 (init.c): runs kgate (`kgate_args`, through `loader`) and the entrypoint `entry`, reaps every child, forwards signals,
 * and returns the entrypoint's status once kgate is gone too. `status_file` (may be NULL): the lifecycle's status file, the
 * entrypoint held until `done 0`. `control_fd`/`control_write`: the pipe kgate asks for the entrypoint's restart on (the
 * write end is kgate's, closed here once kgate runs).
 */
int run_init(const char *loader, char *const *kgate_args, char *const *entry, const char *status_file, int control_fd,
             int control_write);

#endif
