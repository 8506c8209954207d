/* Isolated sessions: a persistent bash in bubblewrap per session, runs delimited by a secret marker on its pipes.
 * Over 600 lines (about 820) on purpose: its parts (start, the pipes' reader, runs, release,
 * expiry) all work on one gw_isolated_session_t and its one run, and read top to bottom as a session's life; the pure
 * parts live apart (isolation.c: requests and bwrap's argv; proctree.c: the sandbox's processes; reaper.c: sandboxes that outlive
 * SIGKILL; rmtree.c: removal). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/ids.h"
#include "wire/text.h"
#include "ksys/sandbox.h"
#include "ksys/spawn.h"
#include "core/errors.h"
#include "core/event.h"
#include "procs/endmark.h"
#include "procs/isolated.h"
#include "procs/lines.h"
#include "procs/proctree.h"
#include "ksys/rmtree.h"
#include "procs/walls.h"
#include "procs/spawn.h"

extern char **environ;

/* A line longer than this is sent in pieces (as commands'). */
#define ISO_MAX_LINE (64u << 10)
/* How long a new sandbox may take to run its bash, and a timed-out run's bash to come back after its processes were killed. */
#define ISO_START_MS 5000
#define ISO_KILL_GRACE_MS 1000
/* How often the loop checks a starting sandbox, or a killed one; how long a killed one is polled before the reaper takes it. */
#define ISO_POLL_MS 2
#define ISO_REAP_MS 2000

static void on_poll(h2o_timeout_entry_t *entry);

/* `bwrap --version`'s output (start-up only). */
static void read_version(gw_isolated_t *iso)
{
    char *argv[] = {iso->bwrap, "--version", NULL}, *envp[] = {NULL}, err[256];
    gw_spawn_options_t opts = {.path = iso->bwrap, .argv = argv, .envp = envp, .uid = -1, .gid = -1, .fds = {-1, -1, -1}};
    int fds[2], status;
    ssize_t n;
    size_t len = 0;
    pid_t pid;

    if (pipe2(fds, O_CLOEXEC) != 0)
        return;
    opts.fds[1] = fds[1];
    if (gw_spawn(&opts, &pid, err, sizeof(err)) == 0) {
        close(fds[1]);
        while (len < sizeof(iso->version) - 1 && (n = read(fds[0], iso->version + len, sizeof(iso->version) - 1 - len)) > 0)
            len += (size_t)n;
        waitpid(pid, &status, 0);
    } else {
        close(fds[1]);
    }
    close(fds[0]);
    iso->version[len] = '\0';
    iso->version[strcspn(iso->version, "\n")] = '\0';
    /* "bubblewrap 0.8.0" -> "0.8.0" */
    if (strncmp(iso->version, "bubblewrap ", 11) == 0)
        memmove(iso->version, iso->version + 11, strlen(iso->version + 11) + 1);
}

void gw_isolated_init(gw_isolated_t *iso, gw_host_t *host, gw_runs_t *runs, const char *bwrap_path, const char *runtime_dir,
                      const char *root)
{
    memset(iso, 0, sizeof(*iso));
    iso->host = host;
    iso->runs = runs;
    iso->runtime_dir = wire_strdup(runtime_dir);
    iso->root = wire_strdup(root);
    h2o_linklist_init_anchor(&iso->sessions);
    h2o_linklist_init_anchor(&iso->pending);
    h2o_timeout_init(host->loop, &iso->poll_timeout, ISO_POLL_MS);
    gw_reaper_init(&iso->reaper);
    iso->start_ms = ISO_START_MS;
    iso->reap_ms = ISO_REAP_MS;
    iso->bwrap = ksys_find_executable(bwrap_path != NULL ? bwrap_path : "bwrap");
    iso->unshare = ksys_find_executable("unshare");
    if (iso->bwrap == NULL) {
        snprintf(iso->message, sizeof(iso->message), "%s not found (install bubblewrap: deploy/deps.sh --with-sandbox)",
                 bwrap_path != NULL ? bwrap_path : "bwrap");
        return;
    }
    read_version(iso);
    if (ksys_bwrap_probe(iso->bwrap, iso->message, sizeof(iso->message)) != 0)
        return;
    iso->available = 1;
}

