/* Routes of /code: execute (in a context, in a language's default context, or stateless) and interrupt. */
#include <stdint.h>
#include <string.h>
#include "execd/execd.h"
#include "code/context.h"
#include "execd/contexts_api.h"
#include "core/errors.h"
#include "core/http.h"
#include "code/kernel_run.h"
#include "procs/shell.h"

/* The context a POST /code names (by id, or a language's default, created on first use). NULL
 * with *stateless set when it names none; NULL after answering an error otherwise. */
static gw_context_t *context_for_execute(gw_execd_t *execd, h2o_req_t *req, json_t *body, int *stateless)
{
    json_t *jctx = json_object_get(body, "context");
    const char *id, *language;
    const kmgr_kernelspec_t *spec;
    gw_context_t *ctx;

    *stateless = 0;
    id = json_string_value(json_object_get(jctx, "id"));
    language = json_string_value(json_object_get(jctx, "language"));
    if (id != NULL && id[0] != '\0') {
        if ((ctx = gw_context_find(execd->contexts, id)) == NULL)
            gw_send_error(req, GW_HTTP_CONTEXT_NOT_FOUND, "no context with id \"%.64s\"", id);
        return ctx;
    }
    if (language == NULL || language[0] == '\0') {
        *stateless = 1;
        return NULL;
    }
    if ((spec = gw_execd_resolve_language(execd, req, language)) == NULL)
        return NULL;
    if ((ctx = gw_context_find_default(execd->contexts, spec)) == NULL) {
        gw_context_options_t opts = {.spec = spec, .is_default = 1};
        if (gw_execd_create_context(execd, req, &opts, &ctx) != 0)
            return NULL;
    }
    return ctx;
}

/* Reads an optional positive integer field no larger than `max`; answers 400 and returns -1 otherwise. */
static int optional_bound(h2o_req_t *req, json_t *body, const char *name, uint64_t def, uint64_t max, uint64_t *out)
{
    json_t *value = json_object_get(body, name);

    *out = def;
    if (value == NULL || json_is_null(value))
        return 0;
    if (!json_is_integer(value) || json_integer_value(value) <= 0) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "%s must be a positive integer", name);
        return -1;
    }
    if ((uint64_t)json_integer_value(value) > max) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "%s must be at most %llu (the server's maximum)", name,
                      (unsigned long long)max);
        return -1;
    }
    *out = (uint64_t)json_integer_value(value);
    return 0;
}

static int optional_bool(h2o_req_t *req, json_t *body, const char *name, int *out)
{
    json_t *value = json_object_get(body, name);

    *out = 0;
    if (value == NULL || json_is_null(value))
        return 0;
    if (!json_is_boolean(value)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "%s must be true or false", name);
        return -1;
    }
    *out = json_is_true(value);
    return 0;
}

/*
 * A POST /code body's `context`, when given: an object whose `id` and `language`, when given, are strings (null as absent), as
 * execd's types take it. Anything else is refused: read as absent, `{"id": 7}` ran the code in a shell instead.
 */
static int valid_context_member(h2o_req_t *req, json_t *body)
{
    static const char *const fields[] = {"id", "language"};
    json_t *jctx = json_object_get(body, "context");

    if (jctx == NULL || json_is_null(jctx))
        return 0;
    if (!json_is_object(jctx)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "context must be an object {\"id\"?, \"language\"?}");
        return -1;
    }
    for (size_t i = 0; i != sizeof(fields) / sizeof(fields[0]); ++i) {
        json_t *value = json_object_get(jctx, fields[i]);
        if (value != NULL && !json_is_null(value) && !json_is_string(value)) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "context.%s must be a string", fields[i]);
            return -1;
        }
    }
    return 0;
}

/* The execution options of a POST /code body, validated against the server's bounds. */
static int parse_options(gw_execd_t *execd, h2o_req_t *req, json_t *body, gw_kernel_run_options_t *opts, int *stateless)
{
    const gw_config_t *config = execd->host->config;
    json_t *jcode = json_object_get(body, "code");
    uint64_t timeout, output_limit, result_limit, stdin_timeout;

    if (!json_is_string(jcode) || json_string_length(jcode) == 0) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "code must be a non-empty string");
        return -1;
    }
    if (strlen(json_string_value(jcode)) != json_string_length(jcode)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "code must not contain NUL characters");
        return -1;
    }
    if (valid_context_member(req, body) != 0)
        return -1;
    if (optional_bound(req, body, "timeout", config->default_timeout_ms, config->max_timeout_ms, &timeout) != 0 ||
        optional_bound(req, body, "output_limit", config->output_limit_bytes, config->max_output_limit_bytes, &output_limit) != 0 ||
        optional_bound(req, body, "result_limit", config->result_limit_bytes, config->max_result_limit_bytes, &result_limit) != 0 ||
        optional_bound(req, body, "stdin_timeout", config->stdin_timeout_ms, config->max_timeout_ms, &stdin_timeout) != 0 ||
        optional_bool(req, body, "stdin", &opts->allow_stdin) != 0 || optional_bool(req, body, "stateless", stateless) != 0)
        return -1;
    {
        char err[512];
        if (gw_toolset_parse(json_object_get(body, "tools"), config, &opts->tools, err, sizeof(err)) != 0) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "%s", err);
            return -1;
        }
    }
    opts->code = json_string_value(jcode);
    opts->timeout_ms = (unsigned)timeout;
    opts->stdin_timeout_ms = (unsigned)stdin_timeout;
    opts->limits.output_bytes = (size_t)output_limit;
    opts->limits.result_bytes = (size_t)result_limit;
    return 0;
}

