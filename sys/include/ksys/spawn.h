/* ksys/spawn.h: starting a child process that dies with its parent (vfork, set-up, exec; failures reported before return). */
#ifndef KSYS_SPAWN_H
#define KSYS_SPAWN_H

#include <sys/types.h>

/** Stands for /dev/null in ksys_spawn_options_t.fds. */
#define KSYS_SPAWN_DEVNULL (-1)

/** The most descriptors ksys_spawn_options_t.keep_fds may pass on. */
#define KSYS_SPAWN_MAX_KEEP_FDS 256

/** A resource limit the child sets (soft and hard) before exec. */
typedef struct st_ksys_spawn_rlimit_t {
    int resource; /* RLIMIT_AS, RLIMIT_CPU, ... */
    unsigned long long value;
} ksys_spawn_rlimit_t;

/** How to start one program. Every pointer is borrowed for the call only. */
typedef struct st_ksys_spawn_options_t {
    const char *path;  /* the program, as execve takes it (no PATH search) */
    char *const *argv; /* NULL-terminated */
    char *const *envp; /* NULL-terminated: the child's whole environment */
    int fds[3];        /* the child's stdin, stdout and stderr (duplicated: the caller still owns them), or KSYS_SPAWN_DEVNULL */
    const char *cwd;   /* NULL: the caller's */
    const uid_t *uid;  /* non-NULL: the child switches to this user (after the group, see gid) */
    const gid_t *gid;  /* non-NULL: the child's only group, supplementary groups included */
    unsigned controlling_tty : 1; /* fds[0] is a terminal's slave side: it becomes the new session's controlling terminal */
    const int *cgroup_fds;        /* cgroup.procs files open for writing: the child joins each group first (writes "0") */
    size_t ncgroup_fds;
    const ksys_spawn_rlimit_t *rlimits; /* set in the child after the credentials change */
    size_t nrlimits;
    /* descriptors passed on: keep_fds[i] becomes the child's descriptor 3 + i (duplicated: the caller still owns them), so
     * that a program can be handed what was opened and checked here (bwrap's --bind-fd) rather than a path to look up again */
    const int *keep_fds;
    size_t nkeep_fds;
} ksys_spawn_options_t;

/** The set-up step of a child that failed, and why. */
typedef struct st_ksys_spawn_failure_t {
    const char *step; /* "open /dev/null", "fork", "dup2", "set the controlling terminal", "chdir", "setgroups", "setgid",
                         "setuid", "prctl", "exec", "join the cgroup", "setrlimit" */
    int err;          /* its errno */
} ksys_spawn_failure_t;

/**
 * Starts `opts->path` in a new session (so its own process group, whose id is the returned pid), with
 * fds 0-2 from `opts->fds`, `opts->keep_fds` at 3 and on, every other descriptor closed, an empty signal mask, every signal's
 * default disposition, and a parent-death signal: the child gets SIGKILL when its parent dies, and
 * one whose parent died before the signal was armed exits at once. Blocks until the program is
 * executing or a set-up step has failed (vfork: the caller's thread is suspended meanwhile, for as
 * long as posix_spawn would suspend it, however much memory the process holds).
 *
 * The parent-death signal follows the *thread* that forked, not the process: call this only from a
 * thread that lives as long as the process (kgate and its bash kernel fork from their one event-loop
 * thread; libzmq's I/O threads never fork). It is armed after the credentials change, which clears it.
 *
 * Returns 0 with the child's pid in `*pid` (the caller reaps it), or KSYS_ESPAWN with `*failure` set
 * (nothing left running: a child that failed has been reaped).
 */
int ksys_spawn(const ksys_spawn_options_t *opts, pid_t *pid, ksys_spawn_failure_t *failure);

/**
 * The program `name` would run as: `name` itself when it holds a '/', else the first executable
 * `<dir>/name` of $PATH (/usr/local/bin:/usr/bin:/bin without one). A new string (the caller frees
 * it), or NULL when there is no such executable.
 */
char *ksys_find_executable(const char *name);

#endif
