/* Contexts: the registry of kernels by context id, readiness waiters, idle expiry; the top of code/ (it calls the runs,
 * kernel_run.c, and the warm pools, pool.c; they call it back only through gw_contexts_t.after_run). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "core/errors.h"
#include "code/context.h"
#include "code/kernel_run.h"
#include "code/pool.h"
#include "ksys/log.h"

/*
 * The one place a stateless run's context (is_ephemeral) is destroyed: once it has no run left (its run ended, was
 * cancelled before it started, or never started; or its kernel died and the runs were ended). Returns 1 when `ctx` is
 * gone. gw_contexts_t.after_run.
 */
static int end_if_spent(gw_context_t *ctx)
{
    if (!ctx->is_ephemeral || !h2o_linklist_is_empty(&ctx->runs))
        return 0;
    gw_context_destroy(ctx);
    return 1;
}

void gw_contexts_init(gw_contexts_t *contexts, gw_host_t *host, gw_runs_t *runs, gw_languages_t *languages, kmgr_manager_t *kmgr)
{
    memset(contexts, 0, sizeof(*contexts));
    contexts->host = host;
    contexts->runs = runs;
    contexts->languages = languages;
    contexts->kmgr = kmgr;
    contexts->translate.compat_execd = host->config->compat_execd;
    contexts->translate.keep_ansi = host->config->keep_ansi;
    h2o_linklist_init_anchor(&contexts->list);
    h2o_linklist_init_anchor(&contexts->pools);
    contexts->after_run = end_if_spent;
    gw_code_figures_init(&contexts->figures, &host->stats, contexts);
}

void gw_context_waiter_cancel(gw_context_waiter_t *waiter)
{
    if (waiter->ctx == NULL)
        return;
    h2o_linklist_unlink(&waiter->link);
    waiter->ctx = NULL;
}

int gw_context_is_deleted(const gw_context_t *ctx)
{
    return ctx->kernel == NULL; /* destroy() clears it first, then tells the waiters */
}

static void tell_waiters(gw_context_t *ctx)
{
    /* whoever waited uses the context now: its idle clock starts here, not when its kernel was asked for (a start longer
     * than --context-idle-ms had the new context culled before its creator's first request) */
    if (!h2o_linklist_is_empty(&ctx->waiters))
        gw_context_touch(ctx);
    while (!h2o_linklist_is_empty(&ctx->waiters)) {
        gw_context_waiter_t *waiter = H2O_STRUCT_FROM_MEMBER(gw_context_waiter_t, link, ctx->waiters.next);
        gw_context_waiter_cancel(waiter);
        if (ctx->kernel != NULL && kmgr_kernel_state(ctx->kernel) != KMGR_KERNEL_DEAD)
            waiter->cb(waiter, ctx, NULL);
        else
            waiter->cb(waiter, ctx, ctx->kernel != NULL ? kmgr_kernel_exit_reason(ctx->kernel) : "context deleted");
    }
}

static int is_starting(const gw_context_t *ctx)
{
    kmgr_kernel_state_t state = kmgr_kernel_state(ctx->kernel);
    return state == KMGR_KERNEL_STARTING || state == KMGR_KERNEL_RESTARTING;
}

/*
 * Runs `body` for each tap. A callback may detach its own tap (a client that went away), so the next
 * one is found before the call; it may not destroy the context or detach another tap (no door does:
 * a tap's client ends only its own socket).
 */
#define FOR_EACH_TAP(ctx, tap, body)                                                                                               \
    do {                                                                                                                           \
        h2o_linklist_t *node_, *next_;                                                                                             \
        for (node_ = (ctx)->taps.next; node_ != &(ctx)->taps; node_ = next_) {                                                     \
            gw_context_tap_t *tap = H2O_STRUCT_FROM_MEMBER(gw_context_tap_t, link, node_);                                         \
            next_ = node_->next;                                                                                                   \
            body;                                                                                                                  \
        }                                                                                                                          \
    } while (0)

/* A cell a tap's client sent (the Jupyter door) counts as kgate's own runs do (kernel_run.c), from its execute_reply. */
static void note_execution_count(gw_context_t *ctx, wire_channel_t channel, const wire_msg_t *msg)
{
    const char *type;
    json_t *count;

    if (channel != WIRE_CHANNEL_SHELL || (type = json_string_value(json_object_get(msg->header, "msg_type"))) == NULL ||
        strcmp(type, "execute_reply") != 0)
        return;
    if (json_is_integer(count = json_object_get(msg->content, "execution_count")) && json_integer_value(count) > 0)
        ctx->execution_count = (int)json_integer_value(count);
}