/* Answers the error of a refused submission (GW_EKERNELDEAD, GW_EQUEUEFULL, GW_ETOOLSUNSUPPORTED). */
static void respond_submit_error(h2o_req_t *req, gw_context_t *ctx, int err)
{
    if (err == GW_ETOOLSUNSUPPORTED)
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY,
                      "tools are supported in Python contexts only; context %s runs %s (kernel %s)", ctx->id, ctx->spec->language,
                      ctx->spec->name);
    else if (err == GW_EKERNELDEAD)
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE,
                      "the kernel of context %s is dead (%s); restart it with POST /code/contexts/%s/restart", ctx->id,
                      gw_context_exit_reason(ctx), ctx->id);
    else
        gw_send_error(req, GW_HTTP_QUEUE_FULL, "context %s already has %zu runs waiting (--max-queue); try again later", ctx->id,
                      gw_kernel_runs_count(ctx) - 1);
}

/* A stateless run in a kernel of its own could not start: its kernel could not be had, or the run was refused. */
static void respond_stateless_error(gw_execd_t *execd, h2o_req_t *req, const kmgr_kernelspec_t *spec, int err)
{
    if (err == GW_ETOOLSUNSUPPORTED)
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "tools are supported in Python kernels only; %s runs %s", spec->name,
                      spec->language);
    else if (err == GW_EKERNELDEAD || err == GW_EQUEUEFULL)
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "the %s kernel of a stateless run could not take it: %s", spec->name,
                      gw_strerror(err));
    else
        gw_execd_respond_create_error(execd, req, spec, err);
}

GW_EXECD_HANDLER(code_execute)
{
    gw_execd_t *execd = gw_execd_from(door);
    json_t *body = gw_parse_body(req), *jctx;
    gw_kernel_run_options_t opts = {0};
    const char *language, *id;
    gw_context_t *ctx = NULL;
    gw_run_t *run = NULL;
    int stateless, ret;
    (void)params;

    if (body == NULL)
        return;
    if (parse_options(execd, req, body, &opts, &stateless) != 0)
        goto Exit;
    jctx = json_object_get(body, "context");
    language = json_string_value(json_object_get(jctx, "language"));
    id = json_string_value(json_object_get(jctx, "id"));
    /* decided once: a stateless run never lands in a context that keeps state */
    if (stateless && id != NULL && id[0] != '\0') {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY,
                      "stateless runs take a language (a fresh kernel) or nothing (a shell), not a context id");
        goto Exit;
    }
    if (stateless && language != NULL && language[0] != '\0') {
        /* a one-shot run in a fresh kernel of that language, discarded afterwards (by code/) */
        gw_context_options_t copts = {.spec = gw_execd_resolve_language(execd, req, language)};
        if (copts.spec == NULL)
            goto Exit;
        if ((ret = gw_kernel_run_submit_stateless(execd->contexts, &copts, &opts, &run)) != 0) {
            respond_stateless_error(execd, req, copts.spec, ret);
            goto Exit;
        }
        opts.tools = NULL; /* the run's now */
    } else if (!stateless) {
        ctx = context_for_execute(execd, req, body, &stateless);
        if (ctx == NULL && !stateless)
            goto Exit;
    }
    if (ctx == NULL && opts.tools != NULL) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY,
                      "tools need a Python kernel: name a context or a language (a stateless run without one is a shell)");
        goto Exit;
    }
    if (run != NULL) {
        /* the stateless language run, submitted above */
    } else if (ctx == NULL) {
        if (gw_shell_start(execd->shells, opts.code, &opts.limits, opts.timeout_ms, &run) != 0) {
            gw_send_error(req, GW_HTTP_RUNTIME_ERROR, "cannot start %s for a stateless run", execd->host->config->shell);
            goto Exit;
        }
    } else if ((ret = gw_kernel_run_submit(ctx, &opts, &run)) != 0) {
        respond_submit_error(req, ctx, ret);
        goto Exit;
    } else {
        opts.tools = NULL; /* the run's now */
    }
    gw_execd_stream_run(execd, req, run, 0);
Exit:
    gw_toolset_destroy(opts.tools);
    json_decref(body);
}

GW_EXECD_HANDLER(code_interrupt)
{
    gw_execd_t *execd = gw_execd_from(door);
    const char *id = gw_query_param(req, "id");
    gw_context_t *ctx;
    (void)params;

    if (id == NULL || id[0] == '\0') {
        gw_send_error(req, GW_HTTP_MISSING_QUERY, "the id query parameter is required (DELETE /code?id=<context id>)");
        return;
    }
    if ((ctx = gw_context_find(execd->contexts, id)) != NULL) {
        if (gw_context_interrupt(ctx) != 0) {
            gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "the kernel of context %s is dead (%s)", ctx->id,
                          gw_context_exit_reason(ctx));
            return;
        }
        gw_send_empty(req);
        return;
    }
    if (gw_shell_interrupt(execd->shells, id) == 0) {
        gw_send_empty(req);
        return;
    }
    gw_send_error(req, GW_HTTP_CONTEXT_NOT_FOUND, "no context or running stateless execution with id \"%.64s\"", id);
}
