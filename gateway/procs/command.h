/* procs/command.h: commands (execd's POST /command): shell processes with an id, a status and a log. */
#ifndef GW_COMMAND_H
#define GW_COMMAND_H

#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>
#include <h2o.h>
#include "wire/ids.h"
#include "procs/cmdlog.h"
#include "core/idmap.h"
#include "runs/run.h"
#include "procs/shell.h"

/** The command records, running and finished. */
typedef struct st_gw_commands_t {
    gw_host_t *host;
    gw_runs_t *runs;     /* where foreground commands' runs are registered */
    gw_shells_t *shells; /* what runs their processes */
    const char *log_dir; /* borrowed: where the log files go (kgate's runtime directory) */
    h2o_linklist_t list; /* gw_command_t, oldest first */
    size_t count;        /* bounded by config->max_commands */
    gw_idmap_t by_id;
} gw_commands_t;

/**
 * One command. Its record outlives its process: it stays queryable (status, logs) until it has been
 * finished for `command_retention_ms`, or until more than `max_commands` records exist (the oldest
 * finished one goes first). Its log (stdout and stderr interleaved as they arrived) lives in a ring
 * file of `max_command_log_bytes` in kgate's runtime directory, deleted with the record.
 */
typedef struct st_gw_command_t {
    char id[WIRE_UUID_STRLEN + 1];
    gw_commands_t *commands;
    char *command;
    gw_shell_t *shell; /* NULL once the shell has exited */
    pid_t pid;         /* the shell, and its process group */
    unsigned background : 1;
    unsigned running : 1;
    unsigned timed_out : 1;
    int exit_code; /* once not running: the exit status, 128+N for signal N */
    int64_t started_at_ms;
    int64_t finished_at_ms;   /* 0 while running */
    int64_t finished_mono_ms; /* the same on gw_now_ms's clock: retention counts from it */
    int64_t kill_at_ms;       /* after DELETE (gw_now_ms's clock): SIGKILL to the group then, unless it is gone; 0: none */
    gw_cmdlog_t log;
    h2o_linklist_t link;    /* in commands->list, oldest first */
    gw_idmap_entry_t by_id; /* in commands->by_id */
} gw_command_t;

typedef struct st_gw_command_options_t {
    const char *command;
    const char *cwd;     /* NULL: kgate's working directory */
    json_t *envs;        /* {"K": "V"}, borrowed, may be NULL */
    long uid, gid;       /* -1: kgate's own */
    unsigned timeout_ms; /* 0: none */
    int background;
    gw_run_limits_t limits; /* of a foreground command's run */
} gw_command_options_t;

/**
 * Starts a command. A foreground command streams as `*run` (init text: the command id; stdout and
 * stderr one event per line; error evalue the exit status; then execution_complete); a background
 * one has no events (`*run` NULL), only its log. Returns 0 and the record in `*out`; GW_ESPAWN when
 * the process could not be started (reason in `err`: a missing cwd, a failed exec);
 * GW_ETOOMANYCOMMANDS when `max_commands` records are all running (reason in `err`).
 */
int gw_command_start(gw_commands_t *commands, const gw_command_options_t *opts, gw_command_t **out, gw_run_t **run, char *err,
                     size_t err_size);

/** The command with `id`, or NULL. */
gw_command_t *gw_command_find(gw_commands_t *commands, const char *id);

/** DELETE /command: SIGTERM to the command's process group now, SIGKILL `command_kill_grace_ms` later. */
void gw_command_terminate(gw_command_t *cmd);

/**
 * The status object: id, command (also as execd's `content`), background, running, exit_code (null
 * while running), error (why it failed; null while running or after exit 0), started_at, finished_at (RFC 3339 UTC, null while
 * running), pid, log_bytes (its log's end offset).
 */
json_t *gw_command_to_json(const gw_command_t *cmd);

/** Initialises an empty registry; logs go to `log_dir` (borrowed for the registry's life). */
void gw_commands_init(gw_commands_t *commands, gw_host_t *host, gw_runs_t *runs, gw_shells_t *shells, const char *log_dir);
/** Escalates terminations and collects expired records (server tick). */
void gw_commands_tick(gw_commands_t *commands);
/** Frees every record and deletes the logs (after the processes are gone). */
void gw_commands_dispose(gw_commands_t *commands);

#endif
