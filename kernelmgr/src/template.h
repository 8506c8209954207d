/* kernelmgr/src/template.h: kernel templates: a process per ipykernel kernelspec that has imported the kernel's code and
 * forks kernels on request (docs/kernels.md, "Kernels forked from a template"). */
#ifndef KMGR_TEMPLATE_H
#define KMGR_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "kmgr/kernelspec.h"
#include "kmgr/manager.h"
#include "ksys/spawn.h"
#include "util_private.h"

/** How long a fork may take, request to answer, before the template counts as broken (killed, started again). */
#define KMGR_TPL_FORK_TIMEOUT_MS 3000
/** How long a forked kernel found gone waits for its wait status from its template before it is reported without one. */
#define KMGR_TPL_STATUS_GRACE_MS 1000
/** The longest wait between two starts of a template that keeps dying (the wait doubles from 1 s). */
#define KMGR_TPL_MAX_BACKOFF_MS 30000

typedef struct st_kmgr_template_t {
    kmgr_link_t link; /* in mgr->templates */
    const kmgr_kernelspec_t *spec;
    char *python; /* the spec's interpreter, as found on PATH */
    pid_t pid;    /* the template process (a child of kgate), 0 when none runs */
    int fd;       /* kgate's end of its socket (non-blocking), -1 when none */
    int ready;    /* it said "ready": forks are asked of it */
    /* what it sent and was not parsed yet (at most one frame and its length) */
    uint8_t *rbuf;
    size_t rlen;
    uint64_t next_id;
    uint64_t restart_at;    /* when a dead template is started again */
    unsigned deaths_in_row; /* deaths before "ready", for the backoff */
    uint64_t started_at;
    /* forked kernels (kmgr_proc_t.tpl_link) whose wait status this template reports */
    kmgr_link_t children;
    unsigned long long forks, starts;
} kmgr_template_t;

/** Whether `spec` runs ipykernel the way a template can fork it: argv `<python> -m ipykernel_launcher|ipykernel ...`. Pure. */
int kmgr_template_eligible(const kmgr_kernelspec_t *spec);

/** The ready template of `spec`, or NULL (none configured, starting, dead). */
kmgr_template_t *kmgr_template_find(kmgr_manager_t *mgr, const kmgr_kernelspec_t *spec);

/** What a forked kernel gets; every pointer borrowed for the call. */
typedef struct st_kmgr_tpl_fork_t {
    const char *cwd;      /* NULL: the template's */
    const char *log_path; /* its stdout and stderr */
    char *const *args;    /* the kernel's arguments after `-m ipykernel_launcher`, NULL-terminated */
    char *const *envp;    /* its whole environment */
    const ksys_spawn_rlimit_t *rlimits;
    size_t nrlimits;
} kmgr_tpl_fork_t;

/**
 * Asks the template for a kernel and waits (at most KMGR_TPL_FORK_TIMEOUT_MS) for its answer, sent right after the fork: 0
 * with the kernel's pid in `*pid` (the child then applies its set-up: session, descriptors, cwd, limits, environment,
 * reseeded random state; a failure there is its exit, the traceback in its log), or KSYS_ESPAWN with `why` set. A template
 * that does not answer in time, or answers nonsense, is killed (and started again later).
 */
int kmgr_template_fork(kmgr_template_t *tpl, const kmgr_tpl_fork_t *req, pid_t *pid, char *why, size_t whylen);

struct st_kmgr_proc_t;
/**
 * Forks the kernel of `proc` from `tpl` instead of spawning it: the same arguments (`argv` past `<python> -m
 * ipykernel_launcher`), environment, cwd, log and rlimits, and the cgroups whose cgroup.procs `cgroup_fds` holds
 * (KSYS_CG_COUNT of them, -1 where none). Returns 0 with `proc` running (pid, pidfd, among the template's children), or -1
 * (said on stderr): spawn it.
 */
int kmgr_template_fork_proc(kmgr_template_t *tpl, struct st_kmgr_proc_t *proc, char **argv, char **envp, const char *cwd,
                            const char *log_path, const int *cgroup_fds, const ksys_spawn_rlimit_t *rlimits, size_t nrlimits);

/** Reads what the template sent (wait statuses of its kernels, "ready") without blocking. */
void kmgr_template_drain(kmgr_template_t *tpl);

/** Reaps dead templates and starts them again when due; reads what they sent. From the manager's tick. */
void kmgr_templates_tick(kmgr_manager_t *mgr, uint64_t now);
/** Stops every template (SIGKILL, reaped) and frees them; the forked kernels' procs must be gone or detached. */
void kmgr_templates_dispose(kmgr_manager_t *mgr);

#endif
