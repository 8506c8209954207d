/* kernelmgr/src/kernel_access.c: what a kernel says of itself: its state, process, spec, deaths and counters (read-only). */
#include "kmgr/kernel.h"
#include "kernel_private.h"
#include "manager_private.h"

const char *kmgr_kernel_state_name(kmgr_kernel_state_t state)
{
    switch (state) {
    case KMGR_KERNEL_STARTING:
        return "starting";
    case KMGR_KERNEL_IDLE:
        return "idle";
    case KMGR_KERNEL_BUSY:
        return "busy";
    case KMGR_KERNEL_RESTARTING:
        return "restarting";
    case KMGR_KERNEL_DEAD:
        return "dead";
    }
    return "unknown";
}

kmgr_kernel_state_t kmgr_kernel_state(const kmgr_kernel_t *k)
{
    return k->state;
}

const kmgr_kernelspec_t *kmgr_kernel_spec(const kmgr_kernel_t *k)
{
    return k->spec;
}

pid_t kmgr_kernel_pid(const kmgr_kernel_t *k)
{
    return k->proc != NULL ? k->proc->pid : 0;
}

const char *kmgr_kernel_start_path(const kmgr_kernel_t *k)
{
    return k->proc != NULL ? kmgr_proc_start_path(k->proc) : "";
}

const char *kmgr_kernel_connection_file(const kmgr_kernel_t *k)
{
    return k->proc != NULL ? k->proc->conn_path : "";
}

json_t *kmgr_kernel_info(const kmgr_kernel_t *k)
{
    return k->state == KMGR_KERNEL_IDLE || k->state == KMGR_KERNEL_BUSY ? k->info : NULL;
}

const char *kmgr_kernel_exit_reason(const kmgr_kernel_t *k)
{
    return k->state == KMGR_KERNEL_DEAD ? k->exit_reason : "";
}

const char *kmgr_kernel_last_death(const kmgr_kernel_t *k)
{
    return k->last_death;
}

unsigned kmgr_kernel_auto_restarts(const kmgr_kernel_t *k, unsigned *in_a_row, unsigned *limit)
{
    if (in_a_row != NULL)
        *in_a_row = k->restarts_in_row;
    if (limit != NULL)
        *limit = k->restart_limit;
    return k->restarts;
}

int kmgr_kernel_answering(const kmgr_kernel_t *k)
{
    return k->answering || (k->state != KMGR_KERNEL_IDLE && k->state != KMGR_KERNEL_BUSY);
}

uint64_t kmgr_kernel_unawaited_messages(const kmgr_kernel_t *k)
{
    return k->unawaited;
}

uint64_t kmgr_kernel_oversized_messages(const kmgr_kernel_t *k)
{
    return k->oversized;
}

int kmgr_kernel_is_destroyed(const kmgr_kernel_t *k)
{
    return k->destroyed;
}

kmgr_link_t *kmgr_kernel_link(kmgr_kernel_t *k)
{
    return &k->link;
}

kmgr_kernel_t *kmgr_kernel_from_link(kmgr_link_t *link)
{
    return KMGR_FROM_MEMBER(kmgr_kernel_t, link, link);
}
