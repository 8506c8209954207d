/* Commands: shell processes with an id, a status record and a bounded log, kept after they exit. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "procs/command.h"

static void command_free(gw_command_t *cmd)
{
    h2o_linklist_unlink(&cmd->link);
    gw_idmap_remove(&cmd->commands->by_id, &cmd->by_id);
    --cmd->commands->count;
    gw_cmdlog_dispose(&cmd->log);
    free(cmd->command);
    free(cmd);
}

/* Drops the oldest finished record; 0 when there was one. */
static int evict_oldest_finished(gw_commands_t *commands)
{
    h2o_linklist_t *node;

    for (node = commands->list.next; node != &commands->list; node = node->next) {
        gw_command_t *cmd = H2O_STRUCT_FROM_MEMBER(gw_command_t, link, node);
        if (!cmd->running) {
            command_free(cmd);
            return 0;
        }
    }
    return -1;
}

static void on_shell_output(gw_shell_t *shell, int is_stderr, const char *bytes, size_t len)
{
    gw_command_t *cmd = shell->data;
    (void)is_stderr;

    gw_cmdlog_append(&cmd->log, bytes, len);
}

static void on_shell_exit(gw_shell_t *shell)
{
    gw_command_t *cmd = shell->data;
    int status = shell->wait_status;

    cmd->shell = NULL;
    cmd->running = 0;
    cmd->timed_out = shell->timed_out;
    cmd->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    cmd->finished_at_ms = gw_unix_ms();
    cmd->finished_mono_ms = gw_now_ms();
}

static const gw_shell_hooks_t command_hooks = {on_shell_output, on_shell_exit};

int gw_command_start(gw_commands_t *commands, const gw_command_options_t *opts, gw_command_t **out, gw_run_t **run, char *err,
                     size_t err_size)
{
    const gw_config_t *config = commands->host->config;
    gw_shell_options_t sopts = {
        .code = opts->command,
        .cwd = opts->cwd,
        .envs = opts->envs,
        .uid = opts->uid,
        .gid = opts->gid,
        .timeout_ms = opts->timeout_ms,
        .exit_ename = "CommandExecError", /* execd's */
        .line_events = 1,
        .blank_as_newline = config->compat_execd != 0,
        .numeric_timeout_evalue = 1,
        .keep_group = 1,
    };
    gw_command_t *cmd;
    char path[1024];
    int ret;

    *run = NULL;
    if (commands->count >= config->max_commands && evict_oldest_finished(commands) != 0) {
        snprintf(err, err_size, "%zu commands are running (--max-commands)", commands->count);
        return GW_ETOOMANYCOMMANDS;
    }
    cmd = wire_calloc(1, sizeof(*cmd));
    wire_uuid4(cmd->id);
    cmd->commands = commands;
    if ((ret = gw_shell_spawn(commands->shells, &sopts, &command_hooks, cmd, &cmd->shell, err, err_size)) != 0) {
        free(cmd);
        return ret;
    }
    cmd->command = wire_strdup(opts->command);
    cmd->pid = cmd->shell->pid;
    cmd->background = opts->background != 0;
    cmd->running = 1;
    cmd->started_at_ms = gw_unix_ms();
    snprintf(path, sizeof(path), "%s/command-%s.log", commands->log_dir, cmd->id);
    gw_cmdlog_open(&cmd->log, path, config->max_command_log_bytes); /* without a file the log only counts bytes */
    h2o_linklist_insert(&commands->list, &cmd->link);
    gw_idmap_insert(&commands->by_id, &cmd->by_id, cmd->id);
    ++commands->count;
    if (!cmd->background) {
        *run = gw_run_create(commands->runs, NULL, cmd->id, &opts->limits);
        gw_shell_set_run(cmd->shell, *run);
    }
    *out = cmd;
    return 0;
}

gw_command_t *gw_command_find(gw_commands_t *commands, const char *id)
{
    gw_idmap_entry_t *e = gw_idmap_find(&commands->by_id, id);
    return e != NULL ? H2O_STRUCT_FROM_MEMBER(gw_command_t, by_id, e) : NULL;
}

void gw_command_terminate(gw_command_t *cmd)
{
    if (!cmd->running)
        return;
    gw_shell_signal(cmd->shell, SIGTERM);
    if (cmd->kill_at_ms == 0)
        cmd->kill_at_ms = gw_now_ms() + cmd->commands->host->config->command_kill_grace_ms;
}

static json_t *rfc3339(int64_t ms)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    char buf[64];
    size_t n;

    gmtime_r(&secs, &tm);
    n = strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, sizeof(buf) - n, ".%03dZ", (int)(ms % 1000));
    return json_string(buf);
}

json_t *gw_command_to_json(const gw_command_t *cmd)
{
    json_t *obj = json_pack("{s:s, s:s, s:s, s:b, s:b, s:i, s:I}", "id", cmd->id, "command", cmd->command, "content", cmd->command,
                            "background", cmd->background, "running", cmd->running, "pid", (int)cmd->pid, "log_bytes",
                            (json_int_t)cmd->log.total);

    json_object_set_new(obj, "started_at", rfc3339(cmd->started_at_ms));
    if (cmd->running) {
        json_object_set_new(obj, "exit_code", json_null());
        json_object_set_new(obj, "finished_at", json_null());
        json_object_set_new(obj, "error", json_null());
        return obj;
    }
    json_object_set_new(obj, "exit_code", json_integer(cmd->exit_code));
    json_object_set_new(obj, "finished_at", rfc3339(cmd->finished_at_ms));
    if (cmd->timed_out)
        json_object_set_new(obj, "error", json_string("the command exceeded its timeout and was killed"));
    else if (cmd->exit_code != 0)
        json_object_set_new(obj, "error", json_sprintf("exit status %d", cmd->exit_code));
    else
        json_object_set_new(obj, "error", json_null());
    return obj;
}

void gw_commands_init(gw_commands_t *commands, gw_host_t *host, gw_runs_t *runs, gw_shells_t *shells, const char *log_dir)
{
    commands->host = host;
    commands->runs = runs;
    commands->shells = shells;
    commands->log_dir = log_dir;
    h2o_linklist_init_anchor(&commands->list);
    commands->count = 0;
    gw_idmap_init(&commands->by_id);
}

void gw_commands_tick(gw_commands_t *commands)
{
    const gw_config_t *config = commands->host->config;
    int64_t now = gw_now_ms(); /* deadlines on the monotonic clock; the *_at_ms shown to clients stay wall time */
    h2o_linklist_t *node, *next;

    for (node = commands->list.next; node != &commands->list; node = next) {
        gw_command_t *cmd = H2O_STRUCT_FROM_MEMBER(gw_command_t, link, node);
        next = node->next;
        if (cmd->kill_at_ms != 0 && now >= cmd->kill_at_ms) {
            /* the shell may be gone while children that ignored SIGTERM still hold its group */
            kill(-cmd->pid, SIGKILL);
            cmd->kill_at_ms = 0;
        }
        if (!cmd->running && cmd->kill_at_ms == 0 && now - cmd->finished_mono_ms >= (int64_t)config->command_retention_ms)
            command_free(cmd);
    }
}

void gw_commands_dispose(gw_commands_t *commands)
{
    while (!h2o_linklist_is_empty(&commands->list)) {
        gw_command_t *cmd = H2O_STRUCT_FROM_MEMBER(gw_command_t, link, commands->list.next);
        if (cmd->shell != NULL)
            cmd->shell->data = NULL, cmd->shell->hooks = NULL;
        command_free(cmd);
    }
    gw_idmap_dispose(&commands->by_id);
}
