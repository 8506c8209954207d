/* Routes of /code/context and /code/contexts: create, list, get, delete, delete by language, restart. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "kmgr/errors.h"
#include "gateway/api.h"
#include "gateway/context.h"
#include "gateway/contexts_api.h"
#include "gateway/http.h"
#include "gateway/kernel_run.h"
#include "gateway/server.h"

void gw_languages_describe(gw_server_t *server, char *buf, size_t size)
{
    size_t i, used = 0;

    buf[0] = '\0';
    for (i = 0; i != server->specs.size && used < size; ++i) {
        const kmgr_kernelspec_t *spec = server->specs.entries[i];
        int n = snprintf(buf + used, size - used, "%s%s (kernel %s)", i == 0 ? "" : ", ", spec->language, spec->name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    if (server->specs.size == 0)
        snprintf(buf, size, "none: no kernelspec is installed");
}

const kmgr_kernelspec_t *gw_resolve_language(gw_server_t *server, h2o_req_t *req, const char *language)
{
    const kmgr_kernelspec_t *spec = kmgr_kernelspecs_resolve(&server->specs, language);
    char available[1024];

    if (spec == NULL) {
        gw_languages_describe(server, available, sizeof(available));
        gw_send_error(req, GW_ERR_UNKNOWN_LANGUAGE, "unknown language \"%.100s\"; available: %s", language, available);
    }
    return spec;
}

int gw_context_create_or_respond(gw_server_t *server, h2o_req_t *req, const kmgr_kernelspec_t *spec, const char *cwd, json_t *env,
                                 int is_default, gw_context_t **out)
{
    int ret;

    if (server->shutting_down) {
        gw_send_error(req, GW_ERR_KERNEL_UNAVAILABLE, "kgate is shutting down");
        return -1;
    }
    if (server->num_contexts >= server->config->max_contexts) {
        gw_send_error(req, GW_ERR_TOO_MANY_CONTEXTS, "%zu contexts are alive, the maximum (--max-contexts); delete one first",
                      server->num_contexts);
        return -1;
    }
    if ((ret = gw_context_create(server, spec, cwd, env, is_default, out)) != 0) {
        gw_send_error(req, GW_ERR_KERNEL_UNAVAILABLE, "cannot start the %s kernel: %s", spec->name, kmgr_strerror(ret));
        return -1;
    }
    return 0;
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
            gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "cwd must be a non-empty string");
            return -1;
        }
        if (stat(json_string_value(jcwd), &st) != 0 || !S_ISDIR(st.st_mode)) {
            gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "cwd \"%.200s\" is not an existing directory", json_string_value(jcwd));
            return -1;
        }
        *cwd = json_string_value(jcwd);
    }
    if (jenv != NULL && !json_is_null(jenv)) {
        if (!json_is_object(jenv)) {
            gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "env must be an object of strings");
            return -1;
        }
        json_object_foreach(jenv, key, value)
        {
            if (!json_is_string(value) || key[0] == '\0' || strchr(key, '=') != NULL ||
                strlen(json_string_value(value)) != json_string_length(value)) {
                gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY,
                              "env.%.100s must be a string without NUL bytes (and a name without '=')", key);
                return -1;
            }
        }
        *env = jenv;
    }
    return 0;
}

void gw_api_context_create(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    json_t *body = gw_parse_body(req), *env;
    const char *language, *cwd;
    const kmgr_kernelspec_t *spec;
    gw_context_t *ctx;
    (void)params;

    if (body == NULL)
        return;
    language = json_string_value(json_object_get(body, "language"));
    if (language == NULL || language[0] == '\0') {
        gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "language is required (a string such as \"python\")");
        goto Exit;
    }
    if ((spec = gw_resolve_language(server, req, language)) == NULL)
        goto Exit;
    if (validate_cwd_env(req, body, &cwd, &env) != 0)
        goto Exit;
    if (gw_context_create_or_respond(server, req, spec, cwd, env, 0, &ctx) != 0)
        goto Exit;
    gw_context_respond_when_ready(ctx, req);
Exit:
    json_decref(body);
}

void gw_api_context_list(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *language = gw_query_param(req, "language");
    json_t *list = json_array();
    h2o_linklist_t *node;
    (void)params;

    for (node = server->contexts.next; node != &server->contexts; node = node->next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        if (ctx->is_ephemeral)
            continue;
        if (language == NULL || language[0] == '\0' || context_matches_language(ctx, language))
            json_array_append_new(list, gw_context_to_json(ctx));
    }
    gw_send_json(req, 200, list);
}

/* The context named by the path parameter, or NULL after answering 404. */
static gw_context_t *context_from_params(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *id = gw_path_param(req, params, 0);
    gw_context_t *ctx = id != NULL ? gw_context_find(server, id) : NULL;

    if (ctx == NULL)
        gw_send_error(req, GW_ERR_CONTEXT_NOT_FOUND, "no context with id \"%.*s\"",
                      (int)(params->values[0].len > 64 ? 64 : params->values[0].len), params->values[0].base);
    return ctx;
}

void gw_api_context_get(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_context_t *ctx = context_from_params(server, req, params);
    if (ctx != NULL)
        gw_send_json(req, 200, gw_context_to_json(ctx));
}

void gw_api_context_delete(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_context_t *ctx = context_from_params(server, req, params);
    if (ctx == NULL)
        return;
    gw_context_destroy(ctx);
    gw_send_empty(req);
}

void gw_api_context_delete_by_language(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *language = gw_query_param(req, "language");
    h2o_linklist_t *node, *next;
    (void)params;

    if (language == NULL || language[0] == '\0') {
        gw_send_error(req, GW_ERR_MISSING_QUERY,
                      "the language query parameter is required (DELETE /code/contexts?language=python)");
        return;
    }
    for (node = server->contexts.next; node != &server->contexts; node = next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        next = node->next;
        if (!ctx->is_ephemeral && context_matches_language(ctx, language))
            gw_context_destroy(ctx);
    }
    gw_send_empty(req);
}

void gw_api_context_restart(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_context_t *ctx = context_from_params(server, req, params);
    int ret;

    if (ctx == NULL)
        return;
    gw_kernel_runs_abort(ctx, "KernelRestarted", "the context was restarted; its state was lost", "cancelled");
    if ((ret = kmgr_kernel_restart(ctx->kernel)) != 0) {
        gw_send_error(req, GW_ERR_KERNEL_UNAVAILABLE, "cannot restart the %s kernel: %s", ctx->spec->name, kmgr_strerror(ret));
        return;
    }
    ctx->execution_count = 0;
    gw_context_respond_when_ready(ctx, req);
}
