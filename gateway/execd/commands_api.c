/* Routes of /command: run (streamed or in the background), stop, status, and incremental logs. */
#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "ksys/log.h"
#include "execd/execd.h"
#include "procs/command.h"
#include "procs/envfile.h"
#include "core/http.h"
#include "core/errors.h"
#include "core/event.h"
#include "core/stream.h"

/* A JSON string without NUL characters (C strings end at the first). */
static int is_c_string(json_t *value)
{
    return json_is_string(value) && strlen(json_string_value(value)) == json_string_length(value);
}

/* Optional non-negative integer field; -2 after answering 400 when malformed, -1 when absent. */
static long long optional_id(h2o_req_t *req, json_t *body, const char *name)
{
    json_t *value = json_object_get(body, name);

    if (value == NULL || json_is_null(value))
        return -1;
    if (!json_is_integer(value) || json_integer_value(value) < 0 || json_integer_value(value) > 0x7fffffff) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "%s must be a non-negative integer", name);
        return -2;
    }
    return json_integer_value(value);
}

static const char *lookup_environ(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

static void on_envfile_skip(size_t lineno, const char *why, void *ctx)
{
    ksys_log_warn("EXECD_ENVS file %s: line %zu skipped: %s", (const char *)ctx, lineno, why);
}

/*
 * The variables of the file EXECD_ENVS names (docs/API.md 6.3), read again for each command so that a runtime that
 * rewrites it reaches the next command, parsed and expanded against kgate's environment as upstream execd does
 * (procs/envfile.h). They go under the request's own `envs`, which win. A missing or unreadable file, or one over the
 * bound, adds nothing and is said in the log: the command still runs, as with upstream. The path may start with `~/`
 * and name variables, as upstream's.
 */
static void add_envs_file(json_t *envs)
{
    const char *home = getenv("HOME"), *key;
    char *path = gw_envfile_expand(getenv("EXECD_ENVS"), lookup_environ, NULL, 4096), *text = NULL, *full;
    json_t *vars, *value;
    FILE *fp;
    size_t len;

    if (path == NULL || path[0] == '\0')
        goto Exit;
    if (path[0] == '~' && path[1] == '/' && home != NULL) {
        full = wire_malloc(strlen(home) + strlen(path));
        sprintf(full, "%s%s", home, path + 1);
        free(path);
        path = full;
    }
    if ((fp = fopen(path, "re")) == NULL) {
        ksys_log_warn("EXECD_ENVS file %s cannot be read: %s", path, strerror(errno));
        goto Exit;
    }
    text = wire_malloc(GW_ENVFILE_MAX_BYTES + 1);
    len = fread(text, 1, GW_ENVFILE_MAX_BYTES + 1, fp);
    fclose(fp);
    if (len > GW_ENVFILE_MAX_BYTES) {
        ksys_log_warn("EXECD_ENVS file %s is over %d bytes: not read", path, GW_ENVFILE_MAX_BYTES);
        goto Exit;
    }
    vars = gw_envfile_parse(text, len, lookup_environ, NULL, on_envfile_skip, path);
    json_object_foreach(vars, key, value)
    {
        if (json_object_get(envs, key) == NULL)
            json_object_set_nocheck(envs, key, value);
    }
    json_decref(vars);
Exit:
    free(text);
    free(path);
}

/* argv as one command line for the shell: each word in single quotes (a quote inside as '\''), run with exec. */
static char *quote_argv(json_t *argv)
{
    size_t len = 5, i;
    json_t *word;
    char *out, *p;

    json_array_foreach(argv, i, word)
    {
        len += 3;
        for (const char *c = json_string_value(word); *c != '\0'; ++c)
            len += *c == '\'' ? 4 : 1;
    }
    p = out = malloc(len + 1);
    p += sprintf(p, "exec");
    json_array_foreach(argv, i, word)
    {
        *p++ = ' ', *p++ = '\'';
        for (const char *c = json_string_value(word); *c != '\0'; ++c)
            p = *c == '\'' ? p + sprintf(p, "'\\''") : (*p = *c, p + 1);
        *p++ = '\'';
    }
    *p = '\0';
    return out;
}

/* `argv: [string]` instead of `command` (docs/API.md 6.3): exactly one of the two; becomes body's `command`. */
static int parse_argv(h2o_req_t *req, json_t *body)
{
    json_t *argv = json_object_get(body, "argv"), *word;
    size_t i;

    if (argv == NULL || json_is_null(argv))
        return 0;
    if (json_object_get(body, "command") != NULL) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "give command or argv, not both");
        return -1;
    }
    if (!json_is_array(argv) || json_array_size(argv) == 0) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "argv must be a non-empty array of strings");
        return -1;
    }
    json_array_foreach(argv, i, word)
    {
        if (!is_c_string(word) || (i == 0 && json_string_length(word) == 0)) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "argv[%zu] must be a string without NUL characters%s", i,
                          i == 0 ? ", not empty" : "");
            return -1;
        }
    }
    char *line = quote_argv(argv);
    json_object_set_new(body, "command", json_string(line));
    free(line);
    return 0;
}

