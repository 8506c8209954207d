/* PTY sessions: a shell on a pseudo-terminal or pipes, read inside the loop into a replay ring, ended with its whole session. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "procs/pty.h"
#include "procs/spawn.h"

/* After the shell exits, output still in flight gets this long before the descriptors are closed. */
#define PTY_DRAIN_MS 100
/* execd's initial window */
#define PTY_COLS 80
#define PTY_ROWS 24
/* A process of the session may fork while it is being killed: look again once. */
#define KILL_PASSES 2

static void free_stdin(gw_pty_t *pty)
{
    free(pty->stdin_pending);
    free(pty->stdin_sending);
    pty->stdin_pending = pty->stdin_sending = NULL;
    pty->pending_len = pty->sending_len = 0;
}

/* Closes out[index] (and stdin with it when it is the terminal). h2o never calls back a closed socket's write. */
static void close_output(gw_pty_t *pty, int index)
{
    if (pty->out[index] == NULL)
        return;
    if (pty->in == pty->out[index]) {
        pty->in = NULL;
        free_stdin(pty);
    }
    h2o_socket_read_stop(pty->out[index]);
    h2o_socket_close(pty->out[index]);
    pty->out[index] = NULL;
}

static void close_all(gw_pty_t *pty)
{
    close_output(pty, 0);
    close_output(pty, 1);
    if (pty->in != NULL) {
        h2o_socket_close(pty->in);
        pty->in = NULL;
    }
    free_stdin(pty);
}

/*
 * SIGKILL to every process of the session `sid` leads: its process group, and the groups an
 * interactive shell makes for its jobs, found by their session id in /proc.
 */
static void kill_session(pid_t sid)
{
    kill(-sid, SIGKILL);
    for (int pass = 0; pass != KILL_PASSES; ++pass) {
        DIR *dir = opendir("/proc");
        struct dirent *ent;
        if (dir == NULL)
            return;
        while ((ent = readdir(dir)) != NULL) {
            char path[300], stat[512], *p;
            long session;
            int fd;
            ssize_t n;
            if (!isdigit((unsigned char)ent->d_name[0]))
                continue;
            snprintf(path, sizeof(path), "/proc/%s/stat", ent->d_name);
            if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
                continue;
            n = read(fd, stat, sizeof(stat) - 1);
            close(fd);
            if (n <= 0)
                continue;
            stat[n] = '\0';
            /* "pid (comm) state ppid pgrp session ...": comm may hold anything, the last ')' ends it */
            if ((p = strrchr(stat, ')')) == NULL || sscanf(p + 1, " %*c %*d %*d %ld", &session) != 1 || p[2] == 'Z')
                continue;
            if (session == (long)sid)
                kill((pid_t)atol(ent->d_name), SIGKILL);
        }
        closedir(dir);
    }
}

/* Frees a session taken out of its list. */
static void pty_free(gw_pty_t *pty)
{
    close_all(pty);
    gw_ring_dispose(&pty->output);
    free(pty->cwd);
    free(pty->command);
    free(pty);
}

int gw_pty_create(gw_ptys_t *ptys, const char *cwd, const char *command, gw_pty_t **out)
{
    const gw_config_t *config = ptys->host->config;
    gw_pty_t *pty;

    if (ptys->host->shutting_down)
        return GW_ESHUTTINGDOWN;
    if (ptys->count >= config->max_ptys)
        return GW_ETOOMANYPTYS;
    pty = wire_calloc(1, sizeof(*pty));
    wire_uuid4(pty->id);
    pty->ptys = ptys;
    pty->cwd = cwd != NULL ? wire_strdup(cwd) : NULL;
    pty->command = command != NULL ? wire_strdup(command) : NULL;
    gw_ring_init(&pty->output, config->pty_ring_bytes);
    pty->active_at_ms = gw_now_ms();
    h2o_linklist_insert(&ptys->list, &pty->link);
    ++ptys->count;
    *out = pty;
    return 0;
}

gw_pty_t *gw_pty_find(gw_ptys_t *ptys, const char *id)
{
    for (h2o_linklist_t *node = ptys->list.next; node != &ptys->list; node = node->next) {
        gw_pty_t *pty = H2O_STRUCT_FROM_MEMBER(gw_pty_t, link, node);
        if (strcmp(pty->id, id) == 0)
            return pty;
    }
    return NULL;
}

