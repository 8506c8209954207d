/* kernelmgr/src/template.c: kernel templates (template.h): start, restart, the fork exchange, wait statuses. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "ksys/log.h"
#include "ksys/spawn.h"
#include "manager_private.h"
#include "process.h"
#include "template.h"
#include "tplproto.h"

extern char **environ;

int kmgr_template_eligible(const kmgr_kernelspec_t *spec)
{
    return spec->argc >= 3 && strcmp(spec->argv[1], "-m") == 0 &&
           (strcmp(spec->argv[2], "ipykernel_launcher") == 0 || strcmp(spec->argv[2], "ipykernel") == 0);
}

kmgr_template_t *kmgr_template_find(kmgr_manager_t *mgr, const kmgr_kernelspec_t *spec)
{
    for (kmgr_link_t *link = mgr->templates.next; link != &mgr->templates; link = link->next) {
        kmgr_template_t *tpl = KMGR_FROM_MEMBER(kmgr_template_t, link, link);
        if (tpl->spec == spec)
            return tpl->ready && tpl->fd != -1 ? tpl : NULL;
    }
    return NULL;
}

/* Its forked kernels will hear no wait status from it any more: they are found gone by their pidfd alone. */
static void orphan_children(kmgr_template_t *tpl)
{
    while (!kmgr_list_empty(&tpl->children)) {
        kmgr_proc_t *proc = KMGR_FROM_MEMBER(kmgr_proc_t, tpl_link, tpl->children.next);
        kmgr_link_unlink(&proc->tpl_link);
        proc->tpl = NULL;
    }
}

/* Kills the template (if it runs) and reaps it; the next start is due after the backoff. */
static void stop(kmgr_template_t *tpl, const char *why)
{
    uint64_t backoff;

    if (tpl->fd != -1) {
        close(tpl->fd);
        tpl->fd = -1;
    }
    if (tpl->pid != 0) {
        kill(tpl->pid, SIGKILL);
        while (waitpid(tpl->pid, NULL, 0) == -1 && errno == EINTR)
            ;
        tpl->pid = 0;
    }
    if (!tpl->ready)
        ++tpl->deaths_in_row;
    tpl->ready = 0;
    tpl->rlen = 0;
    orphan_children(tpl);
    backoff = tpl->deaths_in_row == 0 ? 0 : (uint64_t)1000 << (tpl->deaths_in_row < 6 ? tpl->deaths_in_row - 1 : 5);
    if (backoff > KMGR_TPL_MAX_BACKOFF_MS)
        backoff = KMGR_TPL_MAX_BACKOFF_MS;
    tpl->restart_at = ksys_now_ms() + backoff;
    if (why != NULL)
        ksys_log_warn("the %s kernel template %s; kernels start without it until another is ready (in %llu ms)", tpl->spec->name,
                      why, (unsigned long long)backoff);
}

