/* sys/src/spawn.c: vfork and exec with a parent-death signal; a set-up failure is reported in shared memory. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include "ksys/errors.h"
#include "wire/alloc.h"
#include "ksys/spawn.h"
#include "ksys/util.h"

/*
 * Why vfork: a fork copies the page tables of the whole process, and kgate may hold hundreds of
 * megabytes of run output; measured on these machines, fork+exec took 0.8-2.4 ms with 20 MiB
 * resident and 11-23 ms with 200 MiB, the event loop stalled meanwhile, against 0.1 ms for glibc's
 * posix_spawn (which cannot arm a parent-death signal) and for this vfork whatever the size. vfork
 * shares the memory until exec, so the child obeys what glibc's posix_spawn obeys: every signal
 * blocked around the call (a kgate handler running in the child would write kgate's memory),
 * dispositions reset before they are unblocked, no allocation, and the credentials changed with raw
 * system calls (glibc's setuid would signal kgate's other threads).
 */

static const char *const steps[] = {
    "dup2",     "set the controlling terminal", "chdir", "setgroups", "setgid", "setuid", "prctl", "exec", "join the cgroup",
    "setrlimit"};
enum {
    STEP_DUP2,
    STEP_CTTY,
    STEP_CHDIR,
    STEP_SETGROUPS,
    STEP_SETGID,
    STEP_SETUID,
    STEP_PRCTL,
    STEP_EXEC,
    STEP_CGROUP,
    STEP_RLIMIT,
    STEP_NONE
};

/* What the child leaves in the parent's memory when a step fails (vfork resumes the parent only after exec or _exit). */
typedef struct st_child_report_t {
    int step;
    int err;
} child_report_t;

/* The kernel's struct sigaction: the raw call touches nothing of libc's or the sanitizers' state. */
typedef struct st_kernel_sigaction_t {
    void (*handler)(int);
    unsigned long flags;
    void (*restorer)(void);
    uint64_t mask;
} kernel_sigaction_t;

static void child_fail(volatile child_report_t *report, int step)
{
    report->err = errno;
    report->step = step;
    _exit(127);
}

