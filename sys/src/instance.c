/* sys/src/instance.c: the instance token in every child's environment, the record in the runtime dir, the sweeps. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include "wire/alloc.h"
#include "wire/ids.h"
#include "ksys/errors.h"
#include "ksys/util.h"
#include "ksys/cgroup.h"
#include "ksys/instance.h"
#include "ksys/rmtree.h"
#include "ksys/util.h"

#define BOOT_ID_LEN 36
#define RECORD_PREFIX "kgate-"
#define RECORD_SUFFIX ".instance"
/* Sweeps repeat while they find something (a leftover may fork while it is being looked at), at most this often. */
#define SWEEP_PASSES 5
/* How long one pass waits for the processes it killed to exit (a process in uninterruptible sleep may take longer). */
#define SWEEP_WAIT_MS 1000
/* A process whose environment is larger than this is not read to its end (Linux allows a quarter of the stack limit). */
#define MAX_ENVIRON (8u << 20)

/* A kgate whose descendants a sweep kills: its "KGATE_INSTANCE=<token>" entry and its start time. */
typedef struct st_sweep_target_t {
    char env[sizeof(KSYS_INSTANCE_VAR "=") + KSYS_INSTANCE_TOKEN_LEN];
    unsigned long long starttime;
    char record[256]; /* its record's file name ("" for this kgate) */
} sweep_target_t;

/* State, parent and start time (clock ticks since boot) from /proc/<pid>/stat (pid 0: this process). */
static int read_stat(pid_t pid, char *state, pid_t *ppid, unsigned long long *starttime)
{
    char path[64], buf[1024], *p;
    ssize_t n;
    int fd;

    if (pid == 0)
        snprintf(path, sizeof(path), "/proc/self/stat");
    else
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
        return -1;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    /* the command name may hold spaces and parentheses: fields are counted from the last ')' */
    if ((p = strrchr(buf, ')')) == NULL || sscanf(p + 1, " %c %d", state, ppid) != 2)
        return -1;
    /* the 20th space after it precedes field 22, the start time */
    for (int i = 0; i != 20 && p != NULL; ++i)
        p = strchr(p + 1, ' ');
    return p != NULL && sscanf(p + 1, "%llu", starttime) == 1 ? 0 : -1;
}

/* Where pids and start times mean something: one boot of one machine, one pid namespace. */
typedef struct st_origin_t {
    char boot_id[BOOT_ID_LEN + 1];
    unsigned long long pid_ns; /* the inode of /proc/self/ns/pid */
} origin_t;

static int read_pid_ns(unsigned long long *pid_ns)
{
    struct stat st;

    if (stat("/proc/self/ns/pid", &st) != 0)
        return -1;
    *pid_ns = (unsigned long long)st.st_ino;
    return 0;
}

static int read_origin(origin_t *origin)
{
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd != -1 ? read(fd, origin->boot_id, BOOT_ID_LEN) : -1;

    if (fd != -1)
        close(fd);
    origin->boot_id[n == BOOT_ID_LEN ? BOOT_ID_LEN : 0] = '\0';
    return n == BOOT_ID_LEN ? read_pid_ns(&origin->pid_ns) : -1;
}

int ksys_process_id_self(ksys_process_id_t *id)
{
    pid_t ppid;
    char state;

    id->pid = (int)getpid();
    return read_stat(0, &state, &ppid, &id->starttime) == 0 && read_pid_ns(&id->pid_ns) == 0 ? 0 : KSYS_EIO;
}

int ksys_process_id_gone(const ksys_process_id_t *id)
{
    unsigned long long here, starttime;
    pid_t ppid;
    char state;

    /* a pid of another namespace cannot be looked up from here */
    if (read_pid_ns(&here) != 0 || id->pid_ns != here)
        return 0;
    return !(id->pid > 0 && read_stat(id->pid, &state, &ppid, &starttime) == 0 && starttime == id->starttime && state != 'Z' &&
             state != 'X');
}

