/* tests/support/src/proc.c: processes as /proc/<pid>/stat and /proc/<pid>/status describe them. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/prctl.h>
#include "support/base.h"
#include "support/proc.h"

/* Reads up to `size` - 1 bytes of /proc/<pid>/<file> into `buf`, NUL-terminated; how many, or -1 when the file cannot be
 * read or is empty (the process has gone, or is a zombie's cmdline). */
static ssize_t read_proc(pid_t pid, const char *file, char *buf, size_t size)
{
    char path[64];
    ssize_t n;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* Reads /proc/<pid>/stat into `buf` and returns where the fields after comm begin, or NULL. */
static const char *stat_fields(pid_t pid, char *buf, size_t size)
{
    if (read_proc(pid, "stat", buf, size) < 0)
        return NULL;
    /* comm may contain spaces and parentheses: fields resume after the last ')'. */
    char *p = strrchr(buf, ')');
    return p != NULL ? p + 1 : NULL;
}

static int read_stat(pid_t pid, char *state, pid_t *ppid, unsigned long long *starttime)
{
    char buf[1024];
    const char *p = stat_fields(pid, buf, sizeof(buf));
    if (p == NULL)
        return TS_EIO;
    int ppid_i;
    if (sscanf(p, " %c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", state, &ppid_i, starttime) !=
        3)
        return TS_EPROTO;
    *ppid = ppid_i;
    return 0;
}

/* 1 when `pid` is named `name` (/proc/<pid>/comm). */
static int named(pid_t pid, const char *name)
{
    char comm[32];
    ssize_t n = read_proc(pid, "comm", comm, sizeof(comm));

    if (n < 0)
        return 0;
    if (comm[n - 1] == '\n')
        comm[n - 1] = '\0';
    return strcmp(comm, name) == 0;
}

/* 1 when `pid`'s command line has an argument ending in `suffix` (/proc/<pid>/cmdline). */
static int runs_script(pid_t pid, const char *suffix)
{
    char cmdline[4096];
    size_t len = strlen(suffix);
    ssize_t n = read_proc(pid, "cmdline", cmdline, sizeof(cmdline));

    for (const char *arg = cmdline; n > 0 && arg < cmdline + n; arg += strlen(arg) + 1)
        if (strlen(arg) >= len && strcmp(arg + strlen(arg) - len, suffix) == 0)
            return 1;
    return 0;
}

/* A kernel template: named so, or a child of kgate running its script and not named yet (its forked kernels run the same
 * command line, but they are the template's children, never kgate's). */
static int is_template(pid_t pid, pid_t parent, pid_t root)
{
    return named(pid, TS_TEMPLATE_NAME) || (parent == root && runs_script(pid, TS_TEMPLATE_SCRIPT));
}

static int named_watchdog(pid_t pid)
{
    return named(pid, TS_WATCHDOG_NAME);
}

size_t ts_descendants(pid_t root, ts_proc_t *out, size_t max)
{
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    size_t cap = 1024, n = 0;
    struct {
        pid_t pid, ppid;
        unsigned long long starttime;
    } *all = ts_malloc(cap * sizeof(*all));
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        pid_t pid = (pid_t)atoi(de->d_name);
        char state;
        pid_t ppid;
        unsigned long long st;
        if (read_stat(pid, &state, &ppid, &st) != 0 || state == 'Z')
            continue;
        if (n == cap) {
            cap *= 2;
            all = ts_realloc(all, cap * sizeof(*all));
        }
        all[n].pid = pid;
        all[n].ppid = ppid;
        all[n].starttime = st;
        n++;
    }
    closedir(d);
    /* Breadth-first from root over the parent links. A kernel template is walked through but not listed: its children are
     * kernels, it is none. */
    pid_t *queue = ts_malloc((n + 1) * sizeof(*queue));
    size_t count = 0, head = 0, tail = 0;
    pid_t parent = root;
    for (;;) {
        for (size_t i = 0; i < n && count < max; i++)
            if (all[i].ppid == parent && !(parent == root && named_watchdog(all[i].pid))) {
                queue[tail++] = all[i].pid;
                if (is_template(all[i].pid, parent, root))
                    continue;
                out[count].pid = all[i].pid;
                out[count].starttime = all[i].starttime;
                count++;
            }
        if (head >= tail)
            break;
        parent = queue[head++];
    }
    free(queue);
    free(all);
    return count;
}

int ts_watchdog_of(pid_t kgate, ts_proc_t *out)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    int ret = TS_EIO;

    if (d == NULL)
        return TS_EIO;
    while (ret != 0 && (de = readdir(d)) != NULL) {
        pid_t pid = (pid_t)atoi(de->d_name), ppid;
        unsigned long long st;
        char state;
        if (isdigit((unsigned char)de->d_name[0]) && read_stat(pid, &state, &ppid, &st) == 0 && state != 'Z' && ppid == kgate &&
            named_watchdog(pid)) {
            out->pid = pid;
            out->starttime = st;
            ret = 0;
        }
    }
    closedir(d);
    return ret;
}

int ts_proc_get(pid_t pid, ts_proc_t *out)
{
    char state;
    pid_t ppid;
    unsigned long long st;
    if (read_stat(pid, &state, &ppid, &st) != 0 || state == 'Z')
        return TS_EIO;
    out->pid = pid;
    out->starttime = st;
    return 0;
}

pid_t ts_proc_parent(pid_t pid)
{
    char state;
    pid_t ppid;
    unsigned long long st;
    return read_stat(pid, &state, &ppid, &st) == 0 ? ppid : -1;
}