static void child_exec(const ksys_spawn_options_t *opts, pid_t parent, int devnull, volatile child_report_t *report)
{
    kernel_sigaction_t dfl = {.handler = SIG_DFL};
    sigset_t none;
    int fds[3], above[KSYS_SPAWN_MAX_KEEP_FDS];

    setsid();
    /* first, while the descriptors are where the parent opened them: the groups then hold everything the child starts */
    for (size_t i = 0; i != opts->ncgroup_fds; ++i)
        if (opts->cgroup_fds[i] >= 0 && write(opts->cgroup_fds[i], "0", 1) != 1)
            child_fail(report, STEP_CGROUP);
    /* defaults before unblocking: a handled signal would run kgate's handler on kgate's memory, an
     * ignored one would stay ignored after exec (kgate ignores SIGPIPE) */
    for (int sig = 1; sig < NSIG; ++sig)
        if (sig != SIGKILL && sig != SIGSTOP)
            syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(dfl.mask));
    /* a source that sits at 0-2 itself would be overwritten by an earlier dup2: move it above first */
    for (int i = 0; i != 3; ++i) {
        fds[i] = opts->fds[i] >= 0 ? opts->fds[i] : devnull;
        if (fds[i] < 3 && (fds[i] = fcntl(fds[i], F_DUPFD, 3)) == -1)
            child_fail(report, STEP_DUP2);
    }
    for (int i = 0; i != 3; ++i)
        if (dup2(fds[i], i) == -1)
            child_fail(report, STEP_DUP2);
    /* kept descriptors to 3, 4, ...: first all above that range, so that none overwrites a source still to be moved */
    if (opts->nkeep_fds > KSYS_SPAWN_MAX_KEEP_FDS) {
        errno = EMFILE;
        child_fail(report, STEP_DUP2);
    }
    for (size_t i = 0; i != opts->nkeep_fds; ++i)
        if ((above[i] = fcntl(opts->keep_fds[i], F_DUPFD, 3 + (int)opts->nkeep_fds)) == -1)
            child_fail(report, STEP_DUP2);
    for (size_t i = 0; i != opts->nkeep_fds; ++i)
        if (dup2(above[i], 3 + (int)i) == -1)
            child_fail(report, STEP_DUP2);
    ksys_close_from(3 + (int)opts->nkeep_fds);
    /* a session leader without a terminal acquires the one it names */
    if (opts->controlling_tty && ioctl(0, TIOCSCTTY, 0) != 0)
        child_fail(report, STEP_CTTY);
    if (opts->cwd != NULL && chdir(opts->cwd) != 0)
        child_fail(report, STEP_CHDIR);
    if (opts->gid != NULL) {
        if (syscall(SYS_setgroups, 1, opts->gid) != 0)
            child_fail(report, STEP_SETGROUPS);
        if (syscall(SYS_setgid, *opts->gid) != 0)
            child_fail(report, STEP_SETGID);
    }
    if (opts->uid != NULL && syscall(SYS_setuid, *opts->uid) != 0)
        child_fail(report, STEP_SETUID);
    for (size_t i = 0; i != opts->nrlimits; ++i) {
        struct rlimit rl = {.rlim_cur = opts->rlimits[i].value, .rlim_max = opts->rlimits[i].value};
        if (setrlimit(opts->rlimits[i].resource, &rl) != 0)
            child_fail(report, STEP_RLIMIT);
    }
    /* after the credentials: changing them clears the parent-death signal */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
        child_fail(report, STEP_PRCTL);
    /* the parent may have died before the signal was armed: then nobody would ever send it */
    if (getppid() != parent)
        _exit(127);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(opts->path, opts->argv, opts->envp);
    child_fail(report, STEP_EXEC);
}

int ksys_spawn(const ksys_spawn_options_t *opts, pid_t *pid, ksys_spawn_failure_t *failure)
{
    volatile child_report_t report = {STEP_NONE, 0};
    pid_t parent = getpid(), child;
    sigset_t all, saved;
    int devnull, err;

    /* kgate may run with 0-2 closed: /dev/null must not land where the child's stdio goes */
    devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull >= 0 && devnull < 3) {
        int moved = fcntl(devnull, F_DUPFD_CLOEXEC, 3);
        close(devnull);
        devnull = moved;
    }
    if (devnull == -1) {
        *failure = (ksys_spawn_failure_t){"open /dev/null", errno};
        return KSYS_ESPAWN;
    }
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &saved);
    if ((child = vfork()) == 0)
        child_exec(opts, parent, devnull, &report);
    err = errno;
    sigprocmask(SIG_SETMASK, &saved, NULL);
    close(devnull);
    if (child == -1) {
        *failure = (ksys_spawn_failure_t){"fork", err};
        return KSYS_ESPAWN;
    }
    if (report.step != STEP_NONE) {
        *failure = (ksys_spawn_failure_t){steps[report.step], report.err};
        while (waitpid(child, NULL, 0) == -1 && errno == EINTR)
            ;
        return KSYS_ESPAWN;
    }
    *pid = child;
    return 0;
}

char *ksys_find_executable(const char *name)
{
    const char *path = getenv("PATH");
    char *copy, *save = NULL, *found = NULL;

    if (strchr(name, '/') != NULL)
        return access(name, X_OK) == 0 ? wire_strdup(name) : NULL;
    copy = wire_strdup(path != NULL ? path : "/usr/local/bin:/usr/bin:/bin");
    for (char *dir = strtok_r(copy, ":", &save); dir != NULL && found == NULL; dir = strtok_r(NULL, ":", &save)) {
        char *candidate = ksys_path_join(dir, name);
        if (access(candidate, X_OK) == 0)
            found = candidate;
        else
            free(candidate);
    }
    free(copy);
    return found;
}
