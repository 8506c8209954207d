/* Isolated sessions: a persistent bash in bubblewrap per session, runs delimited by a secret marker on its pipes: the pipes'
 * reader, runs, release and expiry. The start, the poll timer and shutdown are in isolated_start.c, which calls this file; the pure
 * parts live apart (endmark.c: the marker in the output; isolation.c: requests and bwrap's argv; proctree.c: the sandbox's
 * processes; reaper.c: sandboxes that outlive SIGKILL).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
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
#include "procs/isolated_private.h"
#include "procs/lines.h"
#include "procs/proctree.h"
#include "ksys/rmtree.h"
#include "procs/walls.h"
#include "procs/spawn.h"
#include "ksys/log.h"

/* A line longer than this is sent in pieces (as commands'). */
#define ISO_MAX_LINE (64u << 10)
/* How long a new sandbox may take to run its bash, and a timed-out run's bash to come back after its processes were killed. */
#define ISO_START_MS 5000
#define ISO_KILL_GRACE_MS 1000
/* How often the loop checks a starting sandbox, or a killed one; how long a killed one is polled before the reaper takes it. */
#define ISO_POLL_MS 2
#define ISO_REAP_MS 2000

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

void gw_isolated_free_session(gw_isolated_session_t *s)
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
        gw_isolated_free_session(s);
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

void gw_isolated_arm(gw_isolated_session_t *s)
{
    if (!h2o_timeout_is_linked(&s->poll))
        h2o_timeout_link(s->owner->host->loop, &s->owner->poll_timeout, &s->poll);
}

/* Kills the sandbox; the loop reaps it (isolated_start.c's poll timer) and then hands its directory to a thread. Never waits. */
void gw_isolated_release_sandbox(gw_isolated_session_t *s, const char *reason)
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
    gw_isolated_arm(s);
}

/* A killed sandbox: 1 once its processes are gone (its directory then removed) or handed to the reaper with it. */
int gw_isolated_reap(gw_isolated_session_t *s)
{
    pid_t r;

    if (s->pid > 0 && ((r = waitpid(s->pid, NULL, WNOHANG)) == s->pid || (r == -1 && errno == ECHILD)))
        s->pid = 0;
    if (s->init_pid > 0 && gw_proctree_gone(s->init_pid))
        s->init_pid = 0;
    if (s->pid > 0 || s->init_pid > 0) {
        if (gw_now_ms() < s->until_ms)
            return 0;
        ksys_log_warn("isolated session %s: its sandbox (pid %d, pid 1 %d) is still there %u ms after SIGKILL: reaped later, "
                      "its directory removed once it is gone",
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
    gw_isolated_release_sandbox(s, "deleted"); /* arms the poll even when nothing is left to reap: `cb` runs later, never in here */
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

void gw_isolated_on_pipe_read(h2o_socket_t *sock, const char *err)
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

void gw_isolated_abandon(gw_isolated_session_t *s)
{
    s->on_started = NULL;
    s->on_released = NULL;
    if (s->starting) {
        s->starting = 0;
        s->deleting = 1;
        gw_isolated_release_sandbox(s, "its creator went away");
    }
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

int gw_isolated_open_view(const gw_isolated_session_t *s, int *fd)
{
    struct open_how how = {.flags = O_PATH | O_DIRECTORY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    char path[64];
    struct stat st;
    int root, ret = 0;

    if (s->destroyed || s->init_pid <= 0)
        return GW_EKERNELDEAD;
    snprintf(path, sizeof(path), "/proc/%d/root", (int)s->init_pid);
    if ((root = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1)
        return -errno;
    /* without openat2 (Linux < 5.6) an absolute link resolves from kgate's root: the identity check below still refuses it */
    if ((*fd = (int)syscall(SYS_openat2, root, s->spec.workspace, &how, sizeof(how))) == -1 && errno == ENOSYS)
        *fd = openat(root, s->spec.workspace + strspn(s->spec.workspace, "/"), O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (*fd == -1)
        ret = -errno;
    close(root);
    if (ret != 0)
        return ret;
    if (fstat(*fd, &st) != 0 || (s->ws_ino != 0 && (st.st_dev != s->ws_dev || st.st_ino != s->ws_ino))) {
        close(*fd);
        *fd = -1;
        return -EXDEV;
    }
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
            gw_isolated_release_sandbox(s, why);
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
            gw_isolated_release_sandbox(s, "a timed-out run did not give bash back");
        }
        if (s->run == NULL && s->spec.idle_timeout_seconds != 0 &&
            now - s->idle_since_ms >= (int64_t)s->spec.idle_timeout_seconds * 1000)
            gw_isolated_destroy(s, NULL, NULL);
    }
}

int gw_isolated_is_drained(gw_isolated_t *iso)
{
    return (iso->pending.next == NULL || h2o_linklist_is_empty(&iso->pending)) && ksys_rmtree_in_flight() == 0;
}
