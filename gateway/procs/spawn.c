/* Child processes: kmgr_spawn with the gateway's options and error messages, and the environment they get. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "kmgr/spawn.h"
#include "core/errors.h"
#include "procs/spawn.h"

extern char **environ;

/* Whether "NAME=value" `entry` is the variable named by the first `len` bytes of `name`. */
static int is_variable(const char *entry, const char *name, size_t len)
{
    return strncmp(entry, name, len) == 0 && entry[len] == '=';
}

char **gw_spawn_env(json_t *envs, const char *mark)
{
    size_t n = 0, i, o = 0, mark_len = mark != NULL ? strcspn(mark, "=") : 0;
    char **envp;
    const char *key;
    json_t *value;

    while (environ[n] != NULL)
        ++n;
    envp = wire_calloc(n + json_object_size(envs) + 2, sizeof(char *));
    for (i = 0; i != n; ++i) {
        const char *eq = strchr(environ[i], '=');
        if ((eq != NULL && envs != NULL && json_object_getn(envs, environ[i], (size_t)(eq - environ[i])) != NULL) ||
            (mark != NULL && is_variable(environ[i], mark, mark_len)))
            continue;
        envp[o++] = wire_strdup(environ[i]);
    }
    json_object_foreach(envs, key, value)
    {
        size_t klen = strlen(key), vlen = strlen(json_string_value(value));
        char *kv;
        if (mark != NULL && klen == mark_len && strncmp(key, mark, mark_len) == 0)
            continue;
        kv = wire_malloc(klen + vlen + 2);
        memcpy(kv, key, klen);
        kv[klen] = '=';
        memcpy(kv + klen + 1, json_string_value(value), vlen + 1);
        envp[o++] = kv;
    }
    if (mark != NULL)
        envp[o] = wire_strdup(mark);
    return envp;
}

void gw_spawn_env_free(char **envp)
{
    size_t i;
    for (i = 0; envp[i] != NULL; ++i)
        free(envp[i]);
    free(envp);
}

int gw_spawn(const gw_spawn_options_t *opts, pid_t *pid, char *err, size_t err_size)
{
    uid_t uid = (uid_t)opts->uid;
    gid_t gid = (gid_t)opts->gid;
    kmgr_spawn_options_t spawn = {.path = opts->path,
                                  .argv = opts->argv,
                                  .envp = opts->envp,
                                  .fds = {opts->fds[0], opts->fds[1], opts->fds[2]},
                                  .cwd = opts->cwd,
                                  .uid = opts->uid >= 0 ? &uid : NULL,
                                  .gid = opts->gid >= 0 ? &gid : NULL,
                                  .controlling_tty = opts->controlling_tty};
    kmgr_spawn_failure_t failure;
    int chdir_failed;

    if (kmgr_spawn(&spawn, pid, &failure) == 0)
        return 0;
    chdir_failed = strcmp(failure.step, "chdir") == 0;
    snprintf(err, err_size, "%s%s%s%s: %s", strcmp(failure.step, "fork") == 0 ? "cannot " : "", failure.step,
             chdir_failed ? " " : "", chdir_failed ? opts->cwd : "", strerror(failure.err));
    return GW_ESPAWN;
}
