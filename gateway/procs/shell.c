/* Processes run by `<shell> -c` in their own process group, their pipes read inside the event loop. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "procs/lines.h"
#include "core/errors.h"
#include "procs/shell.h"
#include "procs/spawn.h"

/* After the shell exits, output still in flight gets this long before the pipes are closed (a
 * background child may hold them open forever). */
#define SHELL_DRAIN_MS 100
/* A line longer than this is sent in pieces: no line makes kgate hold more of it. */
#define SHELL_MAX_LINE (64u << 10)

static void shell_close_pipe(gw_shell_t *shell, int index)
{
    if (shell->pipes[index] == NULL)
        return;
    h2o_socket_read_stop(shell->pipes[index]);
    h2o_socket_close(shell->pipes[index]);
    shell->pipes[index] = NULL;
}

static void shell_free(gw_shell_t *shell)
{
    shell_close_pipe(shell, 0);
    shell_close_pipe(shell, 1);
    h2o_linklist_unlink(&shell->link);
    free(shell);
}

/* Appends `len` bytes of valid UTF-8 as a stdout (index 0) or stderr event. */
static void append_event(gw_shell_t *shell, int index, const char *text, size_t len)
{
    json_t *ev = gw_event_new(index == 0 ? "stdout" : "stderr");

    json_object_set_new(ev, "text", json_stringn_nocheck(text, len));
    gw_run_append(shell->run, ev);
}

typedef struct st_line_ctx_t {
    gw_shell_t *shell;
    int index;
} line_ctx_t;

static void on_line(void *data, const char *line, size_t len)
{
    line_ctx_t *lc = data;
    char *text;
    size_t text_len;

    if (len == 0 && lc->shell->blank_as_newline) {
        append_event(lc->shell, lc->index, "\n", 1);
        return;
    }
    wire_utf8_sanitize(line, len, 1, &text, &text_len);
    append_event(lc->shell, lc->index, text, text_len);
    free(text);
}

/* Relays what the pipe holds; keeps an incomplete character (or line) for the next read unless `final`. */
static void relay_output(gw_shell_t *shell, int index, int final)
{
    h2o_socket_t *sock = shell->pipes[index];
    h2o_buffer_t *input = sock->input;
    size_t consumed;

    if (input->size == 0)
        return;
    if (shell->run == NULL) {
        consumed = input->size;
    } else if (shell->line_events) {
        line_ctx_t lc = {shell, index};
        consumed = gw_lines_split(input->bytes, input->size, final, SHELL_MAX_LINE, &shell->after_cr[index], on_line, &lc);
    } else {
        char *text;
        size_t text_len;
        consumed = wire_utf8_sanitize(input->bytes, input->size, final, &text, &text_len);
        if (text_len != 0)
            append_event(shell, index, text, text_len);
        free(text);
    }
    h2o_buffer_consume(&sock->input, consumed);
}

/* The run's error event for a shell that did not exit 0, or NULL. */
static json_t *exit_error(gw_shell_t *shell)
{
    char evalue[32], why[128];
    int code = WIFEXITED(shell->wait_status) ? WEXITSTATUS(shell->wait_status) : 128 + WTERMSIG(shell->wait_status);
    json_t *ev;

    snprintf(evalue, sizeof(evalue), "%d", code);
    if (!shell->timed_out)
        return code != 0 ? gw_error_event(shell->exit_ename, evalue) : NULL;
    snprintf(why, sizeof(why), "the command exceeded its timeout of %u ms and was killed", shell->timeout_ms);
    if (!shell->numeric_timeout_evalue)
        return gw_error_event("TimeoutError", why);
    ev = gw_error_event("TimeoutError", evalue);
    json_array_append_new(json_object_get(json_object_get(ev, "error"), "traceback"), json_string(why));
    return ev;
}

static void shell_maybe_finish(gw_shell_t *shell)
{
    json_t *ev;

    if (!shell->exited || shell->pipes[0] != NULL || shell->pipes[1] != NULL)
        return;
    if (shell->run != NULL && (ev = exit_error(shell)) != NULL)
        gw_run_append(shell->run, ev);
    if (shell->hooks != NULL && shell->hooks->on_exit != NULL)
        shell->hooks->on_exit(shell);
    if (shell->run != NULL) {
        int failed = shell->timed_out || !WIFEXITED(shell->wait_status) || WEXITSTATUS(shell->wait_status) != 0;
        gw_run_finish(shell->run, -1, shell->timed_out ? "timeout" : failed ? "error" : "ok");
    }
    shell_free(shell);
}