static void close_start_fds(gw_isolated_session_t *s)
{
    for (int i = 0; i != 2; ++i)
        if (s->start_fds[i] != -1) {
            close(s->start_fds[i]);
            s->start_fds[i] = -1;
        }
}

static void free_session(gw_isolated_session_t *s)
{
    h2o_linklist_unlink(&s->link);
    --s->owner->num_sessions;
    gw_iso_spec_dispose(&s->spec);
    free(s);
}

void gw_isolated_dispose(gw_isolated_t *iso)
{
    if (iso->host == NULL)
        return; /* never initialised */
    /* the loop no longer runs (shutdown's deadline passed): what is still dying is left to the kernel, its directory goes now */
    while (!h2o_linklist_is_empty(&iso->pending)) {
        gw_isolated_session_t *s = H2O_STRUCT_FROM_MEMBER(gw_isolated_session_t, link, iso->pending.next);
        if (h2o_timeout_is_linked(&s->poll))
            h2o_timeout_unlink(&s->poll);
        if (s->pid > 0) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, WNOHANG);
        }
        close_start_fds(s);
        if (s->stdin_fd != -1)
            close(s->stdin_fd);
        if (s->dir != NULL)
            ksys_rmtree(s->dir);
        free(s->dir);
        free_session(s);
    }
    gw_reaper_dispose(&iso->reaper);
    h2o_timeout_dispose(iso->host->loop, &iso->poll_timeout);
    free(iso->bwrap);
    free(iso->unshare);
    free(iso->runtime_dir);
    free(iso->root);
}

static void close_pipe(gw_isolated_session_t *s, int index)
{
    if (s->pipes[index] == NULL)
        return;
    h2o_socket_read_stop(s->pipes[index]);
    h2o_socket_close(s->pipes[index]);
    s->pipes[index] = NULL;
}

static void finish_run(gw_isolated_session_t *s, json_t *error, const char *outcome)
{
    gw_run_t *run = s->run;

    s->run = NULL;
    s->deadline_ms = s->killed_at_ms = 0;
    s->timed_out = 0;
    s->marker_seen[0] = s->marker_seen[1] = 0;
    s->after_cr[0] = s->after_cr[1] = 0;
    s->last_run_at_ms = gw_unix_ms();
    s->idle_since_ms = gw_now_ms();
    if (run == NULL) {
        json_decref(error);
        return;
    }
    if (error != NULL)
        gw_run_append(run, error);
    gw_run_finish(run, -1, outcome);
}

static void arm(gw_isolated_session_t *s)
{
    if (!h2o_timeout_is_linked(&s->poll))
        h2o_timeout_link(s->owner->host->loop, &s->owner->poll_timeout, &s->poll);
}

/* Kills the sandbox; the loop reaps it (on_poll) and then hands its directory to a thread. Never waits. */
static void release_sandbox(gw_isolated_session_t *s, const char *reason)
{
    if (!s->destroyed) {
        s->destroyed = 1;
        snprintf(s->reason, sizeof(s->reason), "%s", reason);
    }
    if (s->run != NULL)
        finish_run(s, gw_error_event("SessionDestroyed", s->reason), "error");
    close_pipe(s, 0);
    close_pipe(s, 1);
    close_start_fds(s);
    if (s->stdin_fd != -1) {
        close(s->stdin_fd);
        s->stdin_fd = -1;
    }
    /* a sandbox killed while starting: its pid 1 may exist already */
    if (s->init_pid <= 0 && s->pid > 0)
        s->init_pid = gw_proctree_first_child(s->pid);
    if (s->pid > 0)
        kill(s->pid, SIGKILL);
    if (s->init_pid > 0)
        kill(s->init_pid, SIGKILL);
    if (!s->reaping) {
        s->reaping = 1;
        s->until_ms = gw_now_ms() + s->owner->reap_ms;
    }
    arm(s);
}