static void on_output(h2o_socket_t *sock, const char *err)
{
    gw_pty_t *pty = sock->data;
    int index = sock == pty->out[0] ? 0 : 1;
    h2o_buffer_t *input = sock->input;

    if (input->size != 0) {
        uint64_t offset = pty->output.total;
        gw_ring_append(&pty->output, input->bytes, input->size);
        pty->active_at_ms = gw_now_ms();
        if (pty->sink != NULL)
            pty->sink->on_output(pty->sink_data, index, offset, input->bytes, input->size);
        h2o_buffer_consume(&sock->input, input->size);
    }
    /* EIO from a terminal's master side: no process holds its slave side any more */
    if (err != NULL)
        close_output(pty, index);
}

static h2o_socket_t *watch(gw_pty_t *pty, int fd, int read)
{
    h2o_socket_t *sock = h2o_evloop_socket_create(pty->ptys->host->loop, fd, 0);
    sock->data = pty;
    if (read)
        h2o_socket_read_start(sock, on_output);
    return sock;
}

/* Opens a pseudo-terminal of PTY_COLS x PTY_ROWS: its master side in `*master`, its slave side in `*slave`. */
static int open_terminal(int *master, int *slave, char *err, size_t err_size)
{
    struct winsize size = {PTY_ROWS, PTY_COLS, 0, 0};
    char name[128];

    *slave = -1;
    if ((*master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1 || grantpt(*master) != 0 || unlockpt(*master) != 0 ||
        ptsname_r(*master, name, sizeof(name)) != 0 || (*slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) == -1 ||
        ioctl(*master, TIOCSWINSZ, &size) != 0) {
        snprintf(err, err_size, "cannot open a pseudo-terminal: %s", strerror(errno));
        if (*master != -1)
            close(*master);
        if (*slave != -1)
            close(*slave);
        return GW_ESPAWN;
    }
    return 0;
}

/* The shell's environment: kgate's, with a TERM for a terminal when kgate has none. */
static char **shell_env(const gw_host_t *host, int pipe_mode)
{
    json_t *extra = !pipe_mode && getenv("TERM") == NULL ? json_pack("{s:s}", "TERM", "xterm-256color") : NULL;
    char **envp = gw_spawn_env(extra, host->instance_env);
    json_decref(extra);
    return envp;
}

int gw_pty_start(gw_pty_t *pty, int pipe_mode, char *err, size_t err_size)
{
    const char *shell = pty->ptys->host->config->shell, *base = strrchr(shell, '/');
    char *argv[6];
    size_t argc = 0;
    gw_spawn_options_t spawn = {
        .path = shell, .argv = argv, .cwd = pty->cwd, .uid = -1, .gid = -1, .fds = {-1, -1, -1}, .controlling_tty = !pipe_mode};
    /* ours: the terminal's master side, or stdin's write end and stdout's and stderr's read ends; theirs: the other sides */
    int ours[3] = {-1, -1, -1}, theirs[3] = {-1, -1, -1}, ret = 0, i;
    gw_spawn_sandbox_t sandbox;
    char **envp;

    if (pty->started)
        return 0;
    /* on a terminal, the sandbox keeps the session whose controlling terminal is the pty (gw_spawn, ksys_bwrap_argv) */
    if (gw_spawn_sandbox_of(pty->ptys->host, &sandbox))
        spawn.sandbox = &sandbox;
    argv[argc++] = (char *)shell;
    /* execd runs bash without start-up files: a predictable prompt and environment */
    if (strcmp(base != NULL ? base + 1 : shell, "bash") == 0) {
        argv[argc++] = "--norc";
        argv[argc++] = "--noprofile";
    }
    if (pty->command != NULL) {
        argv[argc++] = "-c";
        argv[argc++] = pty->command;
    }
    argv[argc] = NULL;
    if (pipe_mode) {
        for (i = 0; i != 3; ++i) {
            int fds[2];
            if (pipe2(fds, O_CLOEXEC) != 0) {
                snprintf(err, err_size, "cannot create pipes: %s", strerror(errno));
                ret = GW_ESPAWN;
                goto Exit;
            }
            ours[i] = fds[i == 0 ? 1 : 0];
            spawn.fds[i] = theirs[i] = fds[i == 0 ? 0 : 1];
        }
    } else {
        if ((ret = open_terminal(&ours[0], &theirs[0], err, err_size)) != 0)
            return ret;
        spawn.fds[0] = spawn.fds[1] = spawn.fds[2] = theirs[0];
    }
    spawn.envp = envp = shell_env(pty->ptys->host, pipe_mode);
    ret = gw_spawn(&spawn, &pty->pid, err, err_size);
    gw_spawn_env_free(envp);
    if (ret != 0)
        goto Exit;
    pty->started = 1;
    pty->sandboxed = spawn.sandbox != NULL;
    pty->is_pipe = pipe_mode != 0;
    pty->in = watch(pty, ours[0], !pipe_mode);
    if (pipe_mode) {
        pty->out[0] = watch(pty, ours[1], 1);
        pty->out[1] = watch(pty, ours[2], 1);
    } else {
        pty->out[0] = pty->in;
    }
    ours[0] = ours[1] = ours[2] = -1; /* the sockets own them */

Exit:
    for (i = 0; i != 3; ++i) {
        if (ours[i] != -1)
            close(ours[i]);
        if (theirs[i] != -1)
            close(theirs[i]);
    }
    return ret;
}

int gw_pty_attach(gw_pty_t *pty, const gw_pty_sink_t *sink, void *data)
{
    if (pty->sink != NULL)
        return GW_EPTYBUSY;
    pty->sink = sink;
    pty->sink_data = data;
    pty->active_at_ms = gw_now_ms();
    return 0;
}

void gw_pty_detach(gw_pty_t *pty)
{
    pty->sink = NULL;
    pty->sink_data = NULL;
    pty->active_at_ms = gw_now_ms();
}

void *gw_pty_client(gw_pty_t *pty)
{
    return pty->sink != NULL ? pty->sink_data : NULL;
}

int gw_pty_is_running(const gw_pty_t *pty)
{
    return pty->started && !pty->exited;
}

static void flush_stdin(gw_pty_t *pty);

static void on_stdin_written(h2o_socket_t *sock, const char *err)
{
    gw_pty_t *pty = sock->data;

    free(pty->stdin_sending);
    pty->stdin_sending = NULL;
    pty->sending_len = 0;
    if (err != NULL) {
        free(pty->stdin_pending);
        pty->stdin_pending = NULL;
        pty->pending_len = 0;
        if (pty->sink != NULL && pty->sink->on_stdin_error != NULL)
            pty->sink->on_stdin_error(pty->sink_data, -EIO);
        return;
    }
    flush_stdin(pty);
}

/* One write in flight: what arrives meanwhile waits in `pending` and leaves when it completes. */
static void flush_stdin(gw_pty_t *pty)
{
    h2o_iovec_t buf;

    if (pty->stdin_sending != NULL || pty->pending_len == 0 || pty->in == NULL)
        return;
    pty->stdin_sending = pty->stdin_pending;
    pty->sending_len = pty->pending_len;
    pty->stdin_pending = NULL;
    pty->pending_len = 0;
    buf = h2o_iovec_init(pty->stdin_sending, pty->sending_len);
    h2o_socket_write(pty->in, &buf, 1, on_stdin_written);
}

int gw_pty_write(gw_pty_t *pty, const void *bytes, size_t len)
{
    if (!gw_pty_is_running(pty) || pty->in == NULL)
        return GW_ENOTRUNNING;
    if (pty->pending_len + pty->sending_len + len > pty->ptys->host->config->pty_stdin_bytes)
        return GW_ESTDINFULL;
    if (len == 0)
        return 0;
    pty->stdin_pending = wire_realloc(pty->stdin_pending, pty->pending_len + len);
    memcpy(pty->stdin_pending + pty->pending_len, bytes, len);
    pty->pending_len += len;
    flush_stdin(pty);
    return 0;
}

int gw_pty_resize(gw_pty_t *pty, unsigned cols, unsigned rows)
{
    struct winsize size = {(unsigned short)rows, (unsigned short)cols, 0, 0};

    if (!gw_pty_is_running(pty) || (!pty->is_pipe && pty->out[0] == NULL))
        return GW_ENOTRUNNING;
    if (pty->is_pipe)
        return GW_ENOTTY;
    return ioctl(h2o_socket_get_fd(pty->out[0]), TIOCSWINSZ, &size) == 0 ? 0 : -errno;
}

int gw_pty_signal(gw_pty_t *pty, int sig)
{
    pid_t group = pty->pid;

    if (!gw_pty_is_running(pty))
        return GW_ENOTRUNNING;
    /* a terminal's signals go to its foreground job, as the keyboard's do */
    if (!pty->is_pipe && pty->out[0] != NULL) {
        pid_t fg = tcgetpgrp(h2o_socket_get_fd(pty->out[0]));
        if (fg > 0)
            return kill(-fg, sig) == 0 ? 0 : -errno;
    }
    return gw_spawn_signal(group, pty->sandboxed, sig);
}

void gw_pty_destroy(gw_pty_t *pty)
{
    gw_pty_detach(pty);
    h2o_linklist_unlink(&pty->link);
    --pty->ptys->count;
    if (gw_pty_is_running(pty)) {
        kill_session(pty->pid);
        if (waitpid(pty->pid, NULL, WNOHANG) != pty->pid) {
            /* freed once reaped; nothing of it but the pid is needed meanwhile */
            close_all(pty);
            gw_ring_dispose(&pty->output);
            h2o_linklist_insert(&pty->ptys->dying, &pty->link);
            return;
        }
    }
    pty_free(pty);
}

/* The shell exited and its output is drained (or the drain time is over): the exit is final. */
static void maybe_finish(gw_pty_t *pty, int64_t now)
{
    if (!pty->exited || pty->finished)
        return;
    if (now - pty->exited_at_ms >= PTY_DRAIN_MS)
        close_all(pty);
    if (pty->out[0] != NULL || pty->out[1] != NULL)
        return;
    close_all(pty);
    pty->finished = 1;
    pty->active_at_ms = now;
    if (pty->sink != NULL)
        pty->sink->on_exit(pty->sink_data);
}

static int reap(gw_pty_t *pty, int64_t now)
{
    int status;

    if (!gw_pty_is_running(pty) || waitpid(pty->pid, &status, WNOHANG) != pty->pid)
        return 0;
    pty->exited = 1;
    pty->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    pty->exited_at_ms = now;
    /* the session is over: what it left running goes with it, and the terminal then reads EIO */
    kill_session(pty->pid);
    return 1;
}

void gw_ptys_tick(gw_ptys_t *ptys)
{
    const gw_config_t *config = ptys->host->config;
    int64_t now = gw_now_ms();
    h2o_linklist_t *node, *next;

    for (node = ptys->dying.next; node != &ptys->dying; node = next) {
        gw_pty_t *pty = H2O_STRUCT_FROM_MEMBER(gw_pty_t, link, node);
        next = node->next;
        if (reap(pty, now)) {
            h2o_linklist_unlink(&pty->link);
            pty_free(pty);
        }
    }
    for (node = ptys->list.next; node != &ptys->list; node = next) {
        gw_pty_t *pty = H2O_STRUCT_FROM_MEMBER(gw_pty_t, link, node);
        next = node->next;
        reap(pty, now);
        maybe_finish(pty, now);
        if (pty->sink == NULL && now - pty->active_at_ms >= (int64_t)config->pty_idle_ms)
            gw_pty_destroy(pty);
    }
}

void gw_ptys_kill_all(gw_ptys_t *ptys)
{
    while (!h2o_linklist_is_empty(&ptys->list))
        gw_pty_destroy(H2O_STRUCT_FROM_MEMBER(gw_pty_t, link, ptys->list.next));
    while (!h2o_linklist_is_empty(&ptys->dying)) {
        gw_pty_t *pty = H2O_STRUCT_FROM_MEMBER(gw_pty_t, link, ptys->dying.next);
        while (waitpid(pty->pid, NULL, 0) == -1 && errno == EINTR)
            ;
        h2o_linklist_unlink(&pty->link);
        pty_free(pty);
    }
}

void gw_ptys_init(gw_ptys_t *ptys, gw_host_t *host)
{
    ptys->host = host;
    h2o_linklist_init_anchor(&ptys->list);
    h2o_linklist_init_anchor(&ptys->dying);
    ptys->count = 0;
}

int gw_ptys_is_empty(gw_ptys_t *ptys)
{
    return h2o_linklist_is_empty(&ptys->list) && h2o_linklist_is_empty(&ptys->dying);
}
