/* Child processes: fork, the child's set-up in its own session, and a status pipe that reports a failed step before exec. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "procs/spawn.h"

extern char **environ;

/* What the child reports through its status pipe when a set-up step fails before exec. */
typedef struct st_child_failure_t {
    int step; /* index into child_steps */
    int err;
} child_failure_t;

static const char *const child_steps[] = {"chdir", "setgroups", "setgid", "setuid", "set the controlling terminal", "exec"};
enum { STEP_CHDIR, STEP_SETGROUPS, STEP_SETGID, STEP_SETUID, STEP_CTTY, STEP_EXEC };

char **gw_spawn_env(json_t *envs)
{
    size_t n = 0, i, o = 0;
    char **envp;
    const char *key;
    json_t *value;

    while (environ[n] != NULL)
        ++n;
    envp = wire_calloc(n + json_object_size(envs) + 1, sizeof(char *));
    for (i = 0; i != n; ++i) {
        const char *eq = strchr(environ[i], '=');
        if (eq != NULL && envs != NULL && json_object_getn(envs, environ[i], (size_t)(eq - environ[i])) != NULL)
            continue;
        envp[o++] = wire_strdup(environ[i]);
    }
    json_object_foreach(envs, key, value)
    {
        size_t klen = strlen(key), vlen = strlen(json_string_value(value));
        char *kv = wire_malloc(klen + vlen + 2);
        memcpy(kv, key, klen);
        kv[klen] = '=';
        memcpy(kv + klen + 1, json_string_value(value), vlen + 1);
        envp[o++] = kv;
    }
    return envp;
}

void gw_spawn_env_free(char **envp)
{
    size_t i;
    for (i = 0; envp[i] != NULL; ++i)
        free(envp[i]);
    free(envp);
}

/* In the child, between fork and exec: only async-signal-safe calls (libzmq's threads exist in the parent). */
static void child_fail(int status_fd, int step)
{
    child_failure_t failure = {step, errno};
    ssize_t r = write(status_fd, &failure, sizeof(failure));
    (void)r;
    _exit(127);
}

static void child_exec(const gw_spawn_options_t *opts, pid_t parent, int status_fd)
{
    sigset_t none;
    int fd;

    setsid();
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    for (fd = 0; fd != 3; ++fd)
        dup2(opts->fds[fd] != -1 ? opts->fds[fd] : open("/dev/null", O_RDWR | O_CLOEXEC), fd);
    /* a session leader without a terminal acquires the one it names */
    if (opts->controlling_tty && ioctl(0, TIOCSCTTY, 0) != 0)
        child_fail(status_fd, STEP_CTTY);
    if (opts->cwd != NULL && chdir(opts->cwd) != 0)
        child_fail(status_fd, STEP_CHDIR);
    if (opts->gid >= 0) {
        gid_t gid = (gid_t)opts->gid;
        if (setgroups(1, &gid) != 0)
            child_fail(status_fd, STEP_SETGROUPS);
        if (setgid(gid) != 0)
            child_fail(status_fd, STEP_SETGID);
    }
    if (opts->uid >= 0 && setuid((uid_t)opts->uid) != 0)
        child_fail(status_fd, STEP_SETUID);
    /* after the credentials, which clear the parent-death signal; kgate may have died before the
     * prctl took effect, which the parent's pid recorded before fork tells */
    if (opts->die_with_parent && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent))
        _exit(127);
    execve(opts->path, opts->argv, opts->envp);
    child_fail(status_fd, STEP_EXEC);
}

int gw_spawn(const gw_spawn_options_t *opts, pid_t *pid, char *err, size_t err_size)
{
    int status_pipe[2];
    child_failure_t failure;
    pid_t parent = getpid();
    ssize_t n;

    if (pipe2(status_pipe, O_CLOEXEC) != 0) {
        snprintf(err, err_size, "cannot create a pipe: %s", strerror(errno));
        return GW_ESPAWN;
    }
    if ((*pid = fork()) == 0)
        child_exec(opts, parent, status_pipe[1]);
    close(status_pipe[1]);
    if (*pid == -1) {
        snprintf(err, err_size, "cannot fork: %s", strerror(errno));
        close(status_pipe[0]);
        return GW_ESPAWN;
    }
    /* the status pipe closes on exec (CLOEXEC): bytes on it mean a set-up step failed */
    while ((n = read(status_pipe[0], &failure, sizeof(failure))) == -1 && errno == EINTR)
        ;
    close(status_pipe[0]);
    if (n != (ssize_t)sizeof(failure))
        return 0;
    snprintf(err, err_size, "%s%s%s: %s", child_steps[failure.step], failure.step == STEP_CHDIR ? " " : "",
             failure.step == STEP_CHDIR ? opts->cwd : "", strerror(failure.err));
    while (waitpid(*pid, NULL, 0) == -1 && errno == EINTR)
        ;
    return GW_ESPAWN;
}
