/* Warm pools: kernels started ahead per kernelspec, handed out as contexts, refilled one at a time from the tick. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "code/pool.h"
#include "ksys/log.h"

#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 60000

static gw_pool_t *find_pool(const gw_contexts_t *contexts, const kmgr_kernelspec_t *spec)
{
    for (h2o_linklist_t *node = contexts->pools.next; node != &contexts->pools; node = node->next) {
        gw_pool_t *pool = H2O_STRUCT_FROM_MEMBER(gw_pool_t, link, node);
        if (pool->spec == spec)
            return pool;
    }
    return NULL;
}

static int is_ready(const gw_context_t *ctx)
{
    kmgr_kernel_state_t state = kmgr_kernel_state(ctx->kernel);
    return state == KMGR_KERNEL_IDLE || state == KMGR_KERNEL_BUSY;
}

static gw_context_t *first_starting(gw_pool_t *pool)
{
    for (h2o_linklist_t *node = pool->kernels.next; node != &pool->kernels; node = node->next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        if (!is_ready(ctx))
            return ctx;
    }
    return NULL;
}

static void unlink_pooled(gw_context_t *ctx)
{
    h2o_linklist_unlink(&ctx->link);
    --ctx->pool->count;
    --ctx->contexts->pooled;
    ctx->is_pooled = 0;
    ctx->pool = NULL;
}

/* Shuts down the kernel of a pooled context (never registered) and frees it. */
static void discard(gw_context_t *ctx)
{
    unlink_pooled(ctx);
    kmgr_kernel_destroy(ctx->kernel);
    free(ctx->cwd);
    free(ctx);
}

/* A starting kernel goes first: it holds a core now, and has cost the least so far. */
static gw_context_t *victim_of(gw_pool_t *pool)
{
    gw_context_t *ctx = first_starting(pool);
    return ctx != NULL ? ctx : H2O_STRUCT_FROM_MEMBER(gw_context_t, link, pool->kernels.prev);
}

static int same_sandbox(const gw_context_sandbox_t *a, const gw_context_sandbox_t *b)
{
    return a->share_net == b->share_net && a->limits.memory_bytes == b->limits.memory_bytes && a->limits.pids == b->limits.pids &&
           a->limits.cpu_seconds == b->limits.cpu_seconds && a->limits.open_files == b->limits.open_files &&
           a->limits.file_size_bytes == b->limits.file_size_bytes;
}

/*
 * Whether a pooled kernel is what these options would start. A kernel's directory, environment, mounts,
 * cgroups and rlimits are all fixed when it is spawned: none of them can be changed afterwards the
 * same way in every kernel (os.chdir is Python's, `cd` bash's; rlimits cannot be raised back), so
 * a request asking for any of them gets a kernel of its own.
 */
static int can_serve(const gw_contexts_t *contexts, const gw_context_options_t *opts)
{
    if (opts->env != NULL && json_object_size(opts->env) != 0)
        return 0;
    if (opts->sandbox != NULL) {
        gw_context_sandbox_t defaults;
        gw_context_sandbox_defaults(contexts->host->config, &defaults);
        if (!same_sandbox(opts->sandbox, &defaults))
            return 0;
    }
    if (opts->cwd != NULL) {
        char *real = realpath(opts->cwd, NULL);
        int same = real != NULL && contexts->pool_cwd != NULL && strcmp(real, contexts->pool_cwd) == 0;
        free(real);
        if (!same)
            return 0;
    }
    return 1;
}

gw_context_t *gw_pool_take(gw_contexts_t *contexts, const gw_context_options_t *opts)
{
    gw_pool_t *pool = find_pool(contexts, opts->spec);
    gw_context_t *ctx = NULL;

    if (pool == NULL || pool->count == 0 || !can_serve(contexts, opts))
        return NULL;
    /* the oldest ready one; else one still starting, which is nearer ready than a kernel started now */
    for (h2o_linklist_t *node = pool->kernels.next; node != &pool->kernels && ctx == NULL; node = node->next) {
        gw_context_t *candidate = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        if (is_ready(candidate))
            ctx = candidate;
    }
    if (ctx == NULL)
        ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, pool->kernels.next);
    unlink_pooled(ctx);
    return ctx;
}

int gw_pool_give_up_one(gw_contexts_t *contexts)
{
    gw_pool_t *fullest = NULL;

    for (h2o_linklist_t *node = contexts->pools.next; node != &contexts->pools; node = node->next) {
        gw_pool_t *pool = H2O_STRUCT_FROM_MEMBER(gw_pool_t, link, node);
        gw_context_t *starting = first_starting(pool);
        if (starting != NULL) {
            discard(starting);
            return 1;
        }
        if (pool->count != 0 && (fullest == NULL || pool->count > fullest->count))
            fullest = pool;
    }
    if (fullest == NULL)
        return 0;
    discard(victim_of(fullest));
    return 1;
}

