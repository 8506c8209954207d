/* The execd door's route table and its set-up (the top of the door: its handlers are in the *_api.c files). */
#include <string.h>
#include "core/errors.h"
#include "core/http.h"
#include "execd/execd.h"

void gw_execd_init(gw_execd_t *execd, gw_host_t *host, gw_runs_t *runs, gw_languages_t *languages, gw_contexts_t *contexts,
                   gw_shells_t *shells, gw_commands_t *commands, gw_files_t *files, gw_metrics_t *metrics, gw_ptys_t *ptys,
                   gw_isolated_t *isolated)
{
    memset(execd, 0, sizeof(*execd));
    execd->super.name = "execd";
    execd->host = host;
    execd->runs = runs;
    execd->languages = languages;
    execd->contexts = contexts;
    execd->shells = shells;
    execd->commands = commands;
    execd->files = files;
    execd->files_ws = &files->ws;
    execd->isolated = isolated;
    execd->metrics = metrics;
    execd->ptys = ptys;
    h2o_linklist_init_anchor(&execd->metrics_watches);
    h2o_linklist_init_anchor(&execd->pty_clients);
}

void gw_execd_shutdown(gw_execd_t *execd)
{
    gw_execd_metrics_shutdown(execd);
    gw_execd_pty_shutdown(execd);
}

int gw_execd_is_drained(gw_execd_t *execd)
{
    return h2o_linklist_is_empty(&execd->metrics_watches) && h2o_linklist_is_empty(&execd->pty_clients);
}

static void add_rows(gw_execd_t *execd, gw_route_table_t *table, const gw_execd_route_row_t *rows, size_t n)
{
    const gw_config_t *config = execd->host->config;

    for (size_t i = 0; i != n; ++i) {
        gw_route_t route = {.method = rows[i].method,
                            .pattern = rows[i].pattern,
                            .handler = rows[i].handler,
                            .max_body_bytes = rows[i].is_upload ? config->max_upload_bytes : config->max_body_bytes,
                            .is_public = rows[i].handler == gw_execd_ping,
                            .door = &execd->super};
        gw_route_table_add(table, &route);
    }
}

void gw_execd_add_routes(gw_execd_t *execd, gw_route_table_t *table)
{
    static const gw_execd_route_row_t rows[] = {
        /* /ping answers without the token (docs/API.md 6.3): OpenSandbox's probes and runtimes call it bare */
        {"GET", "/ping", gw_execd_ping, 0},
        {"GET", "/files/info", gw_execd_files_info, 0},
        {"DELETE", "/files", gw_execd_files_delete, 0},
        {"POST", "/files/permissions", gw_execd_files_permissions, 0},
        {"POST", "/files/mv", gw_execd_files_mv, 0},
        {"GET", "/files/search", gw_execd_files_search, 0},
        {"POST", "/files/replace", gw_execd_files_replace, 0},
        {"POST", "/files/upload", gw_execd_files_upload, 1},
        {"GET", "/files/download", gw_execd_files_download, 0},
        {"GET", "/directories/list", gw_execd_directories_list, 0},
        {"POST", "/directories", gw_execd_directories_create, 0},
        {"DELETE", "/directories", gw_execd_directories_delete, 0},
        {"POST", "/editor", gw_execd_editor, 0},
        {"GET", "/code/languages", gw_execd_languages, 0},
        {"POST", "/code/context", gw_execd_context_create, 0},
        {"GET", "/code/contexts", gw_execd_context_list, 0},
        {"DELETE", "/code/contexts", gw_execd_context_delete_by_language, 0},
        {"GET", "/code/contexts/{}", gw_execd_context_get, 0},
        {"DELETE", "/code/contexts/{}", gw_execd_context_delete, 0},
        {"POST", "/code/contexts/{}/restart", gw_execd_context_restart, 0},
        {"POST", "/code", gw_execd_code_execute, 0},
        {"DELETE", "/code", gw_execd_code_interrupt, 0},
        {"GET", "/code/executions/{}", gw_execd_execution_get, 0},
        {"DELETE", "/code/executions/{}", gw_execd_execution_cancel, 0},
        {"GET", "/code/executions/{}/events", gw_execd_execution_events, 0},
        {"POST", "/code/executions/{}/input", gw_execd_execution_input, 0},
        {"POST", "/code/executions/{}/tool_results", gw_execd_execution_tool_result, 0},
        {"POST", "/command", gw_execd_command_run, 0},
        {"DELETE", "/command", gw_execd_command_interrupt, 0},
        {"GET", "/command/status/{}", gw_execd_command_status, 0},
        {"GET", "/command/{}/logs", gw_execd_command_logs, 0},
        {"POST", "/session", gw_execd_session_create, 0},
        {"POST", "/session/{}/run", gw_execd_session_run, 0},
        {"DELETE", "/session/{}", gw_execd_session_delete, 0},
        {"GET", "/metrics", gw_execd_metrics, 0},
        {"GET", "/metrics/watch", gw_execd_metrics_watch, 0},
        {"POST", "/pty", gw_execd_pty_create, 0},
        {"GET", "/pty/{}", gw_execd_pty_get, 0},
        {"DELETE", "/pty/{}", gw_execd_pty_delete, 0},
        {"GET", "/pty/{}/ws", gw_execd_pty_ws, 0},
    };

    add_rows(execd, table, rows, sizeof(rows) / sizeof(rows[0]));
    add_rows(execd, table, gw_execd_isolated_rows, gw_execd_num_isolated_rows);
}

GW_EXECD_HANDLER(ping)
{
    (void)door, (void)params;
    gw_send_empty(req);
}