static void on_kernel_message(kmgr_kernel_t *kernel, wire_channel_t channel, const wire_msg_t *msg, const wire_frame_t *parts,
                              size_t nparts, void *data)
{
    gw_context_t *ctx = data;

    (void)kernel;
    gw_context_touch(ctx);
    if (msg == NULL) {
        const char *parent = nparts != 0 ? parts[0].base : NULL;
        size_t parent_len = nparts != 0 ? parts[0].len : 0;
        FOR_EACH_TAP(ctx, tap, if (tap->on_dropped != NULL) tap->on_dropped(tap, channel, parent, parent_len));
        return;
    }
    if (msg->content_cut) {
        char *parent = json_dumps(msg->parent_header, JSON_COMPACT);
        FOR_EACH_TAP(ctx, tap, if (tap->on_cut != NULL) tap->on_cut(tap, msg);
                     else if (tap->on_dropped != NULL) tap->on_dropped(tap, channel, parent, parent != NULL ? strlen(parent) : 0));
        free(parent);
        return;
    }
    note_execution_count(ctx, channel, msg);
    FOR_EACH_TAP(ctx, tap, tap->on_message(tap, channel, msg, parts, nparts));
}

/* The kernel died on its own and kernelmgr restarts it: the log and the runs still queued hear it (the running one ended
 * with KernelDied), and the new kernel counts cells from 1. */
static void on_auto_restart(gw_context_t *ctx, unsigned restarts)
{
    unsigned in_a_row, limit;

    kmgr_kernel_auto_restarts(ctx->kernel, &in_a_row, &limit);
    ksys_log_warn("context %s: its %s kernel died (%s); restarted automatically (%u of %u in a row), its state lost", ctx->id,
                  ctx->spec->name, kmgr_kernel_last_death(ctx->kernel), in_a_row, limit);
    gw_stats_inc(ctx->contexts->figures.deaths, restarts - ctx->restarts_seen);
    gw_stats_inc(ctx->contexts->figures.restarts_automatic, restarts - ctx->restarts_seen);
    ctx->restarts_seen = restarts;
    ctx->execution_count = 0;
    gw_kernel_runs_status(ctx, "restarting");
}

static void on_kernel_state(kmgr_kernel_t *kernel, void *data)
{
    gw_context_t *ctx = data;
    kmgr_kernel_state_t state = kmgr_kernel_state(kernel);
    unsigned restarts = kmgr_kernel_auto_restarts(kernel, NULL, NULL);

    if (state == KMGR_KERNEL_IDLE && kmgr_kernel_info(kernel) != NULL)
        gw_languages_note_kernel_info(ctx->contexts->languages, ctx->spec, kmgr_kernel_info(kernel));
    if (state == KMGR_KERNEL_IDLE || state == KMGR_KERNEL_BUSY)
        ctx->was_ready = 1;
    if (ctx->is_pooled) {
        /* nobody waits on a pooled kernel, nor taps it: the pool alone hears it (and may free ctx) */
        gw_pool_on_state(ctx, state);
        return;
    }
    if (restarts != ctx->restarts_seen)
        on_auto_restart(ctx, restarts);
    if (ctx->not_answering == kmgr_kernel_answering(kernel)) {
        /* a heartbeat went unanswered (IRkernel in a long cell, a stopped process): information, never a death */
        ctx->not_answering = !kmgr_kernel_answering(kernel);
        gw_kernel_runs_status(ctx, ctx->not_answering ? "not answering" : "answering");
    }
    FOR_EACH_TAP(ctx, tap, tap->on_state(tap, state));
    if (!is_starting(ctx))
        tell_waiters(ctx);
    if (state == KMGR_KERNEL_DEAD) {
        /* the runs end (queued ones would wait forever otherwise); a stateless run's context goes with them */
        gw_stats_inc(ctx->contexts->figures.deaths, 1);
        gw_kernel_runs_abort(ctx, "KernelDied", kmgr_kernel_exit_reason(kernel), "kernel_died");
        if (end_if_spent(ctx))
            return;
        /* a failed start was reported to whoever waited for it: a dead context nobody ever used would stay listed */
        if (ctx->forget_failed_start && !ctx->was_ready)
            gw_context_destroy(ctx);
    }
}