/* A killed sandbox: 1 once its processes are gone (its directory then removed) or handed to the reaper with it. */
static int reap(gw_isolated_session_t *s)
{
    pid_t r;

    if (s->pid > 0 && ((r = waitpid(s->pid, NULL, WNOHANG)) == s->pid || (r == -1 && errno == ECHILD)))
        s->pid = 0;
    if (s->init_pid > 0 && gw_proctree_gone(s->init_pid))
        s->init_pid = 0;
    if (s->pid > 0 || s->init_pid > 0) {
        if (gw_now_ms() < s->until_ms)
            return 0;
        fprintf(stderr,
                "kgate: isolated session %s: its sandbox (pid %d, pid 1 %d) is still there %u ms after SIGKILL: reaped later, "
                "its directory removed once it is gone\n",
                s->id, (int)s->pid, (int)s->init_pid, s->owner->reap_ms);
        /* its pid stays ours to wait for, and its directory may be its root's upper layer: neither may go before it does */
        gw_reaper_adopt(&s->owner->reaper, s->pid, s->init_pid, s->dir);
        s->dir = NULL;
    }
    s->pid = s->init_pid = s->bash_pid = 0;
    s->reaping = 0;
    if (s->dir != NULL) {
        ksys_rmtree_detached(s->dir); /* an upper layer may hold any number of files: never on the loop */
        s->dir = NULL;
    }
    return 1;
}

void gw_isolated_destroy(gw_isolated_session_t *s, gw_isolated_released_cb cb, void *data)
{
    h2o_linklist_unlink(&s->link);
    h2o_linklist_insert(&s->owner->pending, &s->link);
    s->deleting = 1;
    s->on_released = cb;
    s->cb_data = data;
    release_sandbox(s, "deleted"); /* arms the poll even when nothing is left to reap: `cb` runs later, never in here */
}

gw_isolated_session_t *gw_isolated_find(gw_isolated_t *iso, const char *id)
{
    for (h2o_linklist_t *node = iso->sessions.next; node != &iso->sessions; node = node->next) {
        gw_isolated_session_t *s = H2O_STRUCT_FROM_MEMBER(gw_isolated_session_t, link, node);
        if (strcmp(s->id, id) == 0)
            return s;
    }
    return NULL;
}

/* The run's output, line by line; `final` flushes an incomplete last line. Returns the bytes consumed. */
typedef struct st_line_ctx_t {
    gw_isolated_session_t *s;
    int index;
} line_ctx_t;

static void on_line(void *data, const char *line, size_t len)
{
    line_ctx_t *lc = data;
    json_t *ev = gw_event_new(lc->index == 0 ? "stdout" : "stderr");
    char *text;
    size_t text_len;

    if (len == 0) {
        json_object_set_new(ev, "text", json_string("\n")); /* as execd's commands: a blank line is "\n" */
    } else {
        wire_utf8_sanitize(line, len, 1, &text, &text_len);
        json_object_set_new(ev, "text", json_stringn_nocheck(text, text_len));
        free(text);
    }
    gw_run_append(lc->s->run, ev);
}

static size_t relay(gw_isolated_session_t *s, int index, const char *buf, size_t len, int final)
{
    line_ctx_t lc = {s, index};

    if (s->run == NULL)
        return len; /* output between runs (a background job's) has no run to go to */
    return gw_lines_split(buf, len, final, ISO_MAX_LINE, &s->after_cr[index], on_line, &lc);
}

static void maybe_finish(gw_isolated_session_t *s)
{
    char evalue[32], why[160];

    if (s->run == NULL || !s->marker_seen[0] || !s->marker_seen[1])
        return;
    snprintf(evalue, sizeof(evalue), "%d", s->exit_code);
    if (s->timed_out) {
        snprintf(why, sizeof(why), "the run exceeded its timeout of %u ms: its processes were killed", s->timeout_ms);
        finish_run(s, gw_error_event("TimeoutError", why), "timeout");
    } else if (s->exit_code != 0) {
        finish_run(s, gw_error_event("CommandExitError", evalue), "error");
    } else {
        finish_run(s, NULL, "ok");
    }
}

