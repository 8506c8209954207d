/* tests/kernelmgr/test_spawn.c: ksys_spawn's set-up and parent-death signal; the sweeps of the instance record. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "ksys/spawn.h"
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

/* Starts `sleep 100` through ksys_spawn with `env` as its whole environment (NULL: none). */
static ts_proc_t spawn_sleeper(const char *env)
{
    char *argv[] = {"/bin/sleep", "100", NULL}, *envp[] = {(char *)env, NULL};
    ksys_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .fds = {KSYS_SPAWN_DEVNULL, 2, 2}};
    ksys_spawn_failure_t failure;
    pid_t pid;

    cr_assert_eq(ksys_spawn(&opts, &pid, &failure), 0, "spawn: %s: %s", failure.step, strerror(failure.err));
    return proc_id(pid);
}

static void kill_and_reap(ts_proc_t p)
{
    if (ts_proc_alive(&p))
        kill(p.pid, SIGKILL);
    waitpid(p.pid, NULL, 0);
}

/* Runs `sh -c script` through ksys_spawn and returns what it printed (stdout and stderr); `cwd` may be NULL. */
static char *run_capture(const char *script, const char *cwd)
{
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL}, *envp[] = {"KMGR_TEST=spawned", NULL};
    ksys_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .cwd = cwd};
    ksys_spawn_failure_t failure;
    static char out[4096];
    size_t len = 0;
    ssize_t n;
    int fds[2];
    pid_t pid;

    cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
    opts.fds[0] = KSYS_SPAWN_DEVNULL;
    opts.fds[1] = opts.fds[2] = fds[1];
    cr_assert_eq(ksys_spawn(&opts, &pid, &failure), 0, "spawn: %s: %s", failure.step, strerror(failure.err));
    close(fds[1]);
    while (len < sizeof(out) - 1 && (n = read(fds[0], out + len, sizeof(out) - 1 - len)) > 0)
        len += (size_t)n;
    out[len] = '\0';
    close(fds[0]);
    waitpid(pid, NULL, 0);
    return out;
}

/* Waits until `sleep` (pid) sits in its clock_nanosleep: before that, the dynamic loader and setlocale hold descriptors of
 * their own for a moment (seen under load as a stray 5 in the listing below), which are the program's, not a leak. */
static void wait_asleep(pid_t pid)
{
    char path[64], line[64];
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/syscall", (int)pid);
    for (int waited = 0; waited < 20000; waited += 10, ts_sleep_ms(10)) {
        cr_assert_not_null(f = fopen(path, "r"), "%s: %s", path, strerror(errno));
        line[0] = '\0';
        if (fgets(line, sizeof(line), f) == NULL)
            line[0] = '\0';
        fclose(f);
        if (atoi(line) == SYS_clock_nanosleep && line[0] != '\0')
            return;
    }
    cr_assert_fail("process %d never reached clock_nanosleep (last: %s)", (int)pid, line);
}

/* Its entries in /proc/<pid>/fd, space-separated, once it sleeps (wait_asleep). */
static void list_fds(pid_t pid, char *out, size_t size)
{
    char path[64];
    size_t len = 0;
    DIR *dir;
    struct dirent *de;

    wait_asleep(pid);
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
    ksys_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .cwd = "/tmp"};
    int leak = open("/dev/null", O_RDONLY), fds[2]; /* not close-on-exec: closed all the same */
    char path[64], buf[256], link[256];
    ksys_spawn_failure_t failure;
    ts_proc_t child;
    ssize_t n;
    FILE *f;
    pid_t pid;

    cr_assert(leak > 2);
    cr_assert_eq(pipe2(fds, O_CLOEXEC), 0);
    opts.fds[0] = KSYS_SPAWN_DEVNULL;
    opts.fds[1] = opts.fds[2] = fds[1];
    cr_assert_eq(ksys_spawn(&opts, &pid, &failure), 0, "spawn: %s: %s", failure.step, strerror(failure.err));
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

/* keep_fds reach the child at 3, 4, ... in order, whatever numbers they had (here crossed: the one at 4 goes to 3 and the
 * one at 3 to 4 would overwrite each other moved one by one); nothing else is passed. */
