/* Stateless runs: `bash -c <code>` in a fresh process group, its pipes read inside the event loop. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "gateway/server.h"
#include "gateway/shell.h"
#include "gateway/translate.h"
#include "gateway/utf8.h"

/* After the shell exits, output still in flight gets this long before the pipes are closed (a
 * background child may hold them open forever). */
#define SHELL_DRAIN_MS 100

typedef struct st_gw_shell_t {
    gw_server_t *server;
    gw_run_t *run;
    pid_t pid;
    h2o_socket_t *pipes[2]; /* stdout, stderr; NULL once closed */
    int exited;
    int wait_status;
    int64_t exited_at_ms;
    int64_t deadline_ms;
    unsigned timeout_ms;
    int timed_out;
    h2o_linklist_t link; /* in server->shell_runs */
} gw_shell_t;

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

/* Relays what the pipe has; keeps an incomplete UTF-8 character for the next read unless `final`. */
static void relay_output(gw_shell_t *shell, h2o_socket_t *sock, int final)
{
    h2o_buffer_t *input = sock->input;
    char *text;
    size_t text_len, consumed;

    if (input->size == 0)
        return;
    consumed = gw_utf8_sanitize(input->bytes, input->size, final, &text, &text_len);
    if (text_len != 0 && shell->run != NULL) {
        json_t *ev = gw_event_new(sock == shell->pipes[0] ? "stdout" : "stderr");
        json_object_set_new(ev, "text", json_stringn_nocheck(text, text_len));
        gw_run_append(shell->run, ev);
    }
    free(text);
    h2o_buffer_consume(&sock->input, consumed);
}

static void shell_maybe_finish(gw_shell_t *shell)
{
    json_t *ev;
    char evalue[32];
    int code;

    if (!shell->exited || shell->pipes[0] != NULL || shell->pipes[1] != NULL)
        return;
    if (shell->run != NULL) {
        if (WIFEXITED(shell->wait_status)) {
            code = WEXITSTATUS(shell->wait_status);
        } else {
            code = 128 + WTERMSIG(shell->wait_status); /* as shells report it */
        }
        if (shell->timed_out) {
            char why[96];
            snprintf(why, sizeof(why), "the command exceeded its timeout of %u ms and was killed", shell->timeout_ms);
            gw_run_append(shell->run, gw_error_event("TimeoutError", why));
        } else if (code != 0) {
            snprintf(evalue, sizeof(evalue), "%d", code);
            ev = gw_error_event("CommandExitError", evalue);
            gw_run_append(shell->run, ev);
        }
        gw_run_finish(shell->run, -1, shell->timed_out ? "timeout" : code != 0 ? "error" : "ok");
    }
    shell_free(shell);
}

static void on_pipe_read(h2o_socket_t *sock, const char *err)
{
    gw_shell_t *shell = sock->data;
    int index = sock == shell->pipes[0] ? 0 : 1;

    relay_output(shell, sock, err != NULL);
    if (err != NULL) {
        shell_close_pipe(shell, index);
        shell_maybe_finish(shell);
    }
}

static void on_run_cancel(gw_run_t *run)
{
    gw_shell_t *shell = run->producer_data;

    shell->run = NULL;
    kill(-shell->pid, SIGKILL);
}

static void on_run_stop(gw_run_t *run)
{
    gw_shell_t *shell = run->producer_data;

    if (!shell->exited)
        kill(-shell->pid, SIGINT);
}

static int on_run_input(gw_run_t *run, const char *value)
{
    (void)run, (void)value;
    return -1; /* a stateless command's stdin is /dev/null */
}

static const gw_run_producer_t shell_producer = {on_run_cancel, on_run_stop, on_run_input};

static h2o_socket_t *watch_pipe(gw_shell_t *shell, int fd)
{
    h2o_socket_t *sock = h2o_evloop_socket_create(shell->server->ctx.loop, fd, 0);
    sock->data = shell;
    h2o_socket_read_start(sock, on_pipe_read);
    return sock;
}