/* Relays what the pipe holds up to the end-of-run marker (procs/endmark.h), keeping back a tail that may be the start of one. */
static void process_pipe(gw_isolated_session_t *s, int index, int final)
{
    h2o_socket_t *sock = s->pipes[index];
    gw_endmark_t mark;
    size_t consumed = 0;

    gw_endmark_init(&mark, s->nonce, index == 0);
    for (;;) {
        const char *buf = sock->input->bytes + consumed;
        size_t len = sock->input->size - consumed;
        gw_endmark_hit_t hit = {len, 0, 0, 0};
        if (s->run != NULL && !s->marker_seen[index])
            gw_endmark_scan(&mark, buf, len, final, &hit);
        if (!hit.found) {
            consumed += relay(s, index, buf, hit.data_len, final);
            break;
        }
        relay(s, index, buf, hit.data_len, 1);
        consumed += hit.data_len + hit.marker_len;
        s->after_cr[index] = 0;
        s->marker_seen[index] = 1;
        if (index == 0)
            s->exit_code = hit.status;
        maybe_finish(s);
    }
    h2o_buffer_consume(&sock->input, consumed);
}

static void on_pipe_read(h2o_socket_t *sock, const char *err)
{
    gw_isolated_session_t *s = sock->data;
    int index = sock == s->pipes[0] ? 0 : 1;

    process_pipe(s, index, err != NULL);
    if (err != NULL) {
        /* bash is gone: the tick reaps the sandbox and records why */
        close_pipe(s, index);
        if (s->run != NULL)
            finish_run(s, gw_error_event("SessionDestroyed", "the session's bash exited during the run"), "error");
    }
}

static void on_run_cancel(gw_run_t *run, void *data)
{
    gw_isolated_session_t *s = data;
    (void)run;

    s->run = NULL;
    gw_proctree_signal(s->bash_pid, SIGKILL);
}

static void on_run_stop(gw_run_t *run, void *data)
{
    gw_isolated_session_t *s = data;
    (void)run;

    gw_proctree_signal(s->bash_pid, SIGINT);
}

static int on_run_input(gw_run_t *run, void *data, const char *value)
{
    (void)run, (void)data, (void)value;
    return GW_ENOINPUT; /* a run's stdin is /dev/null */
}

static const gw_run_producer_t iso_producer = {on_run_cancel, on_run_stop, on_run_input, NULL};

static int make_dir(const char *parent, const char *name, char *out, size_t size)
{
    if ((size_t)snprintf(out, size, "%s/%s", parent, name) >= size)
        return -ENAMETOOLONG;
    return mkdir(out, 0700) == 0 || errno == EEXIST ? 0 : -errno;
}

/* mkdir -p on the host (the workspace is created when missing, as execd does). */
static int mkdirs(const char *path)
{
    char buf[4096];
    size_t len = strlen(path);

    if (len >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p != '\0'; ++p) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    return mkdir(buf, 0755) == 0 || errno == EEXIST ? 0 : -errno;
}

/* What a sandbox that exited at start said on stderr (its first line). */
static void read_failure(int fd, int status, char *err, size_t errlen)
{
    char buf[512];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);

    buf[n > 0 ? n : 0] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    if (buf[0] != '\0')
        snprintf(err, errlen, "the sandbox did not start: %s", buf);
    else
        snprintf(err, errlen, "the sandbox did not start (exit status %d)",
                 WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}

/* The start failed (`err`): the session goes (released from the loop), its creator hears why. */
static void fail_start(gw_isolated_session_t *s, const char *err)
{
    gw_isolated_started_cb cb = s->on_started;
    void *data = s->cb_data;

    s->starting = 0;
    s->deleting = 1;
    s->on_started = NULL;
    s->on_released = NULL;
    release_sandbox(s, "failed to start");
    if (cb != NULL)
        cb(NULL, data, err);
}