/* Reads /proc/<pid>/environ into *buf (grown as needed); returns its length, or -1. */
static ssize_t read_environ(pid_t pid, char **buf, size_t *cap)
{
    char path[64];
    size_t len = 0;
    ssize_t n = 0;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
        return -1;
    for (;;) {
        if (len == *cap) {
            if (*cap >= MAX_ENVIRON)
                break;
            *cap = *cap != 0 ? *cap * 2 : 64 << 10;
            *buf = wire_realloc(*buf, *cap);
        }
        if ((n = read(fd, *buf + len, *cap - len)) <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    return n < 0 ? -1 : (ssize_t)len;
}

/* The target whose entry `env` (NUL-separated) holds, or NULL. */
static const sweep_target_t *find_mark(const char *env, size_t len, const sweep_target_t *targets, size_t num_targets)
{
    const char *end = env + len, *entry, *nul;

    for (entry = env; entry < end; entry = nul + 1) {
        if ((nul = memchr(entry, '\0', end - entry)) == NULL)
            nul = end;
        if (strncmp(entry, KSYS_INSTANCE_VAR "=", sizeof(KSYS_INSTANCE_VAR)) != 0)
            continue;
        for (size_t i = 0; i != num_targets; ++i)
            if ((size_t)(nul - entry) == strlen(targets[i].env) && memcmp(entry, targets[i].env, nul - entry) == 0)
                return &targets[i];
    }
    return NULL;
}

/* This process and its ancestors: never swept, whatever their environment says (a kgate started by a dead kgate's command). */
static size_t list_lineage(pid_t *out, size_t max)
{
    size_t n = 0;
    pid_t pid = getpid(), ppid;
    unsigned long long starttime;
    char state;

    while (pid > 1 && n != max) {
        out[n++] = pid;
        if (read_stat(pid, &state, &ppid, &starttime) != 0)
            break;
        pid = ppid;
    }
    return n;
}

/* The pidfds of the processes one pass has killed. */
typedef struct st_killed_t {
    int *pidfds;
    size_t size, capacity;
} killed_t;

/*
 * Kills (SIGKILL) the live processes whose environment carries a target's mark and that started no
 * earlier than that kgate. The process is pinned by a pidfd before it is examined and signalled
 * through it, after checking that it still lives: what was read is then its own, and a pid reused
 * meanwhile is never signalled. The pidfds of those killed are added to `killed`.
 */
static void kill_marked_once(const sweep_target_t *targets, size_t num_targets, char **env_buf, size_t *env_cap, killed_t *killed)
{
    pid_t lineage[64];
    size_t num_lineage = list_lineage(lineage, sizeof(lineage) / sizeof(lineage[0])), i;
    unsigned long long oldest = ~0ull;
    DIR *proc = opendir("/proc");
    struct dirent *de;

    if (proc == NULL)
        return;
    for (i = 0; i != num_targets; ++i)
        if (targets[i].starttime < oldest)
            oldest = targets[i].starttime;
    while ((de = readdir(proc)) != NULL) {
        char *end, state;
        long v = strtol(de->d_name, &end, 10);
        pid_t pid = (pid_t)v, ppid;
        unsigned long long starttime;
        const sweep_target_t *target;
        ssize_t len;
        int pidfd;

        if (!isdigit((unsigned char)de->d_name[0]) || *end != '\0' || v <= 1)
            continue;
        for (i = 0; i != num_lineage && lineage[i] != pid; ++i)
            ;
        if (i != num_lineage || (pidfd = pidfd_open(pid, 0)) == -1)
            continue;
        /* the start time first: the environment of processes older than every target is never read */
        if (read_stat(pid, &state, &ppid, &starttime) == 0 && state != 'Z' && state != 'X' && starttime >= oldest &&
            (len = read_environ(pid, env_buf, env_cap)) > 0 &&
            (target = find_mark(*env_buf, (size_t)len, targets, num_targets)) != NULL && starttime >= target->starttime &&
            pidfd_send_signal(pidfd, 0, NULL, 0) == 0 && pidfd_send_signal(pidfd, SIGKILL, NULL, 0) == 0) {
            if (killed->size == killed->capacity) {
                killed->capacity = killed->capacity != 0 ? killed->capacity * 2 : 16;
                killed->pidfds = wire_realloc(killed->pidfds, killed->capacity * sizeof(int));
            }
            killed->pidfds[killed->size++] = pidfd;
            continue;
        }
        close(pidfd);
    }
    closedir(proc);
}

/* Waits (bounded) until every process killed has exited, so that a next pass does not find it again, and closes the pidfds. */
static void wait_killed(killed_t *killed, size_t from)
{
    uint64_t deadline = ksys_now_ms() + SWEEP_WAIT_MS;

    for (size_t i = from; i != killed->size; ++i) {
        struct pollfd pfd = {.fd = killed->pidfds[i], .events = POLLIN};
        uint64_t now;
        while ((now = ksys_now_ms()) < deadline && poll(&pfd, 1, (int)(deadline - now)) == -1 && errno == EINTR)
            ;
        close(killed->pidfds[i]);
    }
}

static size_t kill_marked(const sweep_target_t *targets, size_t num_targets)
{
    char *env_buf = NULL;
    size_t env_cap = 0, before;
    killed_t killed = {NULL, 0, 0};

    for (int pass = 0; pass != SWEEP_PASSES; ++pass) {
        before = killed.size;
        kill_marked_once(targets, num_targets, &env_buf, &env_cap, &killed);
        wait_killed(&killed, before);
        if (killed.size == before)
            break;
    }
    free(env_buf);
    free(killed.pidfds);
    return killed.size;
}

/* A record of another kgate: its pid, start time, origin and token. */
typedef struct st_record_t {
    int pid;
    unsigned long long starttime;
    origin_t origin;
    char token[KSYS_INSTANCE_TOKEN_LEN + 1];
} record_t;

static int read_record(int dirfd, const char *name, record_t *rec)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    char buf[256];
    ssize_t n = fd != -1 ? read(fd, buf, sizeof(buf) - 1) : -1;
    struct stat st;
    int ok = fd != -1 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && n > 0;

    if (fd != -1)
        close(fd);
    if (!ok)
        return -1;
    buf[n] = '\0';
    return sscanf(buf, "%d %llu %36s %llu %32s", &rec->pid, &rec->starttime, rec->origin.boot_id, &rec->origin.pid_ns,
                  rec->token) == 5 &&
                   strlen(rec->token) == KSYS_INSTANCE_TOKEN_LEN
               ? 0
               : -1;
}

typedef enum { RECORD_LIVE, RECORD_DEAD, RECORD_REBOOTED } record_state_t;

/*
 * Whether the kgate of a record still runs: its pid holds a live process that started when it did.
 * One from another pid namespace cannot be looked up and counts as live; after a reboot nothing of
 * it runs any more.
 */
static record_state_t record_state(const record_t *rec, const origin_t *here)
{
    ksys_process_id_t id = {.pid = rec->pid, .starttime = rec->starttime, .pid_ns = rec->origin.pid_ns};

    if (strcmp(rec->origin.boot_id, here->boot_id) != 0)
        return RECORD_REBOOTED;
    return ksys_process_id_gone(&id) ? RECORD_DEAD : RECORD_LIVE;
}

/* "<uuid>" or "<anything>-<uuid>.log": what kgate names its kernel directories and command logs in the runtime dir. */
static int is_uuid(const char *s)
{
    for (int i = 0; i != WIRE_UUID_STRLEN; ++i)
        if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-' : !isxdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

static int is_instance_file(const char *name)
{
    size_t n = strlen(name);

    if (n == WIRE_UUID_STRLEN)
        return is_uuid(name);
    return n > WIRE_UUID_STRLEN + 5 && strcmp(name + n - 4, ".log") == 0 && name[n - 5 - WIRE_UUID_STRLEN] == '-' &&
           is_uuid(name + n - 4 - WIRE_UUID_STRLEN);
}

static void remove_stale_files(const char *runtime_dir)
{
    DIR *dir = opendir(runtime_dir);
    struct dirent *de;

    if (dir == NULL)
        return;
    while ((de = readdir(dir)) != NULL) {
        struct stat st;
        if (!is_instance_file(de->d_name) || fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            st.st_uid != geteuid())
            continue;
        if (S_ISDIR(st.st_mode)) {
            char *path = ksys_path_join(runtime_dir, de->d_name);
            ksys_rmtree(path);
            free(path);
        } else if (S_ISREG(st.st_mode)) {
            unlinkat(dirfd(dir), de->d_name, 0);
        }
    }
    closedir(dir);
}

/* Kills what the dead kgates recorded in `runtime_dir` left and removes their records; returns how many processes it killed. */
static size_t sweep_dead(const char *runtime_dir)
{
    sweep_target_t *targets = NULL;
    size_t num_targets = 0, num_rebooted = 0, killed = 0;
    origin_t here;
    int live = 0;
    DIR *dir = opendir(runtime_dir);
    struct dirent *de;
    struct stat st;

    /* only a directory nobody else can write to: a record planted by someone else proves nothing */
    if (dir == NULL || fstat(dirfd(dir), &st) != 0 || st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0 ||
        read_origin(&here) != 0)
        goto Exit;
    while ((de = readdir(dir)) != NULL) {
        size_t n = strlen(de->d_name);
        record_t rec;
        if (n < sizeof(RECORD_PREFIX RECORD_SUFFIX) || n >= sizeof(targets->record) ||
            strncmp(de->d_name, RECORD_PREFIX, sizeof(RECORD_PREFIX) - 1) != 0 ||
            strcmp(de->d_name + n - (sizeof(RECORD_SUFFIX) - 1), RECORD_SUFFIX) != 0 ||
            read_record(dirfd(dir), de->d_name, &rec) != 0)
            continue;
        switch (record_state(&rec, &here)) {
        case RECORD_LIVE:
            live = 1;
            continue;
        case RECORD_DEAD:
            targets = wire_realloc(targets, (num_targets + 1) * sizeof(*targets));
            snprintf(targets[num_targets].env, sizeof(targets[num_targets].env), KSYS_INSTANCE_VAR "=%s", rec.token);
            targets[num_targets].starttime = rec.starttime;
            memcpy(targets[num_targets++].record, de->d_name, n + 1);
            break;
        case RECORD_REBOOTED:
            unlinkat(dirfd(dir), de->d_name, 0);
            ++num_rebooted;
            break;
        }
    }
    if (num_targets != 0)
        killed = kill_marked(targets, num_targets);
    /* records go only once their processes have: a sweep cut short is taken up again by the next start */
    for (size_t i = 0; i != num_targets; ++i)
        unlinkat(dirfd(dir), targets[i].record, 0);
    /* a live kgate sharing the directory owns some of these files: which ones is not written anywhere */
    if (num_targets + num_rebooted != 0 && !live)
        remove_stale_files(runtime_dir);
Exit:
    if (dir != NULL)
        closedir(dir);
    free(targets);
    return killed;
}

static int write_record(ksys_instance_t *inst, const char *runtime_dir)
{
    char name[sizeof(RECORD_PREFIX RECORD_SUFFIX) + KSYS_INSTANCE_TOKEN_LEN], line[256], *tmp;
    unsigned long long starttime;
    origin_t here;
    pid_t ppid;
    char state;
    int fd, len, ok;

    if (read_stat(0, &state, &ppid, &starttime) != 0 || read_origin(&here) != 0)
        return KSYS_EIO;
    snprintf(name, sizeof(name), RECORD_PREFIX "%s" RECORD_SUFFIX, inst->token);
    inst->record_path = ksys_path_join(runtime_dir, name);
    tmp = wire_malloc(strlen(inst->record_path) + sizeof(".tmp"));
    sprintf(tmp, "%s.tmp", inst->record_path);
    len = snprintf(line, sizeof(line), "%d %llu %s %llu %s\n", (int)getpid(), starttime, here.boot_id, here.pid_ns, inst->token);
    /* written whole, then renamed: a sweep never reads half a record */
    ok = (fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) != -1 && write(fd, line, len) == len;
    ok = fd != -1 && close(fd) == 0 && ok && rename(tmp, inst->record_path) == 0;
    if (!ok) {
        unlink(tmp);
        free(inst->record_path);
        inst->record_path = NULL;
    }
    free(tmp);
    return ok ? 0 : KSYS_EIO;
}

/* This kgate as a sweep's target: its mark, and its start time (clock ticks since boot). */
static int self_target(const ksys_instance_t *inst, sweep_target_t *self)
{
    unsigned long long starttime;
    pid_t ppid;
    char state;

    if (read_stat(0, &state, &ppid, &starttime) != 0)
        return -1;
    snprintf(self->env, sizeof(self->env), "%s", inst->env);
    self->starttime = starttime;
    self->record[0] = '\0';
    return 0;
}

/*
 * Signals a watchdog ignores: those anyone may send in passing (a terminal, a kill of a group, a
 * swept process) must not end it before its work. Faults keep their default; SIGKILL and SIGSTOP
 * cannot be caught (ksys_instance_dispose stops it with SIGKILL).
 */
static const int watchdog_ignored[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGTERM, SIGPIPE, SIGUSR1, SIGUSR2,   SIGALRM,
                                       SIGTSTP, SIGTTIN, SIGTTOU, SIGXCPU, SIGXFSZ, SIGPOLL, SIGVTALRM, SIGPROF};

/* The watchdog: closes `ready` once set up, waits for end-of-file on `fd` (its kgate is dead), sweeps the kgate's mark, exits.
 * Never returns. */
static void watchdog_run(int fd, int ready, const sweep_target_t *self, pid_t kgate)
{
    ksys_process_id_t id;
    struct sigaction ign;
    sigset_t none;
    ssize_t n;
    size_t killed;
    char byte;

    memset(&ign, 0, sizeof(ign));
    ign.sa_handler = SIG_IGN;
    for (size_t i = 0; i != sizeof(watchdog_ignored) / sizeof(watchdog_ignored[0]); ++i)
        sigaction(watchdog_ignored[i], &ign, NULL);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; ++sig)
        sigaction(sig, &ign, NULL);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* out of kgate's process group and session: what is sent to those (a terminal's ^C, kill(-pgid)) is not for it */
    setsid();
    prctl(PR_SET_NAME, KSYS_WATCHDOG_NAME);
    close(ready);
    /* stdio stays (the log line below); nothing else of kgate's is held open (a listener, a kernel's socket) */
    if (fd > 3 && dup2(fd, 3) == 3)
        fd = 3;
    ksys_close_from(fd < 3 ? 3 : fd + 1);
    while ((n = read(fd, &byte, 1)) == -1 && errno == EINTR)
        ;
    /* a byte (or an error) is never sent: only kgate's exit, however it came, ends the read */
    if (n != 0)
        _exit(0);
    if ((killed = kill_marked(self, 1)) != 0)
        dprintf(2, "kgate: watchdog: kgate (pid %d) died; killed %zu process(es) still carrying its mark\n", (int)kgate, killed);
    /* its descriptors close before it is a zombie: the cgroup sweep counts it gone only once it is one (bounded) */
    if (ksys_process_id_self(&id) == 0) {
        id.pid = (int)kgate;
        id.starttime = self->starttime;
        for (int waited = 0; !ksys_process_id_gone(&id) && waited < SWEEP_WAIT_MS; waited += 5)
            usleep(5000);
    }
    ksys_cgroups_sweep();
    _exit(0);
}

