/* Routes of /session: bash sessions, each a context whose kernel is kgate's own bash kernel. */
#include <string.h>
#include "execd/execd.h"
#include "code/context.h"
#include "execd/contexts_api.h"
#include "core/errors.h"
#include "core/http.h"
#include "code/kernel_run.h"

/* The kernelspec name of kgate's bash kernel (kernels/bash). */
#define SESSION_KERNEL "bash"

GW_EXECD_HANDLER(session_create)
{
    gw_execd_t *execd = gw_execd_from(door);
    const kmgr_kernelspec_t *spec = gw_languages_find(execd->languages, SESSION_KERNEL);
    json_t *body = NULL, *cwd = NULL, *env = NULL;
    gw_context_options_t opts = {0};
    gw_context_t *ctx;
    (void)params;

    if (spec == NULL) {
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE,
                      "bash sessions need the \"%s\" kernelspec (kgate's kernels/bash), which is not installed", SESSION_KERNEL);
        return;
    }
    /* the body is optional (execd's SDKs send none) */
    if (req->entity.len != 0) {
        if ((body = gw_parse_body(req)) == NULL)
            return;
        cwd = json_object_get(body, "cwd");
        env = json_object_get(body, "env");
        if ((cwd != NULL && !json_is_null(cwd) && !json_is_string(cwd)) ||
            (env != NULL && !json_is_null(env) && !json_is_object(env))) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "cwd must be a string and env an object of strings");
            goto Exit;
        }
    }
    /* answered at once: runs submitted before the kernel is ready wait for it */
    opts.spec = spec;
    opts.cwd = json_is_string(cwd)             ? json_string_value(cwd)
               : execd->host->config->as_execd ? NULL
                                               : execd->host->config->workspace_root;
    opts.env = json_is_object(env) ? env : NULL;
    if (gw_execd_create_context(execd, req, &opts, &ctx) != 0)
        goto Exit;
    gw_send_json(req, 200, json_pack("{s:s, s:s}", "session_id", ctx->id, "id", ctx->id));
Exit:
    json_decref(body);
}

/* The session named by the path, or NULL after answering 404. */
static gw_context_t *session_from_params(gw_execd_t *execd, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *id = gw_path_param(req, params, 0);
    gw_context_t *ctx = id != NULL ? gw_context_find(execd->contexts, id) : NULL;

    if (ctx != NULL && strcmp(ctx->spec->name, SESSION_KERNEL) == 0)
        return ctx;
    gw_send_error(req, GW_HTTP_SESSION_NOT_FOUND, "no bash session with id \"%.64s\"", id != NULL ? id : "(malformed)");
    return NULL;
}

GW_EXECD_HANDLER(session_run)
{
    gw_execd_t *execd = gw_execd_from(door);
    const gw_config_t *config = execd->host->config;
    gw_context_t *ctx = session_from_params(execd, req, params);
    gw_kernel_run_options_t opts = {0};
    json_t *body, *code, *timeout;
    gw_run_t *run;
    int ret;

    if (ctx == NULL || (body = gw_parse_body(req)) == NULL)
        return;
    /* execd's SDKs send "command"; its server model says "code": either works */
    if ((code = json_object_get(body, "command")) == NULL)
        code = json_object_get(body, "code");
    if ((timeout = json_object_get(body, "timeout")) == NULL)
        timeout = json_object_get(body, "timeout_ms");
    if (!json_is_string(code) || json_string_length(code) == 0 || strlen(json_string_value(code)) != json_string_length(code)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "command (or code) must be a non-empty string without NUL characters");
    } else if (timeout != NULL && !json_is_null(timeout) &&
               (!json_is_integer(timeout) || json_integer_value(timeout) < 0 ||
                json_integer_value(timeout) > (json_int_t)config->max_timeout_ms)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "timeout must be an integer of milliseconds, 0 (none) to %u",
                      config->max_timeout_ms);
    } else {
        opts.code = json_string_value(code);
        opts.timeout_ms = json_integer_value(timeout) > 0 ? (unsigned)json_integer_value(timeout) : config->max_timeout_ms;
        opts.limits.output_bytes = config->output_limit_bytes;
        opts.limits.result_bytes = config->result_limit_bytes;
        if ((ret = gw_kernel_run_submit(ctx, &opts, &run)) == GW_EKERNELDEAD)
            gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "the bash kernel of session %s is dead (%s)", ctx->id,
                          gw_context_exit_reason(ctx));
        else if (ret == GW_EQUEUEFULL)
            gw_send_error(req, GW_HTTP_QUEUE_FULL, "session %s already has %zu runs waiting (--max-queue)", ctx->id,
                          gw_kernel_runs_count(ctx) - 1);
        else
            gw_execd_stream_run(execd, req, run, 0);
    }
    json_decref(body);
}

GW_EXECD_HANDLER(session_delete)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_context_t *ctx = session_from_params(execd, req, params);

    if (ctx == NULL)
        return;
    gw_context_destroy(ctx);
    gw_send_empty(req);
}
