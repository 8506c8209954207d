/* kernelmgr/src/manager.c: the manager: runtime dir, ZMQ context, kernel list, shutdown sequences. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "ksys/rmtree.h"
#include "ksys/spawn.h"
#include "manager_private.h"
#include "template.h"

static void fill_defaults(kmgr_config_t *c)
{
    if (c->heartbeat_interval_ms == 0)
        c->heartbeat_interval_ms = 500;
    if (c->heartbeat_timeout_ms == 0)
        c->heartbeat_timeout_ms = 1500;
    if (c->heartbeat_kill_ms != 0 && c->heartbeat_kill_ms < c->heartbeat_timeout_ms)
        c->heartbeat_kill_ms = c->heartbeat_timeout_ms;
    if (c->restart_stable_ms == 0)
        c->restart_stable_ms = 10000;
    if (c->startup_timeout_ms == 0)
        c->startup_timeout_ms = 60000;
    if (c->shutdown_grace_ms == 0)
        c->shutdown_grace_ms = 2000;
    if (c->kernel_info_retry_ms == 0)
        c->kernel_info_retry_ms = 250;
    if (c->max_message_bytes == 0 || c->max_message_bytes > INT64_MAX)
        c->max_message_bytes = KMGR_DEFAULT_MAX_MESSAGE_BYTES;
    if (c->template_max_pending == 0)
        c->template_max_pending = KMGR_DEFAULT_TEMPLATE_MAX_PENDING;
}

/* `path` with its symbolic links resolved (it exists): sandboxes hide and refuse it by the path bwrap resolves to. */
static char *canonical(char *path)
{
    char *real = realpath(path, NULL);

    if (real == NULL)
        return path;
    free(path);
    return real;
}

static char *make_runtime_dir(const char *given, int *owns)
{
    struct stat st;
    const char *tmp;
    char *path;

    if (given != NULL) {
        *owns = 0;
        if (mkdir(given, 0700) != 0 && errno != EEXIST)
            return NULL;
        if (stat(given, &st) != 0 || !S_ISDIR(st.st_mode))
            return NULL;
        return canonical(wire_strdup(given));
    }
    *owns = 1;
    if ((tmp = getenv("TMPDIR")) == NULL || tmp[0] == '\0')
        tmp = "/tmp";
    path = wire_malloc(strlen(tmp) + sizeof("/kgate-XXXXXX"));
    sprintf(path, "%s/kgate-XXXXXX", tmp);
    /* mkdtemp creates the directory with mode 0700. */
    if (mkdtemp(path) == NULL) {
        free(path);
        return NULL;
    }
    return canonical(path);
}

const char *kmgr_manager_limits_mechanism(const kmgr_manager_t *mgr)
{
    return mgr->cgroups.mechanism;
}

const char *kmgr_manager_bwrap_path(const kmgr_manager_t *mgr)
{
    return mgr->bwrap_path;
}

int kmgr_manager_create(const kmgr_config_t *config, const kmgr_loop_ops_t *ops, void *loop, kmgr_manager_t **out)
{
    kmgr_manager_t *mgr = wire_calloc(1, sizeof(*mgr));

    if (config != NULL)
        mgr->config = *config;
    fill_defaults(&mgr->config);
    mgr->ops = ops;
    mgr->loop = loop;
    kmgr_list_init(&mgr->kernels);
    kmgr_list_init(&mgr->shutting_down);
    kmgr_list_init(&mgr->templates);
    if ((mgr->runtime_dir = make_runtime_dir(mgr->config.runtime_dir, &mgr->owns_runtime_dir)) == NULL)
        goto Error;
    mgr->config.runtime_dir = mgr->runtime_dir;
    if (ksys_instance_init(&mgr->instance, mgr->runtime_dir) != 0)
        goto Error;
    ksys_cgroups_init(&mgr->cgroups);
    mgr->bwrap_path = ksys_find_executable(mgr->config.bwrap_path != NULL ? mgr->config.bwrap_path : "bwrap");
    *out = mgr;
    return 0;

Error:
    if (mgr->runtime_dir != NULL && mgr->owns_runtime_dir)
        rmdir(mgr->runtime_dir);
    free(mgr->runtime_dir);
    free(mgr);
    return KSYS_EIO;
}

/* Frees kernels destroyed since the last sweep; only from the loop, outside every callback. */
static void sweep_destroyed(kmgr_manager_t *mgr)
{
    kmgr_link_t *link, *next;

    for (link = mgr->kernels.next; link != &mgr->kernels; link = next) {
        kmgr_kernel_t *kernel = kmgr_kernel_from_link(link);
        next = link->next;
        if (kmgr_kernel_is_destroyed(kernel)) {
            kmgr_link_unlink(link);
            kmgr_kernel_free(kernel);
        }
    }
}

