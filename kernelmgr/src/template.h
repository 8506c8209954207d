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
#include "process.h"
#include "tplproto.h"
#include "util_private.h"

/** How long a fork may take, request queued to answer, before the template counts as broken (killed, started again; its
 * pending starts spawned). */
#define KMGR_TPL_FORK_TIMEOUT_MS 3000
/** How long a forked kernel found gone waits for its wait status from its template before it is reported without one. */
#define KMGR_TPL_STATUS_GRACE_MS 1000
/** The longest wait between two starts of a template that keeps dying (the wait doubles from 1 s). */
#define KMGR_TPL_MAX_BACKOFF_MS 30000

/* A fork request in its template's queue: written as the socket takes it, answered by id. */
typedef struct st_kmgr_tpl_pending_t {
    kmgr_link_t link; /* in tpl->pending, in the order of the requests */
    uint64_t id;
    uint64_t deadline;      /* its answer is due (KMGR_TPL_FORK_TIMEOUT_MS after the request) */
    kmgr_tpl_request_t req; /* the frame, freed once written */
    size_t written;
    struct st_kmgr_proc_t *proc; /* whose kernel it asks for; NULL once given up (what is forked for it is killed) */
} kmgr_tpl_pending_t;

typedef struct st_kmgr_template_t {
    kmgr_link_t link; /* in mgr->templates */
    kmgr_manager_t *mgr;
    const kmgr_kernelspec_t *spec;
    char *python; /* the spec's interpreter, as found on PATH */
    pid_t pid;    /* the template process (a child of kgate), 0 when none runs */
    int fd;       /* kgate's end of its socket (non-blocking), -1 when none */
    void *watch;  /* the loop's watch of `fd` (readable: drain; writable on request: flush) */
    int want_writable;
    int ready; /* it said "ready": forks are asked of it */
    /* what it sent and was not parsed yet (at most one frame and its length) */
    uint8_t *rbuf;
    size_t rlen;
    uint64_t next_id;
    /* requests not answered yet, at most config.template_max_pending */
    kmgr_link_t pending;
    unsigned npending;
    uint64_t restart_at;    /* when a dead template is started again */
    unsigned deaths_in_row; /* deaths before "ready", for the backoff */
    uint64_t started_at;
    /* forked kernels (kmgr_proc_t.tpl_link) whose wait status this template reports */
    kmgr_link_t children;
    unsigned long long forks, starts;
} kmgr_template_t;

/** Whether `spec` runs ipykernel the way a template can fork it: argv `<python> -m ipykernel_launcher|ipykernel ...`. Pure. */
int kmgr_template_eligible(const kmgr_kernelspec_t *spec);

/** Whether a template was asked for `spec` (kmgr_manager_use_template), ready or not. */
int kmgr_template_configured(kmgr_manager_t *mgr, const kmgr_kernelspec_t *spec);
/** The ready template of `spec`, or NULL (none configured, starting, dead). */
kmgr_template_t *kmgr_template_find(kmgr_manager_t *mgr, const kmgr_kernelspec_t *spec);

/** Whether `tpl`'s request queue takes one more fork (fewer than config.template_max_pending wait): else kmgr_template_fork
 * refuses it (KMGR_FALLBACK_QUEUE_FULL). */
int kmgr_template_has_room(const kmgr_template_t *tpl);

struct st_kmgr_proc_t;
/**
 * Asks `tpl` for the kernel of `proc` as `start` says (its arguments past `<python> -m ipykernel_launcher`, environment, cwd,
 * log and rlimits), without blocking: the request is queued and written as the socket takes it. Returns 0 with
 * start->pending set (proc->start must be `start`): the answer comes later, from the loop, through kmgr_proc_fork_answer
 * (or before this returns, when the write finds the template dead: then `start` is freed) (forked, or a fallback reason:
 * "failed", the template's death, its silence past KMGR_TPL_FORK_TIMEOUT_MS, nonsense). Else a fallback reason with `why`
 * set, and nothing queued: the queue is full (config.template_max_pending), or the request cannot be said (over
 * KMGR_TPL_MAX_FRAME, a resource limit the template does not know).
 */
int kmgr_template_fork(kmgr_template_t *tpl, struct st_kmgr_proc_t *proc, kmgr_proc_start_t *start, char *why, size_t whylen);

/** Gives up the pending request of `start` (its proc is freed): no answer reaches it, a kernel forked for it is killed. */
void kmgr_template_forget(kmgr_proc_start_t *start);

/** Reads what the template sent (wait statuses of its kernels, "ready") without blocking. */
void kmgr_template_drain(kmgr_template_t *tpl);

/** Reaps dead templates and starts them again when due; reads what they sent. From the manager's tick. */
void kmgr_templates_tick(kmgr_manager_t *mgr, uint64_t now);
/** Stops every template (SIGKILL, reaped) and frees them; the forked kernels' procs must be gone or detached. */
void kmgr_templates_dispose(kmgr_manager_t *mgr);

#endif
