/* procs/shell.h: processes run by `<shell> -c`: stateless runs and commands, streamed as runs. */
#ifndef GW_SHELL_H
#define GW_SHELL_H

#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>
#include <h2o.h>
#include "core/host.h"
#include "runs/run.h"

typedef struct st_gw_shell_t gw_shell_t;

/** Every shell process not yet reaped: stateless runs and commands. */
typedef struct st_gw_shells_t {
    gw_host_t *host;     /* config->shell is the shell run */
    gw_runs_t *runs;     /* where stateless runs are registered */
    h2o_linklist_t list; /* gw_shell_t */
} gw_shells_t;

/** How to run one `<config->shell> -c <code>` process. */
typedef struct st_gw_shell_options_t {
    const char *code;
    const char *cwd;                     /* NULL: kgate's working directory */
    json_t *envs;                        /* {"K": "V"} added to kgate's environment; borrowed; may be NULL */
    long uid, gid;                       /* >= 0: the child switches to them (setgroups, setgid, setuid); -1: kgate's own */
    unsigned timeout_ms;                 /* 0: none */
    const char *exit_ename;              /* ename of the error event of a non-zero exit */
    unsigned line_events : 1;            /* one stdout/stderr event per line, terminator removed (commands); else per read */
    unsigned blank_as_newline : 1;       /* with line_events: a blank line's text is "\n" (execd), not "" */
    unsigned numeric_timeout_evalue : 1; /* a timed-out run's evalue is its exit status, as SDKs parse it (commands) */
    unsigned keep_group : 1; /* the process group may outlive the shell (commands); else it is killed when the shell exits */
} gw_shell_options_t;

/** What the owner of a process hears besides the run's events. Both may be NULL. */
typedef struct st_gw_shell_hooks_t {
    /** Output bytes as read, before any conversion (`is_stderr` says from which pipe). */
    void (*on_output)(gw_shell_t *shell, int is_stderr, const char *bytes, size_t len);
    /** The shell has exited (shell->wait_status, shell->timed_out) and its output is drained: called
     * once, before the run is finished; the shell is freed right after. */
    void (*on_exit)(gw_shell_t *shell);
} gw_shell_hooks_t;

struct st_gw_shell_t {
    gw_shells_t *shells;
    gw_run_t *run; /* receives the events; NULL when there is none (background command) or it was cancelled */
    const gw_shell_hooks_t *hooks;
    void *data;             /* the owner's */
    pid_t pid;              /* also the process group id */
    h2o_socket_t *pipes[2]; /* stdout, stderr; NULL once closed */
    int after_cr[2];        /* gw_lines_split state per pipe */
    size_t kept[2];         /* bytes left in each pipe's input buffer by the last read (already hooked) */
    int exited;
    int wait_status;
    int64_t exited_at_ms; /* gw_now_ms clock */
    int64_t deadline_ms;  /* gw_now_ms clock; 0: no timeout */
    unsigned timeout_ms;
    const char *exit_ename;
    unsigned timed_out : 1;
    unsigned line_events : 1;
    unsigned blank_as_newline : 1;
    unsigned numeric_timeout_evalue : 1;
    unsigned keep_group : 1;
    unsigned sandboxed : 1; /* pid is bwrap's (gw_spawn_signal) */
    h2o_linklist_t link;    /* in shells->list */
};

/**
 * Starts `<config->shell> -c <code>` in a new session (its own process group; stdin /dev/null,
 * stdout and stderr piped into the loop) that dies with kgate (gw_spawn), inside the server's sandbox
 * under --sandbox bwrap (gw_spawn_sandbox_of; the process is then bwrap, and the shell's background
 * children end with the shell: the sandbox's pid namespace goes when its first process exits). The child's set-up
 * (chdir, credentials, exec) is checked before this returns. Returns 0 and the process in `*out`,
 * or GW_ESPAWN with the reason in `err` (nothing started). The process belongs to `shells` until
 * it is reaped (gw_shells_tick).
 */
int gw_shell_spawn(gw_shells_t *shells, const gw_shell_options_t *opts, const gw_shell_hooks_t *hooks, void *data, gw_shell_t **out,
                   char *err, size_t err_size);

/**
 * Makes `run` the process's event sink (call right after gw_shell_spawn, before the loop runs):
 * output becomes `stdout`/`stderr` events, valid UTF-8. Once the shell has exited and its output is
 * drained, a non-zero status becomes an `error` event (ename `exit_ename`, evalue the decimal status,
 * 128+N for signal N) and the run is finished. Past `timeout_ms` the whole group is killed (SIGKILL)
 * and the error's ename is "TimeoutError". The run's stop (DELETE /code/executions/{id}) sends SIGINT.
 */
void gw_shell_set_run(gw_shell_t *shell, gw_run_t *run);

/**
 * A stateless run: `code` with kgate's cwd and environment, output per read, ename
 * "CommandExitError", background children killed with the shell. Returns 0 and its run in `*out`
 * (init text: the run's own id, which DELETE /code?id= takes), or GW_ESPAWN.
 */
int gw_shell_start(gw_shells_t *shells, const char *code, const gw_run_limits_t *limits, unsigned timeout_ms, gw_run_t **out);

/** Sends `sig` to the process group of `shell` (unless it has exited). */
void gw_shell_signal(gw_shell_t *shell, int sig);

/** Sends SIGINT to the process group of the stateless run `run_id`. Returns 0, or GW_ENOTFOUND. */
int gw_shell_interrupt(gw_shells_t *shells, const char *run_id);

/** Initialises an empty set; stateless runs are registered in `runs`. */
void gw_shells_init(gw_shells_t *shells, gw_host_t *host, gw_runs_t *runs);
/** Reaps finished shell processes and enforces their timeouts (server tick). */
void gw_shells_tick(gw_shells_t *shells);
/** Kills every shell process group (SIGKILL) and reaps them (server shutdown). */
void gw_shells_kill_all(gw_shells_t *shells);
/** True when no shell process remains. */
int gw_shells_is_empty(gw_shells_t *shells);

#endif