void kmgr_manager_destroy(kmgr_manager_t *mgr)
{
    kmgr_link_t *link;

    if (mgr == NULL)
        return;
    kmgr_manager_shutdown_all(mgr);
    sweep_destroyed(mgr);
    /* No kernel may outlive the manager: whatever is still in its shutdown sequence dies now. */
    while (!kmgr_list_empty(&mgr->shutting_down)) {
        kmgr_proc_t *proc = KMGR_FROM_MEMBER(kmgr_proc_t, link, mgr->shutting_down.next);
        kmgr_link_unlink(&proc->link);
        if (proc->pid != 0) {
            kmgr_proc_signal(proc, SIGKILL);
            kmgr_proc_reap_blocking(proc);
        }
        kmgr_proc_free(proc);
    }
    for (link = mgr->kernels.next; link != &mgr->kernels; link = mgr->kernels.next)
        kmgr_link_unlink(link); /* unreachable: shutdown_all + sweep emptied it */
    kmgr_templates_dispose(mgr);
    ksys_cgroups_dispose(&mgr->cgroups);
    free(mgr->bwrap_path);
    ksys_instance_dispose(&mgr->instance);
    if (mgr->owns_runtime_dir)
        ksys_rmtree(mgr->runtime_dir);
    free(mgr->runtime_dir);
    free(mgr);
}

void kmgr_manager_schedule(kmgr_manager_t *mgr)
{
    if (mgr->scheduled)
        return;
    mgr->scheduled = 1;
    mgr->ops->schedule(mgr->loop);
}

static void send_shutdown_request(kmgr_proc_t *proc)
{
    char session[WIRE_UUID_STRLEN + 1];
    wire_msg_t *msg;

    wire_uuid4(session);
    msg = wire_msg_create("shutdown_request", session, json_pack("{s:b}", "restart", 0));
    kmgr_channels_send(&proc->channels, WIRE_CHANNEL_CONTROL, msg);
    wire_msg_destroy(msg);
}

void kmgr_manager_adopt(kmgr_manager_t *mgr, kmgr_proc_t *proc, int polite)
{
    /* The control socket stays open (unwatched) to carry shutdown_request; it closes when the
     * process is reaped. Closing the others now means no stale message can reach anyone. */
    kmgr_channels_close(&proc->channels, 1);
    kmgr_list_append(&mgr->shutting_down, &proc->link);
    if (kmgr_proc_reap(proc))
        return;
    if (polite && kmgr_channels_is_open(&proc->channels, WIRE_CHANNEL_CONTROL)) {
        send_shutdown_request(proc);
        proc->phase = KMGR_PROC_SHUTDOWN;
    } else {
        kmgr_proc_signal(proc, SIGKILL);
        proc->phase = KMGR_PROC_KILLED;
    }
    proc->deadline = ksys_now_ms() + mgr->config.shutdown_grace_ms;
}

static void tick_shutdown(kmgr_manager_t *mgr, kmgr_proc_t *proc, uint64_t now)
{
    if (kmgr_proc_reap(proc)) {
        kmgr_link_unlink(&proc->link);
        kmgr_proc_free(proc);
        return;
    }
    if (now < proc->deadline)
        return;
    switch (proc->phase) {
    case KMGR_PROC_RUNNING:
    case KMGR_PROC_SHUTDOWN:
        kmgr_proc_signal(proc, SIGTERM);
        proc->phase = KMGR_PROC_TERMED;
        proc->deadline = now + mgr->config.shutdown_grace_ms;
        break;
    case KMGR_PROC_TERMED:
        kmgr_proc_signal(proc, SIGKILL);
        proc->phase = KMGR_PROC_KILLED;
        proc->deadline = now + mgr->config.shutdown_grace_ms;
        break;
    case KMGR_PROC_KILLED:
        /* Still not reaped (uninterruptible sleep?): keep killing it until it goes. */
        kmgr_proc_signal(proc, SIGKILL);
        proc->deadline = now + mgr->config.shutdown_grace_ms;
        break;
    }
}

void kmgr_manager_tick(kmgr_manager_t *mgr)
{
    uint64_t now = ksys_now_ms();
    kmgr_link_t *link, *next;

    /* first: the wait statuses of forked kernels that the kernels' reaping below reads */
    kmgr_templates_tick(mgr, now);
    /* Destroyed kernels stay linked until the sweep, so `next` stays valid whatever callbacks do. */
    for (link = mgr->kernels.next; link != &mgr->kernels; link = next) {
        kmgr_kernel_t *kernel = kmgr_kernel_from_link(link);
        next = link->next;
        if (!kmgr_kernel_is_destroyed(kernel))
            kmgr_kernel_tick(kernel, now);
    }
    for (link = mgr->shutting_down.next; link != &mgr->shutting_down; link = next) {
        next = link->next;
        tick_shutdown(mgr, KMGR_FROM_MEMBER(kmgr_proc_t, link, link), now);
    }
    kmgr_kernels_start_queued(mgr);
    if (mgr->cgroups.nstale != 0)
        ksys_cgroups_tick(&mgr->cgroups);
    sweep_destroyed(mgr);
}

