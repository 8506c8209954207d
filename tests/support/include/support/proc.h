/* support/proc.h: what /proc tells about processes: descendants, liveness, CPU time, resident memory. */
#ifndef KGATE_SUPPORT_PROC_H
#define KGATE_SUPPORT_PROC_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/** A process, named so that a reused PID is not mistaken for it. */
typedef struct st_ts_proc_t {
    pid_t pid;
    unsigned long long starttime; /* /proc/<pid>/stat field 22; 0 matches any process with that PID */
} ts_proc_t;

/* What kgate names its watchdog (kernelmgr's KSYS_WATCHDOG_NAME): the child that sweeps kgate's descendants once kgate is dead. */
#define TS_WATCHDOG_NAME "kgate-watchdog"

/* What a kernel template names itself (kernels/python-template/kgate_template.py): the process kernels are forked from. */
#define TS_TEMPLATE_NAME "kgate-template"
/* Its script: a child of kgate running it is the template before it has named itself (the interpreter's start, tens of
 * milliseconds and more on a loaded machine, in which its name is still `python3`). */
#define TS_TEMPLATE_SCRIPT "kgate_template.py"

/**
 * Collects every live descendant of `root` (not `root` itself) into `out` (at most `max`); returns how
 * many. A child of `root` named TS_WATCHDOG_NAME is left out: it is no process kgate started for a
 * client, and it lives exactly as long as kgate (ts_watchdog_of finds it). A kernel template is left out too (a process
 * named TS_TEMPLATE_NAME, or a child of `root` running TS_TEMPLATE_SCRIPT before it has named itself), its descendants
 * (the kernels forked from it) not.
 */
size_t ts_descendants(pid_t root, ts_proc_t *out, size_t max);

/** kgate's watchdog: the live child of `kgate` named TS_WATCHDOG_NAME, in `*out`; 0, or TS_EIO when there is none. */
int ts_watchdog_of(pid_t kgate, ts_proc_t *out);

/** 1 if that process (same PID and start time) still exists and is not a zombie, else 0. */
int ts_proc_alive(const ts_proc_t *p);

/** The live process (not a zombie) that holds `pid` now, with its start time, in `*out`: 0, or TS_EIO when there is none. */
int ts_proc_get(pid_t pid, ts_proc_t *out);

/** The parent pid of `pid` (/proc/<pid>/stat field 4; a zombie's too), or -1 when there is no such process. */
pid_t ts_proc_parent(pid_t pid);

/** CPU time (user + system) that process `pid` has used so far, in milliseconds, or -1 if /proc cannot tell. */
int64_t ts_proc_cpu_ms(pid_t pid);

/** Context switches of a process: how often its threads gave the CPU up (to wait) or had it taken away. */
typedef struct st_ts_switches_t {
    uint64_t voluntary, involuntary;
} ts_switches_t;

/**
 * The context switches of every thread process `pid` has now (the `*ctxt_switches` lines of
 * /proc/<pid>/task/<tid>/status; threads that have exited are not counted), added to `*acc`.
 * 0, or TS_EIO when /proc cannot tell.
 */
int ts_proc_switches(pid_t pid, ts_switches_t *acc);

/** A descriptor of this process that refers to the file `st` describes (same device and inode), or -1 when none does. */
int ts_fd_of_file(const struct stat *st);

/**
 * The figure of the first "<field>: N kB" line of a /proc file (`path`: /proc/meminfo, /proc/<pid>/status,
 * /proc/<pid>/smaps_rollup, ...) in KiB; -1 when the file cannot be read or has no such line. `field` is the name
 * without its colon ("MemAvailable", "Pss"), matched whole: "Pss" is not "Pss_Anon".
 */
long long ts_proc_kib(const char *path, const char *field);

/** ts_proc_kib of /proc/<pid>/status: a field of process `pid` in KiB ("VmRSS", "VmHWM"), -1 when unknown. */
long long ts_proc_status_kib(pid_t pid, const char *field);

/** Starts process `pid`'s VmHWM over from its VmRSS (clear_refs 5, Linux 4.0), so that it is the peak of what follows. 0, or -1. */
int ts_proc_reset_hwm(pid_t pid);

/**
 * The resident set size of process `pid` (VmRSS of /proc/<pid>/status) in KiB, or -1 if unknown. In an AddressSanitizer
 * build, less what the sanitizer's shadow holds resident (its memory, not the program's; see proc.c).
 */
long long ts_proc_rss_kb(pid_t pid);

/** Samples a process's VmRSS on a thread of its own, keeping the peak: a memory bound measured while the process works. */
typedef struct st_ts_rss_sampler_t {
    pid_t pid;
    int period_ms;
    int stop;          /* set by ts_rss_sampler_stop (atomically) */
    long long peak_kb; /* the largest VmRSS seen so far, -1 before any */
    pthread_t thread;
} ts_rss_sampler_t;

/** Starts sampling `pid` every `period_ms`. 0, or TS_EIO when the thread cannot be started. */
int ts_rss_sampler_start(ts_rss_sampler_t *s, pid_t pid, int period_ms);

/** Stops the sampling (waits for its thread) and returns the peak in KiB, -1 when no sample could be read. */
long long ts_rss_sampler_stop(ts_rss_sampler_t *s);

/**
 * The child's side of starting a server a test or benchmark owns, after fork and before exec: a
 * parent-death SIGTERM (so that the server goes even if its starter dies without stopping it; the
 * child exits 127 at once if `parent` is already gone), stdin from /dev/null, stdout and stderr to
 * `logfd`, no blocked signal, and SIGPIPE, SIGTERM and SIGINT at their defaults.
 */
void ts_child_prepare(int logfd, pid_t parent);

#endif
