/* ksys/sandbox.h: what a kernel may reach (a bubblewrap profile) and use (limits); the bwrap command line, built purely. */
#ifndef KSYS_SANDBOX_H
#define KSYS_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include "ksys/spawn.h"

/** Resource limits of one kernel (its whole process tree where a cgroup holds it). 0: no limit. */
typedef struct st_ksys_limits_t {
    uint64_t memory_bytes;    /* cgroup memory.max / memory.limit_in_bytes where kgate may create cgroups, else RLIMIT_AS */
    uint64_t pids;            /* cgroup pids.max, else RLIMIT_NPROC (which does not bind root) */
    uint64_t cpu_seconds;     /* RLIMIT_CPU, per process: a process past it gets SIGXCPU */
    uint64_t open_files;      /* RLIMIT_NOFILE */
    uint64_t file_size_bytes; /* RLIMIT_FSIZE: a bigger write fails with EFBIG (Python ignores SIGXFSZ) */
} ksys_limits_t;

/** The most rlimits ksys_limits_rlimits writes. */
#define KSYS_LIMITS_MAX_RLIMITS 5

/**
 * The limits of `l` a child sets on itself as rlimits (ksys_spawn_options_t.rlimits), into `out` (room for
 * KSYS_LIMITS_MAX_RLIMITS); memory and processes are left out when a cgroup enforces them (`*_by_cgroup`). Returns how many.
 */
size_t ksys_limits_rlimits(const ksys_limits_t *l, int memory_by_cgroup, int pids_by_cgroup, ksys_spawn_rlimit_t *out);

typedef enum {
    KSYS_SANDBOX_NONE,  /* a plain child of kgate, with kgate's rights */
    KSYS_SANDBOX_BWRAP, /* bubblewrap: see ksys_bwrap_argv */
} ksys_sandbox_kind_t;

/** A kernel's sandbox and limits (kmgr_kernel_options_t.sandbox). Strings are copied by kmgr_kernel_start. */
typedef struct st_ksys_sandbox_t {
    ksys_sandbox_kind_t kind;
    int share_net;         /* bwrap: keep the host's network namespace */
    const char *workspace; /* bwrap: bound read-write at the same path; NULL: none */
    ksys_limits_t limits;
    uint64_t tmp_bytes; /* bwrap: the size of its private /tmp and of its /dev/shm, each; 0: tmpfs's default (half the RAM) */
} ksys_sandbox_t;

/** What the walls every sandbox shares depend on (ksys_bwrap_walls). */
typedef struct st_ksys_bwrap_walls_t {
    int share_net;      /* keep the host's network namespace */
    int own_terminal;   /* no --new-session (see ksys_bwrap_args_t.own_terminal) */
    int host_tmp;       /* the host's /tmp bound read-write (an isolated session's balanced profile); else a private tmpfs */
    uint64_t tmp_bytes; /* the size of the private /tmp and of /dev/shm, each; 0: tmpfs's default (half the RAM) */
} ksys_bwrap_walls_t;

/**
 * The options every sandbox starts with (kernels, shells, commands, PTYs, isolated sessions and the start-up probe, so
 * that the hardening lives in one place), in order: new user, pid, ipc, uts (and, unless share_net, net) namespaces, no
 * nested user namespaces, every capability dropped, SIGKILL when kgate dies, a new session (not with own_terminal), the
 * system read-only (`/` bound read-only), /tmp (private of tmp_bytes, or the host's), a fresh /dev, read-only but for its
 * devices, with a private /dev/shm of tmp_bytes, a fresh /proc and an empty /run (no host daemon's socket). Mounts are
 * applied in the order given: what a caller adds after lies over these. Pure; NULL-terminated, owned by the caller
 * (ksys_strv_free).
 */
char **ksys_bwrap_walls(const ksys_bwrap_walls_t *w);

/** Everything the bwrap command line depends on; every string borrowed for the call. */
typedef struct st_ksys_bwrap_args_t {
    const char *bwrap;        /* the bwrap executable */
    const char *runtime_dir;  /* hidden (an empty tmpfs over it) ... */
    const char *kernel_dir;   /* ... but for this one directory under it, read-write (ipc sockets, connection file); or NULL */
    const char *workspace;    /* bound read-write; NULL: none */
    const char *cwd;          /* the kernel's directory: bound read-only when outside the workspace and /tmp is hiding it; NULL */
    const char *resource_dir; /* the kernelspec's directory, bound read-only (it may live under /tmp); NULL */
    const char *home;         /* the private HOME created on the sandbox's /tmp; NULL: none */
    uint64_t tmp_bytes;       /* the size of the private /tmp and of /dev/shm, each; 0: tmpfs's default (half the RAM) */
    int share_net;
    /* the command runs on a terminal of its own (a PTY session, its controlling terminal set before exec): no
     * --new-session, which would take the terminal away; TIOCSTI can then only reach that terminal, not kgate's */
    int own_terminal;
} ksys_bwrap_args_t;

/**
 * Builds `bwrap [options] -- cmd...`: ksys_bwrap_walls (bwrap always sets no_new_privs; the new session keeps
 * TIOCSTI away from kgate's terminal), then `home` on the private /tmp, the workspace read-write unless it holds the system
 * (ksys_path_holds_system: then it stays read-only), the runtime dir hidden but for `kernel_dir` (if any), and `cwd` as
 * the working directory. The order of the mounts
 * is the order of the arguments: a later mount hides what an earlier one showed beneath it. Pure; the
 * result is NULL-terminated and owned by the caller (ksys_strv_free).
 */
char **ksys_bwrap_argv(const ksys_bwrap_args_t *args, char *const *cmd);
/** Frees a NULL-terminated vector of strings and the strings; accepts NULL. */
void ksys_strv_free(char **v);
/** A NULL-terminated vector of strings being built (a command line, an environment); start from {NULL, 0, 0}. */
typedef struct st_ksys_strv_t {
    char **v; /* NULL-terminated once anything was pushed; the caller's (ksys_strv_free) */
    size_t n, cap;
} ksys_strv_t;
/** Appends a copy of `s`. */
void ksys_strv_push(ksys_strv_t *a, const char *s);

/**
 * Whether `bwrap` can create the namespaces ksys_bwrap_argv asks for on this host: runs `bwrap` with
 * them around /bin/true. Returns 0, or KSYS_ESPAWN with the reason in `why` (its stderr's first line).
 * Blocks for the few milliseconds the run takes: call it at start-up.
 */
int ksys_bwrap_probe(const char *bwrap, char *why, size_t whylen);

/** "256 MiB", "1.5 GiB", "100 B": a byte count for humans (writes at most `size` bytes). */
void ksys_format_bytes(uint64_t bytes, char *buf, size_t size);

/**
 * Whether `path` is `dir` or lies beneath it, lexically: both absolute and normal (no "." or ".."
 * segment, no repeated '/'); a trailing '/' of `dir` is ignored. Every sandbox's bind rules use it.
 */
int ksys_path_within(const char *path, const char *dir);

/** The host's system directories: no sandbox gets one of them, or a directory holding one, writable. */
#define KSYS_SYSTEM_DIRS                                                                                                           \
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/proc", "/run", "/sbin", "/srv", "/sys",      \
        "/usr", "/var"

/** Whether `path` (absolute, normal, resolved) is `/` or holds one of KSYS_SYSTEM_DIRS. */
int ksys_path_holds_system(const char *path);

#endif