static void become_ready(gw_isolated_session_t *s)
{
    gw_isolated_t *iso = s->owner;
    gw_isolated_started_cb cb = s->on_started;

    s->starting = 0;
    s->on_started = NULL;
    for (int i = 0; i != 2; ++i) {
        s->pipes[i] = h2o_evloop_socket_create(iso->host->loop, s->start_fds[i], 0);
        s->start_fds[i] = -1;
        s->pipes[i]->data = s;
        h2o_socket_read_start(s->pipes[i], on_pipe_read);
    }
    s->created_at_ms = gw_unix_ms();
    s->idle_since_ms = gw_now_ms();
    h2o_linklist_unlink(&s->link);
    h2o_linklist_insert(&iso->sessions, &s->link);
    if (cb != NULL)
        cb(s, s->cb_data, NULL);
}

/* Ready once bwrap's pid 1 has set the mounts up and started bash (its child); each check is a waitpid and two small reads of
 * /proc, so that the loop never waits for bwrap. */
static void poll_start(gw_isolated_session_t *s)
{
    char err[600], rootpath[4200];
    int status, fd;

    if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
        s->pid = 0;
        read_failure(s->start_fds[1], status, err, sizeof(err));
        fail_start(s, err);
        return;
    }
    if ((s->init_pid = gw_proctree_first_child(s->pid)) > 0 && (s->bash_pid = gw_proctree_first_child(s->init_pid)) > 0) {
        snprintf(rootpath, sizeof(rootpath), "/proc/%d/root%s", (int)s->init_pid, s->spec.workspace);
        if ((fd = open(rootpath, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1) {
            snprintf(err, sizeof(err), "cannot reach the sandbox's workspace (%.400s): %s", rootpath, strerror(errno));
            fail_start(s, err);
            return;
        }
        close(fd);
        become_ready(s);
        return;
    }
    if (gw_now_ms() > s->until_ms) {
        snprintf(err, sizeof(err), "the sandbox did not start bash within %u ms", s->owner->start_ms);
        fail_start(s, err);
        return;
    }
    arm(s);
}

static void on_poll(h2o_timeout_entry_t *entry)
{
    gw_isolated_session_t *s = H2O_STRUCT_FROM_MEMBER(gw_isolated_session_t, poll, entry);
    gw_isolated_released_cb cb;
    void *data;

    if (s->starting) {
        poll_start(s);
        return;
    }
    if (s->reaping && !reap(s)) {
        arm(s);
        return;
    }
    if (!s->deleting)
        return; /* destroyed but kept for GET */
    cb = s->on_released;
    data = s->cb_data;
    free_session(s);
    if (cb != NULL)
        cb(data);
}

void gw_isolated_abandon(gw_isolated_session_t *s)
{
    s->on_started = NULL;
    s->on_released = NULL;
    if (s->starting) {
        s->starting = 0;
        s->deleting = 1;
        release_sandbox(s, "its creator went away");
    }
}

int gw_isolated_create(gw_isolated_t *iso, gw_iso_spec_t *spec, gw_isolated_started_cb cb, void *data, gw_isolated_session_t **out,
                       char *err, size_t errlen)
{
    char top[4096], dir[4096], ctl[4096], upper[4096], work[4096], merged[4096];
    char *cmd[] = {"/bin/bash", "--noprofile", "--norc", NULL}, **argv = NULL, **envp = NULL;
    int in[2] = {-1, -1}, outp[2] = {-1, -1}, errp[2] = {-1, -1}, ret = GW_ESPAWN;
    gw_isolated_session_t *s = NULL;
    gw_spawn_options_t opts = {.uid = -1, .gid = -1};
    gw_iso_paths_t paths = {0};
    gw_walls_fds_t sources = {0};
    pid_t pid = 0;

    if (iso->num_sessions >= iso->host->config->max_isolated_sessions) {
        snprintf(err, errlen, "%zu isolated sessions exist (--max-isolated-sessions): delete one first", iso->num_sessions);
        return GW_ETOOMANYISOLATED;
    }
    if (spec->mode == GW_ISO_OVERLAY && iso->unshare == NULL) {
        snprintf(err, errlen, "overlay needs util-linux's unshare, which is not installed");
        return GW_ESPAWN;
    }
    /* the workspace exists (created when missing); it and every other host path, symbolic links resolved, still lie where
     * the request may reach, and bwrap gets the resolved paths */
    if ((ret = mkdirs(spec->workspace)) != 0) {
        snprintf(err, errlen, "cannot create the workspace %s: %s", spec->workspace, strerror(-ret));
        return GW_ESPAWN;
    }
    if (gw_walls_open_spec(spec, iso->root, iso->runtime_dir, &sources, err, errlen) != 0)
        return GW_ESPAWN;

    /* counted and pending from here: whatever fails below is released the one way, from the loop, without a callback */
    s = wire_calloc(1, sizeof(*s));
    s->owner = iso;
    s->stdin_fd = s->start_fds[0] = s->start_fds[1] = -1;
    s->poll.cb = on_poll;
    s->deleting = 1;
    wire_uuid4(s->id);
    wire_random_hex(s->nonce, 16);
    h2o_linklist_insert(&iso->pending, &s->link);
    ++iso->num_sessions;
    ret = GW_ESPAWN;
    if (make_dir(iso->runtime_dir, "isolated", top, sizeof(top)) != 0 || make_dir(top, s->id, dir, sizeof(dir)) != 0 ||
        make_dir(dir, "ctl", ctl, sizeof(ctl)) != 0) {
        snprintf(err, errlen, "cannot create the session's directory under %s: %s", iso->runtime_dir, strerror(errno));
        goto Error;
    }
    s->dir = wire_strdup(dir);
    if (spec->mode == GW_ISO_OVERLAY &&
        (make_dir(dir, "upper", upper, sizeof(upper)) != 0 || make_dir(dir, "work", work, sizeof(work)) != 0 ||
         make_dir(dir, "merged", merged, sizeof(merged)) != 0)) {
        snprintf(err, errlen, "cannot create the overlay's directories: %s", strerror(errno));
        goto Error;
    }
    paths = (gw_iso_paths_t){.bwrap = iso->bwrap,
                             .unshare = iso->unshare,
                             .runtime_dir = iso->runtime_dir,
                             .ctl_dir = ctl,
                             .merged_dir = merged,
                             .upper_dir = upper,
                             .work_dir = work,
                             .as_root = geteuid() == 0,
                             .tmp_bytes = gw_config_tmp_bytes(iso->host->config, (uint64_t)iso->host->config->max_memory_mb << 20),
                             .source_fd_base = 3};
    argv = gw_iso_argv(spec, &paths, cmd);
    envp = gw_iso_env(spec, environ, iso->host->instance_env);
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(outp, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "cannot create pipes: %s", strerror(errno));
        goto Error;
    }
    opts.path = argv[0];
    opts.argv = argv;
    opts.envp = envp;
    opts.fds[0] = in[0];
    opts.fds[1] = outp[1];
    opts.fds[2] = errp[1];
    opts.keep_fds = sources.fds;
    opts.nkeep_fds = sources.n;
    if ((ret = gw_spawn(&opts, &pid, err, errlen)) != 0)
        goto Error;
    s->pid = pid;
    s->stdin_fd = in[1];
    s->start_fds[0] = outp[0];
    s->start_fds[1] = errp[0];
    in[1] = outp[0] = errp[0] = -1;
    fcntl(s->stdin_fd, F_SETFL, O_NONBLOCK);
    /* a failed start's message is read once bwrap has exited; its pid 1 may still hold the pipe: never wait for it */
    fcntl(s->start_fds[1], F_SETFL, O_NONBLOCK);
    s->spec = *spec;
    memset(spec, 0, sizeof(*spec));
    s->starting = 1;
    s->deleting = 0;
    s->on_started = cb;
    s->cb_data = data;
    s->until_ms = gw_now_ms() + iso->start_ms;
    arm(s);
    *out = s;
    ret = 0;
    goto Exit;

Error:
    release_sandbox(s, "failed to start");
Exit:
    for (int i = 0; i != 2; ++i) {
        if (in[i] != -1)
            close(in[i]);
        if (outp[i] != -1)
            close(outp[i]);
        if (errp[i] != -1)
            close(errp[i]);
    }
    ksys_strv_free(argv);
    ksys_strv_free(envp);
    gw_walls_fds_close(&sources);
    return ret;
}

