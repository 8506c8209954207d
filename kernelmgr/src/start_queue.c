/* The start queue: at most max_starting kernels spawned and not ready at once, the others waiting unspawned in start order. */
#include "kernel_private.h"
#include "manager_private.h"

static int is_launching(const kmgr_kernel_t *k)
{
    return !k->destroyed && k->proc != NULL && (k->state == KMGR_KERNEL_STARTING || k->state == KMGR_KERNEL_RESTARTING);
}

void kmgr_kernels_count_starting(kmgr_manager_t *mgr, unsigned *launching, unsigned *queued)
{
    *launching = *queued = 0;
    for (kmgr_link_t *link = mgr->kernels.next; link != &mgr->kernels; link = link->next) {
        const kmgr_kernel_t *k = kmgr_kernel_from_link(link);
        *launching += is_launching(k);
        *queued += !k->destroyed && k->queued;
    }
}

void kmgr_kernels_start_queued(kmgr_manager_t *mgr)
{
    unsigned launching, queued;

    if (mgr->config.max_starting == 0)
        return;
    kmgr_kernels_count_starting(mgr, &launching, &queued);
    /* the kernels list is in start order: the oldest queued start goes first */
    for (kmgr_link_t *link = mgr->kernels.next; link != &mgr->kernels && queued != 0 && launching < mgr->config.max_starting;
         link = link->next) {
        kmgr_kernel_t *k = kmgr_kernel_from_link(link);
        if (k->destroyed || !k->queued)
            continue;
        --queued;
        kmgr_kernel_launch_queued(k);
        launching += k->proc != NULL;
    }
}

void kmgr_manager_count_starting(kmgr_manager_t *mgr, unsigned *launching, unsigned *queued)
{
    kmgr_kernels_count_starting(mgr, launching, queued);
}