/*
 * Why a watchdog process. A parent-death signal reaches only kgate's own children (the kernel clears
 * it in every fork), so what they fork and detach (a double fork, a command's `... &`, a process that
 * resets the signal) outlives a kgate killed with SIGKILL. The other ways out were weighed: kgate as
 * a child subreaper adopts those orphans but dies with them unsignalled all the same; a cgroup (v2,
 * cgroup.kill) catches everything but needs a delegated, writable cgroup that kgate rarely has (a
 * container, no systemd unit); a pid namespace needs CAP_SYS_ADMIN or user namespaces and changes
 * every pid kgate reports. A child that outlives kgate by design and sweeps the mark needs none of
 * that: a pipe's end-of-file tells it of the death whatever the signal (the kernel closes the dead
 * process's descriptors), and pidfds and start times (kill_marked) make a reused pid harmless. It is
 * forked, not spawned, so that it is the code of this file; before any thread, at start-up, the
 * fork copies little.
 */
static int start_watchdog(ksys_instance_t *inst)
{
    sweep_target_t self;
    pid_t kgate = getpid();
    int fds[2], ready[2] = {-1, -1};
    ssize_t n;
    char byte;

    if (self_target(inst, &self) != 0 || pipe2(fds, O_CLOEXEC) != 0)
        return KSYS_EIO;
    if (pipe2(ready, O_CLOEXEC) != 0 || (inst->watchdog = fork()) == -1) {
        close(fds[0]);
        close(fds[1]);
        if (ready[0] != -1) {
            close(ready[0]);
            close(ready[1]);
        }
        inst->watchdog = 0;
        return KSYS_EIO;
    }
    if (inst->watchdog == 0) {
        close(fds[1]);
        close(ready[0]);
        watchdog_run(fds[0], ready[1], &self, kgate);
    }
    close(fds[0]);
    /* the watchdog closes its end of `ready` once set up (named, in its session, deaf): a caller that
     * looks for it, or signals kgate's group, finds it so */
    close(ready[1]);
    while ((n = read(ready[0], &byte, 1)) == -1 && errno == EINTR)
        ;
    close(ready[0]);
    inst->watchdog_fd = fds[1];
    return 0;
}