static void start(kmgr_manager_t *mgr, kmgr_template_t *tpl)
{
    static char pydevd[] = "PYDEVD_DISABLE_FILE_VALIDATION=1";
    char **envp = NULL, *argv[3];
    size_t n = 0, cap = 0;
    int sv[2], keep;
    ksys_spawn_failure_t failure;
    ksys_spawn_options_t opts;

    tpl->started_at = ksys_now_ms();
    ++tpl->starts;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        stop(tpl, "could not start (socketpair failed)");
        return;
    }
    for (char **e = environ; e != NULL && *e != NULL; ++e) {
        /* the template's own mark and settings below, set once each */
        if (strncmp(*e, KSYS_INSTANCE_VAR "=", sizeof(KSYS_INSTANCE_VAR)) == 0 || strncmp(*e, "JPY_PARENT_PID=", 15) == 0 ||
            strncmp(*e, "PYDEVD_DISABLE_FILE_VALIDATION=", 31) == 0)
            continue;
        if (n + 4 > cap)
            envp = wire_realloc(envp, (cap = cap * 2 + 64) * sizeof(char *));
        envp[n++] = *e;
    }
    if (n + 4 > cap)
        envp = wire_realloc(envp, (cap = cap + 4) * sizeof(char *));
    /* the forked kernels' environment carries the mark in /proc/<pid>/environ: the template's, inherited by the fork */
    envp[n++] = mgr->instance.env;
    envp[n++] = pydevd;
    envp[n] = NULL;
    argv[0] = tpl->python;
    argv[1] = (char *)mgr->config.template_script;
    argv[2] = NULL;
    keep = sv[1];
    opts = (ksys_spawn_options_t){
        .path = tpl->python, .argv = argv, .envp = envp, .fds = {KSYS_SPAWN_DEVNULL, 2, 2}, .keep_fds = &keep, .nkeep_fds = 1};
    if (ksys_spawn(&opts, &tpl->pid, &failure) != 0) {
        char why[256];
        tpl->pid = 0;
        close(sv[0]);
        close(sv[1]);
        free(envp);
        snprintf(why, sizeof(why), "could not start (%s: %s)", failure.step, strerror(failure.err));
        stop(tpl, why);
        return;
    }
    free(envp);
    close(sv[1]);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    tpl->fd = sv[0];
}

int kmgr_manager_use_template(kmgr_manager_t *mgr, const kmgr_kernelspec_t *spec)
{
    kmgr_template_t *tpl;
    char *python;

    if (mgr->config.template_script == NULL || !kmgr_template_eligible(spec))
        return KSYS_EINVAL;
    for (kmgr_link_t *link = mgr->templates.next; link != &mgr->templates; link = link->next)
        if (KMGR_FROM_MEMBER(kmgr_template_t, link, link)->spec == spec)
            return 0;
    if ((python = ksys_find_executable(spec->argv[0])) == NULL)
        return KSYS_ESPAWN;
    tpl = wire_calloc(1, sizeof(*tpl));
    tpl->spec = spec;
    tpl->python = python;
    tpl->fd = -1;
    tpl->rbuf = wire_malloc(KMGR_TPL_MAX_FRAME + 4);
    kmgr_list_init(&tpl->children);
    kmgr_list_append(&mgr->templates, &tpl->link);
    start(mgr, tpl);
    return 0;
}

static void deliver_status(kmgr_template_t *tpl, pid_t pid, int wstatus)
{
    for (kmgr_link_t *link = tpl->children.next; link != &tpl->children; link = link->next) {
        kmgr_proc_t *proc = KMGR_FROM_MEMBER(kmgr_proc_t, tpl_link, link);
        if (proc->pid == pid) {
            proc->tpl_status_known = 1;
            proc->wstatus = wstatus;
            kmgr_link_unlink(&proc->tpl_link);
            proc->tpl = NULL;
            return;
        }
    }
}

/* Parses what is buffered; a frame not for `want` (0: none) is handled here. Returns 1 when `*got` holds the answer to
 * request `want`, 0 when none was found, -1 when the template sent nonsense. */
static int parse_buffered(kmgr_template_t *tpl, uint64_t want, kmgr_tpl_reply_t *got)
{
    size_t at = 0;
    int found = 0;
    ssize_t n;

    while (!found && (n = kmgr_tpl_parse_reply(tpl->rbuf + at, tpl->rlen - at, got)) > 0) {
        at += (size_t)n;
        switch (got->kind) {
        case KMGR_TPL_READY:
            if (!tpl->ready)
                ksys_log_info("the %s kernel template (pid %d) is ready after %llu ms: kernels are forked from it", tpl->spec->name,
                              (int)tpl->pid, (unsigned long long)(ksys_now_ms() - tpl->started_at));
            tpl->ready = 1;
            tpl->deaths_in_row = 0;
            break;
        case KMGR_TPL_EXITED:
            deliver_status(tpl, got->pid, got->wstatus);
            break;
        default:
            found = want != 0 && got->id == want;
            break;
        }
    }
    memmove(tpl->rbuf, tpl->rbuf + at, tpl->rlen - at);
    tpl->rlen -= at;
    return n < 0 ? -1 : found;
}