/*
 * Starts a kernel for a context that is not registered yet (no id, in no list): `opts->spec`, `env` and `sandbox` apply,
 * `cwd` too but is not recorded. Returns 0 and the context in `*out`, or a kmgr code with nothing left behind.
 */
static int spawn(gw_contexts_t *contexts, const gw_context_options_t *opts, gw_context_t **out)
{
    kmgr_kernel_options_t kopts = {.spec = opts->spec, .cwd = opts->cwd, .env = opts->env, .on_state = on_kernel_state};
    const gw_config_t *config = contexts->host->config;
    gw_context_sandbox_t sandbox;
    ksys_sandbox_t ksandbox;
    gw_context_t *ctx;
    int ret;

    if (opts->sandbox != NULL)
        sandbox = *opts->sandbox;
    else
        gw_context_sandbox_defaults(config, &sandbox);
    ksandbox = (ksys_sandbox_t){.kind = config->sandbox ? KSYS_SANDBOX_BWRAP : KSYS_SANDBOX_NONE,
                                .share_net = sandbox.share_net,
                                .workspace = contexts->workspace,
                                .limits = sandbox.limits,
                                .tmp_bytes = sandbox.tmp_bytes};
    kopts.sandbox = &ksandbox;
    ctx = wire_calloc(1, sizeof(*ctx));
    ctx->sandbox = sandbox;
    kopts.data = ctx;
    if ((ret = kmgr_kernel_start(contexts->kmgr, &kopts, &ctx->kernel)) != 0) {
        free(ctx);
        return ret;
    }
    ctx->contexts = contexts;
    ctx->spec = opts->spec;
    h2o_linklist_init_anchor(&ctx->waiters);
    h2o_linklist_init_anchor(&ctx->runs);
    h2o_linklist_init_anchor(&ctx->taps);
    *out = ctx;
    return 0;
}

int gw_context_create(gw_contexts_t *contexts, const gw_context_options_t *opts, gw_context_t **out)
{
    gw_context_t *ctx;
    int ret;

    if (contexts->host->shutting_down)
        return GW_ESHUTTINGDOWN;
    if (contexts->count >= contexts->host->config->max_contexts)
        return GW_ETOOMANYCONTEXTS;
    if ((ctx = gw_pool_take(contexts, opts)) == NULL) {
        /* pooled kernels hold places of max_contexts only until a request needs one */
        while (contexts->count + contexts->pooled >= contexts->host->config->max_contexts && gw_pool_give_up_one(contexts))
            ;
        if ((ret = spawn(contexts, opts, &ctx)) != 0)
            return ret;
    }
    /* a pooled kernel becomes a context now: a new id, created and active now */
    wire_uuid4(ctx->id);
    ctx->cwd = wire_strdup(opts->cwd);
    ctx->language_named = wire_strdup(opts->language_named);
    ctx->created_at_ms = gw_unix_ms();
    gw_context_touch(ctx);
    ctx->execution_count = 0;
    ctx->is_default = opts->is_default;
    ctx->is_ephemeral = opts->is_ephemeral;
    ctx->forget_failed_start = opts->forget_failed_start;
    /* a stateless run's kernel serves one run: a death ends it; a context's comes back as Jupyter Server's do */
    kmgr_kernel_set_restart_limit(ctx->kernel, opts->is_ephemeral ? 0 : contexts->host->config->kernel_restart_limit);
    h2o_linklist_insert(&contexts->list, &ctx->link);
    gw_idmap_insert(&contexts->by_id, &ctx->by_id, ctx->id);
    ++contexts->count;
    *out = ctx;
    return 0;
}

static void destroy(gw_context_t *ctx, int kill_now)
{
    kmgr_kernel_t *kernel = ctx->kernel;

    h2o_linklist_unlink(&ctx->link);
    gw_idmap_remove(&ctx->contexts->by_id, &ctx->by_id);
    --ctx->contexts->count;
    /* the kernel goes first so waiters hear "context deleted", and its requests are dropped */
    ctx->kernel = NULL;
    if (kill_now)
        kmgr_kernel_kill(kernel);
    else
        kmgr_kernel_destroy(kernel);
    while (!h2o_linklist_is_empty(&ctx->taps)) {
        gw_context_tap_t *tap = H2O_STRUCT_FROM_MEMBER(gw_context_tap_t, link, ctx->taps.next);
        gw_context_tap_detach(tap);
        tap->on_destroy(tap, ctx);
    }
    tell_waiters(ctx);
    gw_kernel_runs_abort(ctx, "ContextDeleted", "the context was deleted before this run ended", "cancelled");
    free(ctx->cwd);
    free(ctx->language_named);
    free(ctx);
}

