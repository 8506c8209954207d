/* The tools that act on a session's kernels rather than run code in them: interrupt, restart, list_contexts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"

static void respond_text(h2o_req_t *req, unsigned accepts, json_t *id, const char *text, int is_error)
{
    gw_mcp_respond(req, accepts, gw_mcp_result(id, gw_mcp_text_result(text, strlen(text), is_error)));
}

/*
 * The session's context of the language `args` names: 0 with `*ctx` (NULL when the session has none of it yet), or -1
 * after answering an isError result (bad arguments, an unknown language).
 */
static int context_of_args(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, unsigned accepts, json_t *args,
                           const kmgr_kernelspec_t **spec, gw_context_t **ctx)
{
    const char *language, *ctx_id;
    char why[1024];

    if (gw_mcp_language_args(args, &language, why, sizeof(why)) != 0) {
        respond_text(req, accepts, id, why, 1);
        return -1;
    }
    if ((*spec = gw_languages_resolve(session->mcp->languages, language)) == NULL) {
        char available[768];
        gw_languages_describe(session->mcp->languages, available, sizeof(available));
        snprintf(why, sizeof(why), "unknown language \"%.100s\"; available: %s", language, available);
        respond_text(req, accepts, id, why, 1);
        return -1;
    }
    ctx_id = json_string_value(json_object_get(session->contexts, (*spec)->name));
    *ctx = ctx_id != NULL ? gw_context_find(session->mcp->contexts, ctx_id) : NULL;
    return 0;
}

void gw_mcp_tool_interrupt(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, unsigned accepts, json_t *args)
{
    const kmgr_kernelspec_t *spec;
    gw_context_t *ctx;
    char text[512];
    int ret;

    if (context_of_args(session, req, id, accepts, args, &spec, &ctx) != 0)
        return;
    if (ctx == NULL) {
        snprintf(text, sizeof(text), "This session has no %s kernel yet: nothing to interrupt.", spec->name);
        respond_text(req, accepts, id, text, 0);
        return;
    }
    if (h2o_linklist_is_empty(&ctx->runs)) {
        snprintf(text, sizeof(text), "The %s kernel was not running anything: nothing to interrupt (its state is unchanged).",
                 spec->name);
        respond_text(req, accepts, id, text, 0);
        return;
    }
    if (kmgr_kernel_state(ctx->kernel) == KMGR_KERNEL_STARTING || kmgr_kernel_state(ctx->kernel) == KMGR_KERNEL_RESTARTING) {
        /* nothing runs in a kernel not ready yet (kmgr_kernel_interrupt sends it nothing): its calls wait for it */
        snprintf(text, sizeof(text),
                 "The %s kernel is still starting: nothing runs in it yet, nothing was interrupted; the calls waiting for it "
                 "run once it is ready.",
                 spec->name);
        respond_text(req, accepts, id, text, 0);
        return;
    }
    if ((ret = gw_context_interrupt(ctx)) != 0) {
        snprintf(text, sizeof(text), "cannot interrupt the %s kernel: %s%s%s", spec->name, gw_strerror(ret),
                 gw_context_exit_reason(ctx)[0] != '\0' ? "; " : "", gw_context_exit_reason(ctx));
        respond_text(req, accepts, id, text, 1);
        return;
    }
    snprintf(text, sizeof(text),
             "Interrupted the cell running in the %s kernel: its call ends with the interruption; the kernel's state is kept "
             "and calls waiting behind it still run.",
             spec->name);
    respond_text(req, accepts, id, text, 0);
}

/* ---- restart: answered once the kernel is ready again --------------------------------------------------------------- */

/* A restart waiting for its kernel, in the request's pool: a client that leaves takes it along (the restart goes on). */
typedef struct st_restart_wait_t {
    gw_context_waiter_t waiter;
    h2o_req_t *req;
    json_t *id;
    unsigned accepts;
    char kernel[64];
} restart_wait_t;

