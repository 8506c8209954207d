/* The start queue: at most max_starting kernels spawned and not ready at once, the others waiting unspawned in start order;
 * starts whose template answered no fork (its death, its silence) wait here for their spawn too. */
#include "ksys/errors.h"
#include "ksys/util.h"
#include "kernel_private.h"
#include "manager_private.h"
#include "process.h"
#include "template.h"

/* Its template answered no fork: it waits for its spawn, as a spawned start, in the place of its first start. */
static int spawn_due(const kmgr_kernel_t *k)
{
    return !k->destroyed && k->proc != NULL && k->proc->spawn_due &&
           (k->state == KMGR_KERNEL_STARTING || k->state == KMGR_KERNEL_RESTARTING);
}

static int is_launching(const kmgr_kernel_t *k)
{
    return !k->destroyed && k->proc != NULL && !k->proc->spawn_due &&
           (k->state == KMGR_KERNEL_STARTING || k->state == KMGR_KERNEL_RESTARTING);
}

/* A start let go that may come back to the queue: its fork request not answered yet (a template that dies, times out or
 * answers "failed" sends it back as a spawn due). A relaunch's never waits, so it takes no place. */
static int may_come_back(const kmgr_kernel_t *k)
{
    return is_launching(k) && !k->relaunched && k->proc->start != NULL;
}

void kmgr_kernels_count_starting(kmgr_manager_t *mgr, unsigned *launching, unsigned *queued)
{
    *launching = *queued = 0;
    for (kmgr_link_t *link = mgr->kernels.next; link != &mgr->kernels; link = link->next) {
        const kmgr_kernel_t *k = kmgr_kernel_from_link(link);
        *launching += is_launching(k);
        *queued += (!k->destroyed && k->queued) || (spawn_due(k) && !k->relaunched);
    }
}

/* The places of the start queue taken: the starts waiting in it, and those let go that may still come back to it. */
static unsigned places_taken(kmgr_manager_t *mgr, unsigned queued)
{
    unsigned n = queued;

    for (kmgr_link_t *link = mgr->kernels.next; link != &mgr->kernels; link = link->next)
        n += may_come_back(kmgr_kernel_from_link(link));
    return n;
}

/* Whether `k`, started now, would fork from a template (and so may come back to the queue): the test kmgr_proc_spawn makes. */
static int would_fork(kmgr_manager_t *mgr, const kmgr_kernel_t *k)
{
    const kmgr_template_t *tpl;

    return k->sandbox.kind == KSYS_SANDBOX_NONE && (tpl = kmgr_template_find(mgr, k->spec)) != NULL && kmgr_template_has_room(tpl);
}

/*
 * How many kernels may be starting when `k` starts: more if it will fork from a ready template (max_forking), one whose
 * request queue has room: a start the template refuses for a full queue (kmgr_template_fork) is spawned, and a spawned start
 * obeys max_starting, so it is counted so (and waits) here too.
 */
static unsigned start_limit(kmgr_manager_t *mgr, const kmgr_kernel_t *k)
{
    const kmgr_template_t *tpl;

    if (mgr->config.max_forking != 0 && k->sandbox.kind == KSYS_SANDBOX_NONE && (tpl = kmgr_template_find(mgr, k->spec)) != NULL &&
        kmgr_template_has_room(tpl))
        return mgr->config.max_forking;
    return mgr->config.max_starting;
}

int kmgr_kernels_must_queue(kmgr_manager_t *mgr, const kmgr_kernel_t *k, int *err)
{
    unsigned launching, queued;

    *err = 0;
    if (mgr->config.max_starting == 0)
        return 0;
    kmgr_kernels_count_starting(mgr, &launching, &queued);
    /* behind a queued start, in its turn: the order of the starts is kept */
    if (queued == 0 && launching < start_limit(mgr, k)) {
        /* a start that forks takes a place in the queue it may come back to: max_start_queue holds however templates fail */
        if (mgr->config.max_start_queue != 0 && would_fork(mgr, k) && places_taken(mgr, queued) >= mgr->config.max_start_queue) {
            *err = KSYS_ESTARTQUEUE;
            return 1;
        }
        return 0;
    }
    if (places_taken(mgr, queued) >= mgr->config.max_start_queue)
        *err = KSYS_ESTARTQUEUE;
    return 1;
}

/* Spawns k, whose spawn was due; counted among the launching if it was. */
static void spawn_fallback(kmgr_kernel_t *k, unsigned *launching)
{
    if (kmgr_proc_spawn_fallback(k->proc) == 0) {
        /* its start-up timeout counts from its spawn, as a queued start's does, not from its fork request */
        k->started_at = ksys_now_ms();
        k->next_info_at = k->started_at + k->mgr->config.kernel_info_retry_ms;
        ++*launching;
    }
}

void kmgr_kernels_start_queued(kmgr_manager_t *mgr)
{
    unsigned launching, queued;
    int held = 0; /* a start that must wait holds the ones behind it */

    if (mgr->config.max_starting == 0)
        return;
    kmgr_kernels_count_starting(mgr, &launching, &queued);
    /* the kernels list is in start order: the oldest queued start goes first */
    for (kmgr_link_t *link = mgr->kernels.next; link != &mgr->kernels; link = link->next) {
        kmgr_kernel_t *k = kmgr_kernel_from_link(link);
        if (spawn_due(k) && k->relaunched) {
            /* a relaunch was not held back: nor is its fallback */
            spawn_fallback(k, &launching);
        } else if (held) {
            continue;
        } else if (spawn_due(k)) {
            /* spawned, never forked now: max_starting, whatever template is ready by now */
            if (launching >= mgr->config.max_starting)
                held = 1;
            else
                spawn_fallback(k, &launching);
        } else if (!k->destroyed && k->queued) {
            if (launching >= start_limit(mgr, k)) {
                held = 1;
                continue;
            }
            kmgr_kernel_launch_queued(k);
            launching += is_launching(k);
        }
    }
}

void kmgr_manager_count_starting(kmgr_manager_t *mgr, unsigned *launching, unsigned *queued)
{
    kmgr_kernels_count_starting(mgr, launching, queued);
}