void gw_context_destroy(gw_context_t *ctx)
{
    destroy(ctx, 0);
}

void gw_context_discard(gw_context_t *ctx)
{
    destroy(ctx, 1);
}

void gw_contexts_destroy_all(gw_contexts_t *contexts)
{
    gw_pool_dispose_all(contexts);
    while (!h2o_linklist_is_empty(&contexts->list))
        gw_context_destroy(H2O_STRUCT_FROM_MEMBER(gw_context_t, link, contexts->list.next));
    gw_idmap_dispose(&contexts->by_id);
}

/* Starts one pooled kernel when a pool lacks one and nothing else is starting (gw_pool_to_fill decides). */
static void fill_pool(gw_contexts_t *contexts)
{
    gw_pool_t *pool = gw_pool_to_fill(contexts);
    gw_context_options_t opts = {0};
    gw_context_t *ctx;
    int ret;

    if (pool == NULL)
        return;
    opts.spec = pool->spec;
    if ((ret = spawn(contexts, &opts, &ctx)) != 0)
        gw_pool_start_failed(pool, gw_strerror(ret));
    else
        gw_pool_add(pool, ctx);
}

void gw_contexts_tick(gw_contexts_t *contexts)
{
    int64_t now = gw_now_ms();
    h2o_linklist_t *node, *next;

    gw_kernel_runs_tick(contexts);
    for (node = contexts->list.next; node != &contexts->list; node = next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        next = node->next;
        if (h2o_linklist_is_empty(&ctx->runs) && h2o_linklist_is_empty(&ctx->waiters) && ctx->ntaps == 0 &&
            now - ctx->last_activity_mono_ms > (int64_t)contexts->host->config->context_idle_ms)
            gw_context_destroy(ctx);
    }
    fill_pool(contexts);
}

gw_context_t *gw_context_find(gw_contexts_t *contexts, const char *id)
{
    gw_idmap_entry_t *e = gw_idmap_find(&contexts->by_id, id);
    return e != NULL ? H2O_STRUCT_FROM_MEMBER(gw_context_t, by_id, e) : NULL;
}

gw_context_t *gw_context_find_listed(gw_contexts_t *contexts, const char *id)
{
    gw_context_t *ctx = gw_context_find(contexts, id);
    return ctx != NULL && !ctx->is_ephemeral ? ctx : NULL;
}

void gw_contexts_each_listed(gw_contexts_t *contexts, void (*fn)(gw_context_t *ctx, void *arg), void *arg)
{
    h2o_linklist_t *node, *next;

    for (node = contexts->list.next; node != &contexts->list; node = next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        next = node->next; /* fn may destroy ctx */
        if (!ctx->is_ephemeral)
            fn(ctx, arg);
    }
}

gw_context_t *gw_context_find_default(gw_contexts_t *contexts, const kmgr_kernelspec_t *spec)
{
    for (h2o_linklist_t *node = contexts->list.next; node != &contexts->list; node = node->next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        if (ctx->is_default && ctx->spec == spec)
            return ctx;
    }
    return NULL;
}

const char *gw_context_exit_reason(const gw_context_t *ctx)
{
    return kmgr_kernel_exit_reason(ctx->kernel);
}

void gw_context_wait_ready(gw_context_t *ctx, gw_context_waiter_t *waiter)
{
    waiter->ctx = ctx;
    h2o_linklist_insert(&ctx->waiters, &waiter->link);
    if (!is_starting(ctx))
        tell_waiters(ctx);
}

/* The head of a stream message over the cap that the taps can pass on: the largest any of them can (one with no on_cut
 * keeps none). */
