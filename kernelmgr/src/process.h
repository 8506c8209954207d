/* kernelmgr/src/process.h: one incarnation of a kernel process with its directory, key and channels. */
#ifndef KMGR_PROCESS_H
#define KMGR_PROCESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>
#include "wire/connfile.h"
#include "wire/ids.h"
#include "wire/signer.h"
#include "kmgr/kernelspec.h"
#include "kmgr/manager.h"
#include "ksys/sandbox.h"
#include "ksys/cgroup.h"
#include "ksys/spawn.h"
#include "channels.h"
#include "util_private.h"

typedef enum {
    KMGR_PROC_RUNNING,  /* owned by a kernel, alive (as far as we know) */
    KMGR_PROC_SHUTDOWN, /* shutdown_request sent; SIGTERM at the deadline */
    KMGR_PROC_TERMED,   /* SIGTERM sent; SIGKILL at the deadline */
    KMGR_PROC_KILLED,   /* SIGKILL sent; waiting to reap */
} kmgr_proc_phase_t;

typedef struct st_kmgr_proc_t kmgr_proc_t;

/*
 * How a process is started (process_start.c): what ksys_spawn takes, owned. A kernel forked from a template keeps it until
 * the template's answer (template.h): "forked" frees it, anything else spawns the kernel with it instead (the fallback).
 */
typedef struct st_kmgr_proc_start_t {
    kmgr_manager_t *mgr;
    char *path;    /* what is executed: the kernel's program, or bwrap */
    char *program; /* the kernel's program (in its failure messages) */
    char **argv;   /* path's argv (bwrap's when sandboxed) */
    char **envp;   /* the kernel's whole environment (without JPY_PARENT_PID when it may be forked: added to spawn it) */
    char *cwd;     /* NULL: kgate's */
    char *log_path;
    int log_fd;                    /* its stdout and stderr */
    int cgroup_fds[KSYS_CG_COUNT]; /* cgroup.procs of its cgroups, -1 where none */
    ksys_spawn_rlimit_t rlimits[KSYS_LIMITS_MAX_RLIMITS];
    size_t nrlimits;
    struct st_kmgr_tpl_pending_t *pending; /* its fork request in its template's queue, while unanswered */
    /* the template answered anything but "forked" and the spawn waits in the start queue (kmgr_proc_t.spawn_due): why */
    kmgr_fallback_t fallback;
    char *fallback_why;
    char *fallback_spec; /* the kernelspec's name, for the log */
} kmgr_proc_start_t;

struct st_kmgr_proc_t {
    /* Link in mgr->shutting_down once detached. */
    kmgr_link_t link;
    char uuid[WIRE_UUID_STRLEN + 1];
    char *dir;       /* <runtime_dir>/<uuid> */
    char *conn_path; /* <dir>/connection.json */
    wire_connection_t conn;
    wire_signer_t signer;
    pid_t pid;   /* 0 once reaped */
    int wstatus; /* valid once reaped */
    /*
     * Forked from a template (template.h) rather than spawned: not kgate's child, so found gone by `pidfd` (readable once
     * it exits), its wait status told by its template (`tpl`, `tpl_link` in its children) while that lives.
     */
    int forked;
    int pidfd; /* -1 unless forked and not yet found gone */
    struct st_kmgr_template_t *tpl;
    kmgr_link_t tpl_link;
    int tpl_status_known; /* `wstatus` came from the template */
    uint64_t gone_at;     /* when the pidfd said it was gone, waiting for its status (KMGR_TPL_STATUS_GRACE_MS) */
    /* non-NULL while its template has not answered its fork request: no process yet (pid 0), but not gone either */
    kmgr_proc_start_t *start;
    /* its template's answer came and was no fork: `start` is kept until the start queue spawns it (kmgr_proc_spawn_fallback),
     * as a spawned start, under max_starting (no process meanwhile; given up, it is gone without one) */
    int spawn_due;
    char *start_error; /* a fallback spawn after the answer failed: why (its death reason) */
    kmgr_proc_phase_t phase;
    /* its sandbox and limits: a killed kernel's reason names the limit it hit */
    int sandboxed;
    ksys_limits_t limits;
    ksys_cgroup_t cgroup; /* empty when its limits needed none */
    uint64_t deadline;
    /* Opened by the kernel that owns this incarnation, closed (but for control) once detached. */
    kmgr_channels_t channels;
};

/**
 * Creates the directory, connection file and IPython dir of a new incarnation and spawns it (or asks its template for it:
 * its process comes with the answer; or, the template unable to take the request past max_starting, from the start queue:
 * kmgr_proc_refused_fork_waits). Returns 0 with `*out` set (phase RUNNING, its channels initialised but closed), or KSYS_EIO /
 * KSYS_ESPAWN; on error nothing is left behind and `why` (if non-NULL, `whylen` bytes) says what failed.
 */