int ts_proc_alive(const ts_proc_t *p)
{
    ts_proc_t now;
    return ts_proc_get(p->pid, &now) == 0 && (p->starttime == 0 || now.starttime == p->starttime);
}

int64_t ts_proc_cpu_ms(pid_t pid)
{
    char buf[1024];
    const char *p = stat_fields(pid, buf, sizeof(buf));
    unsigned long long utime, stime;
    if (p == NULL || sscanf(p, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &utime, &stime) != 2)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? (int64_t)((utime + stime) * 1000 / (unsigned long long)hz) : -1;
}

int ts_proc_switches(pid_t pid, ts_switches_t *acc)
{
    char path[64], line[256];
    struct dirent *d;
    DIR *dir;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    if ((dir = opendir(path)) == NULL)
        return TS_EIO;
    while ((d = readdir(dir)) != NULL) {
        if (!isdigit((unsigned char)d->d_name[0]))
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%.16s/status", (int)pid, d->d_name);
        FILE *f = fopen(path, "r");
        if (f == NULL)
            continue; /* the thread has just exited */
        unsigned long long n;
        while (fgets(line, sizeof(line), f) != NULL) {
            if (sscanf(line, "voluntary_ctxt_switches: %llu", &n) == 1)
                acc->voluntary += n;
            else if (sscanf(line, "nonvoluntary_ctxt_switches: %llu", &n) == 1)
                acc->involuntary += n;
        }
        fclose(f);
    }
    closedir(dir);
    return 0;
}

#if defined(__SANITIZE_ADDRESS__) && defined(__x86_64__)
/*
 * What AddressSanitizer's shadow of `pid` holds resident: its anonymous mappings of 1 GiB or more between 0x7fff8000 and
 * 0x10007fff8000 (LowShadow, ShadowGap and HighShadow on x86_64). That is the sanitizer's memory, not the program's: a
 * 1 GiB file mapping whose shadow the kernel populates (seen on Linux 6.18) made kgate look 250 MiB bigger during an upload
 * that holds a few MiB of its own. Only in a sanitizer build, where the program under test is one too.
 */
static long long asan_shadow_kb(pid_t pid)
{
    char path[64], line[512];
    unsigned long long start = 0, end = 0, inode = 1;
    long long total = 0, kb;

    snprintf(path, sizeof(path), "/proc/%d/smaps", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long s, e, in;
        if (sscanf(line, "%llx-%llx %*s %*s %*s %llu", &s, &e, &in) == 3) {
            start = s, end = e, inode = in;
        } else if (sscanf(line, "Rss: %lld kB", &kb) == 1 && inode == 0 && start >= 0x7fff8000ULL && end <= 0x10007fff8000ULL &&
                   end - start >= (1ULL << 30)) {
            total += kb;
        }
    }
    fclose(f);
    return total;
}
#else
static long long asan_shadow_kb(pid_t pid)
{
    (void)pid;
    return 0;
}
#endif

long long ts_proc_kib(const char *path, const char *field)
{
    size_t len = strlen(field);
    char line[256];
    long long kib = -1;
    FILE *fp;

    if ((fp = fopen(path, "r")) == NULL)
        return -1;
    while (kib < 0 && fgets(line, sizeof(line), fp) != NULL)
        if (strncmp(line, field, len) == 0 && line[len] == ':')
            kib = strtoll(line + len + 1, NULL, 10);
    fclose(fp);
    return kib;
}

long long ts_proc_status_kib(pid_t pid, const char *field)
{
    char path[64];

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    return ts_proc_kib(path, field);
}

int ts_proc_reset_hwm(pid_t pid)
{
    char path[64];
    int fd, ok;

    snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
    if ((fd = open(path, O_WRONLY)) < 0)
        return -1;
    ok = write(fd, "5", 1) == 1;
    close(fd);
    return ok ? 0 : -1;
}

long long ts_proc_rss_kb(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    long long kb = ts_proc_kib(path, "VmRSS");
    return kb >= 0 ? kb - asan_shadow_kb(pid) : kb;
}

static void *sample_rss(void *arg)
{
    ts_rss_sampler_t *s = arg;

    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        long long kb = ts_proc_rss_kb(s->pid);
        if (kb > s->peak_kb)
            s->peak_kb = kb;
        ts_sleep_ms(s->period_ms);
    }
    return NULL;
}

int ts_rss_sampler_start(ts_rss_sampler_t *s, pid_t pid, int period_ms)
{
    s->pid = pid;
    s->period_ms = period_ms;
    s->stop = 0;
    s->peak_kb = -1;
    return pthread_create(&s->thread, NULL, sample_rss, s) == 0 ? 0 : TS_EIO;
}

long long ts_rss_sampler_stop(ts_rss_sampler_t *s)
{
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_join(s->thread, NULL);
    return s->peak_kb;
}

void ts_child_prepare(int logfd, pid_t parent)
{
    sigset_t none;
    int nullfd;

    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(127);
    if ((nullfd = open("/dev/null", O_RDONLY)) >= 0)
        dup2(nullfd, 0);
    dup2(logfd, 1);
    dup2(logfd, 2);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
}

int ts_fd_of_file(const struct stat *st)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *de;
    int found = -1;

    if (dir == NULL)
        return -1;
    while (found == -1 && (de = readdir(dir)) != NULL) {
        struct stat fst;
        int fd = atoi(de->d_name);
        if (de->d_name[0] != '.' && fd != dirfd(dir) && fstat(fd, &fst) == 0 && fst.st_ino == st->st_ino &&
            fst.st_dev == st->st_dev)
            found = fd;
    }
    closedir(dir);
    return found;
}
