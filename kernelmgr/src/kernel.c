/* kernelmgr/src/kernel.c: the kernel state machine: start-up readiness, interrupt, restart, shutdown (liveness.c: death;
 * kernel_overcap.c: messages over the cap). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/json_in.h"
#include "ksys/errors.h"
#include "kmgr/kernel.h"
#include "kernel_private.h"
#include "manager_private.h"
#include "ksys/log.h"

/* ---- state ---- */

/* Loop context only: tells the owner about the current state if it has not heard of it yet. */
static void flush_state(kmgr_kernel_t *k)
{
    if (k->destroyed || (k->state == k->notified_state && kmgr_kernel_answering(k) == k->notified_answering))
        return;
    k->notified_state = k->state;
    k->notified_answering = kmgr_kernel_answering(k);
    if (k->on_state != NULL)
        k->on_state(k, k->data);
}

/* From a public call, the notice waits for run_pending: no callback may run inside the call. */
static void set_state_later(kmgr_kernel_t *k, kmgr_kernel_state_t state)
{
    k->state = state;
    kmgr_manager_schedule(k->mgr);
}

void kmgr_kernel_flush_deferred(kmgr_kernel_t *k)
{
    kmgr_requests_process_failing(k);
    flush_state(k);
}

void kmgr_kernel_notify_later(kmgr_kernel_t *k)
{
    kmgr_manager_schedule(k->mgr);
}

int kmgr_kernel_send(kmgr_kernel_t *k, wire_channel_t channel, wire_msg_t *msg)
{
    int ret = k->proc != NULL ? kmgr_channels_send(&k->proc->channels, channel, msg) : KSYS_EZMQ;
    wire_msg_destroy(msg);
    return ret;
}

static void send_kernel_info(kmgr_kernel_t *k)
{
    kmgr_kernel_send(k, WIRE_CHANNEL_SHELL, wire_msg_create("kernel_info_request", k->session, NULL));
}

void kmgr_kernel_die(kmgr_kernel_t *k, const char *reason, int kill_it)
{
    ++k->generation;
    snprintf(k->exit_reason, sizeof(k->exit_reason), "%s", reason);
    snprintf(k->last_death, sizeof(k->last_death), "%s", reason);
    if (k->proc != NULL) {
        kmgr_channels_close(&k->proc->channels, 0);
        if (kill_it)
            kmgr_proc_signal(k->proc, SIGKILL);
    }
    k->state = KMGR_KERNEL_DEAD;
    kmgr_requests_fail_all(k, KSYS_EDIED);
    kmgr_kernel_flush_deferred(k);
}

static void maybe_ready(kmgr_kernel_t *k)
{
    uint64_t now;

    if ((k->state != KMGR_KERNEL_STARTING && k->state != KMGR_KERNEL_RESTARTING) || !k->got_info_reply || !k->got_iopub ||
        !k->proc->channels.stdin_connected)
        return;
    now = ksys_now_ms();
    k->state = KMGR_KERNEL_IDLE;
    k->ready_at = now;
    k->auto_restarting = 0;
    k->bind_retries = 0;
    k->answering = 1;
    k->next_ping_at = now;
    k->ping_sent_at = 0;
    kmgr_requests_send_unsent(k);
    kmgr_manager_schedule(k->mgr); /* its start slot is free: a queued start may go (kmgr_manager_run_pending) */
    flush_state(k);
}

/* ---- what the channels report ---- */

static void on_status(kmgr_kernel_t *k, const wire_msg_t *msg)
{
    const char *state = json_string_value(json_object_get(msg->content, "execution_state"));

    if (state == NULL || (k->state != KMGR_KERNEL_IDLE && k->state != KMGR_KERNEL_BUSY))
        return;
    if (strcmp(state, "busy") == 0) {
        k->state = KMGR_KERNEL_BUSY;
    } else if (strcmp(state, "idle") == 0) {
        k->state = KMGR_KERNEL_IDLE;
        k->interrupt_sent_at = 0;
    }
    flush_state(k);
}