Test(spawn, kept_descriptors_arrive_at_three_and_on)
{
    char *argv[] = {"/bin/sleep", "100", NULL}, *envp[] = {NULL};
    ksys_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .fds = {-1, -1, -1}};
    int a = open("/etc", O_PATH | O_CLOEXEC), b = open("/usr", O_PATH | O_CLOEXEC), other = open("/dev/null", O_RDONLY);
    char path[64], buf[256], link[256];
    ksys_spawn_failure_t failure;
    ssize_t n;
    pid_t pid;

    cr_assert(a > 2 && b > a && other > b);
    opts.keep_fds = (const int[]){b, a};
    opts.nkeep_fds = 2;
    cr_assert_eq(ksys_spawn(&opts, &pid, &failure), 0, "spawn: %s: %s", failure.step, strerror(failure.err));
    list_fds(pid, buf, sizeof(buf));
    cr_assert_str_eq(buf, "0 1 2 3 4 ");
    for (int fd = 3; fd != 5; ++fd) {
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, fd);
        cr_assert_gt(n = readlink(path, link, sizeof(link) - 1), 0);
        link[n] = '\0';
        cr_assert_str_eq(link, fd == 3 ? "/usr" : "/etc");
    }
    kill_and_reap(proc_id(pid));
    close(a);
    close(b);
    close(other);
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
    ksys_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .fds = {-1, -1, -1}};
    ksys_spawn_failure_t failure;
    pid_t pid = 0;

    cr_assert_eq(ksys_spawn(&opts, &pid, &failure), KSYS_ESPAWN);
    cr_assert_str_eq(failure.step, "exec");
    cr_assert_eq(failure.err, ENOENT);
    argv[0] = "/bin/true";
    opts.path = argv[0];
    opts.cwd = "/nonexistent/kgate-test";
    cr_assert_eq(ksys_spawn(&opts, &pid, &failure), KSYS_ESPAWN);
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
        ksys_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .fds = {-1, -1, -1}};
        ksys_spawn_failure_t failure;
        close(go[1]);
        if (ksys_spawn(&opts, &pid, &failure) != 0 || write(report[1], &pid, sizeof(pid)) != (ssize_t)sizeof(pid))
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

/* ---- the instance record and its sweeps ---- */

static char sweep_dir[] = "/tmp/kgate-kmgr-sweep-XXXXXX";

static void touch(const char *name)
{
    char path[256];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", sweep_dir, name);
    cr_assert_neq(fd = open(path, O_WRONLY | O_CREAT, 0600), -1, "%s: %s", path, strerror(errno));
    close(fd);
}

static void unlink_entry(const char *name)
{
    char path[256];

    snprintf(path, sizeof(path), "%s/%s", sweep_dir, name);
    cr_assert_eq(unlink(path), 0, "%s: %s", path, strerror(errno));
}

static int exists(const char *name)
{
    char path[256];
    struct stat st;

    snprintf(path, sizeof(path), "%s/%s", sweep_dir, name);
    return lstat(path, &st) == 0;
}

/* The pid namespace of this process (the inode of /proc/self/ns/pid). */
static unsigned long long pid_ns(void)
{
    struct stat st;
    cr_assert_eq(stat("/proc/self/ns/pid", &st), 0);
    return (unsigned long long)st.st_ino;
}

/* A record as kgate writes it, of the kgate `pid` started at `starttime` on boot `boot_id` (NULL: this boot) in pid namespace `ns`.
 */
static void write_record(const char *token, pid_t pid, unsigned long long starttime, const char *boot_id, unsigned long long ns)
{
    char path[256], this_boot[37] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

    cr_assert_not_null(f);
    cr_assert_eq(fread(this_boot, 1, 36, f), 36);
    fclose(f);
    snprintf(path, sizeof(path), "%s/kgate-%s.instance", sweep_dir, token);
    cr_assert_not_null(f = fopen(path, "w"));
    fprintf(f, "%d %llu %s %llu %s\n", (int)pid, starttime, boot_id != NULL ? boot_id : this_boot, ns, token);
    fclose(f);
}

/* A kgate that has died: a process that ran, and was reaped, before the leftovers started. */
static ts_proc_t dead_process(void)
{
    int fds[2];
    char c;
    ts_proc_t p;

    cr_assert_eq(pipe(fds), 0);
    if ((p.pid = fork()) == 0) {
        ssize_t r;
        close(fds[1]);
        r = read(fds[0], &c, 1);
        _exit(r < 0);
    }
    close(fds[0]);
    p = proc_id(p.pid);
    close(fds[1]);
    waitpid(p.pid, NULL, 0);
    return p;
}