/* Reads what is there: 1 when it read something, 0 when nothing was there, -1 at end-of-file or an error (the template is
 * gone or broken). */
static int read_some(kmgr_template_t *tpl)
{
    for (;;) {
        ssize_t n = read(tpl->fd, tpl->rbuf + tpl->rlen, KMGR_TPL_MAX_FRAME + 4 - tpl->rlen);
        if (n > 0) {
            tpl->rlen += (size_t)n;
            return 1;
        }
        if (n == -1 && errno == EINTR)
            continue;
        return n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : -1;
    }
}

/* Its socket reached end-of-file: it is exiting (a template closes it only by dying). Reaps it, waiting a moment, and says how
 * it ended in `why`; one still alive then is left to stop(), which kills it. */
static void gone(kmgr_template_t *tpl, char *why, size_t whylen)
{
    int status;

    snprintf(why, whylen, "closed its socket");
    for (int waited = 0; tpl->pid != 0 && waited < 100; waited += 5) {
        if (waitpid(tpl->pid, &status, WNOHANG) == tpl->pid) {
            tpl->pid = 0;
            if (WIFSIGNALED(status))
                snprintf(why, whylen, "died (killed by signal %d)", WTERMSIG(status));
            else
                snprintf(why, whylen, "died (exited with code %d)", WEXITSTATUS(status));
            return;
        }
        usleep(5000);
    }
}

void kmgr_template_drain(kmgr_template_t *tpl)
{
    kmgr_tpl_reply_t reply;
    int got;

    while (tpl->fd != -1) {
        got = read_some(tpl);
        if (parse_buffered(tpl, 0, &reply) < 0) {
            stop(tpl, "sent a frame kgate cannot parse");
            return;
        }
        if (got < 0) {
            char why[96];
            gone(tpl, why, sizeof(why));
            stop(tpl, why);
            return;
        }
        if (got == 0)
            return;
    }
}

/* Waits until `fd` is ready for `events` or `deadline` passes. Returns 1 when ready, 0 at the deadline. */
static int wait_fd(int fd, short events, uint64_t deadline)
{
    for (;;) {
        uint64_t now = ksys_now_ms();
        struct pollfd pfd = {.fd = fd, .events = events};
        int r;
        if (now >= deadline)
            return 0;
        r = poll(&pfd, 1, (int)(deadline - now));
        if (r > 0)
            return 1;
        if (r == -1 && errno != EINTR)
            return 0;
    }
}

