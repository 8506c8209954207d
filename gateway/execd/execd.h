/* execd/execd.h: the execd front door: OpenSandbox execd's HTTP API (docs/API.md Parts 1-3) over the engine. */
#ifndef GW_EXECD_H
#define GW_EXECD_H

#include <h2o.h>
#include "core/host.h"
#include "core/router.h"
#include "code/context.h"
#include "code/languages.h"
#include "files/files.h"
#include "metrics/metrics.h"
#include "procs/command.h"
#include "procs/isolated.h"
#include "procs/pty.h"
#include "procs/shell.h"
#include "runs/run.h"

/**
 * The door's state: the engine features it speaks for (borrowed from the server) and its own
 * streams. Its route handlers get this, never the server.
 */
typedef struct st_gw_execd_t {
    gw_door_t super;
    gw_host_t *host;
    gw_runs_t *runs;
    gw_languages_t *languages;
    gw_contexts_t *contexts;
    gw_shells_t *shells;
    gw_commands_t *commands;
    gw_files_t *files;
    /* the workspace the files handler being called works in: files->ws, or an isolated session's view while its
     * /v1/isolated/session/{id}/files/... wrapper calls the handler (a handler that goes on later copies it) */
    const gw_workspace_t *files_ws;
    gw_isolated_t *isolated;
    gw_metrics_t *metrics;
    gw_ptys_t *ptys;
    h2o_linklist_t metrics_watches; /* GET /metrics/watch responses */
    h2o_linklist_t pty_clients;     /* WebSockets of /pty/{id}/ws, open or closing */
} gw_execd_t;

/** Initialises the door over the given engine features (all borrowed for the door's life). */
void gw_execd_init(gw_execd_t *execd, gw_host_t *host, gw_runs_t *runs, gw_languages_t *languages, gw_contexts_t *contexts,
                   gw_shells_t *shells, gw_commands_t *commands, gw_files_t *files, gw_metrics_t *metrics, gw_ptys_t *ptys,
                   gw_isolated_t *isolated);
/** A row of the door's route table: gw_execd_add_routes makes each a gw_route_t of the door. */
typedef struct st_gw_execd_route_row_t {
    const char *method, *pattern;
    gw_route_handler_t handler;
    /* the one kind of route allowed past --max-body-bytes, up to --max-upload-bytes */
    int is_upload;
} gw_execd_route_row_t;
/** The isolated sessions' routes (/v1/isolated/..., isolated_api.c), which gw_execd_add_routes adds too. */
extern const gw_execd_route_row_t gw_execd_isolated_rows[];
extern const size_t gw_execd_num_isolated_rows;
/** Appends the door's routes to `table` (body limits from the configuration). */
void gw_execd_add_routes(gw_execd_t *execd, gw_route_table_t *table);
/** Writes due lines of /metrics/watch streams (server tick). */
void gw_execd_tick(gw_execd_t *execd);
/**
 * Ends the door's own streams and WebSockets (server shutdown; PTY clients are detached, so call
 * it before gw_ptys_kill_all); runs end with the engine.
 */
void gw_execd_shutdown(gw_execd_t *execd);
/** True once every stream and WebSocket of the door's own has been disposed (after gw_execd_shutdown). */
int gw_execd_is_drained(gw_execd_t *execd);
/* gw_execd_shutdown's parts, by file. */
void gw_execd_metrics_shutdown(gw_execd_t *execd);
void gw_execd_pty_shutdown(gw_execd_t *execd);

/* Route handlers, grouped by file. */
#define GW_EXECD_HANDLER(name) void gw_execd_##name(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
GW_EXECD_HANDLER(ping);
GW_EXECD_HANDLER(files_info);
GW_EXECD_HANDLER(files_delete);
GW_EXECD_HANDLER(files_permissions);
GW_EXECD_HANDLER(files_mv);
GW_EXECD_HANDLER(files_search);
GW_EXECD_HANDLER(files_replace);
GW_EXECD_HANDLER(files_upload);
GW_EXECD_HANDLER(files_download);
GW_EXECD_HANDLER(directories_list);
GW_EXECD_HANDLER(directories_create);
GW_EXECD_HANDLER(directories_delete);
GW_EXECD_HANDLER(editor);
GW_EXECD_HANDLER(languages);
GW_EXECD_HANDLER(context_create);
GW_EXECD_HANDLER(context_list);
GW_EXECD_HANDLER(context_get);
GW_EXECD_HANDLER(context_delete);
GW_EXECD_HANDLER(context_delete_by_language);
GW_EXECD_HANDLER(context_restart);
GW_EXECD_HANDLER(code_execute);
GW_EXECD_HANDLER(code_interrupt);
GW_EXECD_HANDLER(execution_get);
GW_EXECD_HANDLER(execution_events);
GW_EXECD_HANDLER(execution_cancel);
GW_EXECD_HANDLER(execution_input);
GW_EXECD_HANDLER(execution_tool_result);
GW_EXECD_HANDLER(command_run);
GW_EXECD_HANDLER(command_interrupt);
GW_EXECD_HANDLER(command_status);
GW_EXECD_HANDLER(command_logs);
GW_EXECD_HANDLER(session_create);
GW_EXECD_HANDLER(session_run);
GW_EXECD_HANDLER(session_delete);
GW_EXECD_HANDLER(metrics);
GW_EXECD_HANDLER(metrics_watch);
GW_EXECD_HANDLER(pty_create);
GW_EXECD_HANDLER(pty_get);
GW_EXECD_HANDLER(pty_delete);
GW_EXECD_HANDLER(pty_ws);
GW_EXECD_HANDLER(isolated_capabilities);
GW_EXECD_HANDLER(isolated_create);
GW_EXECD_HANDLER(isolated_list);
GW_EXECD_HANDLER(isolated_get);
GW_EXECD_HANDLER(isolated_delete);
GW_EXECD_HANDLER(isolated_run);
GW_EXECD_HANDLER(isolated_diff);

/** The door's state from a handler's `door` argument. */
static inline gw_execd_t *gw_execd_from(gw_door_t *door)
{
    return H2O_STRUCT_FROM_MEMBER(gw_execd_t, super, door);
}

/**
 * Streams `run` as the response to `req` from the event after `after_id`, with the
 * x-kgate-execution-id header. Returns 0, or GW_EEVENTSGONE (nothing sent).
 */
int gw_execd_stream_run(gw_execd_t *execd, h2o_req_t *req, gw_run_t *run, uint64_t after_id);

#endif
