/* procs/spawn.h: a child started in its own session, its set-up (cwd, credentials, terminal, exec) checked before the caller goes
 * on, and dying with kgate. */
#ifndef GW_SPAWN_H
#define GW_SPAWN_H

#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>
#include "ksys/sandbox.h"
#include "core/host.h"

/**
 * The sandbox of a shell, command or PTY under --sandbox bwrap: kernels' default profile (ksys_bwrap_argv: no network,
 * `/` read-only, the workspace read-write, private /tmp and HOME (/tmp/home), kgate's runtime dir hidden, capabilities
 * dropped, SIGKILL when kgate dies) and the server's default limits as rlimits of bwrap and all it starts. Borrowed.
 */
typedef struct st_gw_spawn_sandbox_t {
    const char *bwrap;
    const char *runtime_dir; /* hidden whole */
    const char *workspace;   /* bound read-write at its own path; NULL: none */
    ksys_limits_t limits;    /* memory: RLIMIT_AS, pids: RLIMIT_NPROC, cpu, open files, file size; 0: none */
    uint64_t tmp_bytes;      /* its private /tmp and /dev/shm, each (gw_config_tmp_bytes); 0: tmpfs's default */
} gw_spawn_sandbox_t;

/** Fills `*out` with the server's sandbox and returns 1 under --sandbox bwrap; returns 0 (no sandbox) otherwise. */
int gw_spawn_sandbox_of(const gw_host_t *host, gw_spawn_sandbox_t *out);

/** What the child becomes. Every pointer is borrowed for the call. */
typedef struct st_gw_spawn_options_t {
    const char *path;             /* the executable */
    char *const *argv;            /* NULL-terminated */
    char *const *envp;            /* NULL-terminated (gw_spawn_env) */
    const char *cwd;              /* NULL: kgate's working directory */
    long uid, gid;                /* >= 0: the child switches to them (setgroups, setgid, setuid); -1: kgate's own */
    int fds[3];                   /* become the child's stdin, stdout, stderr; -1: /dev/null (they are never closed here) */
    unsigned controlling_tty : 1; /* fds[0] is a terminal's slave side: it becomes the session's controlling terminal */
    const int *keep_fds;          /* keep_fds[i] becomes the child's descriptor 3 + i (ksys_spawn_options_t.keep_fds) */
    size_t nkeep_fds;
    /* non-NULL: `path` runs inside bubblewrap, in `cwd` (else kgate's) as the sandbox sees it: the workspace is bound at its
     * own path, a directory outside it read-only, one in kgate's runtime dir (symbolic links resolved) is refused (GW_ESPAWN); with
     * controlling_tty the terminal stays the program's (no --new-session). HOME becomes /tmp/home unless `envp` changed it, and
     * kgate's access token is left out. */
    const gw_spawn_sandbox_t *sandbox;
} gw_spawn_options_t;

/**
 * Starts a child with ksys_spawn: a new session (it leads its own process group), `fds` as 0, 1 and
 * 2 and no other descriptor, every signal unblocked and at its default, the directory and
 * credentials changed, then `path` executed; it gets SIGKILL when kgate dies. The child's set-up is
 * checked before this returns: 0 with the child's pid in `*pid` (the caller reaps it), or GW_ESPAWN
 * with the failed step and its reason in `err` (the child, if any, is reaped already).
 */
int gw_spawn(const gw_spawn_options_t *opts, pid_t *pid, char *err, size_t err_size);

/**
 * Sends `sig` to the process group of a child gw_spawn started (`pid`). In a sandbox (`sandboxed`), the program runs in
 * the session bwrap's pid 1 made (--new-session): every signal but SIGKILL goes to that group, so that SIGINT interrupts
 * the program as it would outside rather than ending bwrap; SIGKILL (and any signal before the sandbox is up) goes to
 * bwrap's own group, which ends the sandbox and everything in it (its pid 1 dies with bwrap). Returns 0 or -errno.
 */
int gw_spawn_signal(pid_t pid, int sandboxed, int sig);

/**
 * kgate's environment with `envs` ({"K": "V"}, may be NULL) added, replacing variables of the same
 * name, and `mark` ("NAME=value": kgate's instance mark, kmgr_manager_instance_env; NULL: none) last,
 * replacing any variable of its name, from `envs` too: the mark is what proves a leftover kgate's once
 * kgate is gone. NULL-terminated.
 */
char **gw_spawn_env(json_t *envs, const char *mark);
/** Frees what gw_spawn_env returned. */
void gw_spawn_env_free(char **envp);

#endif