/* Reads and validates the POST /command body into `opts` (borrowing from `body`); answers 4xx and returns -1 otherwise. */
static int parse_command(gw_execd_t *execd, h2o_req_t *req, json_t *body, gw_command_options_t *opts)
{
    if (parse_argv(req, body) != 0)
        return -1;

    const gw_config_t *config = execd->host->config;
    json_t *command = json_object_get(body, "command"), *cwd = json_object_get(body, "cwd"), *envs = json_object_get(body, "envs"),
           *background = json_object_get(body, "background"), *timeout = json_object_get(body, "timeout"), *value;
    long long uid, gid;
    const char *key;

    if (!is_c_string(command) || json_string_length(command) == 0) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "command must be a non-empty string without NUL characters");
        return -1;
    }
    if (cwd != NULL && !json_is_null(cwd) && (!is_c_string(cwd) || json_string_length(cwd) == 0)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "cwd must be a non-empty string");
        return -1;
    }
    if (background != NULL && !json_is_null(background) && !json_is_boolean(background)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "background must be true or false");
        return -1;
    }
    if (timeout != NULL && !json_is_null(timeout) &&
        (!json_is_integer(timeout) || json_integer_value(timeout) < 0 ||
         json_integer_value(timeout) > (json_int_t)config->max_timeout_ms)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "timeout must be an integer of milliseconds, 0 (none) to %u",
                      config->max_timeout_ms);
        return -1;
    }
    if (envs != NULL && !json_is_null(envs)) {
        if (!json_is_object(envs)) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "envs must be an object of strings");
            return -1;
        }
        json_object_foreach(envs, key, value)
        {
            if (key[0] == '\0' || strchr(key, '=') != NULL || !is_c_string(value)) {
                gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "envs: \"%.64s\" must be a name without '=' with a string value",
                              key);
                return -1;
            }
        }
    }
    if ((uid = optional_id(req, body, "uid")) == -2 || (gid = optional_id(req, body, "gid")) == -2)
        return -1;
    /* switching credentials needs root; without it, only kgate's own are possible */
    if (geteuid() != 0) {
        if ((uid >= 0 && (uid_t)uid != geteuid()) || (gid >= 0 && (gid_t)gid != getegid())) {
            gw_send_error(req, GW_HTTP_FORBIDDEN, "kgate does not run as root: uid/gid other than %u/%u cannot be used",
                          (unsigned)geteuid(), (unsigned)getegid());
            return -1;
        }
        uid = gid = -1;
    } else if (uid >= 0 && gid < 0) {
        /* never leave root's group behind a switched uid: the user's primary group, else the uid's number */
        struct passwd pw, *found = NULL;
        char buf[1024];
        gid = getpwuid_r((uid_t)uid, &pw, buf, sizeof(buf), &found) == 0 && found != NULL ? (long long)pw.pw_gid : uid;
    }
    opts->command = json_string_value(command);
    /* commands start in the workspace (--workspace-root, else kgate's cwd); as a sandbox's execd, in kgate's cwd */
    opts->cwd = json_is_string(cwd) ? json_string_value(cwd) : config->as_execd ? NULL : config->workspace_root;
    if (getenv("EXECD_ENVS") != NULL && getenv("EXECD_ENVS")[0] != '\0') {
        if (!json_is_object(envs))
            json_object_set_new(body, "envs", envs = json_object());
        add_envs_file(envs);
    }
    opts->envs = json_is_object(envs) ? envs : NULL;
    opts->uid = (long)uid;
    opts->gid = (long)gid;
    opts->timeout_ms = json_is_integer(timeout) ? (unsigned)json_integer_value(timeout) : 0;
    opts->background = json_is_true(background);
    opts->limits.output_bytes = config->output_limit_bytes;
    opts->limits.result_bytes = config->result_limit_bytes;
    return 0;
}