static void set_taps_text_room(gw_context_t *ctx)
{
    uint64_t room = 0;

    for (h2o_linklist_t *node = ctx->taps.next; node != &ctx->taps; node = node->next) {
        const gw_context_tap_t *tap = H2O_STRUCT_FROM_MEMBER(gw_context_tap_t, link, node);
        uint64_t r = tap->on_cut == NULL ? 0 : tap->text_room != 0 ? tap->text_room : UINT64_MAX;
        room = r > room ? r : room;
    }
    kmgr_kernel_set_tap_text_room(ctx->kernel, room);
}

void gw_context_tap_attach(gw_context_t *ctx, gw_context_tap_t *tap)
{
    tap->ctx = ctx;
    h2o_linklist_insert(&ctx->taps, &tap->link);
    /* kernelmgr keeps raw parts alive and reads big output only while someone relays */
    if (ctx->ntaps++ == 0)
        kmgr_kernel_set_tap(ctx->kernel, on_kernel_message, ctx);
    set_taps_text_room(ctx);
}

void gw_context_tap_detach(gw_context_tap_t *tap)
{
    gw_context_t *ctx = tap->ctx;

    if (ctx == NULL)
        return;
    h2o_linklist_unlink(&tap->link);
    tap->ctx = NULL;
    if (--ctx->ntaps == 0 && ctx->kernel != NULL)
        kmgr_kernel_set_tap(ctx->kernel, NULL, NULL);
    else if (ctx->kernel != NULL)
        set_taps_text_room(ctx);
}

int gw_context_send_parts(gw_context_t *ctx, wire_channel_t channel, const wire_frame_t *parts, size_t nparts)
{
    gw_context_touch(ctx);
    return kmgr_kernel_send_parts(ctx->kernel, channel, parts, nparts);
}

int gw_context_interrupt(gw_context_t *ctx)
{
    return kmgr_kernel_interrupt(ctx->kernel);
}

int gw_context_restart(gw_context_t *ctx)
{
    int ret;

    gw_kernel_runs_abort(ctx, "KernelRestarted", "the context was restarted; its state was lost", "cancelled");
    if ((ret = kmgr_kernel_restart(ctx->kernel)) != 0)
        return ret;
    gw_stats_inc(ctx->contexts->figures.restarts_requested, 1);
    ctx->execution_count = 0;
    return 0;
}

json_t *gw_context_to_json(const gw_context_t *ctx)
{
    const char *status = ctx->kernel != NULL ? kmgr_kernel_state_name(kmgr_kernel_state(ctx->kernel)) : "dead";
    json_t *obj = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:i, s:b}", "id", ctx->id, "language", ctx->spec->language, "kernel",
                            ctx->spec->name, "status", status, "created_at", (json_int_t)ctx->created_at_ms, "last_activity",
                            (json_int_t)ctx->last_activity_ms, "execution_count", ctx->execution_count, "default", ctx->is_default);

    json_object_set_new(obj, "cwd", ctx->cwd != NULL ? json_string(ctx->cwd) : json_null());
    json_object_set_new(obj, "sandbox", gw_context_sandbox_to_json(&ctx->sandbox, ctx->contexts->host->config->sandbox));
    json_object_set_new(obj, "limits", gw_context_limits_to_json(&ctx->sandbox.limits));
    if (ctx->kernel != NULL) {
        const char *death = kmgr_kernel_last_death(ctx->kernel);
        json_object_set_new(obj, "answering", json_boolean(kmgr_kernel_answering(ctx->kernel)));
        json_object_set_new(obj, "restarts", json_integer(kmgr_kernel_auto_restarts(ctx->kernel, NULL, NULL)));
        json_object_set_new(obj, "last_death", death[0] != '\0' ? json_string(death) : json_null());
        /* how its current process started: forked from a kernel template, or spawned (docs/kernels.md) */
        if (kmgr_kernel_start_path(ctx->kernel)[0] != '\0')
            json_object_set_new(obj, "start", json_string(kmgr_kernel_start_path(ctx->kernel)));
    }
    return obj;
}

int gw_kernel_run_submit_stateless(gw_contexts_t *contexts, const gw_context_options_t *copts, const gw_kernel_run_options_t *opts,
                                   gw_run_t **out)
{
    gw_context_options_t ephemeral = *copts;
    gw_context_t *ctx;
    int ret;

    ephemeral.is_ephemeral = 1;
    if ((ret = gw_context_create(contexts, &ephemeral, &ctx)) != 0)
        return ret;
    if ((ret = gw_kernel_run_submit(ctx, opts, out)) != 0)
        end_if_spent(ctx);
    return ret;
}