static void on_pipe_read(h2o_socket_t *sock, const char *err)
{
    gw_shell_t *shell = sock->data;
    int index = sock == shell->pipes[0] ? 0 : 1;
    h2o_buffer_t *input = sock->input;

    /* the hook sees each byte once: what the last read appended after the bytes kept back */
    if (shell->hooks != NULL && shell->hooks->on_output != NULL && input->size > shell->kept[index])
        shell->hooks->on_output(shell, index, input->bytes + shell->kept[index], input->size - shell->kept[index]);
    relay_output(shell, index, err != NULL);
    shell->kept[index] = sock->input->size;
    if (err != NULL) {
        shell_close_pipe(shell, index);
        shell_maybe_finish(shell);
    }
}

static void on_run_cancel(gw_run_t *run, void *data)
{
    gw_shell_t *shell = data;
    (void)run;

    shell->run = NULL;
    kill(-shell->pid, SIGKILL);
}

static void on_run_stop(gw_run_t *run, void *data)
{
    (void)run;
    gw_shell_signal(data, SIGINT);
}

static int on_run_input(gw_run_t *run, void *data, const char *value)
{
    (void)run, (void)data, (void)value;
    return GW_ENOINPUT; /* a shell's stdin is /dev/null */
}

static const gw_run_producer_t shell_producer = {on_run_cancel, on_run_stop, on_run_input, NULL};

static h2o_socket_t *watch_pipe(gw_shell_t *shell, int fd)
{
    h2o_socket_t *sock = h2o_evloop_socket_create(shell->shells->host->loop, fd, 0);
    sock->data = shell;
    h2o_socket_read_start(sock, on_pipe_read);
    return sock;
}

int gw_shell_spawn(gw_shells_t *shells, const gw_shell_options_t *opts, const gw_shell_hooks_t *hooks, void *data, gw_shell_t **out,
                   char *err, size_t err_size)
{
    const gw_config_t *config = shells->host->config;
    char *argv[] = {config->shell, "-c", (char *)opts->code, NULL};
    gw_spawn_options_t spawn = {
        .path = config->shell, .argv = argv, .cwd = opts->cwd, .uid = opts->uid, .gid = opts->gid, .fds = {-1, -1, -1}};
    int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, ret;
    gw_spawn_sandbox_t sandbox;
    gw_shell_t *shell;
    char **envp;
    pid_t pid;

    if (gw_spawn_sandbox_of(shells->host, &sandbox))
        spawn.sandbox = &sandbox;
    if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
        snprintf(err, err_size, "cannot create pipes: %s", strerror(errno));
        ret = GW_ESPAWN;
        goto Exit;
    }
    spawn.envp = envp = gw_spawn_env(opts->envs, shells->host->instance_env);
    spawn.fds[1] = out_pipe[1];
    spawn.fds[2] = err_pipe[1];
    ret = gw_spawn(&spawn, &pid, err, err_size);
    gw_spawn_env_free(envp);
    if (ret != 0)
        goto Exit;
    shell = wire_calloc(1, sizeof(*shell));
    shell->shells = shells;
    shell->hooks = hooks;
    shell->data = data;
    shell->pid = pid;
    shell->timeout_ms = opts->timeout_ms;
    shell->deadline_ms = opts->timeout_ms != 0 ? gw_now_ms() + opts->timeout_ms : 0;
    shell->exit_ename = opts->exit_ename;
    shell->line_events = opts->line_events;
    shell->blank_as_newline = opts->blank_as_newline;
    shell->numeric_timeout_evalue = opts->numeric_timeout_evalue;
    shell->keep_group = opts->keep_group;
    shell->sandboxed = spawn.sandbox != NULL;
    h2o_linklist_insert(&shells->list, &shell->link);
    shell->pipes[0] = watch_pipe(shell, out_pipe[0]);
    shell->pipes[1] = watch_pipe(shell, err_pipe[0]);
    out_pipe[0] = err_pipe[0] = -1; /* the sockets own them */
    *out = shell;

Exit:
    for (int i = 0; i != 2; ++i) {
        if (out_pipe[i] != -1)
            close(out_pipe[i]);
        if (err_pipe[i] != -1)
            close(err_pipe[i]);
    }
    return ret;
}