int kmgr_proc_spawn(kmgr_manager_t *mgr, const kmgr_kernelspec_t *spec, const char *cwd, json_t *env, const ksys_sandbox_t *sandbox,
                    kmgr_proc_t **out, char *why, size_t whylen);
/** Frees a start (closing its descriptors); its pending request, if any, must have been detached. */
void kmgr_proc_start_free(kmgr_proc_start_t *start);
/** Spawns `proc` as `start` says (ksys_spawn). Returns 0 with proc->pid set, or KSYS_ESPAWN with `why` set. */
int kmgr_proc_start_spawn(kmgr_proc_t *proc, const kmgr_proc_start_t *start, char *why, size_t whylen);
/**
 * The template's answer to the fork request of `proc` (from template.c, possibly from inside kmgr_template_fork): `pid` > 0
 * the forked kernel (watched by its pidfd, moved to its cgroups, among the template's children), else `reason` and `why`: the
 * kernel is spawned instead, as a spawned start: with max_starting set, `spawn_due` is set and the start queue spawns it in
 * its turn (kmgr_proc_spawn_fallback; the manager is scheduled), else at once. A proc already given up (being shut down)
 * gets no spawn, and a forked kernel it gets is killed at once. Frees proc->start unless the spawn is due.
 */
void kmgr_proc_fork_answer(kmgr_proc_t *proc, struct st_kmgr_template_t *tpl, pid_t pid, kmgr_fallback_t reason, const char *why);
/**
 * A fork request of `proc` its template refused before it was sent (`reason`: "setup", a request over the frame bound or an
 * rlimit the template does not know; "queue_full"; "unavailable"), `start` not yet freed: when max_starting kernels are
 * already spawned and not ready, its spawn waits in the start queue as a fallback's does (`spawn_due`, proc->start = start,
 * the manager scheduled) and 1 is returned; else 0, and the caller spawns it at once. A "setup" start was let go under
 * max_forking, as one that forks: spawned at once, it would be one full interpreter more than max_starting (the start queue
 * lets a start the template would refuse for "queue_full" or "unavailable" go under max_starting already).
 */
int kmgr_proc_refused_fork_waits(kmgr_proc_t *proc, kmgr_proc_start_t *start, const kmgr_kernelspec_t *spec, kmgr_fallback_t reason,
                                 const char *why);
/**
 * Spawns `proc`, whose spawn was due (spawn_due), its fallback reason logged and counted; a spawn that fails leaves it gone
 * with `start_error` (reported as its death before it was ready). Frees proc->start. Returns 0 when it was spawned.
 */
int kmgr_proc_spawn_fallback(kmgr_proc_t *proc);

/** Reaps the process if it has exited (WNOHANG). Returns 1 when it is (now or already) reaped. */
int kmgr_proc_reap(kmgr_proc_t *proc);
/** Waits until the process is gone and reaps it (kgate's exit, after SIGKILL). A forked one is gone when its pidfd says so,
 * at most KMGR_TPL_STATUS_GRACE_MS later: its wait status is its template's if already known, else unknown (-1). */
void kmgr_proc_reap_blocking(kmgr_proc_t *proc);
/** "forked" or "spawned"; "" while its template has not answered, or its fallback spawn waits in the start queue. */
const char *kmgr_proc_start_path(const kmgr_proc_t *proc);
/** Sends `sig` to the process group (no-op once reaped). */
void kmgr_proc_signal(kmgr_proc_t *proc, int sig);
/** The private HOME of a sandboxed kernel, on its private /tmp. */
#define KMGR_SANDBOX_HOME "/tmp/home"
/**
 * Formats why a reaped process ended: "exited with code 1", "killed by signal 9 (SIGKILL)", "out of
 * memory (memory limit 256 MiB)" when its cgroup's OOM killer struck, "CPU time limit exceeded (60 s) ...".
 */
void kmgr_proc_describe_exit(const kmgr_proc_t *proc, char *buf, size_t bufsize);
/**
 * The last lines of what the process wrote to stdout and stderr (its kernel.log): at most KMGR_OUTPUT_TAIL_LINES
 * lines of the last KMGR_OUTPUT_TAIL_BYTES bytes, trailing blank space dropped, as valid UTF-8 without terminal
 * escapes or control characters but newlines and tabs, NUL-terminated in `buf` (cut to `bufsize`); "" when there is none.
 */
void kmgr_proc_output_tail(const kmgr_proc_t *proc, char *buf, size_t bufsize);
/** Closes sockets, wipes the key, removes the directory and the cgroups, and frees. The process must be reaped. */
void kmgr_proc_free(kmgr_proc_t *proc);

#endif
