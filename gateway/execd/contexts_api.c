/* Routes of /code/context and /code/contexts: create, list, get, delete, delete by language, restart. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "ksys/errors.h"
#include "core/errors.h"
#include "execd/execd.h"
#include "code/context.h"
#include "execd/contexts_api.h"
#include "core/http.h"
#include "code/kernel_run.h"

const kmgr_kernelspec_t *gw_execd_resolve_language(gw_execd_t *execd, h2o_req_t *req, const char *language)
{
    const kmgr_kernelspec_t *spec = gw_languages_resolve(execd->languages, language);
    char available[1024];

    if (spec == NULL) {
        gw_languages_describe(execd->languages, available, sizeof(available));
        gw_send_error(req, GW_HTTP_UNKNOWN_LANGUAGE, "unknown language \"%.100s\"; available: %s", language, available);
    }
    return spec;
}

int gw_execd_create_context(gw_execd_t *execd, h2o_req_t *req, const gw_context_options_t *opts, gw_context_t **out)
{
    int ret = gw_context_create(execd->contexts, opts, out);

    if (ret == 0)
        return 0;
    gw_execd_respond_create_error(execd, req, opts->spec, ret);
    return -1;
}

void gw_execd_respond_create_error(gw_execd_t *execd, h2o_req_t *req, const kmgr_kernelspec_t *spec, int err)
{
    switch (err) {
    case GW_ESHUTTINGDOWN:
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "kgate is shutting down");
        break;
    case KSYS_ESTARTQUEUE:
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("2"));
        gw_send_error(req, GW_HTTP_TOO_MANY_CONTEXTS, "%u kernels are waiting to start (--max-start-queue); retry later",
                      execd->host->config->max_start_queue);
        break;
    case GW_ETOOMANYCONTEXTS:
        gw_send_error(req, GW_HTTP_TOO_MANY_CONTEXTS, "%zu contexts are alive, the maximum (--max-contexts); delete one first",
                      execd->contexts->count);
        break;
    default:
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "cannot start the %s kernel: %s", spec->name, gw_strerror(err));
        break;
    }
}

/* A request waiting for its context's kernel; lives in the request's pool. */
typedef struct st_ready_waiter_t {
    gw_context_waiter_t super;
    h2o_req_t *req;
} ready_waiter_t;

static void on_ready(gw_context_waiter_t *waiter, gw_context_t *ctx, const char *failure)
{
    h2o_req_t *req = H2O_STRUCT_FROM_MEMBER(ready_waiter_t, super, waiter)->req;

    if (failure == NULL)
        gw_send_json(req, 200, gw_context_to_json(ctx));
    else if (gw_context_is_deleted(ctx))
        gw_send_error(req, GW_HTTP_CONTEXT_NOT_FOUND, "context \"%s\" was deleted before its kernel was ready", ctx->id);
    else
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "the %s kernel failed to start: %s", ctx->spec->name, failure);
}

/* The client went away before its kernel was ready: the context stays, the answer is dropped. */
static void on_ready_waiter_dispose(void *p)
{
    gw_context_waiter_cancel(&((ready_waiter_t *)p)->super);
}

void gw_execd_respond_when_ready(gw_context_t *ctx, h2o_req_t *req)
{
    ready_waiter_t *waiter = h2o_mem_alloc_shared(&req->pool, sizeof(*waiter), on_ready_waiter_dispose);

    memset(waiter, 0, sizeof(*waiter));
    waiter->super.cb = on_ready;
    waiter->req = req;
    gw_context_wait_ready(ctx, &waiter->super);
}

static int context_matches_language(const gw_context_t *ctx, const char *language)
{
    return strcasecmp(ctx->spec->name, language) == 0 || strcasecmp(ctx->spec->language, language) == 0;
}

/* Validates the optional `cwd` (an existing directory) and `env` (an object of strings). */
static int validate_cwd_env(h2o_req_t *req, json_t *body, const char **cwd, json_t **env)
{
    json_t *jcwd = json_object_get(body, "cwd"), *jenv = json_object_get(body, "env"), *value;
    const char *key;
    struct stat st;

    *cwd = NULL;
    *env = NULL;
    if (jcwd != NULL && !json_is_null(jcwd)) {
        if (!json_is_string(jcwd) || json_string_length(jcwd) == 0 || strlen(json_string_value(jcwd)) != json_string_length(jcwd)) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "cwd must be a non-empty string");
            return -1;
        }
        if (stat(json_string_value(jcwd), &st) != 0 || !S_ISDIR(st.st_mode)) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "cwd \"%.200s\" is not an existing directory",
                          json_string_value(jcwd));
            return -1;
        }
        *cwd = json_string_value(jcwd);
    }
    if (jenv != NULL && !json_is_null(jenv)) {
        if (!json_is_object(jenv)) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "env must be an object of strings");
            return -1;
        }
        json_object_foreach(jenv, key, value)
        {
            if (!json_is_string(value) || key[0] == '\0' || strchr(key, '=') != NULL ||
                strlen(json_string_value(value)) != json_string_length(value)) {
                gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY,
                              "env.%.100s must be a string without NUL bytes (and a name without '=')", key);
                return -1;
            }
        }
        *env = jenv;
    }
    return 0;
}

