/* kernelmgr/src/manager_private.h: the manager's insides, and what it drives in each kernel. */
#ifndef KMGR_MANAGER_PRIVATE_H
#define KMGR_MANAGER_PRIVATE_H

#include <stdint.h>
#include "kmgr/kernel.h"
#include "kmgr/loop.h"
#include "kmgr/manager.h"
#include "ksys/cgroup.h"
#include "ksys/instance.h"
#include "process.h"
#include "util_private.h"

/* ---- manager.c ---- */

struct st_kmgr_manager_t {
    kmgr_config_t config; /* defaults filled in */
    char *runtime_dir;
    int owns_runtime_dir;
    /* the mark every kernel carries in its environment, and this kgate's record in the runtime dir */
    ksys_instance_t instance;
    const kmgr_loop_ops_t *ops;
    void *loop;
    /* Every kernel handle, including destroyed ones waiting to be freed from the loop. */
    kmgr_link_t kernels;
    /* Detached incarnations in their shutdown sequence (kmgr_proc_t.link). */
    kmgr_link_t shutting_down;
    /* control groups for kernels with memory or process limits, where the host allows them */
    ksys_cgroups_t cgroups;
    /* the bwrap executable (config.bwrap_path, or found on PATH), NULL if there is none */
    char *bwrap_path;
    /* kernel templates (template.h), one per kernelspec given to kmgr_manager_use_template */
    kmgr_link_t templates;
    /* how kernels started (kmgr_manager_start_stats; templates_running is counted when asked) */
    kmgr_start_stats_t start_stats;
    /* kernel output no request received (kmgr_manager_lost_output): counted here as each kernel counts its own */
    kmgr_lost_output_t lost_output;
    /* Set between ops->schedule and the kmgr_manager_run_pending it asked for. */
    int scheduled;
};

/** Asks the loop for a kmgr_manager_run_pending (coalesced). */
void kmgr_manager_schedule(kmgr_manager_t *mgr);
/**
 * Takes ownership of a detached incarnation and runs its shutdown sequence: shutdown_request on
 * control (if `polite` and it still runs), SIGTERM and SIGKILL after grace periods, then reaping.
 */
void kmgr_manager_adopt(kmgr_manager_t *mgr, kmgr_proc_t *proc, int polite);

/* ---- kernel.c: what the manager drives (declared here: the manager never sees a kernel's insides) ---- */

/** Tick work of one kernel: readiness retries, timeouts, heartbeats, reaping. */
void kmgr_kernel_tick(kmgr_kernel_t *kernel, uint64_t now);
/** Kernels spawned and not ready yet (they count against max_starting), and kernels queued for their spawn. */
void kmgr_kernels_count_starting(kmgr_manager_t *mgr, unsigned *launching, unsigned *queued);
/** Spawns a queued kernel now; a failure makes it DEAD (reported from the loop). */
void kmgr_kernel_launch_queued(kmgr_kernel_t *kernel);
/** Spawns the oldest queued kernels while fewer than max_starting are launching (from the tick). */
void kmgr_kernels_start_queued(kmgr_manager_t *mgr);
/** Whether a new start of `k` must wait its turn (fails with KSYS_ESTARTQUEUE in *err when the queue is full). */
int kmgr_kernels_must_queue(kmgr_manager_t *mgr, const struct st_kmgr_kernel_t *k, int *err);
/** Deferred work of one kernel: re-drain after sends, deferred failures and state notices. */
void kmgr_kernel_run_pending(kmgr_kernel_t *kernel);
/** Whether the kernel was destroyed and is waiting to be freed. */
int kmgr_kernel_is_destroyed(const kmgr_kernel_t *kernel);
/** Frees a destroyed kernel (only from the loop, never from inside its callbacks). */
void kmgr_kernel_free(kmgr_kernel_t *kernel);
/** Link of a kernel in mgr->kernels. */
kmgr_link_t *kmgr_kernel_link(kmgr_kernel_t *kernel);
kmgr_kernel_t *kmgr_kernel_from_link(kmgr_link_t *link);

#endif
