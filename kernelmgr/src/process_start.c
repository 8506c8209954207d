/* kernelmgr/src/process_start.c: how a kernel process starts (process.h): spawned, or forked from a template when its answer
 * comes (template.h), spawned after all when the template cannot; the figures of which path each start took. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "ksys/log.h"
#include "ksys/spawn.h"
#include "manager_private.h"
#include "process.h"
#include "template.h"

static const char *const fallback_names[KMGR_FALLBACK_COUNT] = {"unavailable", "queue_full", "failed", "timeout",
                                                                "died",        "protocol",   "setup"};

const char *kmgr_fallback_name(kmgr_fallback_t reason)
{
    return reason < KMGR_FALLBACK_COUNT ? fallback_names[reason] : "unknown";
}

void kmgr_manager_start_stats(const kmgr_manager_t *mgr, kmgr_start_stats_t *out)
{
    *out = mgr->start_stats;
    out->templates_running = 0;
    for (const kmgr_link_t *link = mgr->templates.next; link != &mgr->templates; link = link->next) {
        const kmgr_template_t *tpl = KMGR_FROM_MEMBER(kmgr_template_t, link, (kmgr_link_t *)link);
        out->templates_running += tpl->ready && tpl->fd != -1;
    }
}

void kmgr_proc_start_free(kmgr_proc_start_t *start)
{
    if (start == NULL)
        return;
    if (start->log_fd != -1)
        close(start->log_fd);
    for (int i = 0; i != KSYS_CG_COUNT; ++i)
        if (start->cgroup_fds[i] != -1)
            close(start->cgroup_fds[i]);
    ksys_strv_free(start->argv);
    ksys_strv_free(start->envp);
    free(start->path);
    free(start->program);
    free(start->cwd);
    free(start->log_path);
    free(start->fallback_why);
    free(start->fallback_spec);
    free(start);
}

/* `envp` with JPY_PARENT_PID=<kgate's pid> (ipykernel exits when that process is gone), in a new vector of borrowed strings
 * but that one, which is `var`. */
static char **with_parent_pid(char *const *envp, char *var, size_t varsize)
{
    size_t n = 0, o = 0;
    char **out;

    while (envp[n] != NULL)
        ++n;
    out = wire_calloc(n + 2, sizeof(char *));
    for (size_t i = 0; i != n; ++i)
        if (strncmp(envp[i], "JPY_PARENT_PID=", 15) != 0)
            out[o++] = envp[i];
    snprintf(var, varsize, "JPY_PARENT_PID=%d", (int)getpid());
    out[o] = var;
    return out;
}

int kmgr_proc_start_spawn(kmgr_proc_t *proc, const kmgr_proc_start_t *start, char *why, size_t whylen)
{
    char var[48], **envp = NULL;
    ksys_spawn_failure_t failure;
    int ret;

    /* a kernel that might have been forked has no JPY_PARENT_PID yet: its parent would have been its template */
    if (!proc->sandboxed)
        envp = with_parent_pid(start->envp, var, sizeof(var));
    ksys_spawn_options_t opts = {.path = start->path,
                                 .argv = start->argv,
                                 .envp = envp != NULL ? envp : start->envp,
                                 .fds = {KSYS_SPAWN_DEVNULL, start->log_fd, start->log_fd},
                                 .cwd = start->cwd,
                                 .cgroup_fds = start->cgroup_fds,
                                 .ncgroup_fds = KSYS_CG_COUNT,
                                 .rlimits = start->rlimits,
                                 .nrlimits = start->nrlimits};
    ret = ksys_spawn(&opts, &proc->pid, &failure);
    free(envp);
    if (ret == 0)
        return 0;
    proc->pid = 0;
    if (strcmp(failure.step, "chdir") == 0)
        snprintf(why, whylen, "cannot change to directory %s: %s", start->cwd, strerror(failure.err));
    else if (strcmp(failure.step, "exec") == 0)
        snprintf(why, whylen, "cannot execute %s: %s", start->program, strerror(failure.err));
    else
        snprintf(why, whylen, "cannot start %s: %s: %s", start->program, failure.step, strerror(failure.err));
    return ret;
}

/* The forked kernel `pid` becomes proc's: watched by its pidfd, in its cgroups (joined by pid before it can run any user
 * code: that comes through its channels, once it is ready). Returns 0, or -1 with `why` set and the kernel killed. */
