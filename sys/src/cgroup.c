/* sys/src/cgroup.c: a control group per kernel incarnation, under a parent kgate creates in its own group. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "ksys/cgroup.h"
#include "ksys/instance.h"
#include "ksys/util.h"

/*
 * Where the controllers are: cgroup v1 mounts each under /sys/fs/cgroup/<name> (Debian, Docker with
 * cgroupfs v1, the project's VMs: memory, pids and cpu there, and kgate may mkdir in its own memory
 * group); cgroup v2 mounts one tree at /sys/fs/cgroup whose cgroup.controllers lists what it may
 * delegate. kgate's own group is read from /proc/self/cgroup.
 */
static const char *const names[KSYS_CG_COUNT] = {"memory", "pids", "cpu"};
#define CG_ROOT "/sys/fs/cgroup"
/* How deep a sweep looks below a dead kgate's parent (kernels' groups are its children; nothing makes more). */
#define SWEEP_DEPTH 4

static int write_file(const char *dir, const char *file, const char *value)
{
    char path[4096];
    int fd, ret = 0;
    size_t len = strlen(value);

    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
        return -ENAMETOOLONG;
    if ((fd = open(path, O_WRONLY | O_CLOEXEC)) == -1)
        return -errno;
    if (write(fd, value, len) != (ssize_t)len)
        ret = -errno;
    close(fd);
    return ret;
}