void kmgr_manager_run_pending(kmgr_manager_t *mgr)
{
    kmgr_link_t *link, *next;

    mgr->scheduled = 0;
    for (link = mgr->kernels.next; link != &mgr->kernels; link = next) {
        kmgr_kernel_t *kernel = kmgr_kernel_from_link(link);
        next = link->next;
        if (!kmgr_kernel_is_destroyed(kernel))
            kmgr_kernel_run_pending(kernel);
    }
    /* a kernel that became ready scheduled this pass: the start it lets through goes now, not at the next tick (a forked
     * kernel starts in ~0.1 s: up to half a tick lost per start, 2 at a time, made a burst wait for ticks) */
    kmgr_kernels_start_queued(mgr);
    sweep_destroyed(mgr);
}

/*
 * kgate's exit ends every kernel at once (kmgr_manager_yield_cpu), each end Python work in the kernel (~15 ms of CPU and its
 * memory's teardown): hundreds of them starved kgate, whose grace timers and reaping then ran seconds late (300 kernels on 2 cores:
 * kgate made twenty system calls in the 5 s after its requests, each poll waiting up to 1.2 s for a core). A kernel is a session of
 * its own, so with the scheduler's autogroups (sched_autogroup_enabled) its whole session weighs as much as kgate's,
 * whatever its threads' nice: both go to the lowest (every thread of its group: PRIO_PGRP; its session: /proc/<pid>/autogroup).
 * kgate then keeps its deadlines; a kernel that ends in time ends as politely as before. Best effort: either may be missing.
 */
static void lower_priority(pid_t pid)
{
    char path[64];
    int fd;

    setpriority(PRIO_PGRP, (id_t)pid, 19);
    snprintf(path, sizeof(path), "/proc/%d/autogroup", (int)pid);
    if ((fd = open(path, O_WRONLY | O_CLOEXEC)) >= 0) {
        if (write(fd, "19", 2) != 2) {
            /* not this kernel's to refuse: an autogroup of someone else's, or none */
        }
        close(fd);
    }
}

void kmgr_manager_yield_cpu(kmgr_manager_t *mgr)
{
    kmgr_link_t *link;

    for (link = mgr->kernels.next; link != &mgr->kernels; link = link->next)
        if (kmgr_kernel_pid(kmgr_kernel_from_link(link)) > 0)
            lower_priority(kmgr_kernel_pid(kmgr_kernel_from_link(link)));
    for (link = mgr->shutting_down.next; link != &mgr->shutting_down; link = link->next)
        if (KMGR_FROM_MEMBER(kmgr_proc_t, link, link)->pid > 0)
            lower_priority(KMGR_FROM_MEMBER(kmgr_proc_t, link, link)->pid);
}

void kmgr_manager_shutdown_all(kmgr_manager_t *mgr)
{
    kmgr_link_t *link;

    for (link = mgr->kernels.next; link != &mgr->kernels; link = link->next) {
        kmgr_kernel_t *kernel = kmgr_kernel_from_link(link);
        if (!kmgr_kernel_is_destroyed(kernel))
            kmgr_kernel_destroy(kernel);
    }
}

size_t kmgr_manager_num_processes(const kmgr_manager_t *mgr)
{
    size_t n = 0;
    const kmgr_link_t *link;

    for (link = mgr->kernels.next; link != &mgr->kernels; link = link->next)
        if (kmgr_kernel_pid(kmgr_kernel_from_link((kmgr_link_t *)link)) != 0)
            ++n;
    for (link = mgr->shutting_down.next; link != &mgr->shutting_down; link = link->next)
        if (KMGR_FROM_MEMBER(kmgr_proc_t, link, link)->pid != 0)
            ++n;
    return n;
}

const char *kmgr_manager_runtime_dir(const kmgr_manager_t *mgr)
{
    return mgr->runtime_dir;
}

const char *kmgr_manager_instance_env(const kmgr_manager_t *mgr)
{
    return mgr->instance.env;
}

size_t kmgr_manager_swept(const kmgr_manager_t *mgr)
{
    return mgr->instance.swept;
}

void kmgr_manager_lost_output(const kmgr_manager_t *mgr, kmgr_lost_output_t *out)
{
    *out = mgr->lost_output;
}