static void on_message(void *data, wire_channel_t channel, wire_msg_t *msg, const wire_frame_t *parts, size_t nparts)
{
    kmgr_kernel_t *k = data;
    uint64_t generation = k->generation;
    const char *type = wire_msg_type(msg);
    int own = kmgr_late_flush_own(k, msg); /* a flush's own message: for kgate alone (late.c) */

    /* Deferred events (a restart's FAILED, its state notice) go out before anything newer. */
    kmgr_kernel_flush_deferred(k);
    if (k->generation != generation)
        goto Exit;

    switch (channel) {
    case WIRE_CHANNEL_SHELL:
        if (kmgr_requests_on_reply(k, msg) || kmgr_late_flush_on_reply(k, msg))
            break;
        if (k->resync.active) {
            kmgr_kernel_resync_on(k, msg, channel);
            break;
        }
        /* A reply to one of our own handshake requests. */
        if (strcmp(type, "kernel_info_reply") == 0 && (k->state == KMGR_KERNEL_STARTING || k->state == KMGR_KERNEL_RESTARTING)) {
            if (k->info == NULL)
                k->info = json_incref(msg->content);
            k->got_info_reply = 1;
            /* iopub still silent: the nudges now come every kernel_info_retry_ms, not after the backoff's wait */
            if (!k->got_iopub && k->next_info_at > ksys_now_ms() + k->mgr->config.kernel_info_retry_ms)
                k->next_info_at = ksys_now_ms() + k->mgr->config.kernel_info_retry_ms;
            maybe_ready(k);
        }
        break;
    case WIRE_CHANNEL_IOPUB:
        k->got_iopub = 1;
        if (k->state == KMGR_KERNEL_STARTING || k->state == KMGR_KERNEL_RESTARTING) {
            maybe_ready(k);
        } else if (strcmp(type, "status") == 0 && !own) {
            on_status(k, msg);
        }
        if (k->generation == generation)
            kmgr_requests_on_iopub(k, msg);
        if (k->generation == generation && k->resync.active)
            kmgr_kernel_resync_on(k, msg, channel);
        break;
    case WIRE_CHANNEL_STDIN:
        kmgr_requests_on_input(k, msg);
        break;
    default:
        /* control replies (interrupt_reply) concern nobody but a relay. */
        break;
    }
    /* The relay hears everything, after kernelmgr's own requests (the kernel's state is current). */
    if (k->generation == generation && !k->destroyed && k->tap != NULL && parts != NULL && !own)
        k->tap(k, channel, msg, parts, nparts, k->tap_data);
Exit:
    wire_msg_destroy(msg);
}

static int wants_parts(void *data)
{
    kmgr_kernel_t *k = data;

    return k->tap != NULL;
}

static void on_stdin_connected(void *data)
{
    kmgr_kernel_t *k = data;

    kmgr_kernel_flush_deferred(k);
    if (!k->destroyed)
        maybe_ready(k);
}

static void on_pong(void *data)
{
    kmgr_kernel_t *k = data;

    k->ping_sent_at = 0;
    /* told from run_pending: a pong is read inside the tick, which goes on using the kernel */
    if (!k->answering) {
        k->answering = 1;
        kmgr_kernel_notify_later(k);
    }
}

static void on_redrain(void *data)
{
    kmgr_kernel_t *k = data;

    kmgr_manager_schedule(k->mgr);
}

static const kmgr_channels_ops_t channel_ops = {
    .on_message = on_message,
    .wants_parts = wants_parts,
    .on_stdin_connected = on_stdin_connected,
    .on_pong = on_pong,
    .big_iopub = kmgr_kernel_big_iopub,
    .on_oversized = kmgr_kernel_on_oversized,
    .text_room = kmgr_kernel_text_room,
    .on_redrain = on_redrain,
};

/* Spawns a new incarnation and starts its handshake. No callbacks. */
static int launch(kmgr_kernel_t *k, char *why, size_t whylen)
{
    kmgr_proc_t *proc;
    int ret;

    k->answering = 1;
    k->interrupt_sent_at = 0; /* a new process has none in flight */
    if ((ret = kmgr_proc_spawn(k->mgr, k->spec, k->cwd, k->env, &k->sandbox, &proc, why, whylen)) != 0)
        return ret;
    if ((ret = kmgr_channels_open(&proc->channels, &channel_ops, k)) != 0) {
        snprintf(why, whylen, "cannot open the kernel's channels");
        kmgr_manager_adopt(k->mgr, proc, 0);
        return ret;
    }
    k->proc = proc;
    k->sent = 0;
    memset(&k->resync, 0, sizeof(k->resync));
    memset(&k->flush, 0, sizeof(k->flush));
    k->got_info_reply = 0;
    k->got_iopub = 0;
    k->started_at = ksys_now_ms();
    k->info_retry_ms = k->mgr->config.kernel_info_retry_ms;
    k->next_info_at = k->started_at + k->info_retry_ms;
    k->ping_sent_at = 0;
    send_kernel_info(k);
    return 0;
}

/* ---- lifecycle ---- */