int ksys_instance_init(ksys_instance_t *inst, const char *runtime_dir)
{
    memset(inst, 0, sizeof(*inst));
    wire_random_hex(inst->token, KSYS_INSTANCE_TOKEN_LEN / 2);
    snprintf(inst->env, sizeof(inst->env), KSYS_INSTANCE_VAR "=%s", inst->token);
    inst->watchdog_fd = -1;
    inst->swept = sweep_dead(runtime_dir);
    if (write_record(inst, runtime_dir) != 0)
        return KSYS_EIO;
    if (start_watchdog(inst) != 0) {
        unlink(inst->record_path);
        free(inst->record_path);
        inst->record_path = NULL;
        return KSYS_EIO;
    }
    return 0;
}

void ksys_instance_dispose(ksys_instance_t *inst)
{
    sweep_target_t self;

    if (inst->token[0] == '\0')
        return;
    /* what escaped its process group (a double fork, a command's background job) goes now, not at the next start */
    if (self_target(inst, &self) == 0)
        kill_marked(&self, 1);
    /* after the sweep: had this process died during it, the watchdog would have finished the work */
    if (inst->watchdog != 0) {
        kill(inst->watchdog, SIGKILL);
        while (waitpid(inst->watchdog, NULL, 0) == -1 && errno == EINTR)
            ;
    }
    if (inst->watchdog_fd != -1)
        close(inst->watchdog_fd);
    if (inst->record_path != NULL)
        unlink(inst->record_path);
    free(inst->record_path);
    memset(inst, 0, sizeof(*inst));
}