/* Single-quoted for bash. */
static void put_quoted(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s != '\0'; ++s) {
        if (*s == '\'')
            fputs("'\\''", f);
        else
            fputc(*s, f);
    }
    fputc('\'', f);
}

int gw_isolated_run(gw_isolated_session_t *s, const char *code, json_t *envs, const char *cwd, unsigned timeout_ms,
                    const gw_run_limits_t *limits, gw_run_t **out)
{
    char path[4200], tmp[4200], line[256];
    const char *key;
    json_t *value;
    FILE *f;
    int len;

    if (s->destroyed || s->stdin_fd == -1)
        return GW_EKERNELDEAD;
    if (s->run != NULL)
        return GW_EISOBUSY;
    /* the code goes through a file (bash reads a sourced file whole before running it); stdin only carries a short line */
    snprintf(path, sizeof(path), "%s/ctl/run.sh", s->dir);
    snprintf(tmp, sizeof(tmp), "%s/ctl/.run.sh.tmp", s->dir);
    if ((f = fopen(tmp, "w")) == NULL)
        return -errno;
    json_object_foreach(envs, key, value)
    {
        fprintf(f, "export %s=", key);
        put_quoted(f, json_string_value(value));
        fputc('\n', f);
    }
    if (cwd != NULL) {
        fputs("cd -- ", f);
        put_quoted(f, cwd);
        fputs(" || return 1\n", f);
    }
    fputs(code, f);
    fputc('\n', f);
    if (fclose(f) != 0 || chmod(tmp, 0644) != 0 || rename(tmp, path) != 0)
        return -errno;
    len = snprintf(line, sizeof(line),
                   ". " GW_ISO_CTL_DIR
                   "/run.sh </dev/null; printf '\\036KGATE:%s:%%d\\036' \"$?\"; printf '\\036KGATE:%s\\036' >&2\n",
                   s->nonce, s->nonce);
    if (write(s->stdin_fd, line, (size_t)len) != len)
        return errno != 0 ? -errno : -EIO;
    ++s->run_seq;
    s->run = gw_run_create(s->owner->runs, NULL, NULL, limits);
    gw_run_mark_started(s->run);
    gw_run_set_producer(s->run, &iso_producer, s);
    s->timeout_ms = timeout_ms;
    s->deadline_ms = timeout_ms != 0 ? gw_now_ms() + timeout_ms : 0;
    *out = s->run;
    return 0;
}