static void on_restarted(gw_context_waiter_t *waiter, gw_context_t *ctx, const char *failure)
{
    restart_wait_t *wait = H2O_STRUCT_FROM_MEMBER(restart_wait_t, waiter, waiter);
    char text[1024];
    (void)ctx;

    if (failure != NULL) {
        snprintf(text, sizeof(text), "the %s kernel did not come back after the restart: %s", wait->kernel, failure);
        respond_text(wait->req, wait->accepts, wait->id, text, 1);
        return;
    }
    snprintf(text, sizeof(text),
             "Restarted the %s kernel: all its state (variables, imports, definitions; a shell's cwd and variables) is lost, "
             "and execution_count starts again from 1.",
             wait->kernel);
    respond_text(wait->req, wait->accepts, wait->id, text, 0);
}

static void on_restart_dispose(void *p)
{
    restart_wait_t *wait = p;

    gw_context_waiter_cancel(&wait->waiter);
    json_decref(wait->id);
}

void gw_mcp_tool_restart(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, unsigned accepts, json_t *args)
{
    const kmgr_kernelspec_t *spec;
    restart_wait_t *wait;
    gw_context_t *ctx;
    char text[512];
    int ret;

    if (context_of_args(session, req, id, accepts, args, &spec, &ctx) != 0)
        return;
    if (ctx == NULL) {
        snprintf(text, sizeof(text), "This session has no %s kernel yet: nothing to restart (the next call starts a fresh one).",
                 spec->name);
        respond_text(req, accepts, id, text, 0);
        return;
    }
    if ((ret = gw_context_restart(ctx)) != 0) {
        snprintf(text, sizeof(text), "cannot restart the %s kernel: %s", spec->name, gw_strerror(ret));
        respond_text(req, accepts, id, text, 1);
        return;
    }
    wait = h2o_mem_alloc_shared(&req->pool, sizeof(*wait), on_restart_dispose);
    memset(wait, 0, sizeof(*wait));
    wait->waiter.cb = on_restarted;
    wait->req = req;
    wait->id = json_incref(id);
    wait->accepts = accepts;
    snprintf(wait->kernel, sizeof(wait->kernel), "%s", spec->name);
    gw_context_wait_ready(ctx, &wait->waiter);
}

/* ---- list_contexts -------------------------------------------------------------------------------------------------- */

void gw_mcp_tool_list_contexts(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, unsigned accepts)
{
    json_t *list = json_array(), *ctx_id, *result;
    int64_t now = gw_now_ms();
    const char *spec_name;
    char *text = NULL, line[512];
    size_t len = 0;

    json_object_foreach(session->contexts, spec_name, ctx_id)
    {
        gw_context_t *ctx = gw_context_find(session->mcp->contexts, json_string_value(ctx_id));
        const char *state;
        int64_t idle;
        int n;
        /* one the engine deleted on its own (idle, DELETE /code/contexts/{id}) is no kernel of the session's any more */
        if (ctx == NULL)
            continue;
        state = ctx->kernel != NULL ? kmgr_kernel_state_name(kmgr_kernel_state(ctx->kernel)) : "dead";
        /* a cell waiting or running is the session's business, whatever the kernel last said */
        if (strcmp(state, "idle") == 0 && !h2o_linklist_is_empty(&ctx->runs))
            state = "busy";
        idle = strcmp(state, "busy") == 0 || now < ctx->last_activity_mono_ms ? 0 : now - ctx->last_activity_mono_ms;
        json_array_append_new(list, json_pack("{s:s, s:s, s:s, s:i, s:I, s:s}", "language", ctx->spec->language, "kernel",
                                              ctx->spec->name, "state", state, "execution_count", ctx->execution_count, "idle_ms",
                                              (json_int_t)idle, "context_id", ctx->id));
        n = snprintf(line, sizeof(line), "%s (kernel %s): %s, execution_count %d, idle %.1f s\n", ctx->spec->language,
                     ctx->spec->name, state, ctx->execution_count, (double)idle / 1000.0);
        if (n < 0 || (size_t)n >= sizeof(line))
            n = (int)strlen(line);
        text = wire_realloc(text, len + (size_t)n + 1);
        memcpy(text + len, line, (size_t)n + 1);
        len += (size_t)n;
    }
    if (len == 0)
        result = gw_mcp_text_result(H2O_STRLIT("This session has no kernel yet (run_code and bash start theirs on first use)."), 0);
    else
        result = gw_mcp_text_result(text, len, 0);
    free(text);
    json_object_set_new(result, "structuredContent", json_pack("{s:o}", "contexts", list));
    gw_mcp_respond(req, accepts, gw_mcp_result(id, result));
}