/* A background command's whole stream: its `init` event, then the end of the response. */
static void send_init_only(gw_execd_t *execd, h2o_req_t *req, const gw_command_t *cmd)
{
    json_t *init = gw_event_new("init");
    gw_event_t *ev;

    json_object_set_new(init, "text", json_string(cmd->id));
    ev = gw_event_render(init, 1, execd->host->config->compat_execd);
    json_decref(init);
    gw_sse_prepare_response(req);
    req->res.content_length = ev->len;
    h2o_send_inline(req, ev->frame, ev->len);
    gw_event_release(ev);
}

GW_EXECD_HANDLER(command_run)
{
    gw_execd_t *execd = gw_execd_from(door);
    json_t *body = gw_parse_body(req);
    gw_command_options_t opts = {0};
    gw_command_t *cmd;
    gw_run_t *run;
    char err[512];
    int ret;
    (void)params;

    if (body == NULL)
        return;
    if (parse_command(execd, req, body, &opts) != 0)
        goto Exit;
    if ((ret = gw_command_start(execd->commands, &opts, &cmd, &run, err, sizeof(err))) != 0) {
        if (ret == GW_ETOOMANYCOMMANDS)
            gw_send_error(req, GW_HTTP_TOO_MANY_COMMANDS, "%s", err);
        else
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "cannot start the command: %s", err);
        goto Exit;
    }
    if (run != NULL)
        gw_execd_stream_run(execd, req, run, 0);
    else
        send_init_only(execd, req, cmd);
Exit:
    json_decref(body);
}

/* The command named by the `{}` path parameter, or NULL after answering 404. */
static gw_command_t *command_from_params(gw_execd_t *execd, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *id = gw_path_param(req, params, 0);
    gw_command_t *cmd = id != NULL ? gw_command_find(execd->commands, id) : NULL;

    if (cmd == NULL)
        gw_send_error(req, GW_HTTP_COMMAND_NOT_FOUND, "no command with id \"%.64s\"", id != NULL ? id : "(malformed)");
    return cmd;
}

GW_EXECD_HANDLER(command_interrupt)
{
    gw_execd_t *execd = gw_execd_from(door);
    const char *id = gw_query_param(req, "id");
    gw_command_t *cmd;
    (void)params;

    if (id == NULL || id[0] == '\0') {
        gw_send_error(req, GW_HTTP_MISSING_QUERY, "the id query parameter is required (DELETE /command?id=<command id>)");
        return;
    }
    if ((cmd = gw_command_find(execd->commands, id)) == NULL) {
        gw_send_error(req, GW_HTTP_COMMAND_NOT_FOUND, "no command with id \"%.64s\"", id);
        return;
    }
    gw_command_terminate(cmd);
    gw_send_empty(req);
}

GW_EXECD_HANDLER(command_status)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_command_t *cmd = command_from_params(execd, req, params);
    if (cmd != NULL)
        gw_send_json(req, 200, gw_command_to_json(cmd));
}

GW_EXECD_HANDLER(command_logs)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_command_t *cmd = command_from_params(execd, req, params);
    const char *cursor_param;
    uint64_t cursor = 0;
    gw_cmdlog_span_t span;
    char *buf, header[32];
    int ret;

    if (cmd == NULL)
        return;
    if ((cursor_param = gw_query_param(req, "cursor")) != NULL && cursor_param[0] != '\0') {
        if (wire_parse_decimal(cursor_param, UINT64_MAX, &cursor) != 0) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "cursor must be a byte offset (a non-negative integer)");
            return;
        }
    }
    gw_cmdlog_plan(cmd->log.total, cmd->log.cap, cursor, execd->host->config->command_log_read_bytes, &span);
    buf = h2o_mem_alloc_pool(&req->pool, span.len + 1);
    if ((ret = gw_cmdlog_read(&cmd->log, cursor, span.len, buf, &span)) != 0) {
        gw_send_error(req, GW_HTTP_RUNTIME_ERROR, "cannot read the log of command %s: %s", cmd->id, strerror(-ret));
        return;
    }
    req->res.status = 200;
    req->res.reason = "OK";
    req->res.content_length = span.len;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/plain; charset=utf-8"));
    snprintf(header, sizeof(header), "%llu", (unsigned long long)(span.start + span.len));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("execd-commands-tail-cursor"), 0, NULL, header, strlen(header));
    if (span.skipped != 0) {
        /* the ring overwrote bytes the caller had not read yet: say how many */
        snprintf(header, sizeof(header), "%llu", (unsigned long long)span.skipped);
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-kgate-log-skipped-bytes"), 0, NULL, header,
                              strlen(header));
    }
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-kgate-command-running"), 0, NULL,
                          cmd->running ? "true" : "false", cmd->running ? 4 : 5);
    gw_add_common_headers(req);
    h2o_send_inline(req, buf, span.len);
}
