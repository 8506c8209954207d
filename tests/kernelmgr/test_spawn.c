/* tests/kernelmgr/test_spawn.c: kmgr_spawn's set-up and parent-death signal. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "kmgr/errors.h"
#include "kmgr/spawn.h"
#include "kmgr_test.h"
#include "support/base.h"
#include "support/proc.h"

TestSuite(spawn, .timeout = 60);

/* The process `pid` names now (asserted alive), by pid and start time: a reused pid is never mistaken for it. */
static ts_proc_t proc_id(pid_t pid)
{
    ts_proc_t p;
    cr_assert_eq(ts_proc_get(pid, &p), 0, "no process %d", (int)pid);
    return p;
}

static int wait_gone(ts_proc_t p, int ms)
{
    for (int waited = 0; waited < ms && ts_proc_alive(&p); waited += 10)
        ts_sleep_ms(10);
    return !ts_proc_alive(&p);
}

static void kill_and_reap(ts_proc_t p)
{
    if (ts_proc_alive(&p))
        kill(p.pid, SIGKILL);
    waitpid(p.pid, NULL, 0);
}

/* Runs `sh -c script` through kmgr_spawn and returns what it printed (stdout and stderr); `cwd` may be NULL. */
static char *run_capture(const char *script, const char *cwd)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL}, *envp[] = {"KMGR_TEST=spawned", NULL};
    kmgr_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .cwd = cwd};
    kmgr_spawn_failure_t failure;
    static char out[4096];
    size_t len = 0;
    ssize_t n;
    int fds[2];
    pid_t pid;

    cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
    opts.fds[0] = KMGR_SPAWN_DEVNULL;
    opts.fds[1] = opts.fds[2] = fds[1];
    cr_assert_eq(kmgr_spawn(&opts, &pid, &failure), 0, "spawn: %s: %s", failure.step, strerror(failure.err));
    close(fds[1]);
    while (len < sizeof(out) - 1 && (n = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    waitpid(pid, NULL, 0);
    return out;
}

/* Its entries in /proc/<pid>/fd, space-separated. */
static void list_fds(pid_t pid, char *out, size_t size)
{
    char path[64];
    size_t len = 0;
    DIR *dir;
    struct dirent *de;

    snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
    cr_assert_not_null(dir = opendir(path));
    out[0] = '\0';
    while ((de = readdir(dir)) != NULL)
        if (de->d_name[0] != '.')
            len += (size_t)snprintf(out + len, size - len, "%s ", de->d_name);
    closedir(dir);
}

Test(spawn, child_gets_its_own_session_stdio_cwd_and_environment_only)
{
    char *argv[] = {"/bin/sleep", "100", NULL}, *envp[] = {"KMGR_TEST=spawned", NULL};
    kmgr_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .cwd = "/tmp"};
    int leak = open("/dev/null", O_RDONLY), fds[2]; /* not close-on-exec: closed all the same */
    char path[64], buf[256], link[256];
    kmgr_spawn_failure_t failure;
    ts_proc_t child;
    ssize_t n;
    FILE *f;
    pid_t pid;

    cr_assert(leak > 2);
    cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
    opts.fds[0] = KMGR_SPAWN_DEVNULL;
    opts.fds[1] = opts.fds[2] = fds[1];
    cr_assert_eq(kmgr_spawn(&opts, &pid, &failure), 0, "spawn: %s: %s", failure.step, strerror(failure.err));
    child = proc_id(pid);
    cr_assert_eq(getsid(pid), pid, "not in a session of its own");
    list_fds(pid, buf, sizeof(buf));
    cr_assert_str_eq(buf, "0 1 2 ");
    snprintf(path, sizeof(path), "/proc/%d/fd/0", (int)pid);
    cr_assert_gt(n = readlink(path, link, sizeof(link) - 1), 0);
    link[n] = '\0';
    cr_assert_str_eq(link, "/dev/null");
    snprintf(path, sizeof(path), "/proc/%d/cwd", (int)pid);
    cr_assert_gt(n = readlink(path, link, sizeof(link) - 1), 0);
    link[n] = '\0';
    cr_assert_str_eq(link, "/tmp");
    /* vfork resumes the parent before exec has laid out the new stack: the environment shows a moment later */
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    for (int tries = 0; tries != 100; ++tries, ts_sleep_ms(10)) {
        cr_assert_not_null(f = fopen(path, "r"));
        n = (ssize_t)fread(buf, 1, sizeof(buf), f);
        fclose(f);
        if (n != 0)
            break;
    }
    cr_assert(n == sizeof("KMGR_TEST=spawned") && memcmp(buf, "KMGR_TEST=spawned", n) == 0, "environ: %.*s", (int)n, buf);
    kill_and_reap(child);
    close(fds[0]);
    close(fds[1]);
    close(leak);
}