int gw_isolated_view_path(const gw_isolated_session_t *s, char *buf, size_t size)
{
    if (s->destroyed || s->init_pid <= 0)
        return GW_EKERNELDEAD;
    snprintf(buf, size, "/proc/%d/root%s", (int)s->init_pid, s->spec.workspace);
    return 0;
}

const char *gw_isolated_status(const gw_isolated_session_t *s)
{
    return s->destroyed ? "destroyed" : "active";
}

long gw_isolated_idle_remaining(const gw_isolated_session_t *s)
{
    int64_t left;

    if (s->spec.idle_timeout_seconds == 0)
        return -1;
    if (s->run != NULL)
        return (long)s->spec.idle_timeout_seconds;
    left = (int64_t)s->spec.idle_timeout_seconds * 1000 - (gw_now_ms() - s->idle_since_ms);
    return left > 0 ? (long)((left + 999) / 1000) : 0;
}

static json_t *iso_date(int64_t unix_ms)
{
    struct timespec ts = {unix_ms / 1000, (unix_ms % 1000) * 1000000L};
    char buf[WIRE_DATE_STRLEN + 1];

    if (unix_ms == 0)
        return json_null();
    wire_iso8601_format(&ts, buf);
    return json_string(buf);
}

json_t *gw_isolated_to_json(const gw_isolated_session_t *s)
{
    json_t *obj = gw_iso_spec_to_json(&s->spec);
    long idle = gw_isolated_idle_remaining(s);

    json_object_set_new(obj, "session_id", json_string(s->id));
    json_object_set_new(obj, "status", json_string(gw_isolated_status(s)));
    json_object_set_new(obj, "created_at", iso_date(s->created_at_ms));
    json_object_set_new(obj, "last_run_at", iso_date(s->last_run_at_ms));
    json_object_set_new(obj, "idle_remaining_seconds", idle >= 0 ? json_integer(idle) : json_null());
    json_object_set_new(obj, "running", json_boolean(s->run != NULL));
    if (s->destroyed)
        json_object_set_new(obj, "reason", json_string(s->reason));
    return obj;
}