static int read_file(const char *dir, const char *file, char *buf, size_t size)
{
    char path[4096];
    ssize_t n;
    int fd;

    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
        return -1;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
        return -1;
    n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

/* kgate's group in the v1 hierarchy of `controller`, or in v2 (controller NULL); "" when not found. */
static void own_group(const char *controller, char *out, size_t size)
{
    char line[4096];
    FILE *fp = fopen("/proc/self/cgroup", "re");

    out[0] = '\0';
    if (fp == NULL)
        return;
    while (fgets(line, sizeof(line), fp) != NULL) {
        char *ctls = strchr(line, ':'), *path;
        if (ctls == NULL || (path = strchr(++ctls, ':')) == NULL)
            continue;
        *path++ = '\0';
        path[strcspn(path, "\n")] = '\0';
        if (controller == NULL ? ctls[0] == '\0' : 0) {
            snprintf(out, size, "%s", path);
            break;
        }
        if (controller != NULL) {
            char *save = NULL;
            for (char *c = strtok_r(ctls, ",", &save); c != NULL; c = strtok_r(NULL, ",", &save))
                if (strcmp(c, controller) == 0)
                    snprintf(out, size, "%s", path);
        }
    }
    fclose(fp);
}

/*
 * The parent's name says whose it is: "kgate-<pid>-<start time>-<pid namespace>" (ksys_process_id_t), so
 * that a later kgate can tell a dead owner's groups from a live one's even when the pid was reused
 * (sweep_base). Groups named "kgate-<pid>" come from kgates before that.
 */
static void parent_name(char *out, size_t size)
{
    ksys_process_id_t self;

    if (ksys_process_id_self(&self) == 0)
        snprintf(out, size, "kgate-%d-%llu-%llu", self.pid, self.starttime, self.pid_ns);
    else
        snprintf(out, size, "kgate-%d", (int)getpid());
}

static char *make_parent(const char *base)
{
    char path[4096], name[96];

    parent_name(name, sizeof(name));
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", strcmp(base, "/") == 0 ? "" : base, name) >= sizeof(path))
        return NULL;
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
        return NULL;
    return wire_strdup(path);
}

/* Where this process's parent goes: its own group in the v1 hierarchy of names[controller], or in v2 (controller -1). */
static int own_base(int controller, char *out, size_t size)
{
    char group[2048];

    own_group(controller >= 0 ? names[controller] : NULL, group, sizeof(group));
    if (group[0] == '\0')
        return -1;
    snprintf(out, size, CG_ROOT "%s%s%s", controller >= 0 ? "/" : "", controller >= 0 ? names[controller] : "",
             strcmp(group, "/") == 0 ? "" : group);
    return 0;
}

static void init_v1(ksys_cgroups_t *cgs)
{
    static const char *const probe[KSYS_CG_COUNT] = {"memory.limit_in_bytes", "pids.max", "cpu.shares"};

    for (int i = 0; i != KSYS_CG_COUNT; ++i) {
        char base[4096], file[4200];
        struct stat st;
        if (own_base(i, base, sizeof(base)) != 0)
            continue;
        snprintf(file, sizeof(file), "%s/%s", base, i == KSYS_CG_PIDS ? "cgroup.procs" : probe[i]);
        if (stat(file, &st) == 0 && (cgs->parents[i] = make_parent(base)) != NULL)
            cgs->version = 1;
    }
}

/* v2: kgate's group must have the controllers in its subtree_control, which a group holding processes cannot
 * (the no-internal-processes rule): kgate moves itself into a leaf first. Unverified on the project's
 * machines (their memory controller is on v1); see PLATFORM.md. */
static void init_v2(ksys_cgroups_t *cgs)
{
    char base[4096], controllers[512], leaf[4200], pid[32];
    char *parent;

    if (own_base(-1, base, sizeof(base)) != 0 || read_file(base, "cgroup.controllers", controllers, sizeof(controllers)) != 0 ||
        strstr(controllers, "memory") == NULL)
        return;
    if (write_file(base, "cgroup.subtree_control", "+memory +pids +cpu") != 0) {
        snprintf(leaf, sizeof(leaf), "%s/kgate-self-%d", base, (int)getpid());
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        if ((mkdir(leaf, 0755) != 0 && errno != EEXIST) || write_file(leaf, "cgroup.procs", pid) != 0 ||
            write_file(base, "cgroup.subtree_control", "+memory +pids +cpu") != 0)
            return;
    }
    if ((parent = make_parent(base)) == NULL)
        return;
    if (write_file(parent, "cgroup.subtree_control", "+memory +pids +cpu") != 0 &&
        write_file(parent, "cgroup.subtree_control", "+memory +pids") != 0) {
        rmdir(parent);
        free(parent);
        return;
    }
    cgs->version = 2;
    for (int i = 0; i != KSYS_CG_COUNT; ++i)
        cgs->parents[i] = i == 0 ? parent : wire_strdup(parent);
}

static void sweep(ksys_cgroups_t *cgs);
static void drain_stale(ksys_cgroups_t *cgs);

void ksys_cgroups_init(ksys_cgroups_t *cgs)
{
    struct stat st;

    memset(cgs, 0, sizeof(*cgs));
    /* before this kgate makes its own parent: a dead kgate's pid may be this one's now */
    sweep(cgs);
    drain_stale(cgs);
    if (stat(CG_ROOT "/cgroup.controllers", &st) == 0)
        init_v2(cgs);
    else
        init_v1(cgs);
    if (cgs->version == 0) {
        snprintf(cgs->mechanism, sizeof(cgs->mechanism),
                 "memory limits: RLIMIT_AS; process limits: RLIMIT_NPROC (kgate may not create cgroups here)");
        return;
    }
    snprintf(cgs->mechanism, sizeof(cgs->mechanism), "memory limits: %s; process limits: %s (cgroup v%d under %s)",
             cgs->parents[KSYS_CG_MEMORY] == NULL ? "RLIMIT_AS"
             : cgs->version == 2                  ? "cgroup v2 memory.max"
                                                  : "cgroup v1 memory.limit_in_bytes",
             cgs->parents[KSYS_CG_PIDS] == NULL ? "RLIMIT_NPROC" : "cgroup pids.max", cgs->version,
             cgs->parents[KSYS_CG_MEMORY] != NULL ? cgs->parents[KSYS_CG_MEMORY] : cgs->parents[KSYS_CG_PIDS]);
}

int ksys_cgroups_has(const ksys_cgroups_t *cgs, int controller)
{
    return cgs->parents[controller] != NULL;
}

/* Kills what the group holds; returns whether it was empty. */
static int kill_members(const char *dir)
{
    char path[4200], line[64];
    int empty = 1;
    FILE *fp;

    if (write_file(dir, "cgroup.kill", "1") == 0)
        return 0;
    snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
    if ((fp = fopen(path, "re")) == NULL)
        return 1;
    while (fgets(line, sizeof(line), fp) != NULL) {
        pid_t pid = (pid_t)atoi(line);
        if (pid > 0 && pid != getpid()) {
            kill(pid, SIGKILL);
            empty = 0;
        }
    }
    fclose(fp);
    return empty;
}

static int remove_group(char *dir)
{
    kill_members(dir);
    return rmdir(dir) == 0 || errno == ENOENT;
}

static void push_stale(ksys_cgroups_t *cgs, char *dir)
{
    cgs->stale = wire_realloc(cgs->stale, (cgs->nstale + 1) * sizeof(char *));
    cgs->stale[cgs->nstale++] = dir;
}

static int is_subgroup(DIR *dir, const struct dirent *de)
{
    struct stat st;

    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
        return 0;
    if (de->d_type != DT_UNKNOWN)
        return de->d_type == DT_DIR;
    return fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Kills what `dir` and its subgroups hold and queues them for removal, the deepest first (ksys_cgroups_tick removes them in
 * order). With `do_kill` 0 nothing is killed: only the groups already empty go. */
static void condemn(ksys_cgroups_t *cgs, const char *dir, int do_kill, int depth)
{
    DIR *d;
    struct dirent *de;

    if (do_kill)
        kill_members(dir);
    if (depth != SWEEP_DEPTH && (d = opendir(dir)) != NULL) {
        while ((de = readdir(d)) != NULL) {
            if (is_subgroup(d, de)) {
                char *sub = ksys_path_join(dir, de->d_name);
                condemn(cgs, sub, do_kill, depth + 1);
                free(sub);
            }
        }
        closedir(d);
    }
    if (do_kill)
        push_stale(cgs, wire_strdup(dir));
    else
        rmdir(dir);
}

/*
 * The groups a kgate that is provably gone left under `base` (it died by SIGKILL: nothing ran its
 * ksys_cgroups_dispose). A parent named with its owner's identity is killed and removed when that
 * process has gone (ksys_process_id_gone: a dead pid, or one reused by a process of another start
 * time; another pid namespace never counts as gone). What older kgates named by pid alone ("kgate-<pid>",
 * and v2's leaf "kgate-self-<pid>") proves less: it goes only when nothing holds that pid, and only
 * what is already empty (a rmdir never kills).
 */
static void sweep_base(ksys_cgroups_t *cgs, const char *base)
{
    DIR *dir = opendir(base);
    struct dirent *de;

    if (dir == NULL)
        return;
    while ((de = readdir(dir)) != NULL) {
        const char *tail = de->d_name + sizeof("kgate-") - 1;
        ksys_process_id_t owner;
        char path[4096];
        int n = -1, pid;

        if (strncmp(de->d_name, "kgate-", sizeof("kgate-") - 1) != 0 || !is_subgroup(dir, de) ||
            (size_t)snprintf(path, sizeof(path), "%s/%s", base, de->d_name) >= sizeof(path))
            continue;
        if (strspn(tail, "0123456789-") == strlen(tail) &&
            sscanf(tail, "%d-%llu-%llu%n", &owner.pid, &owner.starttime, &owner.pid_ns, &n) == 3 && tail[n] == '\0') {
            if (ksys_process_id_gone(&owner))
                condemn(cgs, path, 1, 0);
        } else if (((n = -1, sscanf(tail, "%d%n", &pid, &n) == 1) || (n = -1, sscanf(tail, "self-%d%n", &pid, &n) == 1)) && n > 0 &&
                   tail[n] == '\0' && pid > 0 && kill(pid, 0) != 0 && errno == ESRCH) {
            condemn(cgs, path, 0, 0);
        }
    }
    closedir(dir);
}

static void sweep(ksys_cgroups_t *cgs)
{
    char base[4096];
    struct stat st;

    if (stat(CG_ROOT "/cgroup.controllers", &st) == 0) {
        if (own_base(-1, base, sizeof(base)) == 0)
            sweep_base(cgs, base);
        return;
    }
    for (int i = 0; i != KSYS_CG_COUNT; ++i)
        if (own_base(i, base, sizeof(base)) == 0)
            sweep_base(cgs, base);
}

void ksys_cgroups_sweep(void)
{
    ksys_cgroups_t cgs;

    memset(&cgs, 0, sizeof(cgs));
    sweep(&cgs);
    ksys_cgroups_dispose(&cgs);
}

void ksys_cgroups_tick(ksys_cgroups_t *cgs)
{
    size_t o = 0;

    for (size_t i = 0; i != cgs->nstale; ++i) {
        if (remove_group(cgs->stale[i]))
            free(cgs->stale[i]);
        else
            cgs->stale[o++] = cgs->stale[i];
    }
    cgs->nstale = o;
}

/* The last members die within milliseconds of their SIGKILL: waits for them a little. */
static void drain_stale(ksys_cgroups_t *cgs)
{
    for (int tries = 0; cgs->nstale != 0 && tries != 50; ++tries) {
        ksys_cgroups_tick(cgs);
        if (cgs->nstale != 0)
            usleep(2000);
    }
}

void ksys_cgroups_dispose(ksys_cgroups_t *cgs)
{
    drain_stale(cgs);
    for (size_t i = 0; i != cgs->nstale; ++i)
        free(cgs->stale[i]);
    free(cgs->stale);
    for (int i = 0; i != KSYS_CG_COUNT; ++i) {
        if (cgs->parents[i] != NULL && (cgs->version == 1 || i == 0))
            rmdir(cgs->parents[i]);
        free(cgs->parents[i]);
    }
    memset(cgs, 0, sizeof(*cgs));
}

int ksys_cgroup_create(ksys_cgroups_t *cgs, const char *name, const ksys_limits_t *limits, ksys_cgroup_t *cg,
                       int fds[KSYS_CG_COUNT], char *why, size_t whylen)
{
    char value[32], path[4200];
    int err;

    memset(cg, 0, sizeof(*cg));
    cg->owner = cgs;
    for (int i = 0; i != KSYS_CG_COUNT; ++i)
        fds[i] = -1;
    for (int i = 0; i != KSYS_CG_COUNT; ++i) {
        if (cgs->parents[i] == NULL)
            continue;
        if (cgs->version == 2 && i != 0) {
            /* one directory holds every controller */
            continue;
        }
        cg->dirs[i] = ksys_path_join(cgs->parents[i], name);
        if (mkdir(cg->dirs[i], 0755) != 0) {
            snprintf(why, whylen, "cannot create the cgroup %s: %s", cg->dirs[i], strerror(errno));
            free(cg->dirs[i]);
            cg->dirs[i] = NULL;
            goto Error;
        }
    }
    if (limits->memory_bytes != 0 && cg->dirs[KSYS_CG_MEMORY] != NULL) {
        snprintf(value, sizeof(value), "%" PRIu64, limits->memory_bytes);
        if (cgs->version == 2) {
            if ((err = write_file(cg->dirs[0], "memory.max", value)) != 0)
                goto WriteError;
            write_file(cg->dirs[0], "memory.swap.max", "0");
        } else {
            if ((err = write_file(cg->dirs[KSYS_CG_MEMORY], "memory.limit_in_bytes", value)) != 0)
                goto WriteError;
            /* with swap accounting, swap counts too (absent or refused without it: no swap to escape to) */
            write_file(cg->dirs[KSYS_CG_MEMORY], "memory.memsw.limit_in_bytes", value);
        }
    }
    if (limits->pids != 0 && ksys_cgroups_has(cgs, KSYS_CG_PIDS)) {
        snprintf(value, sizeof(value), "%" PRIu64, limits->pids);
        if ((err = write_file(cg->dirs[cgs->version == 2 ? 0 : KSYS_CG_PIDS], "pids.max", value)) != 0)
            goto WriteError;
    }
    for (int i = 0; i != KSYS_CG_COUNT; ++i) {
        if (cg->dirs[i] == NULL)
            continue;
        snprintf(path, sizeof(path), "%s/cgroup.procs", cg->dirs[i]);
        if ((fds[i] = open(path, O_WRONLY | O_CLOEXEC)) == -1) {
            snprintf(why, whylen, "cannot open %s: %s", path, strerror(errno));
            goto Error;
        }
    }
    return 0;

WriteError:
    snprintf(why, whylen, "cannot set the limits of the cgroup %s: %s", name, strerror(-err));
Error:
    for (int i = 0; i != KSYS_CG_COUNT; ++i) {
        if (fds[i] != -1)
            close(fds[i]);
        fds[i] = -1;
        if (cg->dirs[i] != NULL)
            rmdir(cg->dirs[i]);
        free(cg->dirs[i]);
        cg->dirs[i] = NULL;
    }
    return KSYS_EIO;
}

uint64_t ksys_cgroup_oom_kills(const ksys_cgroup_t *cg)
{
    char buf[1024], *hit;

    if (cg->dirs[KSYS_CG_MEMORY] == NULL ||
        read_file(cg->dirs[KSYS_CG_MEMORY], cg->owner->version == 2 ? "memory.events" : "memory.oom_control", buf, sizeof(buf)) !=
            0 ||
        (hit = strstr(buf, "oom_kill ")) == NULL)
        return 0;
    return strtoull(hit + sizeof("oom_kill ") - 1, NULL, 10);
}

void ksys_cgroup_release(ksys_cgroup_t *cg)
{
    for (int i = 0; i != KSYS_CG_COUNT; ++i) {
        ksys_cgroups_t *cgs = cg->owner;
        if (cg->dirs[i] == NULL)
            continue;
        if (remove_group(cg->dirs[i])) {
            free(cg->dirs[i]);
        } else {
            push_stale(cgs, cg->dirs[i]);
        }
        cg->dirs[i] = NULL;
    }
}