Test(spawn, ignored_and_blocked_signals_are_reset)
{
    struct sigaction ign = {.sa_handler = SIG_IGN}, saved_pipe, saved_int;
    sigset_t block, saved_mask;
    char *out;

    sigaction(SIGPIPE, &ign, &saved_pipe);
    sigaction(SIGINT, &ign, &saved_int);
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigprocmask(SIG_BLOCK, &block, &saved_mask);
    out = run_capture("exec grep -E '^Sig(Blk|Ign)' /proc/self/status", NULL);
    sigaction(SIGPIPE, &saved_pipe, NULL);
    sigaction(SIGINT, &saved_int, NULL);
    sigprocmask(SIG_SETMASK, &saved_mask, NULL);
    cr_assert_str_eq(out, "SigBlk:\t0000000000000000\nSigIgn:\t0000000000000000\n");
}

Test(spawn, failed_steps_are_reported_and_nothing_is_left)
{
    char *argv[] = {"/nonexistent/kgate-test", NULL}, *envp[] = {NULL};
    kmgr_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .fds = {-1, -1, -1}};
    kmgr_spawn_failure_t failure;
    pid_t pid = 0;

    cr_assert_eq(kmgr_spawn(&opts, &pid, &failure), KMGR_ESPAWN);
    cr_assert_str_eq(failure.step, "exec");
    cr_assert_eq(failure.err, ENOENT);
    argv[0] = "/bin/true";
    opts.path = argv[0];
    opts.cwd = "/nonexistent/kgate-test";
    cr_assert_eq(kmgr_spawn(&opts, &pid, &failure), KMGR_ESPAWN);
    cr_assert_str_eq(failure.step, "chdir");
    cr_assert_eq(failure.err, ENOENT);
    cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a failed child was left unreaped");
    cr_assert_eq(errno, ECHILD);
}

Test(spawn, child_dies_with_its_parent)
{
    ts_proc_t child;
    int report[2], go[2], status;
    pid_t middle, pid = 0;

    /* a middle process starts the child, reports its pid, and exits when told (once the child is identified) */
    cr_assert_eq(pipe(report), 0);
    cr_assert_eq(pipe(go), 0);
    if ((middle = fork()) == 0) {
        char *argv[] = {"/bin/sleep", "100", NULL}, *envp[] = {NULL}, c;
        kmgr_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .fds = {-1, -1, -1}};
        kmgr_spawn_failure_t failure;
        close(go[1]);
        if (kmgr_spawn(&opts, &pid, &failure) != 0 || write(report[1], &pid, sizeof(pid)) != (ssize_t)sizeof(pid))
            _exit(1);
        _exit(read(go[0], &c, 1) == 0 ? 0 : 1);
    }
    close(report[1]);
    close(go[0]);
    cr_assert_eq(read(report[0], &pid, sizeof(pid)), (ssize_t)sizeof(pid));
    close(report[0]);
    child = proc_id(pid);
    close(go[1]);
    cr_assert_eq(waitpid(middle, &status, 0), middle);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cr_assert(wait_gone(child, 2000), "the child of a dead parent (pid %d) still runs", (int)pid);
}