static void make_stale_files(void)
{
    char path[256];

    cr_assert_not_null(mkdtemp(sweep_dir));
    snprintf(path, sizeof(path), "%s/0d4e3a1c-5b2f-4c6d-8e9f-0a1b2c3d4e5f", sweep_dir);
    cr_assert_eq(mkdir(path, 0700), 0);
    touch("0d4e3a1c-5b2f-4c6d-8e9f-0a1b2c3d4e5f/connection.json");
    touch("command-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d.log");
    touch("notes.txt");
}

static void remove_sweep_dir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", sweep_dir);
    cr_expect_eq(system(cmd), 0);
}

#define DEAD_TOKEN "0123456789abcdef0123456789abcdef"
#define OTHER_TOKEN "fedcba9876543210fedcba9876543210"

Test(spawn, a_new_manager_kills_what_a_dead_kgate_left_and_only_that)
{
    kmgr_config_t config = {0};
    ts_proc_t dead = dead_process(), marked, other, unmarked;

    make_stale_files();
    marked = spawn_sleeper("KGATE_INSTANCE=" DEAD_TOKEN);
    other = spawn_sleeper("KGATE_INSTANCE=" OTHER_TOKEN);
    unmarked = spawn_sleeper(NULL);
    write_record(DEAD_TOKEN, dead.pid, dead.starttime, NULL, pid_ns());
    config.runtime_dir = sweep_dir;
    kt_setup_config(&config);

    cr_expect(!ts_proc_alive(&marked), "the dead kgate's leftover survived");
    cr_expect(ts_proc_alive(&other), "a process marked by another kgate was killed");
    cr_expect(ts_proc_alive(&unmarked), "an unmarked process was killed");
    cr_expect_eq(kmgr_manager_swept(kt.mgr), 1);
    cr_expect(!exists("kgate-" DEAD_TOKEN ".instance"), "the dead kgate's record is still there");
    cr_expect(!exists("0d4e3a1c-5b2f-4c6d-8e9f-0a1b2c3d4e5f"), "a stale kernel directory is still there");
    cr_expect(!exists("command-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d.log"), "a stale command log is still there");
    cr_expect(exists("notes.txt"), "a file kgate did not name was removed");

    kt_teardown();
    kill_and_reap(marked);
    kill_and_reap(other);
    kill_and_reap(unmarked);
    remove_sweep_dir();
}

Test(spawn, a_live_kgate_and_a_shared_directory_are_left_alone)
{
    kmgr_config_t config = {0};
    ts_proc_t self = proc_id(getpid()), dead = dead_process(), marked;

    make_stale_files();
    config.runtime_dir = sweep_dir;
    /* a record of a live kgate (this very process): its processes and the directory's files stay */
    marked = spawn_sleeper("KGATE_INSTANCE=" OTHER_TOKEN);
    write_record(OTHER_TOKEN, self.pid, self.starttime, NULL, pid_ns());
    kt_setup_config(&config);
    cr_expect(ts_proc_alive(&marked), "a live kgate's process was killed");
    cr_expect(exists("kgate-" OTHER_TOKEN ".instance"), "a live kgate's record was removed");
    cr_expect(exists("command-1a2b3c4d-5e6f-4a7b-8c9d-0e1f2a3b4c5d.log"), "a file of a live kgate was removed");
    kt_teardown();
    kill_and_reap(marked);
    unlink_entry("kgate-" OTHER_TOKEN ".instance");

    /* a dead pid of another pid namespace says nothing about the kgate there: it counts as live */
    marked = spawn_sleeper("KGATE_INSTANCE=" DEAD_TOKEN);
    write_record(DEAD_TOKEN, dead.pid, dead.starttime, NULL, pid_ns() + 1);
    kt_setup_config(&config);
    cr_expect(ts_proc_alive(&marked), "the process of a kgate in another pid namespace was killed");
    cr_expect(exists("kgate-" DEAD_TOKEN ".instance"), "the record of a kgate in another pid namespace was removed");
    kt_teardown();

    /* after a reboot a record only goes: a process now carrying its token cannot be its */
    write_record(DEAD_TOKEN, dead.pid, dead.starttime, "00000000-0000-4000-8000-000000000000", pid_ns());
    kt_setup_config(&config);
    cr_expect(ts_proc_alive(&marked), "a process was killed for the record of an earlier boot");
    cr_expect(!exists("kgate-" DEAD_TOKEN ".instance"), "the record of an earlier boot is still there");
    kt_teardown();

    /* a directory others may write to proves nothing: its records are not acted upon */
    cr_assert_eq(chmod(sweep_dir, 0770), 0);
    write_record(DEAD_TOKEN, dead.pid, dead.starttime, NULL, pid_ns());
    kt_setup_config(&config);
    cr_expect(ts_proc_alive(&marked), "a record in a group-writable directory was acted upon");
    cr_expect_eq(kmgr_manager_swept(kt.mgr), 0);
    kt_teardown();
    kill_and_reap(marked);
    remove_sweep_dir();
}

