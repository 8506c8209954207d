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

int kmgr_template_configured(kmgr_manager_t *mgr, const kmgr_kernelspec_t *spec)
{
    for (kmgr_link_t *link = mgr->templates.next; link != &mgr->templates; link = link->next)
        if (KMGR_FROM_MEMBER(kmgr_template_t, link, link)->spec == spec)
            return 1;
    return 0;
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

static void pending_free(kmgr_template_t *tpl, kmgr_tpl_pending_t *p)
{
    kmgr_link_unlink(&p->link);
    --tpl->npending;
    kmgr_tpl_request_free(&p->req);
    free(p);
}

/* Ends a pending request: its proc (if still waiting) gets `pid`, or is spawned for `reason`. The proc may start again at once
 * (a fallback spawn), never re-entering the template. */
static void pending_answer(kmgr_template_t *tpl, kmgr_tpl_pending_t *p, pid_t pid, kmgr_fallback_t reason, const char *why)
{
    kmgr_proc_t *proc = p->proc;

    pending_free(tpl, p);
    if (proc != NULL) {
        proc->start->pending = NULL;
        kmgr_proc_fork_answer(proc, tpl, pid, reason, why);
    } else if (pid > 0) {
        /* asked for a kernel that was given up meanwhile: nobody's (its template reaps it) */
        kill(pid, SIGKILL);
    }
}

/* Kills the template (if it runs) and reaps it; its pending starts are spawned (`reason`, `why`); the next start is due after
 * the backoff. */
static void stop(kmgr_template_t *tpl, kmgr_fallback_t reason, const char *why)
{
    uint64_t backoff;

    if (tpl->watch != NULL) {
        tpl->mgr->ops->unwatch(tpl->mgr->loop, tpl->watch);
        tpl->watch = NULL;
    }
    tpl->want_writable = 0;
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
    while (!kmgr_list_empty(&tpl->pending)) {
        char text[160];
        snprintf(text, sizeof(text), "its template %s", why != NULL ? why : "was stopped");
        pending_answer(tpl, KMGR_FROM_MEMBER(kmgr_tpl_pending_t, link, tpl->pending.next), 0, reason, text);
    }
}

static void on_readable(void *arg);

static void start(kmgr_manager_t *mgr, kmgr_template_t *tpl)
{
    static char pydevd[] = "PYDEVD_DISABLE_FILE_VALIDATION=1";
    static char merge[] = "--merge", imports_only[] = "--imports-only";
    char **envp = NULL, *argv[5];
    size_t n = 0, cap = 0, argc;
    int sv[2], keep;
    ksys_spawn_failure_t failure;
    ksys_spawn_options_t opts;

    tpl->started_at = ksys_now_ms();
    if (tpl->starts++ != 0)
        ++mgr->start_stats.template_restarts;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        stop(tpl, KMGR_FALLBACK_DIED, "could not start (socketpair failed)");
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
    argc = 0;
    argv[argc++] = tpl->python;
    argv[argc++] = (char *)mgr->config.template_script;
    if (mgr->config.template_merge)
        argv[argc++] = merge; /* its memory and its kernels' mergeable by KSM */
    if (mgr->config.template_imports_only)
        argv[argc++] = imports_only; /* kernels forked from the imports alone, not from a warm kernel */
    argv[argc] = NULL;
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
        stop(tpl, KMGR_FALLBACK_DIED, why);
        return;
    }
    free(envp);
    close(sv[1]);
    fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    tpl->fd = sv[0];
    /* its frames ("ready", answers, wait statuses) are read when the loop finds the socket readable */
    if ((tpl->watch = mgr->ops->watch(mgr->loop, tpl->fd, on_readable, tpl)) == NULL)
        stop(tpl, KMGR_FALLBACK_DIED, "could not be watched by the loop: killed");
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
    tpl->mgr = mgr;
    tpl->spec = spec;
    tpl->python = python;
    tpl->fd = -1;
    tpl->rbuf = wire_malloc(KMGR_TPL_MAX_FRAME + 4);
    kmgr_list_init(&tpl->children);
    kmgr_list_init(&tpl->pending);
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

static kmgr_tpl_pending_t *pending_find(kmgr_template_t *tpl, uint64_t id)
{
    for (kmgr_link_t *link = tpl->pending.next; link != &tpl->pending; link = link->next) {
        kmgr_tpl_pending_t *p = KMGR_FROM_MEMBER(kmgr_tpl_pending_t, link, link);
        if (p->id == id)
            return p;
    }
    return NULL;
}

/* Handles every whole frame buffered. Returns 0, or -1 when the template sent nonsense (a frame that does not parse, an
 * answer to no request that was written), `why` set. */
static int parse_buffered(kmgr_template_t *tpl, char *why, size_t whylen)
{
    size_t at = 0;
    ssize_t n;
    kmgr_tpl_reply_t got;
    int ret = 0;

    while (ret == 0 && tpl->fd != -1 && (n = kmgr_tpl_parse_reply(tpl->rbuf + at, tpl->rlen - at, &got)) != 0) {
        kmgr_tpl_pending_t *p;
        if (n < 0) {
            snprintf(why, whylen, "sent a frame kgate cannot parse: killed");
            ret = -1;
            break;
        }
        at += (size_t)n;
        switch (got.kind) {
        case KMGR_TPL_READY:
            if (!tpl->ready)
                ksys_log_info("the %s kernel template (pid %d) is ready after %llu ms: kernels are forked from it", tpl->spec->name,
                              (int)tpl->pid, (unsigned long long)(ksys_now_ms() - tpl->started_at));
            tpl->ready = 1;
            tpl->deaths_in_row = 0;
            break;
        case KMGR_TPL_EXITED:
            deliver_status(tpl, got.pid, got.wstatus);
            break;
        case KMGR_TPL_FORKED:
        case KMGR_TPL_FAILED:
            if ((p = pending_find(tpl, got.id)) == NULL || p->req.data != NULL) {
                if (got.kind == KMGR_TPL_FORKED && got.pid > 0)
                    kill(got.pid, SIGKILL);
                snprintf(why, whylen, "answered request %llu, which it was not asked: killed", (unsigned long long)got.id);
                ret = -1;
            } else if (got.kind == KMGR_TPL_FORKED) {
                ++tpl->forks;
                pending_answer(tpl, p, got.pid, KMGR_FALLBACK_SETUP, NULL);
            } else {
                char text[KMGR_TPL_MAX_TEXT + 64];
                snprintf(text, sizeof(text), "the template could not fork it: %s", got.text);
                pending_answer(tpl, p, 0, KMGR_FALLBACK_FAILED, text);
            }
            break;
        }
    }
    memmove(tpl->rbuf, tpl->rbuf + at, tpl->rlen - at);
    tpl->rlen -= at;
    return ret;
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
    char why[160];

    while (tpl->fd != -1) {
        int got = read_some(tpl);
        if (parse_buffered(tpl, why, sizeof(why)) < 0) {
            stop(tpl, KMGR_FALLBACK_PROTOCOL, why);
            return;
        }
        if (got < 0 && tpl->fd != -1) {
            if (tpl->rlen == KMGR_TPL_MAX_FRAME + 4) {
                /* a whole buffer and still no frame: kmgr_tpl_parse_reply refuses a length over the bound, so this is unreachable
                 * unless the bound and the buffer disagree */
                stop(tpl, KMGR_FALLBACK_PROTOCOL, "sent a frame over the bound: killed");
                return;
            }
            gone(tpl, why, sizeof(why));
            stop(tpl, KMGR_FALLBACK_DIED, why);
            return;
        }
        if (got == 0)
            return;
    }
}

static void on_readable(void *arg)
{
    kmgr_template_drain(arg);
}

static void flush(kmgr_template_t *tpl);

static void on_writable(void *arg)
{
    kmgr_template_t *tpl = arg;

    tpl->want_writable = 0;
    flush(tpl);
}

/* Writes what the socket takes of the queued requests, in order; the rest when the loop finds it writable. */
static void flush(kmgr_template_t *tpl)
{
    for (kmgr_link_t *link = tpl->pending.next; tpl->fd != -1 && link != &tpl->pending; link = link->next) {
        kmgr_tpl_pending_t *p = KMGR_FROM_MEMBER(kmgr_tpl_pending_t, link, link);
        while (p->req.data != NULL) {
            /* MSG_NOSIGNAL: a template dead and not yet found so is an EPIPE here, not kgate's death by SIGPIPE */
            ssize_t n = send(tpl->fd, p->req.data + p->written, p->req.len - p->written, MSG_NOSIGNAL);
            if (n > 0) {
                if ((p->written += (size_t)n) == p->req.len)
                    kmgr_tpl_request_free(&p->req);
            } else if (n == -1 && errno == EINTR) {
                continue;
            } else if (n == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
                if (!tpl->want_writable) {
                    tpl->want_writable = 1;
                    tpl->mgr->ops->notify_writable(tpl->mgr->loop, tpl->watch, on_writable, tpl);
                }
                return;
            } else {
                char why[96];
                snprintf(why, sizeof(why), "could not be written to (%s): killed", strerror(errno));
                stop(tpl, KMGR_FALLBACK_DIED, why);
                return;
            }
        }
    }
}

int kmgr_template_has_room(const kmgr_template_t *tpl)
{
    return tpl->npending < tpl->mgr->config.template_max_pending;
}

int kmgr_template_fork(kmgr_template_t *tpl, kmgr_proc_t *proc, kmgr_proc_start_t *start, char *why, size_t whylen)
{
    unsigned bound = tpl->mgr->config.template_max_pending;
    kmgr_tpl_pending_t *p;

    if (!kmgr_template_has_room(tpl)) {
        snprintf(why, whylen, "%u fork requests wait for their template's answers (the bound)", bound);
        return KMGR_FALLBACK_QUEUE_FULL;
    }
    p = wire_calloc(1, sizeof(*p));
    p->id = ++tpl->next_id;
    kmgr_tpl_request_fork(&p->req, p->id);
    if (start->cwd != NULL)
        kmgr_tpl_request_add(&p->req, 'c', start->cwd);
    kmgr_tpl_request_add(&p->req, 'l', start->log_path);
    /* the kernel's arguments past `<python> -m ipykernel_launcher` */
    for (char *const *a = start->argv + 3; *a != NULL; ++a)
        kmgr_tpl_request_add(&p->req, 'a', *a);
    for (char *const *e = start->envp; *e != NULL; ++e)
        kmgr_tpl_request_add(&p->req, 'e', *e);
    for (size_t i = 0; i != start->nrlimits; ++i) {
        if (kmgr_tpl_request_rlimit(&p->req, start->rlimits[i].resource, start->rlimits[i].value) != 0) {
            snprintf(why, whylen, "the template cannot set resource limit %d", start->rlimits[i].resource);
            goto Refused;
        }
    }
    if (kmgr_tpl_request_end(&p->req) != 0) {
        snprintf(why, whylen, "the fork request is over %zu bytes (its environment?)", KMGR_TPL_MAX_FRAME);
        goto Refused;
    }
    p->proc = proc;
    p->deadline = ksys_now_ms() + KMGR_TPL_FORK_TIMEOUT_MS;
    kmgr_list_append(&tpl->pending, &p->link);
    ++tpl->npending;
    start->pending = p;
    /* a write that fails stops the template: this start is then answered (spawned) before this returns */
    flush(tpl);
    return 0;

Refused:
    kmgr_tpl_request_free(&p->req);
    free(p);
    return KMGR_FALLBACK_SETUP;
}

void kmgr_template_forget(kmgr_proc_start_t *start)
{
    if (start->pending != NULL) {
        start->pending->proc = NULL;
        start->pending = NULL;
    }
}

void kmgr_templates_tick(kmgr_manager_t *mgr, uint64_t now)
{
    for (kmgr_link_t *link = mgr->templates.next; link != &mgr->templates; link = link->next) {
        kmgr_template_t *tpl = KMGR_FROM_MEMBER(kmgr_template_t, link, link);
        if (tpl->pid != 0)
            kmgr_template_drain(tpl);
        /* the oldest request is first: its deadline is the earliest */
        if (tpl->pid != 0 && !kmgr_list_empty(&tpl->pending) &&
            now >= KMGR_FROM_MEMBER(kmgr_tpl_pending_t, link, tpl->pending.next)->deadline) {
            char why[96];
            snprintf(why, sizeof(why), "did not answer a fork within %d ms: killed", KMGR_TPL_FORK_TIMEOUT_MS);
            stop(tpl, KMGR_FALLBACK_TIMEOUT, why);
        }
        if (tpl->pid == 0 && now >= tpl->restart_at)
            start(mgr, tpl);
    }
}

void kmgr_templates_dispose(kmgr_manager_t *mgr)
{
    while (!kmgr_list_empty(&mgr->templates)) {
        kmgr_template_t *tpl = KMGR_FROM_MEMBER(kmgr_template_t, link, mgr->templates.next);
        kmgr_link_unlink(&tpl->link);
        stop(tpl, KMGR_FALLBACK_DIED, NULL);
        free(tpl->rbuf);
        free(tpl->python);
        free(tpl);
    }
}
