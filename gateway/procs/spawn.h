/* procs/spawn.h: a child started in its own session, its set-up (cwd, credentials, terminal, exec) checked before the caller goes
 * on, and dying with kgate. */
#ifndef GW_SPAWN_H
#define GW_SPAWN_H

#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>

/** What the child becomes. Every pointer is borrowed for the call. */
typedef struct st_gw_spawn_options_t {
    const char *path;             /* the executable */
    char *const *argv;            /* NULL-terminated */
    char *const *envp;            /* NULL-terminated (gw_spawn_env) */
    const char *cwd;              /* NULL: kgate's working directory */
    long uid, gid;                /* >= 0: the child switches to them (setgroups, setgid, setuid); -1: kgate's own */
    int fds[3];                   /* become the child's stdin, stdout, stderr; -1: /dev/null (they are never closed here) */
    unsigned controlling_tty : 1; /* fds[0] is a terminal's slave side: it becomes the session's controlling terminal */
} gw_spawn_options_t;

/**
 * Starts a child with kmgr_spawn: a new session (it leads its own process group), `fds` as 0, 1 and
 * 2 and no other descriptor, every signal unblocked and at its default, the directory and
 * credentials changed, then `path` executed; it gets SIGKILL when kgate dies. The child's set-up is
 * checked before this returns: 0 with the child's pid in `*pid` (the caller reaps it), or GW_ESPAWN
 * with the failed step and its reason in `err` (the child, if any, is reaped already).
 */
int gw_spawn(const gw_spawn_options_t *opts, pid_t *pid, char *err, size_t err_size);

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