GW_EXECD_HANDLER(context_create)
{
    gw_execd_t *execd = gw_execd_from(door);
    json_t *body = gw_parse_body(req);
    gw_context_options_t opts = {0};
    gw_context_sandbox_t sandbox;
    const char *language;
    char err[256];
    gw_context_t *ctx;
    (void)params;

    if (body == NULL)
        return;
    language = json_string_value(json_object_get(body, "language"));
    if (language == NULL || language[0] == '\0') {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "language is required (a string such as \"python\")");
        goto Exit;
    }
    if ((opts.spec = gw_execd_resolve_language(execd, req, language)) == NULL)
        goto Exit;
    if (validate_cwd_env(req, body, &opts.cwd, &opts.env) != 0)
        goto Exit;
    if (gw_context_sandbox_parse(body, execd->host->config, &sandbox, err, sizeof(err)) != 0) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "%s", err);
        goto Exit;
    }
    opts.sandbox = &sandbox;
    opts.forget_failed_start = 1;
    if (gw_execd_create_context(execd, req, &opts, &ctx) != 0)
        goto Exit;
    gw_execd_respond_when_ready(ctx, req);
Exit:
    json_decref(body);
}

/* What a walk over the listed contexts of one language does with each. */
typedef struct st_by_language_t {
    const char *language; /* NULL or "": every language */
    json_t *list;         /* context_list's answer */
} by_language_t;

static void list_one(gw_context_t *ctx, void *arg)
{
    by_language_t *walk = arg;

    if (walk->language == NULL || walk->language[0] == '\0' || context_matches_language(ctx, walk->language))
        json_array_append_new(walk->list, gw_context_to_json(ctx));
}

GW_EXECD_HANDLER(context_list)
{
    gw_execd_t *execd = gw_execd_from(door);
    by_language_t walk = {gw_query_param(req, "language"), json_array()};
    (void)params;

    gw_contexts_each_listed(execd->contexts, list_one, &walk);
    gw_send_json(req, 200, walk.list);
}

/* The context named by the path parameter, or NULL after answering 404. */
static gw_context_t *context_from_params(gw_execd_t *execd, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *id = gw_path_param(req, params, 0);
    gw_context_t *ctx = id != NULL ? gw_context_find(execd->contexts, id) : NULL;

    if (ctx == NULL)
        gw_send_error(req, GW_HTTP_CONTEXT_NOT_FOUND, "no context with id \"%.*s\"",
                      (int)(params->values[0].len > 64 ? 64 : params->values[0].len), params->values[0].base);
    return ctx;
}

GW_EXECD_HANDLER(context_get)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_context_t *ctx = context_from_params(execd, req, params);
    if (ctx != NULL)
        gw_send_json(req, 200, gw_context_to_json(ctx));
}

GW_EXECD_HANDLER(context_delete)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_context_t *ctx = context_from_params(execd, req, params);
    if (ctx == NULL)
        return;
    gw_context_destroy(ctx);
    gw_send_empty(req);
}

static void delete_one(gw_context_t *ctx, void *arg)
{
    by_language_t *walk = arg;

    if (context_matches_language(ctx, walk->language))
        gw_context_destroy(ctx);
}

GW_EXECD_HANDLER(context_delete_by_language)
{
    gw_execd_t *execd = gw_execd_from(door);
    by_language_t walk = {gw_query_param(req, "language"), NULL};
    (void)params;

    if (walk.language == NULL || walk.language[0] == '\0') {
        gw_send_error(req, GW_HTTP_MISSING_QUERY,
                      "the language query parameter is required (DELETE /code/contexts?language=python)");
        return;
    }
    gw_contexts_each_listed(execd->contexts, delete_one, &walk);
    gw_send_empty(req);
}

GW_EXECD_HANDLER(context_restart)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_context_t *ctx = context_from_params(execd, req, params);
    int ret;

    if (ctx == NULL)
        return;
    if ((ret = gw_context_restart(ctx)) != 0) {
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "cannot restart the %s kernel: %s", ctx->spec->name, gw_strerror(ret));
        return;
    }
    gw_execd_respond_when_ready(ctx, req);
}

GW_EXECD_HANDLER(languages)
{
    gw_execd_t *execd = gw_execd_from(door);
    json_t *list = gw_languages_to_json(execd->languages), *entry, *pool;
    size_t i;
    (void)params;

    /* the warm pool of a kernelspec that has one: {"size", "ready", "starting"} */
    json_array_foreach(list, i, entry)
    {
        const kmgr_kernelspec_t *spec = gw_languages_find(execd->languages, json_string_value(json_object_get(entry, "kernel")));
        if (spec != NULL && (pool = gw_contexts_pool_spec_to_json(execd->contexts, spec)) != NULL)
            json_object_set_new(entry, "pool", pool);
    }
    gw_send_json(req, 200, list);
}
