/* tests/kernelmgr/test_cgroup.c: the cgroups a kgate killed with SIGKILL left, swept by the next manager and by its watchdog. */
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
#include "kmgr_test.h"
#include "support/base.h"
#include "support/proc.h"
#include "support/skip.h"

TestSuite(cgroup, .timeout = 60);

#define CG_ROOT "/sys/fs/cgroup"

/*
 * Where kgate makes its parents and a test plants its groups: this process's own group in the v1 pids
 * hierarchy, or in v2. The tests skip where that is not writable (no cgroups, or not ours to change).
 */
static char base[1024];

static void find_base(void)
{
    char line[1024];
    struct stat st;
    int v2 = stat(CG_ROOT "/cgroup.controllers", &st) == 0;
    FILE *f = fopen("/proc/self/cgroup", "re");

    base[0] = '\0';
    cr_assert_not_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        char *path = strchr(line, ':'), *ctls = path;
        if (path == NULL || (path = strchr(path + 1, ':')) == NULL)
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        if (v2 ? strcmp(ctls, ":") == 0 : strcmp(ctls, ":pids") == 0)
            snprintf(base, sizeof(base), CG_ROOT "%s%s", v2 ? "" : "/pids", strcmp(path, "/") == 0 ? "" : path);
    }
    fclose(f);
}

static void path_of(char *out, size_t size, const char *name)
{
    snprintf(out, size, "%s/%s", base, name);
}

static int group_exists(const char *name)
{
    char path[1200];
    struct stat st;

    path_of(path, sizeof(path), name);
    return stat(path, &st) == 0;
}

