/* gateway/shell.h: stateless runs: code executed by `bash -c` in a fresh process, streamed as a run. */
#ifndef GW_SHELL_H
#define GW_SHELL_H

#include <h2o.h>
#include "gateway/run.h"

typedef struct st_gw_server_t gw_server_t;

/**
 * Starts `<config->shell> -c <code>` in its own session (stdin /dev/null, stdout and stderr piped)
 * and returns its run: stdout/stderr events as output arrives, then `error` (ename
 * "CommandExitError", evalue the exit status, 128+N for signal N) when it did not exit 0, then
 * execution_complete. Past `timeout_ms` the whole process group is killed and the run ends with
 * ename "TimeoutError". Returns NULL when the process cannot be started.
 */
gw_run_t *gw_shell_start(gw_server_t *server, const char *code, const gw_run_limits_t *limits, unsigned timeout_ms);

/** Sends SIGINT to the process group of the stateless run `run_id`. Returns 0, or -1 if unknown. */
int gw_shell_interrupt(gw_server_t *server, const char *run_id);

/** Reaps finished shell processes and enforces their timeouts (called from the server tick). */
void gw_shell_tick(gw_server_t *server);

/** Kills every shell process group (SIGKILL) and reaps them (server shutdown). */
void gw_shell_kill_all(gw_server_t *server);

#endif
