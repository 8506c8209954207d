/* kernelmgr/src/liveness.c: when a kernel is dead (its process decides), heartbeats as information, automatic restarts. */
#include <stdio.h>
#include <string.h>
#include "ksys/errors.h"
#include "kernel_private.h"
#include "manager_private.h"
#include "ksys/log.h"

int kmgr_kernel_heartbeats(kmgr_kernel_t *k, uint64_t now)
{
    const kmgr_config_t *config = &k->mgr->config;

    if (k->ping_sent_at != 0) {
        /* A stalled loop must not read as a silent kernel: collect pongs that already arrived. */
        kmgr_channels_drain(&k->proc->channels, WIRE_CHANNEL_HB);
    }
    if (k->ping_sent_at != 0) {
        uint64_t silent = now - k->ping_sent_at;
        if (config->heartbeat_kill_ms != 0 && silent >= config->heartbeat_kill_ms) {
            kmgr_kernel_incarnation_ended(k, "stopped answering heartbeats", 1);
            return 1;
        }
        /* IRkernel answers on the thread that runs R: a long cell is silent, and its kernel alive. Information only. */
        if (silent >= config->heartbeat_timeout_ms && k->answering) {
            k->answering = 0;
            kmgr_kernel_notify_later(k);
        }
        /* The hb socket is a DEALER: a ping lost with a reconnection is sent again, not waited for forever; once per
         * timeout at most, so that a kernel stopped for an hour finds a few thousand pings queued, not more. */
        if (now - k->ping_resent_at >= config->heartbeat_timeout_ms) {
            kmgr_channels_ping(&k->proc->channels);
            k->ping_resent_at = now;
        }
    } else if (now >= k->next_ping_at) {
        kmgr_channels_ping(&k->proc->channels);
        k->ping_sent_at = k->ping_resent_at = now;
        k->next_ping_at = now + config->heartbeat_interval_ms;
    }
    return 0;
}

/* Whether the kernel's output says one of its TCP ports was taken between kernelmgr's pick and its bind. */
static int lost_a_port(const kmgr_kernel_t *k, const char *tail)
{
    return k->proc != NULL && k->proc->conn.transport != NULL && strcmp(k->proc->conn.transport, "tcp") == 0 &&
           strstr(tail, "Address already in use") != NULL;
}

/* Starts the kernel again after the death of a ready incarnation (or of an automatic restart's): FAILED for its
 * requests (they died with it), RESTARTING for the owner, then IDLE. */
static void restart_automatically(kmgr_kernel_t *k, const char *reason)
{
    char why[256];

    ++k->restarts;
    ++k->restarts_in_row;
    k->auto_restarting = 1;
    k->exit_reason[0] = '\0';
    snprintf(k->last_death, sizeof(k->last_death), "%s", reason);
    ksys_log_warn("a %s kernel died (%s); restarting it automatically (%u of %u in a row)", k->spec->name, reason,
                  k->restarts_in_row, k->restart_limit);
    k->state = KMGR_KERNEL_RESTARTING;
    kmgr_requests_fail_all(k, KSYS_EDIED);
    if (kmgr_kernel_relaunch(k, 0, why, sizeof(why)) != 0) {
        char dead[KMGR_REASON_MAX + 300];
        snprintf(dead, sizeof(dead), "%s; the automatic restart failed: %s", reason, why);
        kmgr_kernel_die(k, dead, 0);
        return;
    }
    kmgr_kernel_run_pending(k);
}

void kmgr_kernel_incarnation_ended(kmgr_kernel_t *k, const char *reason, int kill_it)
{
    int starting = k->state == KMGR_KERNEL_STARTING || k->state == KMGR_KERNEL_RESTARTING;
    /* a death of a kernel that worked, or of its automatic restart before it did: not of a kernel that never started */
    int may_restart = k->restart_limit != 0 && (!starting || k->auto_restarting);
    /* the tail leaves room in a reason for what goes around it */
    char tail[KMGR_REASON_MAX - 512] = "", full[KMGR_REASON_MAX];

    if (starting && k->proc != NULL)
        kmgr_proc_output_tail(k->proc, tail, sizeof(tail));
    if (starting && k->bind_retries < KMGR_BIND_RETRIES && lost_a_port(k, tail)) {
        char why[256];
        ++k->bind_retries;
        ksys_log_warn("a %s kernel could not bind a port kgate picked (%s); starting it on new ports (%u of %u)", k->spec->name,
                      reason, k->bind_retries, KMGR_BIND_RETRIES);
        /* requests queued meanwhile were never sent: they wait for the new incarnation */
        if (kmgr_kernel_relaunch(k, 0, why, sizeof(why)) == 0)
            return;
        kmgr_kernel_die(k, why, 0);
        return;
    }
    if (tail[0] != '\0')
        snprintf(full, sizeof(full), "%s; its last output:\n%s", reason, tail);
    else
        snprintf(full, sizeof(full), "%s", reason);
    if (may_restart) {
        /* Jupyter's restarter counts deaths in a row: a kernel that stayed up long enough starts a new row */
        if (!k->auto_restarting && ksys_now_ms() - k->ready_at >= k->mgr->config.restart_stable_ms)
            k->restarts_in_row = 0;
        if (k->restarts_in_row < k->restart_limit) {
            restart_automatically(k, full);
            return;
        }
        size_t len = strlen(full);
        snprintf(full + len, sizeof(full) - len,
                 "; not restarted: it died again after %u automatic restart%s in a row (the restart limit)", k->restarts_in_row,
                 k->restarts_in_row == 1 ? "" : "s");
    }
    kmgr_kernel_die(k, full, kill_it);
}