static void make_group(const char *name)
{
    char path[1200];

    path_of(path, sizeof(path), name);
    cr_assert(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", path, strerror(errno));
}

/* rmdir, the test's own clean-up of what the sweep was to leave */
static void remove_group(const char *name)
{
    char path[1200];

    path_of(path, sizeof(path), name);
    rmdir(path);
}

/* Skips the test unless this process may create groups where kgate would. */
static void require_writable_cgroups(void)
{
    char probe[1200];

    find_base();
    if (base[0] == '\0')
        cr_skip_test("%s", ts_skip_note(__func__, "no cgroup hierarchy to write to here"));
    snprintf(probe, sizeof(probe), "%s/kgate-test-probe-%d", base, (int)getpid());
    if (mkdir(probe, 0755) != 0)
        cr_skip_test("%s", ts_skip_note(__func__, "cgroups are not writable here (%s): %s", base, strerror(errno)));
    rmdir(probe);
}

static unsigned long long pid_ns(void)
{
    struct stat st;
    cr_assert_eq(stat("/proc/self/ns/pid", &st), 0);
    return (unsigned long long)st.st_ino;
}

/* `sleep 100`, a child of this process, in the group `name` when not NULL. */
static ts_proc_t sleeper_in(const char *name)
{
    char path[1300], pid[32];
    ts_proc_t p;
    pid_t child;
    int fd;

    if ((child = fork()) == 0) {
        execl("/bin/sleep", "sleep", "100", (char *)NULL);
        _exit(127);
    }
    cr_assert_gt(child, 0);
    cr_assert_eq(ts_proc_get(child, &p), 0);
    if (name != NULL) {
        snprintf(path, sizeof(path), "%s/%s/cgroup.procs", base, name);
        snprintf(pid, sizeof(pid), "%d", (int)child);
        cr_assert_neq(fd = open(path, O_WRONLY | O_CLOEXEC), -1, "%s: %s", path, strerror(errno));
        cr_assert_eq(write(fd, pid, strlen(pid)), (ssize_t)strlen(pid), "%s: %s", path, strerror(errno));
        close(fd);
    }
    return p;
}

static void kill_and_reap(ts_proc_t p)
{
    if (ts_proc_alive(&p))
        kill(p.pid, SIGKILL);
    waitpid(p.pid, NULL, 0);
}

/* A process that ran and was reaped: a kgate that died. */
static ts_proc_t dead_process(void)
{
    ts_proc_t p = sleeper_in(NULL);
    kill_and_reap(p);
    return p;
}

/* "kgate-<pid>-<start time>-<pid namespace>", as kgate names its parent. */
static void owner_name(char *out, size_t size, const char *suffix, pid_t pid, unsigned long long starttime, unsigned long long ns)
{
    snprintf(out, size, "kgate-%d-%llu-%llu%s", (int)pid, starttime, ns, suffix);
}

Test(cgroup, a_new_manager_removes_what_a_dead_kgate_left_and_only_that)
{
    ts_proc_t dead, live, inside, live_inside;
    char stale[96], stale_kernel[128], reused[96], live_group[96], live_kernel[128], foreign[96], legacy[64], legacy_kernel[96];

    require_writable_cgroups();
    dead = dead_process();
    live = sleeper_in(NULL);
    /* a dead kgate's parent, with a kernel's group that still holds a process (what its watchdog would have killed) */
    owner_name(stale, sizeof(stale), "", dead.pid, dead.starttime, pid_ns());
    owner_name(stale_kernel, sizeof(stale_kernel), "/k1", dead.pid, dead.starttime, pid_ns());
    make_group(stale);
    make_group(stale_kernel);
    inside = sleeper_in(stale_kernel);
    /* the pid of a dead kgate that a process of another start time holds now */
    owner_name(reused, sizeof(reused), "", live.pid, live.starttime + 1, pid_ns());
    make_group(reused);
    /* a live kgate's (its pid and start time are a live process's): it and what it holds stay */
    owner_name(live_group, sizeof(live_group), "", live.pid, live.starttime, pid_ns());
    owner_name(live_kernel, sizeof(live_kernel), "/k1", live.pid, live.starttime, pid_ns());
    make_group(live_group);
    make_group(live_kernel);
    live_inside = sleeper_in(live_kernel);
    /* one of another pid namespace: a dead pid there says nothing here */
    owner_name(foreign, sizeof(foreign), "", dead.pid, dead.starttime, pid_ns() + 1);
    make_group(foreign);
    /* an older kgate's, named by its pid alone: goes when that pid is free and the groups are empty */
    snprintf(legacy, sizeof(legacy), "kgate-%d", (int)dead.pid);
    snprintf(legacy_kernel, sizeof(legacy_kernel), "%s/k1", legacy);
    make_group(legacy);
    make_group(legacy_kernel);

    kt_setup();
    cr_expect(!ts_proc_alive(&inside), "a process in a dead kgate's cgroup survived");
    cr_expect(!group_exists(stale_kernel), "a dead kgate's kernel cgroup %s/%s is still there", base, stale_kernel);
    cr_expect(!group_exists(stale), "a dead kgate's cgroup %s/%s is still there", base, stale);
    cr_expect(!group_exists(reused), "the cgroup of a kgate whose pid was reused is still there");
    cr_expect(!group_exists(legacy_kernel) && !group_exists(legacy), "an older dead kgate's empty cgroups are still there");
    cr_expect(group_exists(live_kernel), "a live kgate's cgroup was removed");
    cr_expect(ts_proc_alive(&live_inside), "a process in a live kgate's cgroup was killed");
    cr_expect(group_exists(foreign), "the cgroup of a kgate in another pid namespace was removed");
    kt_teardown();

    kill_and_reap(inside);
    kill_and_reap(live_inside);
    kill_and_reap(live);
    remove_group(stale_kernel);
    remove_group(stale);
    remove_group(reused);
    remove_group(live_kernel);
    remove_group(live_group);
    remove_group(foreign);
    remove_group(legacy_kernel);
    remove_group(legacy);
}

Test(cgroup, the_watchdog_removes_the_cgroups_of_a_manager_killed_with_sigkill)
{
    ts_proc_t middle_id;
    char parent[96], byte;
    int report[2], go[2], status;
    pid_t middle;

    require_writable_cgroups();
    cr_assert_eq(pipe(report), 0);
    cr_assert_eq(pipe(go), 0);
    /* a middle process creates a manager (and so its parent cgroup), reports, and dies by SIGKILL when told */
    if ((middle = fork()) == 0) {
        poll_loop_t *loop = poll_loop_create();
        kmgr_manager_t *mgr;
        close(report[0]);
        close(go[1]);
        if (kmgr_manager_create(NULL, &poll_loop_ops, loop, &mgr) != 0 || write(report[1], "r", 1) != 1 ||
            read(go[0], &byte, 1) != 1)
            _exit(1);
        raise(SIGKILL);
    }
    close(report[1]);
    close(go[0]);
    cr_assert_eq(read(report[0], &byte, 1), 1, "the middle process failed");
    close(report[0]);
    cr_assert_eq(ts_proc_get(middle, &middle_id), 0);
    owner_name(parent, sizeof(parent), "", middle, middle_id.starttime, pid_ns());
    cr_assert(group_exists(parent), "the manager made no cgroup %s/%s", base, parent);
    cr_assert_eq(write(go[1], "k", 1), 1);
    close(go[1]);
    cr_assert_eq(waitpid(middle, &status, 0), middle);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    for (int waited = 0; waited < 3000 && group_exists(parent); waited += 10)
        ts_sleep_ms(10);
    cr_expect(!group_exists(parent), "the cgroup %s/%s of a kgate killed with SIGKILL outlived it by 3 s", base, parent);
    remove_group(parent);
}