int kmgr_template_fork(kmgr_template_t *tpl, const kmgr_tpl_fork_t *req, pid_t *pid, char *why, size_t whylen)
{
    kmgr_tpl_request_t r = {0};
    kmgr_tpl_reply_t reply;
    uint64_t id = ++tpl->next_id, deadline = ksys_now_ms() + KMGR_TPL_FORK_TIMEOUT_MS;
    size_t sent = 0;
    int ret = KSYS_ESPAWN, found = 0;

    kmgr_tpl_request_fork(&r, id);
    if (req->cwd != NULL)
        kmgr_tpl_request_add(&r, 'c', req->cwd);
    kmgr_tpl_request_add(&r, 'l', req->log_path);
    for (char *const *a = req->args; *a != NULL; ++a)
        kmgr_tpl_request_add(&r, 'a', *a);
    for (char *const *e = req->envp; *e != NULL; ++e)
        kmgr_tpl_request_add(&r, 'e', *e);
    for (size_t i = 0; i != req->nrlimits; ++i) {
        if (kmgr_tpl_request_rlimit(&r, req->rlimits[i].resource, req->rlimits[i].value) != 0) {
            snprintf(why, whylen, "the template cannot set resource limit %d", req->rlimits[i].resource);
            goto Exit;
        }
    }
    if (kmgr_tpl_request_end(&r) != 0) {
        snprintf(why, whylen, "the request is over %zu bytes (its environment?)", KMGR_TPL_MAX_FRAME);
        goto Exit;
    }
    while (sent != r.len) {
        ssize_t n = write(tpl->fd, r.data + sent, r.len - sent);
        if (n > 0) {
            sent += (size_t)n;
        } else if (n == -1 && (errno == EAGAIN || errno == EINTR)) {
            if (!wait_fd(tpl->fd, POLLOUT, deadline))
                break;
        } else {
            break;
        }
    }
    while (sent == r.len && (found = parse_buffered(tpl, id, &reply)) == 0) {
        if (!wait_fd(tpl->fd, POLLIN, deadline) || read_some(tpl) < 0)
            break;
    }
    if (found == 1 && reply.kind == KMGR_TPL_FORKED) {
        *pid = reply.pid;
        ++tpl->forks;
        ret = 0;
    } else if (found == 1) {
        snprintf(why, whylen, "the template could not fork the kernel: %s", reply.text);
    } else {
        snprintf(why, whylen, "the template did not answer");
        stop(tpl, found < 0 ? "sent a frame kgate cannot parse" : "did not answer a fork within its timeout: killed");
    }
Exit:
    kmgr_tpl_request_free(&r);
    return ret;
}

/* Its cgroups are joined here, by pid, before it can run any user code: that comes through its channels, once it is ready. */
int kmgr_template_fork_proc(kmgr_template_t *tpl, kmgr_proc_t *proc, char **argv, char **envp, const char *cwd,
                            const char *log_path, const int *cgroup_fds, const ksys_spawn_rlimit_t *rlimits, size_t nrlimits)
{
    kmgr_tpl_fork_t req = {
        .cwd = cwd, .log_path = log_path, .args = argv + 3, .envp = envp, .rlimits = rlimits, .nrlimits = nrlimits};
    char why[KMGR_TPL_MAX_TEXT + 64];
    pid_t pid;
    int pidfd;

    if (kmgr_template_fork(tpl, &req, &pid, why, sizeof(why)) != 0) {
        ksys_log_warn("%s; spawning the %s kernel instead", why, tpl->spec->name);
        return -1;
    }
    if ((pidfd = pidfd_open(pid, 0)) == -1) {
        ksys_log_warn("cannot watch a forked %s kernel (pidfd_open: %s); spawning it instead", tpl->spec->name, strerror(errno));
        kill(pid, SIGKILL);
        return -1;
    }
    for (int i = 0; i != KSYS_CG_COUNT; ++i) {
        if (cgroup_fds[i] != -1 && dprintf(cgroup_fds[i], "%d", (int)pid) < 0) {
            ksys_log_warn("cannot move a forked %s kernel into its cgroup (%s); spawning it instead", tpl->spec->name,
                          strerror(errno));
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

void kmgr_templates_tick(kmgr_manager_t *mgr, uint64_t now)
{
    for (kmgr_link_t *link = mgr->templates.next; link != &mgr->templates; link = link->next) {
        kmgr_template_t *tpl = KMGR_FROM_MEMBER(kmgr_template_t, link, link);
        if (tpl->pid != 0)
            kmgr_template_drain(tpl);
        else if (now >= tpl->restart_at)
            start(mgr, tpl);
    }
}

void kmgr_templates_dispose(kmgr_manager_t *mgr)
{
    while (!kmgr_list_empty(&mgr->templates)) {
        kmgr_template_t *tpl = KMGR_FROM_MEMBER(kmgr_template_t, link, mgr->templates.next);
        kmgr_link_unlink(&tpl->link);
        stop(tpl, NULL);
        free(tpl->rbuf);
        free(tpl->python);
        free(tpl);
    }
}
