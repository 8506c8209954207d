/* kernels/bash/src/proc.h: small process helpers (locating bash, running a short-lived child). */
#ifndef BK_PROC_H
#define BK_PROC_H

#include <stddef.h>
#include <sys/types.h>

/**
 * The absolute path of the bash to run: the first executable `bash` on PATH, else /bin/bash.
 * Resolved in the parent because only async-signal-safe calls may run between fork and exec (the
 * kernel has ZeroMQ's I/O threads). The string is static.
 */
const char *bk_bash_path(void);

/**
 * In a forked child: restores default dispositions and an empty signal mask (both survive exec,
 * and the kernel blocks or ignores SIGINT, SIGTERM, SIGHUP, SIGCHLD and SIGPIPE). Async-signal-safe.
 */
void bk_child_reset_signals(void);

/**
 * In a forked child: asks for SIGKILL when the parent dies (PR_SET_PDEATHSIG), and exits at once
 * (status 127) if `parent` (the parent's pid, taken before fork) has already died. The signal follows
 * the thread that forked: the kernel forks only from its main thread, which lives as long as the
 * process (libzmq's I/O threads never fork). kgate's own children do the same (ksys/spawn.h), which
 * this kernel does not link. Async-signal-safe.
 */
void bk_child_die_with_parent(pid_t parent);

/**
 * Runs `argv` (argv[0] an absolute path) with stdin from /dev/null and stdout+stderr captured, for
 * at most `timeout_ms`; the child is killed (SIGKILL) and reaped when it takes longer. Blocks the
 * caller, so only for commands that take milliseconds. On success returns 0, stores the output
 * (NUL-terminated, at most `max_out` bytes kept; owned by the caller) in `*out` and the wait status
 * in `*wstatus`. Returns -ETIMEDOUT (output is still stored) or another -errno (nothing stored).
 */
int bk_run_capture(char *const argv[], int timeout_ms, size_t max_out, char **out, int *wstatus);

/** Milliseconds on the monotonic clock. */
long long bk_now_ms(void);

#endif
