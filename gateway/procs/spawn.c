/* Child processes: ksys_spawn with the gateway's options and error messages, the environment they get, and their sandbox. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/spawn.h"
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

int gw_spawn_sandbox_of(const gw_host_t *host, gw_spawn_sandbox_t *out)
{
    const gw_config_t *config = host->config;

    if (host->sandbox_bwrap == NULL)
        return 0;
    *out = (gw_spawn_sandbox_t){.bwrap = host->sandbox_bwrap,
                                .runtime_dir = host->runtime_dir,
                                .workspace = host->workspace,
                                .limits = {.memory_bytes = (uint64_t)config->max_memory_mb << 20,
                                           /* RLIMIT_NPROC counts every process of kgate's user, not the sandbox's: only a
                                            * cap the operator set, never one derived for kernels' cgroups */
                                           .pids = config->max_pids_given ? config->max_pids : 0,
                                           .cpu_seconds = config->max_cpu_seconds,
                                           .open_files = config->max_open_files,
                                           .file_size_bytes = (uint64_t)config->max_file_size_mb << 20},
                                .tmp_bytes = gw_config_tmp_bytes(config, (uint64_t)config->max_memory_mb << 20)};
    return 1;
}

/* Whether `path` is `dir` or lies beneath it (lexically, as ksys_bwrap_argv decides what to bind). */
static int is_within(const char *path, const char *dir)
{
    size_t len = strlen(dir);

    while (len > 1 && dir[len - 1] == '/')
        --len;
    return strncmp(path, dir, len) == 0 && (path[len] == '\0' || path[len] == '/');
}

/* `envp` for the sandbox: without kgate's access token, HOME on the private /tmp unless the caller set its own. */
static char **sandbox_env(char *const *envp)
{
    const char *home = getenv("HOME");
    size_t n = 0, o = 0;
    char **out;
    int home_set = 0;

    while (envp[n] != NULL)
        ++n;
    out = wire_calloc(n + 2, sizeof(char *));
    for (size_t i = 0; i != n; ++i) {
        if (is_variable(envp[i], "KGATE_ACCESS_TOKEN", 18))
            continue;
        if (is_variable(envp[i], "HOME", 4)) {
            if (home != NULL && strcmp(envp[i] + 5, home) == 0)
                continue; /* kgate's own: a sandbox cannot write it */
            home_set = 1;
        }
        out[o++] = wire_strdup(envp[i]);
    }
    if (!home_set)
        out[o] = wire_strdup("HOME=/tmp/home");
    return out;
}

int gw_spawn(const gw_spawn_options_t *opts, pid_t *pid, char *err, size_t err_size)
{
    uid_t uid = (uid_t)opts->uid;
    gid_t gid = (gid_t)opts->gid;
    ksys_spawn_options_t spawn = {.path = opts->path,
                                  .argv = opts->argv,
                                  .envp = opts->envp,
                                  .fds = {opts->fds[0], opts->fds[1], opts->fds[2]},
                                  .cwd = opts->cwd,
                                  .uid = opts->uid >= 0 ? &uid : NULL,
                                  .gid = opts->gid >= 0 ? &gid : NULL,
                                  .controlling_tty = opts->controlling_tty,
                                  .keep_fds = opts->keep_fds,
                                  .nkeep_fds = opts->nkeep_fds};
    ksys_spawn_failure_t failure;
    ksys_spawn_rlimit_t rlimits[KSYS_LIMITS_MAX_RLIMITS];
    char **wrapped = NULL, **envp = NULL, cwd[PATH_MAX];
    int chdir_failed, ret;

    if (opts->sandbox != NULL) {
        const gw_spawn_sandbox_t *sb = opts->sandbox;
        ksys_bwrap_args_t bargs = {.bwrap = sb->bwrap,
                                   .runtime_dir = sb->runtime_dir,
                                   .workspace = sb->workspace,
                                   .cwd = opts->cwd,
                                   .home = "/tmp/home",
                                   .tmp_bytes = sb->tmp_bytes,
                                   .own_terminal = opts->controlling_tty};
        size_t argc = 0;
        if (bargs.cwd == NULL) {
            if (getcwd(cwd, sizeof(cwd)) == NULL) {
                snprintf(err, err_size, "getcwd: %s", strerror(errno));
                return GW_ESPAWN;
            }
            bargs.cwd = cwd;
        } else if (bargs.cwd[0] == '/' && realpath(bargs.cwd, cwd) != NULL) {
            /* as bwrap will find it: a link into the runtime dir is the runtime dir */
            bargs.cwd = cwd;
        }
        if (bargs.cwd[0] != '/' || is_within(bargs.cwd, sb->runtime_dir)) {
            snprintf(err, err_size, "the working directory %s is not visible in the sandbox (kgate's runtime dir is hidden%s)",
                     bargs.cwd, bargs.cwd[0] != '/' ? "; give an absolute path" : "");
            return GW_ESPAWN;
        }
        while (opts->argv[argc] != NULL)
            ++argc;
        char **cmd = wire_calloc(argc + 1, sizeof(char *));
        /* bwrap would search its own PATH for argv[0]: the program the caller named */
        cmd[0] = (char *)opts->path;
        for (size_t i = 1; i < argc; ++i)
            cmd[i] = opts->argv[i];
        wrapped = ksys_bwrap_argv(&bargs, cmd);
        free(cmd);
        spawn.path = sb->bwrap;
        spawn.argv = wrapped;
        spawn.envp = envp = sandbox_env(opts->envp);
        spawn.rlimits = rlimits;
        spawn.nrlimits = ksys_limits_rlimits(&sb->limits, 0, 0, rlimits);
    }
    ret = ksys_spawn(&spawn, pid, &failure);
    ksys_strv_free(wrapped);
    ksys_strv_free(envp);
    if (ret == 0)
        return 0;
    chdir_failed = strcmp(failure.step, "chdir") == 0;
    snprintf(err, err_size, "%s%s%s%s: %s", strcmp(failure.step, "fork") == 0 ? "cannot " : "", failure.step,
             chdir_failed ? " " : "", chdir_failed ? opts->cwd : "", strerror(failure.err));
    return GW_ESPAWN;
}

/* bwrap's pid 1 in the sandbox's pid namespace (bwrap's only child), or 0 before it exists. */
static pid_t sandbox_init(pid_t bwrap)
{
    char path[64], buf[64];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)bwrap, (int)bwrap);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return (pid_t)atol(buf);
}

int gw_spawn_signal(pid_t pid, int sandboxed, int sig)
{
    pid_t init;

    /* the pid namespace's init ignores every signal it has no handler for (but SIGKILL from outside): its group's other
     * members, the program and its jobs, get it */
    if (sandboxed && sig != SIGKILL && (init = sandbox_init(pid)) > 0 && kill(-init, sig) == 0)
        return 0;
    return kill(-pid, sig) == 0 ? 0 : -errno;
}