static void note_failure(gw_pool_t *pool, const char *why)
{
    unsigned shift = pool->failures < 6 ? pool->failures : 6;
    int64_t delay = (int64_t)BACKOFF_FIRST_MS << shift;

    if (pool->failures++ == 0)
        ksys_log_warn("pool: a %s kernel started ahead failed (%s); it is replaced after a back-off (1 s, doubling to 60 s; "
                      "further failures in a row are not logged)",
                      pool->spec->name, why);
    pool->next_start_ms = gw_now_ms() + (delay < BACKOFF_MAX_MS ? delay : BACKOFF_MAX_MS);
}

void gw_pool_on_state(gw_context_t *ctx, kmgr_kernel_state_t state)
{
    gw_pool_t *pool = ctx->pool;

    if (state == KMGR_KERNEL_IDLE) {
        pool->failures = 0;
        pool->next_start_ms = 0;
    } else if (state == KMGR_KERNEL_DEAD) {
        note_failure(pool, kmgr_kernel_exit_reason(ctx->kernel));
        discard(ctx);
    }
}

/* Whether a kernel is being started anywhere: for a request (a context's) or for a pool. */
static int any_starting(const gw_contexts_t *contexts)
{
    for (h2o_linklist_t *node = contexts->list.next; node != &contexts->list; node = node->next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        kmgr_kernel_state_t state = kmgr_kernel_state(ctx->kernel);
        if (state == KMGR_KERNEL_STARTING || state == KMGR_KERNEL_RESTARTING)
            return 1;
    }
    for (h2o_linklist_t *node = contexts->pools.next; node != &contexts->pools; node = node->next)
        if (first_starting(H2O_STRUCT_FROM_MEMBER(gw_pool_t, link, node)) != NULL)
            return 1;
    return 0;
}

gw_pool_t *gw_pool_to_fill(gw_contexts_t *contexts)
{
    int64_t now;

    if (h2o_linklist_is_empty(&contexts->pools) || contexts->host->shutting_down ||
        contexts->count + contexts->pooled >= contexts->host->config->max_contexts)
        return NULL;
    /* one start at a time, and none beside a request's: a kernel start takes most of a core for
     * half a second, and the pool must never be what slows a client down */
    if (any_starting(contexts))
        return NULL;
    now = gw_now_ms();
    for (h2o_linklist_t *node = contexts->pools.next; node != &contexts->pools; node = node->next) {
        gw_pool_t *pool = H2O_STRUCT_FROM_MEMBER(gw_pool_t, link, node);
        if (pool->count < pool->size && now >= pool->next_start_ms)
            return pool;
    }
    return NULL;
}

void gw_pool_start_failed(gw_pool_t *pool, const char *why)
{
    note_failure(pool, why);
}

void gw_pool_add(gw_pool_t *pool, gw_context_t *ctx)
{
    ctx->is_pooled = 1;
    ctx->pool = pool;
    h2o_linklist_insert(&pool->kernels, &ctx->link);
    ++pool->count;
    ++ctx->contexts->pooled;
}

void gw_contexts_set_pool(gw_contexts_t *contexts, const kmgr_kernelspec_t *spec, unsigned size)
{
    gw_pool_t *pool = find_pool(contexts, spec);

    if (pool == NULL) {
        if (size == 0)
            return;
        pool = wire_calloc(1, sizeof(*pool));
        pool->spec = spec;
        h2o_linklist_init_anchor(&pool->kernels);
        h2o_linklist_insert(&contexts->pools, &pool->link);
    }
    if (contexts->pool_cwd == NULL)
        contexts->pool_cwd = realpath(".", NULL);
    pool->size = size;
    while (pool->count > size)
        discard(victim_of(pool));
}

void gw_pool_dispose_all(gw_contexts_t *contexts)
{
    while (!h2o_linklist_is_empty(&contexts->pools)) {
        gw_pool_t *pool = H2O_STRUCT_FROM_MEMBER(gw_pool_t, link, contexts->pools.next);
        while (pool->count != 0)
            discard(victim_of(pool));
        h2o_linklist_unlink(&pool->link);
        free(pool);
    }
    free(contexts->pool_cwd);
    contexts->pool_cwd = NULL;
}

json_t *gw_contexts_pool_spec_to_json(const gw_contexts_t *contexts, const kmgr_kernelspec_t *spec)
{
    gw_pool_t *pool = find_pool(contexts, spec);
    unsigned ready = 0;

    if (pool == NULL)
        return NULL;
    for (h2o_linklist_t *node = pool->kernels.next; node != &pool->kernels; node = node->next)
        ready += is_ready(H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node));
    return json_pack("{s:i, s:i, s:i}", "size", (int)pool->size, "ready", (int)ready, "starting", (int)(pool->count - ready));
}

json_t *gw_contexts_pool_to_json(const gw_contexts_t *contexts)
{
    json_t *obj = json_object();

    for (h2o_linklist_t *node = contexts->pools.next; node != &contexts->pools; node = node->next) {
        gw_pool_t *pool = H2O_STRUCT_FROM_MEMBER(gw_pool_t, link, node);
        json_object_set_new(obj, pool->spec->name, gw_contexts_pool_spec_to_json(contexts, pool->spec));
    }
    return obj;
}