static int adopt_forked(kmgr_proc_t *proc, kmgr_template_t *tpl, pid_t pid, char *why, size_t whylen)
{
    const kmgr_proc_start_t *start = proc->start;
    int pidfd;

    if ((pidfd = pidfd_open(pid, 0)) == -1) {
        snprintf(why, whylen, "cannot watch the forked kernel (pidfd_open: %s)", strerror(errno));
        kill(pid, SIGKILL);
        return -1;
    }
    for (int i = 0; i != KSYS_CG_COUNT; ++i) {
        if (start->cgroup_fds[i] != -1 && dprintf(start->cgroup_fds[i], "%d", (int)pid) < 0) {
            snprintf(why, whylen, "cannot move the forked kernel into its cgroup (%s)", strerror(errno));
            pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
            close(pidfd);
            return -1;
        }
    }
    proc->pid = pid;
    proc->pidfd = pidfd;
    proc->forked = 1;
    proc->tpl = tpl;
    kmgr_list_append(&tpl->children, &proc->tpl_link);
    return 0;
}

void kmgr_proc_fork_answer(kmgr_proc_t *proc, kmgr_template_t *tpl, pid_t pid, kmgr_fallback_t reason, const char *why)
{
    kmgr_proc_start_t *start = proc->start;
    kmgr_manager_t *mgr = start->mgr;
    char text[KMGR_TPL_MAX_TEXT + 128];

    if (pid > 0) {
        if (adopt_forked(proc, tpl, pid, text, sizeof(text)) == 0) {
            ++mgr->start_stats.forked;
            /* given up while its fork was asked for: it goes through the shutdown sequence it is in */
            if (proc->phase != KMGR_PROC_RUNNING)
                kmgr_proc_signal(proc, SIGKILL);
            else /* the template answers once the child has bound its sockets (a warm kernel's): connect now, not a tick later */
                kmgr_channels_retry_now(&proc->channels);
            goto Exit;
        }
        why = text;
    }
    if (proc->phase != KMGR_PROC_RUNNING)
        goto Exit; /* nobody waits for it: no spawn, found gone at once */
    start->fallback = reason;
    start->fallback_why = wire_strdup(why);
    start->fallback_spec = wire_strdup(tpl->spec->name);
    proc->spawn_due = 1;
    /* A template that dies or times out answers every start waiting on it at once: spawned here, they would all start full
     * interpreters together, past max_starting (50 at once from a burst). They go back through the start queue instead. */
    if (mgr->config.max_starting != 0) {
        ksys_log_info("the %s kernel will be spawned, not forked, in its turn (%s: %s)", tpl->spec->name,
                      kmgr_fallback_name(reason), why);
        kmgr_manager_schedule(mgr);
        return;
    }
    kmgr_proc_spawn_fallback(proc);
    return;
Exit:
    proc->start = NULL;
    kmgr_proc_start_free(start);
}

int kmgr_proc_refused_fork_waits(kmgr_proc_t *proc, kmgr_proc_start_t *start, const kmgr_kernelspec_t *spec, kmgr_fallback_t reason,
                                 const char *why)
{
    kmgr_manager_t *mgr = start->mgr;
    unsigned launching, queued;

    if (mgr->config.max_starting == 0)
        return 0;
    /* this start is not among them yet (its kernel has no proc) */
    kmgr_kernels_count_starting(mgr, &launching, &queued);
    if (launching < mgr->config.max_starting)
        return 0;
    start->fallback = reason;
    start->fallback_why = wire_strdup(why);
    start->fallback_spec = wire_strdup(spec->name);
    proc->start = start;
    proc->spawn_due = 1;
    ksys_log_info("the %s kernel will be spawned, not forked, in its turn (%s: %s)", spec->name, kmgr_fallback_name(reason), why);
    kmgr_manager_schedule(mgr);
    return 1;
}

int kmgr_proc_spawn_fallback(kmgr_proc_t *proc)
{
    kmgr_proc_start_t *start = proc->start;
    kmgr_manager_t *mgr = start->mgr;
    const char *name = kmgr_fallback_name(start->fallback);
    char text[KMGR_TPL_MAX_TEXT + 128];
    int ret;

    proc->spawn_due = 0;
    ksys_log_warn("the %s kernel is spawned, not forked (%s: %s)", start->fallback_spec, name, start->fallback_why);
    if ((ret = kmgr_proc_start_spawn(proc, start, text, sizeof(text))) == 0) {
        ++mgr->start_stats.fallback[start->fallback];
    } else {
        /* reported as the kernel's death before it was ready, as a spawned kernel's failed exec would be */
        ksys_log_error("cannot start a %s kernel: %s", start->fallback_spec, text);
        proc->start_error = wire_strdup(text);
        proc->wstatus = -1;
    }
    proc->start = NULL;
    kmgr_proc_start_free(start);
    return ret;
}
