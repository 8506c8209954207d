/* Contexts: the registry of kernels by context id, and their answers to the HTTP requests waiting on them. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "kmgr/errors.h"
#include "gateway/context.h"
#include "gateway/http.h"
#include "gateway/kernel_run.h"
#include "gateway/server.h"
#include "gateway/sse.h"

/* A POST /code/context waiting for its kernel; lives in the request's pool. */
typedef struct st_gw_context_waiter_t {
    h2o_req_t *req;
    gw_context_t *ctx; /* NULL once answered or detached */
    h2o_linklist_t link;
} gw_context_waiter_t;

static void waiter_detach(gw_context_waiter_t *waiter)
{
    if (waiter->ctx == NULL)
        return;
    h2o_linklist_unlink(&waiter->link);
    waiter->ctx = NULL;
}

/* The client went away before its kernel was ready: the context stays, the answer is dropped. */
static void on_waiter_dispose(void *p)
{
    waiter_detach(p);
}

static void answer_waiters(gw_context_t *ctx)
{
    while (!h2o_linklist_is_empty(&ctx->waiters)) {
        gw_context_waiter_t *waiter = H2O_STRUCT_FROM_MEMBER(gw_context_waiter_t, link, ctx->waiters.next);
        h2o_req_t *req = waiter->req;
        waiter_detach(waiter);
        if (ctx->kernel != NULL && kmgr_kernel_state(ctx->kernel) != KMGR_KERNEL_DEAD)
            gw_send_json(req, 200, gw_context_to_json(ctx));
        else
            gw_send_error(req, GW_ERR_KERNEL_UNAVAILABLE, "the %s kernel failed to start: %s", ctx->spec->name,
                          ctx->kernel != NULL ? kmgr_kernel_exit_reason(ctx->kernel) : "context deleted");
    }
}

static void on_kernel_state(kmgr_kernel_t *kernel, void *data)
{
    gw_context_t *ctx = data;
    kmgr_kernel_state_t state = kmgr_kernel_state(kernel);

    if (state == KMGR_KERNEL_IDLE && kmgr_kernel_info(kernel) != NULL)
        gw_languages_note_kernel_info(ctx->server, ctx->spec, kmgr_kernel_info(kernel));
    if (state != KMGR_KERNEL_STARTING && state != KMGR_KERNEL_RESTARTING)
        answer_waiters(ctx);
    if (state == KMGR_KERNEL_DEAD) {
        /* the running run hears it from its request; queued ones would wait forever otherwise */
        gw_kernel_runs_abort(ctx, "KernelDied", kmgr_kernel_exit_reason(kernel), "kernel_died");
        if (ctx->is_ephemeral)
            gw_context_destroy(ctx);
    }
}

void gw_contexts_cull_idle(gw_server_t *server)
{
    int64_t now = gw_unix_ms();
    h2o_linklist_t *node, *next;

    for (node = server->contexts.next; node != &server->contexts; node = next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        next = node->next;
        if (h2o_linklist_is_empty(&ctx->runs) && h2o_linklist_is_empty(&ctx->waiters) &&
            now - ctx->last_activity_ms > (int64_t)server->config->context_idle_ms)
            gw_context_destroy(ctx);
    }
}

int gw_context_create(gw_server_t *server, const kmgr_kernelspec_t *spec, const char *cwd, json_t *env, int is_default,
                      gw_context_t **out)
{
    gw_context_t *ctx = wire_calloc(1, sizeof(*ctx));
    kmgr_kernel_options_t opts = {.spec = spec, .cwd = cwd, .env = env, .on_state = on_kernel_state, .data = ctx};
    int ret;

    if ((ret = kmgr_kernel_start(server->kmgr, &opts, &ctx->kernel)) != 0) {
        free(ctx);
        return ret;
    }
    wire_uuid4(ctx->id);
    ctx->server = server;
    ctx->spec = spec;
    ctx->cwd = wire_strdup(cwd);
    ctx->created_at_ms = ctx->last_activity_ms = gw_unix_ms();
    ctx->execution_count = 0;
    ctx->is_default = is_default != 0;
    h2o_linklist_init_anchor(&ctx->waiters);
    h2o_linklist_init_anchor(&ctx->runs);
    h2o_linklist_insert(&server->contexts, &ctx->link);
    ++server->num_contexts;
    *out = ctx;
    return 0;
}

void gw_context_destroy(gw_context_t *ctx)
{
    kmgr_kernel_t *kernel = ctx->kernel;

    h2o_linklist_unlink(&ctx->link);
    --ctx->server->num_contexts;
    /* the kernel goes first so waiters hear "context deleted", and its requests are dropped */
    ctx->kernel = NULL;
    kmgr_kernel_destroy(kernel);
    answer_waiters(ctx);
    gw_kernel_runs_abort(ctx, "ContextDeleted", "the context was deleted before this run ended", "cancelled");
    free(ctx->cwd);
    free(ctx);
}

gw_context_t *gw_context_find(gw_server_t *server, const char *id)
{
    h2o_linklist_t *node;
    for (node = server->contexts.next; node != &server->contexts; node = node->next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        if (strcmp(ctx->id, id) == 0)
            return ctx;
    }
    return NULL;
}

gw_context_t *gw_context_find_default(gw_server_t *server, const kmgr_kernelspec_t *spec)
{
    h2o_linklist_t *node;
    for (node = server->contexts.next; node != &server->contexts; node = node->next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        if (ctx->is_default && ctx->spec == spec)
            return ctx;
    }
    return NULL;
}

void gw_context_respond_when_ready(gw_context_t *ctx, h2o_req_t *req)
{
    gw_context_waiter_t *waiter;

    waiter = h2o_mem_alloc_shared(&req->pool, sizeof(*waiter), on_waiter_dispose);
    memset(waiter, 0, sizeof(*waiter));
    waiter->req = req;
    waiter->ctx = ctx;
    h2o_linklist_insert(&ctx->waiters, &waiter->link);
    if (kmgr_kernel_state(ctx->kernel) != KMGR_KERNEL_STARTING && kmgr_kernel_state(ctx->kernel) != KMGR_KERNEL_RESTARTING)
        answer_waiters(ctx);
}

json_t *gw_context_to_json(const gw_context_t *ctx)
{
    const char *status = ctx->kernel != NULL ? kmgr_kernel_state_name(kmgr_kernel_state(ctx->kernel)) : "dead";
    json_t *obj = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:i, s:b}", "id", ctx->id, "language", ctx->spec->language, "kernel",
                            ctx->spec->name, "status", status, "created_at", (json_int_t)ctx->created_at_ms, "last_activity",
                            (json_int_t)ctx->last_activity_ms, "execution_count", ctx->execution_count, "default", ctx->is_default);

    json_object_set_new(obj, "cwd", ctx->cwd != NULL ? json_string(ctx->cwd) : json_null());
    return obj;
}
