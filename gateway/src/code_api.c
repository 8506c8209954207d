/* Routes of /code: execute (in a context, in a language's default context, or stateless) and interrupt. */
#include <string.h>
#include "gateway/api.h"
#include "gateway/context.h"
#include "gateway/contexts_api.h"
#include "gateway/http.h"
#include "gateway/kernel_run.h"
#include "gateway/server.h"
#include "gateway/shell.h"

/* The context a POST /code names (by id, or a language's default, created on first use). NULL
 * with *stateless set when it names none; NULL after answering an error otherwise. */
static gw_context_t *context_for_execute(gw_server_t *server, h2o_req_t *req, json_t *body, int *stateless)
{
    json_t *jctx = json_object_get(body, "context");
    const char *id, *language;
    const kmgr_kernelspec_t *spec;
    gw_context_t *ctx;

    *stateless = 0;
    if (jctx != NULL && !json_is_null(jctx) && !json_is_object(jctx)) {
        gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "context must be an object {\"id\"?, \"language\"?}");
        return NULL;
    }
    id = json_string_value(json_object_get(jctx, "id"));
    language = json_string_value(json_object_get(jctx, "language"));
    if (id != NULL && id[0] != '\0') {
        if ((ctx = gw_context_find(server, id)) == NULL)
            gw_send_error(req, GW_ERR_CONTEXT_NOT_FOUND, "no context with id \"%.64s\"", id);
        return ctx;
    }
    if (language == NULL || language[0] == '\0') {
        *stateless = 1;
        return NULL;
    }
    if ((spec = gw_resolve_language(server, req, language)) == NULL)
        return NULL;
    if ((ctx = gw_context_find_default(server, spec)) == NULL &&
        gw_context_create_or_respond(server, req, spec, NULL, NULL, 1, &ctx) != 0)
        return NULL;
    return ctx;
}

void gw_api_code_execute(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    json_t *body = gw_parse_body(req), *jcode;
    gw_context_t *ctx;
    gw_run_t *run;
    int stateless;
    (void)params;

    if (body == NULL)
        return;
    jcode = json_object_get(body, "code");
    if (!json_is_string(jcode) || json_string_length(jcode) == 0) {
        gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "code must be a non-empty string");
        goto Exit;
    }
    if (strlen(json_string_value(jcode)) != json_string_length(jcode)) {
        gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "code must not contain NUL characters");
        goto Exit;
    }
    ctx = context_for_execute(server, req, body, &stateless);
    if (ctx == NULL && !stateless)
        goto Exit;
    if (ctx != NULL) {
        if (kmgr_kernel_state(ctx->kernel) == KMGR_KERNEL_DEAD) {
            gw_send_error(req, GW_ERR_KERNEL_UNAVAILABLE,
                          "the kernel of context %s is dead (%s); restart it with POST /code/contexts/%s/restart", ctx->id,
                          kmgr_kernel_exit_reason(ctx->kernel), ctx->id);
            goto Exit;
        }
        run = gw_kernel_run_start(ctx, json_string_value(jcode));
    } else if ((run = gw_shell_start(server, json_string_value(jcode))) == NULL) {
        gw_send_error(req, GW_ERR_RUNTIME_ERROR, "cannot start %s for a stateless run", server->config->shell);
        goto Exit;
    }
    gw_run_attach_reader(run, req, 0);
Exit:
    json_decref(body);
}

void gw_api_code_interrupt(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *id = gw_query_param(req, "id");
    gw_context_t *ctx;
    (void)params;

    if (id == NULL || id[0] == '\0') {
        gw_send_error(req, GW_ERR_MISSING_QUERY, "the id query parameter is required (DELETE /code?id=<context id>)");
        return;
    }
    if ((ctx = gw_context_find(server, id)) != NULL) {
        if (kmgr_kernel_interrupt(ctx->kernel) != 0) {
            gw_send_error(req, GW_ERR_KERNEL_UNAVAILABLE, "the kernel of context %s is dead (%s)", ctx->id,
                          kmgr_kernel_exit_reason(ctx->kernel));
            return;
        }
        gw_send_empty(req);
        return;
    }
    if (gw_shell_interrupt(server, id) == 0) {
        gw_send_empty(req);
        return;
    }
    gw_send_error(req, GW_ERR_CONTEXT_NOT_FOUND, "no context or running stateless execution with id \"%.64s\"", id);
}