Test(spawn, a_manager_kills_its_own_escaped_descendants_when_destroyed)
{
    ts_proc_t escaped, unmarked;

    kt_setup();
    escaped = spawn_sleeper(kmgr_manager_instance_env(kt.mgr));
    unmarked = spawn_sleeper(NULL);
    kt_teardown();
    cr_expect(!ts_proc_alive(&escaped), "a process carrying the manager's mark outlived it");
    cr_expect(ts_proc_alive(&unmarked), "an unmarked process was killed");
    kill_and_reap(escaped);
    kill_and_reap(unmarked);
}

Test(spawn, the_watchdog_kills_what_escaped_a_manager_killed_with_sigkill)
{
    ts_proc_t escaped, watchdog;
    int report[2], go[2], status;
    pid_t middle, pids[2];

    /* a middle process creates a manager, starts a double fork with the manager's mark, reports, and, once this
     * process has taken the reported processes' identities (the watchdog acts within milliseconds), dies by SIGKILL */
    cr_assert_eq(pipe(report), 0);
    cr_assert_eq(pipe(go), 0);
    if ((middle = fork()) == 0) {
        char *argv[] = {"/bin/sh", "-c", "sleep 100 > /dev/null 2>&1 & echo $!", NULL}, *envp[] = {NULL, NULL}, buf[32] = "";
        ksys_spawn_options_t opts = {.path = argv[0], .argv = argv, .envp = envp, .fds = {KSYS_SPAWN_DEVNULL, -1, 2}};
        ksys_spawn_failure_t failure;
        poll_loop_t *loop = poll_loop_create();
        kmgr_manager_t *mgr;
        ts_proc_t wd;
        int out[2];
        pid_t sh;
        close(report[0]);
        close(go[1]);
        if (kmgr_manager_create(NULL, &poll_loop_ops, loop, &mgr) != 0 || ts_watchdog_of(getpid(), &wd) != 0 || pipe(out) != 0)
            _exit(1);
        envp[0] = (char *)kmgr_manager_instance_env(mgr);
        opts.fds[1] = out[1];
        if (ksys_spawn(&opts, &sh, &failure) != 0)
            _exit(1);
        close(out[1]);
        if (read(out[0], buf, sizeof(buf) - 1) <= 0 || waitpid(sh, NULL, 0) != sh)
            _exit(1);
        pids[0] = (pid_t)atoi(buf);
        pids[1] = wd.pid;
        if (write(report[1], pids, sizeof(pids)) != (ssize_t)sizeof(pids) || read(go[0], buf, 1) != 1)
            _exit(1);
        raise(SIGKILL);
    }
    close(report[1]);
    close(go[0]);
    cr_assert_eq(read(report[0], pids, sizeof(pids)), (ssize_t)sizeof(pids), "the middle process failed");
    close(report[0]);
    escaped = proc_id(pids[0]);
    watchdog = proc_id(pids[1]);
    cr_assert_eq(write(go[1], "k", 1), 1);
    close(go[1]);
    cr_assert_eq(waitpid(middle, &status, 0), middle);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    cr_expect(wait_gone(escaped, 2000), "the double-forked process (pid %d) outlived its manager by 2 s", (int)escaped.pid);
    cr_expect(wait_gone(watchdog, 2000), "the watchdog (pid %d) outlived its work by 2 s", (int)watchdog.pid);
    kill_and_reap(escaped);
    kill_and_reap(watchdog);
}

Test(spawn, the_watchdog_is_deaf_to_signals_sent_in_passing_and_goes_with_its_manager)
{
    ts_proc_t watchdog;

    kt_setup();
    cr_assert_eq(ts_watchdog_of(getpid(), &watchdog), 0, "no watchdog among this process's children");
    cr_expect_eq(getsid(watchdog.pid), watchdog.pid, "the watchdog is not in a session of its own");
    kill(watchdog.pid, SIGTERM);
    kill(watchdog.pid, SIGINT);
    kill(watchdog.pid, SIGHUP);
    ts_sleep_ms(100);
    cr_expect(ts_proc_alive(&watchdog), "a signal sent in passing ended the watchdog");
    kt_teardown();
    cr_expect(!ts_proc_alive(&watchdog), "the watchdog outlived its manager's destruction");
}