gw_run_t *gw_shell_start(gw_server_t *server, const char *code, const gw_run_limits_t *limits, unsigned timeout_ms)
{
    const gw_config_t *config = server->config;
    int out[2], err[2];
    pid_t pid;
    gw_shell_t *shell;

    if (pipe2(out, O_CLOEXEC) != 0)
        return NULL;
    if (pipe2(err, O_CLOEXEC) != 0) {
        close(out[0]);
        close(out[1]);
        return NULL;
    }
    if ((pid = fork()) == -1) {
        close(out[0]), close(out[1]), close(err[0]), close(err[1]);
        return NULL;
    }
    if (pid == 0) {
        int devnull = open("/dev/null", O_RDONLY);
        setsid();
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        dup2(devnull, 0);
        dup2(out[1], 1);
        dup2(err[1], 2);
        execl(config->shell, config->shell, "-c", code, (char *)NULL);
        dprintf(2, "kgate: cannot run %s: %s\n", config->shell, strerror(errno));
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    shell = wire_calloc(1, sizeof(*shell));
    shell->server = server;
    shell->pid = pid;
    h2o_linklist_insert(&server->shell_runs, &shell->link);
    shell->timeout_ms = timeout_ms;
    shell->deadline_ms = gw_unix_ms() + timeout_ms;
    shell->run = gw_run_create(server, NULL, limits); /* init names the run itself: DELETE /code?id= takes it */
    gw_run_mark_started(shell->run);
    shell->pipes[0] = watch_pipe(shell, out[0]);
    shell->pipes[1] = watch_pipe(shell, err[0]);
    gw_run_set_producer(shell->run, &shell_producer, shell);
    return shell->run;
}

static gw_shell_t *find_shell(gw_server_t *server, const char *run_id)
{
    h2o_linklist_t *node;
    for (node = server->shell_runs.next; node != &server->shell_runs; node = node->next) {
        gw_shell_t *shell = H2O_STRUCT_FROM_MEMBER(gw_shell_t, link, node);
        if (shell->run != NULL && strcmp(shell->run->id, run_id) == 0)
            return shell;
    }
    return NULL;
}

int gw_shell_interrupt(gw_server_t *server, const char *run_id)
{
    gw_shell_t *shell = find_shell(server, run_id);

    if (shell == NULL || shell->exited)
        return -1;
    kill(-shell->pid, SIGINT);
    return 0;
}

void gw_shell_tick(gw_server_t *server)
{
    h2o_linklist_t *node, *next;
    int64_t now = gw_unix_ms();

    for (node = server->shell_runs.next; node != &server->shell_runs; node = next) {
        gw_shell_t *shell = H2O_STRUCT_FROM_MEMBER(gw_shell_t, link, node);
        next = node->next;
        if (!shell->exited) {
            if (!shell->timed_out && now >= shell->deadline_ms) {
                shell->timed_out = 1;
                kill(-shell->pid, SIGKILL);
            }
            if (waitpid(shell->pid, &shell->wait_status, WNOHANG) != shell->pid)
                continue;
            shell->exited = 1;
            shell->exited_at_ms = now;
            /* nothing of a stateless run persists: background children die with it */
            kill(-shell->pid, SIGKILL);
        }
        if (now - shell->exited_at_ms >= SHELL_DRAIN_MS) {
            shell_close_pipe(shell, 0);
            shell_close_pipe(shell, 1);
        }
        shell_maybe_finish(shell);
    }
}

void gw_shell_kill_all(gw_server_t *server)
{
    while (!h2o_linklist_is_empty(&server->shell_runs)) {
        gw_shell_t *shell = H2O_STRUCT_FROM_MEMBER(gw_shell_t, link, server->shell_runs.next);
        if (!shell->exited) {
            kill(-shell->pid, SIGKILL);
            waitpid(shell->pid, NULL, 0);
        }
        if (shell->run != NULL)
            shell->run->producer = NULL;
        shell_free(shell);
    }
}