void gw_isolated_tick(gw_isolated_t *iso)
{
    int64_t now = gw_now_ms();
    h2o_linklist_t *node, *next;

    if (iso->sessions.next == NULL)
        return;
    gw_reaper_tick(&iso->reaper, now);
    for (node = iso->sessions.next; node != &iso->sessions; node = next) {
        gw_isolated_session_t *s = H2O_STRUCT_FROM_MEMBER(gw_isolated_session_t, link, node);
        int status;
        next = node->next;
        if (!s->destroyed && s->pid > 0 && waitpid(s->pid, &status, WNOHANG) == s->pid) {
            char why[128];
            s->pid = 0;
            snprintf(why, sizeof(why), "the session's bash exited (status %d)",
                     WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
            release_sandbox(s, why);
        }
        if (s->run != NULL && s->deadline_ms != 0 && now >= s->deadline_ms && !s->timed_out) {
            s->timed_out = 1;
            s->killed_at_ms = now;
            gw_proctree_signal(s->bash_pid, SIGKILL);
        }
        if (s->run != NULL && s->killed_at_ms != 0 && now - s->killed_at_ms >= ISO_KILL_GRACE_MS) {
            /* bash itself is busy (a shell loop): the session goes with the run */
            char why[160];
            snprintf(why, sizeof(why),
                     "the run exceeded its timeout of %u ms and bash did not come back: the session was destroyed", s->timeout_ms);
            finish_run(s, gw_error_event("TimeoutError", why), "timeout");
            release_sandbox(s, "a timed-out run did not give bash back");
        }
        if (s->run == NULL && s->spec.idle_timeout_seconds != 0 &&
            now - s->idle_since_ms >= (int64_t)s->spec.idle_timeout_seconds * 1000)
            gw_isolated_destroy(s, NULL, NULL);
    }
}

void gw_isolated_destroy_all(gw_isolated_t *iso)
{
    h2o_linklist_t *node, *next;

    if (iso->sessions.next == NULL)
        return; /* never initialised (start-up failed first) */
    for (node = iso->pending.next; node != &iso->pending; node = next) {
        gw_isolated_session_t *s = H2O_STRUCT_FROM_MEMBER(gw_isolated_session_t, link, node);
        next = node->next;
        if (s->starting)
            fail_start(s, "kgate is shutting down");
    }
    while (!h2o_linklist_is_empty(&iso->sessions))
        gw_isolated_destroy(H2O_STRUCT_FROM_MEMBER(gw_isolated_session_t, link, iso->sessions.next), NULL, NULL);
}

int gw_isolated_is_drained(gw_isolated_t *iso)
{
    return (iso->pending.next == NULL || h2o_linklist_is_empty(&iso->pending)) && ksys_rmtree_in_flight() == 0;
}