int kmgr_kernel_start(kmgr_manager_t *mgr, const kmgr_kernel_options_t *opts, kmgr_kernel_t **out)
{
    kmgr_kernel_t *k;
    char why[256];
    int ret;

    if (opts == NULL || opts->spec == NULL)
        return KSYS_EINVAL;
    k = wire_calloc(1, sizeof(*k));
    k->mgr = mgr;
    k->spec = opts->spec;
    k->cwd = wire_strdup(opts->cwd);
    k->env = opts->env != NULL ? json_deep_copy(opts->env) : NULL;
    if (opts->sandbox != NULL) {
        k->sandbox = *opts->sandbox;
        k->sandbox.workspace = k->workspace = wire_strdup(opts->sandbox->workspace);
    }
    k->on_state = opts->on_state;
    k->data = opts->data;
    k->restart_limit = opts->restart_limit;
    k->state = k->notified_state = KMGR_KERNEL_STARTING;
    k->notified_answering = 1;
    wire_uuid4(k->session);
    kmgr_list_init(&k->link);
    kmgr_list_init(&k->requests);
    kmgr_list_init(&k->failing);
    if (kmgr_kernels_must_queue(mgr, k, &ret)) {
        if (ret != 0) {
            kmgr_kernel_free(k);
            return ret;
        }
        k->queued = 1;
    }
    if (!k->queued && (ret = launch(k, why, sizeof(why))) != 0) {
        ksys_log_error("cannot start a %s kernel: %s", k->spec->name, why);
        kmgr_kernel_free(k);
        return ret;
    }
    kmgr_list_append(&mgr->kernels, &k->link);
    *out = k;
    return 0;
}

static void destroy(kmgr_kernel_t *k, int polite)
{
    if (k == NULL || k->destroyed)
        return;
    k->destroyed = 1;
    ++k->generation;
    kmgr_requests_silence(k);
    if (k->proc != NULL) {
        kmgr_manager_adopt(k->mgr, k->proc, polite && k->state != KMGR_KERNEL_DEAD);
        k->proc = NULL;
    }
    kmgr_manager_schedule(k->mgr);
}

void kmgr_kernel_destroy(kmgr_kernel_t *k)
{
    destroy(k, 1);
}

void kmgr_kernel_kill(kmgr_kernel_t *k)
{
    destroy(k, 0);
}

void kmgr_kernel_free(kmgr_kernel_t *k)
{
    kmgr_requests_free_all(k);
    if (k->proc != NULL)
        kmgr_manager_adopt(k->mgr, k->proc, 0);
    json_decref(k->info);
    json_decref(k->env);
    free(k->workspace);
    free(k->cwd);
    free(k);
}

void kmgr_kernel_launch_queued(kmgr_kernel_t *k)
{
    char why[256];

    k->queued = 0;
    if (launch(k, why, sizeof(why)) != 0) {
        ksys_log_error("cannot start a %s kernel: %s", k->spec->name, why);
        snprintf(k->exit_reason, sizeof(k->exit_reason), "%s", why);
        set_state_later(k, KMGR_KERNEL_DEAD);
        kmgr_manager_schedule(k->mgr);
    }
}

int kmgr_kernel_relaunch(kmgr_kernel_t *k, int polite, char *why, size_t whylen)
{
    ++k->generation;
    if (k->proc != NULL) {
        kmgr_manager_adopt(k->mgr, k->proc, polite);
        k->proc = NULL;
    }
    json_decref(k->info);
    k->info = NULL;
    /* a restart is not held back by the start queue (it counts once spawned) */
    k->queued = 0;
    k->relaunched = 1;
    return launch(k, why, whylen);
}

void kmgr_kernel_set_restart_limit(kmgr_kernel_t *k, unsigned limit)
{
    k->restart_limit = limit;
}

int kmgr_kernel_restart(kmgr_kernel_t *k)
{
    char why[256];
    int ret, polite = k->state != KMGR_KERNEL_DEAD;

    if (k->destroyed)
        return KSYS_ESHUTDOWN;
    ++k->generation;
    kmgr_requests_fail_all(k, KSYS_ESHUTDOWN);
    k->exit_reason[0] = k->last_death[0] = '\0';
    k->restarts_in_row = 0;
    k->auto_restarting = 0;
    k->bind_retries = 0;
    set_state_later(k, KMGR_KERNEL_RESTARTING);
    if ((ret = kmgr_kernel_relaunch(k, polite, why, sizeof(why))) != 0) {
        snprintf(k->exit_reason, sizeof(k->exit_reason), "%s", why);
        set_state_later(k, KMGR_KERNEL_DEAD);
        return ret;
    }
    return 0;
}

