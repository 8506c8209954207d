/* An isolated session's start (procs/isolated.h, gw_isolated_create): its directories, the sandbox spawned, and its poll
 * timer (the checks until its bash runs, never waiting for bwrap; the reaping of a killed sandbox; the release of a deleted
 * session), and shutdown's gw_isolated_destroy_all. It calls isolated.c (the pipes' reader, runs, release), never the reverse. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/ids.h"
#include "ksys/sandbox.h"
#include "ksys/spawn.h"
#include "core/errors.h"
#include "procs/isolated.h"
#include "procs/isolated_private.h"
#include "procs/isolation.h"
#include "procs/proctree.h"
#include "procs/spawn.h"
#include "procs/walls.h"

extern char **environ;

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
    gw_isolated_release_sandbox(s, "failed to start");
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
        h2o_socket_read_start(s->pipes[i], gw_isolated_on_pipe_read);
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
    char err[600];
    struct stat st;
    int status, fd, ret;

    if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
        s->pid = 0;
        read_failure(s->start_fds[1], status, err, sizeof(err));
        fail_start(s, err);
        return;
    }
    if ((s->init_pid = gw_proctree_first_child(s->pid)) > 0 && (s->bash_pid = gw_proctree_first_child(s->init_pid)) > 0) {
        /* what the files routes will accept as the workspace: what bwrap mounted there, before any code of the session runs */
        if ((ret = gw_isolated_open_view(s, &fd)) != 0 || fstat(fd, &st) != 0) {
            snprintf(err, sizeof(err), "cannot reach the sandbox's workspace (/proc/%d/root%.400s): %s", (int)s->init_pid,
                     s->spec.workspace, ret != 0 ? gw_strerror(ret) : strerror(errno));
            if (ret == 0)
                close(fd);
            fail_start(s, err);
            return;
        }
        s->ws_dev = st.st_dev;
        s->ws_ino = st.st_ino;
        close(fd);
        become_ready(s);
        return;
    }
    if (gw_now_ms() > s->until_ms) {
        snprintf(err, sizeof(err), "the sandbox did not start bash within %u ms", s->owner->start_ms);
        fail_start(s, err);
        return;
    }
    gw_isolated_arm(s);
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
    if (s->reaping && !gw_isolated_reap(s)) {
        gw_isolated_arm(s);
        return;
    }
    if (!s->deleting)
        return; /* destroyed but kept for GET */
    cb = s->on_released;
    data = s->cb_data;
    gw_isolated_free_session(s);
    if (cb != NULL)
        cb(data);
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
    gw_isolated_arm(s);
    *out = s;
    ret = 0;
    goto Exit;

Error:
    gw_isolated_release_sandbox(s, "failed to start");
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