void gw_shell_set_run(gw_shell_t *shell, gw_run_t *run)
{
    shell->run = run;
    gw_run_mark_started(run);
    gw_run_set_producer(run, &shell_producer, shell);
}

int gw_shell_start(gw_shells_t *shells, const char *code, const gw_run_limits_t *limits, unsigned timeout_ms, gw_run_t **out)
{
    gw_shell_options_t opts = {.code = code, .uid = -1, .gid = -1, .timeout_ms = timeout_ms, .exit_ename = "CommandExitError"};
    gw_shell_t *shell;
    char err[256];
    int ret;

    if ((ret = gw_shell_spawn(shells, &opts, NULL, NULL, &shell, err, sizeof(err))) != 0)
        return ret;
    *out = gw_run_create(shells->runs, NULL, NULL, limits); /* init names the run itself: DELETE /code?id= takes it */
    gw_shell_set_run(shell, *out);
    return 0;
}

void gw_shell_signal(gw_shell_t *shell, int sig)
{
    if (!shell->exited)
        gw_spawn_signal(shell->pid, shell->sandboxed, sig);
}

static gw_shell_t *find_shell(gw_shells_t *shells, const char *run_id)
{
    h2o_linklist_t *node;
    for (node = shells->list.next; node != &shells->list; node = node->next) {
        gw_shell_t *shell = H2O_STRUCT_FROM_MEMBER(gw_shell_t, link, node);
        if (shell->run != NULL && strcmp(gw_run_id(shell->run), run_id) == 0)
            return shell;
    }
    return NULL;
}

int gw_shell_interrupt(gw_shells_t *shells, const char *run_id)
{
    gw_shell_t *shell = find_shell(shells, run_id);

    if (shell == NULL || shell->exited)
        return GW_ENOTFOUND;
    gw_spawn_signal(shell->pid, shell->sandboxed, SIGINT);
    return 0;
}

void gw_shells_tick(gw_shells_t *shells)
{
    h2o_linklist_t *node, *next;
    int64_t now = gw_now_ms(); /* deadlines on the monotonic clock: a step of the wall clock times nothing out */

    for (node = shells->list.next; node != &shells->list; node = next) {
        gw_shell_t *shell = H2O_STRUCT_FROM_MEMBER(gw_shell_t, link, node);
        next = node->next;
        if (!shell->exited) {
            if (!shell->timed_out && shell->deadline_ms != 0 && now >= shell->deadline_ms) {
                shell->timed_out = 1;
                kill(-shell->pid, SIGKILL);
            }
            if (waitpid(shell->pid, &shell->wait_status, WNOHANG) != shell->pid)
                continue;
            shell->exited = 1;
            shell->exited_at_ms = now;
            /* a stateless run leaves nothing behind; a command's background children may stay */
            if (!shell->keep_group)
                kill(-shell->pid, SIGKILL);
        }
        if (now - shell->exited_at_ms >= SHELL_DRAIN_MS) {
            shell_close_pipe(shell, 0);
            shell_close_pipe(shell, 1);
        }
        shell_maybe_finish(shell);
    }
}

void gw_shells_kill_all(gw_shells_t *shells)
{
    while (!h2o_linklist_is_empty(&shells->list)) {
        gw_shell_t *shell = H2O_STRUCT_FROM_MEMBER(gw_shell_t, link, shells->list.next);
        kill(-shell->pid, SIGKILL);
        if (!shell->exited)
            waitpid(shell->pid, NULL, 0);
        if (shell->run != NULL)
            gw_run_set_producer(shell->run, NULL, NULL); /* the run is ended by gw_runs_shutdown, without us */
        shell->run = NULL;
        if (shell->hooks != NULL && shell->hooks->on_exit != NULL) {
            shell->exited = 1;
            shell->wait_status = SIGKILL; /* as if killed: the owner records a final state */
            shell->hooks->on_exit(shell);
        }
        shell_free(shell);
    }
}

void gw_shells_init(gw_shells_t *shells, gw_host_t *host, gw_runs_t *runs)
{
    shells->host = host;
    shells->runs = runs;
    h2o_linklist_init_anchor(&shells->list);
}

int gw_shells_is_empty(gw_shells_t *shells)
{
    return h2o_linklist_is_empty(&shells->list);
}