int kmgr_kernel_interrupt(kmgr_kernel_t *k)
{
    uint64_t now = ksys_now_ms();

    if (k->destroyed || k->state == KMGR_KERNEL_DEAD)
        return KSYS_EDIED;
    /* Not ready (queued for its start, its template's answer awaited, or not answering yet): nothing of a caller's runs, its
     * requests wait unsent; and a SIGINT before the kernel's handler is installed would kill it. */
    if (k->state == KMGR_KERNEL_STARTING || k->state == KMGR_KERNEL_RESTARTING)
        return 0;
    if (k->proc == NULL || k->proc->pid == 0)
        return KSYS_EDIED;
    if (k->interrupt_sent_at != 0 && now - k->interrupt_sent_at < KMGR_INTERRUPT_COALESCE_MS)
        return 0; /* the one in flight interrupts what this one would (see KMGR_INTERRUPT_COALESCE_MS) */
    k->interrupt_sent_at = now;
    /* a signal would reach bwrap, which dies of SIGINT and takes the sandbox along: the control channel instead */
    if (k->spec->interrupt_mode == KMGR_INTERRUPT_SIGNAL && k->sandbox.kind == KSYS_SANDBOX_NONE) {
        kmgr_proc_signal(k->proc, SIGINT);
        return 0;
    }
    return kmgr_kernel_send(k, WIRE_CHANNEL_CONTROL, wire_msg_create("interrupt_request", k->session, NULL)) == 0 ? 0 : KSYS_EDIED;
}

void kmgr_kernel_set_tap_text_room(kmgr_kernel_t *k, uint64_t bytes)
{
    k->tap_text_room = bytes;
}

void kmgr_kernel_set_tap(kmgr_kernel_t *k, kmgr_tap_cb cb, void *data)
{
    k->tap = cb;
    k->tap_data = cb != NULL ? data : NULL;
    k->tap_text_room = UINT64_MAX;
}

int kmgr_kernel_send_parts(kmgr_kernel_t *k, wire_channel_t channel, const wire_frame_t *parts, size_t nparts)
{
    int ret;

    if ((channel != WIRE_CHANNEL_SHELL && channel != WIRE_CHANNEL_CONTROL && channel != WIRE_CHANNEL_STDIN) || nparts < 4)
        return KSYS_EINVAL;
    if (k->state == KMGR_KERNEL_DEAD || k->destroyed)
        return KSYS_EDIED;
    /* Until ready, iopub may not be subscribed yet: the request's output could be lost. */
    if (k->state != KMGR_KERNEL_IDLE && k->state != KMGR_KERNEL_BUSY)
        return KSYS_ENOTREADY;
    if ((ret = kmgr_channels_send_parts(&k->proc->channels, channel, parts, nparts)) != 0)
        return ret;
    /* Its place among shell messages: a probe after a lost connection is answered after it too. */
    if (channel == WIRE_CHANNEL_SHELL)
        ++k->sent;
    return 0;
}

/* ---- from the loop ---- */

void kmgr_kernel_tick(kmgr_kernel_t *k, uint64_t now)
{
    const kmgr_config_t *config = &k->mgr->config;
    char reason[256];

    kmgr_kernel_flush_deferred(k);
    /* no process yet: queued, or its fallback spawn due (its start-up timeout counts from its spawn) */
    if (k->destroyed || k->proc == NULL || k->proc->spawn_due)
        return;
    if (k->state == KMGR_KERNEL_DEAD) {
        kmgr_proc_reap(k->proc);
        return;
    }
    if (kmgr_proc_reap(k->proc)) {
        uint64_t generation = k->generation;
        /* What it said before exiting (a last reply, its output) still belongs to its requests. */
        kmgr_channels_drain_all(&k->proc->channels);
        if (k->generation != generation || k->destroyed)
            return;
        kmgr_proc_describe_exit(k->proc, reason, sizeof(reason));
        kmgr_kernel_incarnation_ended(k, reason, 0);
        return;
    }
    kmgr_channels_tick(&k->proc->channels, now);
    switch (k->state) {
    case KMGR_KERNEL_STARTING:
    case KMGR_KERNEL_RESTARTING:
        if (now - k->started_at >= config->startup_timeout_ms) {
            snprintf(reason, sizeof(reason), "did not become ready within %u ms", config->startup_timeout_ms);
            kmgr_kernel_incarnation_ended(k, reason, 1);
        } else if (now >= k->next_info_at) {
            send_kernel_info(k);
            k->next_info_at = kmgr_kernel_info_next(k, config->kernel_info_retry_ms, now);
        }
        break;
    default:
        if (kmgr_kernel_heartbeats(k, now))
            return;
        kmgr_requests_finish_replied_without_idle(k, now);
        break;
    }
}

void kmgr_kernel_run_pending(kmgr_kernel_t *k)
{
    kmgr_kernel_flush_deferred(k);
    if (k->destroyed || k->proc == NULL || !k->proc->channels.redrain)
        return;
    kmgr_channels_drain_all(&k->proc->channels);
}
