/* tests/gateway/test_contexts.c: the context registry on the fake kernel manager: bounds, readiness waiters, deletion, idle expiry.
 */
#include <string.h>
#include <criterion/criterion.h>
#include "ksys/errors.h"
#include "core/errors.h"
#include "code/tools.h"
#include "engine_test.h"

TestSuite(contexts, .init = engine_setup, .fini = engine_teardown, .timeout = 20);

/* A waiter that records what it was told. */
typedef struct st_test_waiter_t {
    gw_context_waiter_t super;
    unsigned calls;
    int deleted;       /* gw_context_is_deleted during the call */
    char failure[128]; /* "" when told the kernel is ready */
} test_waiter_t;

static void on_told(gw_context_waiter_t *waiter, gw_context_t *ctx, const char *failure)
{
    test_waiter_t *w = H2O_STRUCT_FROM_MEMBER(test_waiter_t, super, waiter);

    cr_expect_null(waiter->ctx, "the waiter is detached before it is told");
    cr_expect_not_null(ctx);
    ++w->calls;
    w->deleted = gw_context_is_deleted(ctx);
    snprintf(w->failure, sizeof(w->failure), "%s", failure != NULL ? failure : "");
}

static void wait_ready(gw_context_t *ctx, test_waiter_t *w)
{
    memset(w, 0, sizeof(*w));
    w->super.cb = on_told;
    gw_context_wait_ready(ctx, &w->super);
}

static gw_context_t *create(int *ret)
{
    gw_context_options_t opts = {.spec = &eng.spec};
    gw_context_t *ctx = NULL;

    *ret = gw_context_create(&eng.contexts, &opts, &ctx);
    return ctx;
}

static gw_context_t *create_ok(void)
{
    int ret;
    gw_context_t *ctx = create(&ret);

    cr_assert_eq(ret, 0, "gw_context_create: %s", gw_strerror(ret));
    return ctx;
}

ENGINE_TEST(contexts, create_registers_up_to_max_contexts)
{
    gw_context_t *a, *b;
    char a_id[64];
    int ret;

    eng.config.max_contexts = 2;
    a = create_ok();
    b = create_ok();
    cr_expect_eq(eng.contexts.count, 2);
    cr_expect_eq(gw_context_find(&eng.contexts, a->id), a);
    cr_expect_eq(gw_context_find(&eng.contexts, b->id), b);
    cr_expect_neq(strcmp(a->id, b->id), 0);
    cr_expect_null(create(&ret));
    cr_expect_eq(ret, GW_ETOOMANYCONTEXTS);
    cr_expect_eq(eng.contexts.count, 2);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 2, "no kernel is started for a refused context");
    snprintf(a_id, sizeof(a_id), "%s", a->id);
    gw_context_destroy(a);
    cr_expect_eq(eng.contexts.count, 1);
    cr_expect_null(gw_context_find(&eng.contexts, a_id));
    create_ok();
    cr_expect_eq(eng.contexts.count, 2, "a deleted context frees its place");
}

ENGINE_TEST(contexts, a_context_keeps_the_language_its_creator_named_and_frees_it_with_itself)
{
    char named[] = "javascript";
    gw_context_options_t opts = {.spec = &eng.spec, .language_named = named};
    gw_context_t *ctx = NULL, *plain;

    cr_assert_eq(gw_context_create(&eng.contexts, &opts, &ctx), 0);
    named[0] = 'X'; /* the creator's buffer is its own: the context holds a copy */
    cr_expect_str_eq(ctx->language_named, "javascript", "E2B says this name again for the context's whole life");
    plain = create_ok();
    cr_expect_null(plain->language_named, "no name given: the spec's language is the context's");
    /* the name goes with the context, whichever door deletes it (E2B kept names in a map of its own, which grew by one
     * for every such context deleted elsewhere until its next GET /contexts); ASan's leak check sees it freed */
    gw_context_destroy(ctx);
    gw_context_destroy(plain);
    cr_expect_eq(eng.contexts.count, 0);
}

ENGINE_TEST(contexts, create_is_refused_while_shutting_down)
{
    int ret;

    eng.host.shutting_down = 1;
    cr_expect_null(create(&ret));
    cr_expect_eq(ret, GW_ESHUTTINGDOWN);
    cr_expect_eq(eng.contexts.count, 0);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 0);
}

ENGINE_TEST(contexts, a_kernel_that_cannot_start_registers_nothing)
{
    int ret;

    fake_kmgr_fail_next_start(eng.kmgr, KSYS_ESPAWN);
    cr_expect_null(create(&ret));
    cr_expect_eq(ret, KSYS_ESPAWN, "the kernel manager's code is passed on");
    cr_expect_eq(eng.contexts.count, 0);
    cr_expect(h2o_linklist_is_empty(&eng.contexts.list));
}

ENGINE_TEST(contexts, a_waiter_is_told_once_when_the_kernel_becomes_ready)
{
    gw_context_t *ctx = create_ok();
    test_waiter_t w;
    json_t *obj;

    wait_ready(ctx, &w);
    cr_expect_eq(w.calls, 0, "not while the kernel starts");
    engine_run_for(10, 0);
    cr_expect_eq(w.calls, 0);
    fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_IDLE);
    cr_expect_eq(w.calls, 1);
    cr_expect_str_eq(w.failure, "");
    fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_BUSY);
    fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_IDLE);
    cr_expect_eq(w.calls, 1, "exactly once");
    obj = gw_context_to_json(ctx);
    cr_expect_str_eq(json_string_value(json_object_get(obj, "status")), "idle");
    cr_expect_str_eq(json_string_value(json_object_get(obj, "id")), ctx->id);
    json_decref(obj);
}

ENGINE_TEST(contexts, a_waiter_on_a_ready_kernel_is_told_at_once)
{
    gw_context_t *ctx = engine_ready_context(0, NULL);
    test_waiter_t w;

    wait_ready(ctx, &w);
    cr_expect_eq(w.calls, 1, "inside gw_context_wait_ready");
    cr_expect_str_eq(w.failure, "");
    cr_expect(h2o_linklist_is_empty(&ctx->waiters));
}

ENGINE_TEST(contexts, a_cancelled_waiter_is_never_told)
{
    gw_context_t *ctx = create_ok();
    test_waiter_t gone, stays;

    wait_ready(ctx, &gone);
    wait_ready(ctx, &stays);
    gw_context_waiter_cancel(&gone.super);
    gw_context_waiter_cancel(&gone.super); /* twice is fine */
    fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_IDLE);
    cr_expect_eq(gone.calls, 0);
    cr_expect_eq(stays.calls, 1);
    gw_context_waiter_cancel(&stays.super); /* after being told: a no-op */
    cr_expect_eq(stays.calls, 1);
}

ENGINE_TEST(contexts, deleting_a_context_tells_its_waiters)
{
    gw_context_t *ctx = create_ok();
    kmgr_kernel_t *kernel = ctx->kernel;
    test_waiter_t w;

    wait_ready(ctx, &w);
    gw_context_destroy(ctx);
    cr_expect_eq(w.calls, 1);
    cr_expect_str_eq(w.failure, "context deleted");
    cr_expect(w.deleted, "the doors tell a deletion from a failed kernel by gw_context_is_deleted");
    cr_expect(fake_kernel_seen(kernel)->destroyed, "its kernel is shut down");
    cr_expect_eq(eng.contexts.count, 0);
}

ENGINE_TEST(contexts, a_kernel_that_dies_starting_tells_waiters_why)
{
    gw_context_t *ctx = create_ok();
    gw_kernel_run_options_t opts = {.code = "1", .timeout_ms = 1000};
    gw_run_t *run = NULL;
    test_waiter_t w;

    wait_ready(ctx, &w);
    fake_kernel_die(ctx->kernel, "exited with code 1");
    cr_expect_eq(w.calls, 1);
    cr_expect_str_eq(w.failure, "exited with code 1");
    cr_expect_not(w.deleted, "a kernel that died is no deletion");
    cr_expect(gw_context_is_dead(ctx));
    cr_expect_str_eq(gw_context_exit_reason(ctx), "exited with code 1");
    cr_expect_eq(gw_kernel_run_submit(ctx, &opts, &run), GW_EKERNELDEAD);
    cr_expect_null(run);
    cr_expect_not_null(gw_context_find(&eng.contexts, ctx->id), "a dead context stays until deleted (restart revives it)");
}

/* execd's create reports a failed start with 503 and never gave out the id: the context is not left listed as dead. */
ENGINE_TEST(contexts, a_failed_start_the_creator_reports_is_not_left_listed)
{
    gw_context_options_t opts = {.spec = &eng.spec, .forget_failed_start = 1};
    gw_context_t *ctx = NULL, *ready;
    test_waiter_t w;
    char id[64];

    cr_assert_eq(gw_context_create(&eng.contexts, &opts, &ctx), 0);
    snprintf(id, sizeof(id), "%s", ctx->id);
    wait_ready(ctx, &w);
    fake_kernel_die(ctx->kernel, "did not become ready within 60000 ms");
    cr_expect_eq(w.calls, 1);
    cr_expect_str_eq(w.failure, "did not become ready within 60000 ms");
    cr_expect_null(gw_context_find(&eng.contexts, id), "a context whose start failed is still listed");
    cr_expect_eq(eng.contexts.count, 0);

    /* once ready, a context stays listed when its kernel dies: its creator has its id (restart revives it) */
    cr_assert_eq(gw_context_create(&eng.contexts, &opts, &ready), 0);
    snprintf(id, sizeof(id), "%s", ready->id);
    fake_kernel_set_state(ready->kernel, KMGR_KERNEL_IDLE);
    fake_kernel_die(ready->kernel, "exited with code 1");
    cr_expect_not_null(gw_context_find(&eng.contexts, id));
}

ENGINE_TEST(contexts, an_ephemeral_context_is_deleted_after_its_run)
{
    kmgr_kernel_t *kernel;
    gw_context_t *ctx = engine_ready_context(1, &kernel);
    char id[64];
    gw_run_t *run;

    snprintf(id, sizeof(id), "%s", ctx->id);
    run = engine_submit(ctx, "print(1)");
    cr_expect_not_null(gw_context_find(&eng.contexts, id));
    fake_request_complete(fake_kernel_request(kernel, 0), 1);
    cr_expect_str_eq(run_outcome(run), "ok");
    cr_expect_null(gw_context_find(&eng.contexts, id));
    cr_expect_eq(eng.contexts.count, 0);
    cr_expect(fake_kernel_seen(kernel)->destroyed);
}

ENGINE_TEST(contexts, an_ephemeral_context_whose_kernel_dies_is_deleted)
{
    kmgr_kernel_t *kernel;
    gw_context_t *ctx = engine_ready_context(1, &kernel);
    gw_run_t *run = engine_submit(ctx, "import os; os._exit(1)");

    fake_kernel_die(kernel, "exited with code 1");
    cr_expect_eq(eng.contexts.count, 0);
    cr_expect(fake_kernel_seen(kernel)->destroyed);
    cr_expect_str_eq(run_error(run), "KernelDied");
}

/* A stateless run whose submission is refused (tools in a kernel that is not Python's) leaves no context behind: code/
 * destroys it, no door has to. */
ENGINE_TEST(contexts, a_stateless_run_that_is_refused_leaves_no_context)
{
    json_t *tools = json_loads("[{\"name\": \"fetch\"}]", 0, NULL);
    gw_context_options_t copts = {.spec = &eng.spec};
    gw_kernel_run_options_t opts = {.code = "1", .timeout_ms = 60000, .limits = {1u << 20, 1u << 20}};
    gw_run_t *run = NULL;
    char err[256] = "";

    cr_assert_eq(gw_toolset_parse(tools, &eng.config, &opts.tools, err, sizeof(err)), 0, "%s", err);
    json_decref(tools);
    eng.spec.language = "R";
    cr_expect_eq(gw_kernel_run_submit_stateless(&eng.contexts, &copts, &opts, &run), GW_ETOOLSUNSUPPORTED);
    cr_expect_null(run);
    cr_expect_eq(eng.contexts.count, 0, "the refused stateless run's context is still registered");
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 1);
    gw_toolset_destroy(opts.tools);
    eng.spec.language = "python";

    /* a refused creation creates nothing */
    eng.contexts.host->shutting_down = 1;
    opts.tools = NULL;
    cr_expect_eq(gw_kernel_run_submit_stateless(&eng.contexts, &copts, &opts, &run), GW_ESHUTTINGDOWN);
    eng.contexts.host->shutting_down = 0;
    cr_expect_eq(eng.contexts.count, 0);
}

static void collect_id(gw_context_t *ctx, void *arg)
{
    json_array_append_new(arg, json_string(ctx->id));
}

static void destroy_each(gw_context_t *ctx, void *arg)
{
    (void)arg;
    gw_context_destroy(ctx);
}

/* Doors walk and find contexts through code/, which leaves a stateless run's own context out. */
ENGINE_TEST(contexts, doors_see_every_context_but_a_stateless_runs_own)
{
    gw_context_t *a = engine_ready_context(0, NULL), *b = engine_ready_context(0, NULL), *ephemeral;
    gw_context_options_t copts = {.spec = &eng.spec};
    gw_kernel_run_options_t opts = {.code = "print(1)", .timeout_ms = 60000, .limits = {1u << 20, 1u << 20}};
    json_t *ids = json_array();
    char ephemeral_id[64];
    gw_run_t *run = NULL;

    cr_assert_eq(gw_kernel_run_submit_stateless(&eng.contexts, &copts, &opts, &run), 0);
    cr_assert_eq(eng.contexts.count, 3);
    /* the newest context is the stateless run's */
    ephemeral = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, eng.contexts.list.prev);
    cr_assert(ephemeral->is_ephemeral);
    snprintf(ephemeral_id, sizeof(ephemeral_id), "%s", ephemeral->id);

    gw_contexts_each_listed(&eng.contexts, collect_id, ids);
    cr_expect_eq(json_array_size(ids), 2);
    cr_expect_str_eq(json_string_value(json_array_get(ids, 0)), a->id);
    cr_expect_str_eq(json_string_value(json_array_get(ids, 1)), b->id);
    json_decref(ids);
    cr_expect_eq(gw_context_find_listed(&eng.contexts, a->id), a);
    cr_expect_null(gw_context_find_listed(&eng.contexts, ephemeral_id));
    cr_expect_eq(gw_context_find(&eng.contexts, ephemeral_id), ephemeral);

    /* a walk may destroy the context it is given; the stateless run goes on */
    gw_contexts_each_listed(&eng.contexts, destroy_each, NULL);
    cr_expect_eq(eng.contexts.count, 1);
    cr_expect_eq(gw_context_find(&eng.contexts, ephemeral_id), ephemeral);
    cr_expect_null(run_outcome(run));
}

ENGINE_TEST(contexts, idle_contexts_are_deleted_by_the_tick)
{
    gw_context_t *idle = engine_ready_context(0, NULL), *busy = engine_ready_context(0, NULL), *starting = create_ok();
    char idle_id[64];
    test_waiter_t w;

    snprintf(idle_id, sizeof(idle_id), "%s", idle->id);
    engine_submit(busy, "import time; time.sleep(100)");
    wait_ready(starting, &w);
    eng.config.context_idle_ms = 200;
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(eng.contexts.count, 3, "nothing is idle long enough yet");
    engine_run_for(250, 0);
    gw_contexts_tick(&eng.contexts);
    cr_expect_null(gw_context_find(&eng.contexts, idle_id), "idle for longer than context_idle_ms");
    cr_expect_eq(gw_context_find(&eng.contexts, busy->id), busy, "a context with a run is not idle");
    cr_expect_eq(gw_context_find(&eng.contexts, starting->id), starting, "nor one that someone waits for");
    cr_expect_eq(w.calls, 0);
    gw_context_waiter_cancel(&w.super); /* it lives on this stack */
}

ENGINE_TEST(contexts, activity_keeps_a_context_alive)
{
    kmgr_kernel_t *kernel;
    gw_context_t *ctx = engine_ready_context(0, &kernel);

    eng.config.context_idle_ms = 300;
    engine_run_for(200, 0);
    engine_submit(ctx, "1");
    fake_request_complete(fake_kernel_request(kernel, 0), 1);
    engine_run_for(200, 0);
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(eng.contexts.count, 1, "created 400 ms ago, but its run ended 200 ms ago: not idle for 300 ms");
}

ENGINE_TEST(contexts, restart_ends_runs_and_the_context_becomes_ready_again)
{
    kmgr_kernel_t *kernel;
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_run_t *running, *queued;
    test_waiter_t w;

    engine_submit(ctx, "x = 1");
    fake_request_complete(fake_kernel_request(kernel, 0), 4);
    cr_expect_eq(ctx->execution_count, 4);
    running = engine_submit(ctx, "a");
    queued = engine_submit(ctx, "b");
    cr_assert_eq(gw_context_restart(ctx), 0);
    cr_expect_eq(fake_kernel_seen(kernel)->restarts, 1);
    cr_expect(fake_request_seen(fake_kernel_request(kernel, 1))->cancelled, "the running request is abandoned");
    cr_expect_eq(ctx->execution_count, 0);
    cr_expect_str_eq(run_error(running), "KernelRestarted");
    cr_expect_str_eq(run_error(queued), "KernelRestarted");
    cr_expect_str_eq(run_outcome(queued), "cancelled");
    cr_expect_eq(fake_kernel_seen(kernel)->executes, 2, "the queued run is never sent");
    engine_run_for(5, 0); /* the kernel manager says RESTARTING from its loop */
    wait_ready(ctx, &w);
    cr_expect_eq(w.calls, 0, "a restarting kernel is not ready");
    fake_kernel_set_state(kernel, KMGR_KERNEL_IDLE);
    cr_expect_eq(w.calls, 1);
    cr_expect_str_eq(w.failure, "");
}

ENGINE_TEST(contexts, deleting_a_context_ends_its_runs)
{
    kmgr_kernel_t *kernel;
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_run_t *running = engine_submit(ctx, "a"), *queued = engine_submit(ctx, "b");

    gw_context_destroy(ctx);
    cr_expect_str_eq(run_error(running), "ContextDeleted");
    cr_expect_str_eq(run_error(queued), "ContextDeleted");
    cr_expect_str_eq(run_outcome(running), "cancelled");
    cr_expect(fake_kernel_seen(kernel)->destroyed);
}

/* ---- taps: relays of a kernel's messages (the Jupyter kernel WebSocket) ---- */

typedef struct st_test_tap_t {
    gw_context_tap_t super;
    unsigned messages, states, destroyed;
    kmgr_kernel_state_t last_state;
    char last_type[64];
    struct st_test_tap_t *detach_on_message; /* detach this tap (itself) from inside on_message */
} test_tap_t;

static void tap_on_message(gw_context_tap_t *tap, wire_channel_t channel, const wire_msg_t *msg, const wire_frame_t *parts,
                           size_t nparts)
{
    test_tap_t *t = H2O_STRUCT_FROM_MEMBER(test_tap_t, super, tap);

    (void)channel, (void)parts;
    cr_expect_eq(nparts, 4);
    ++t->messages;
    snprintf(t->last_type, sizeof(t->last_type), "%s", wire_msg_type(msg));
    if (t->detach_on_message == t)
        gw_context_tap_detach(tap);
}

static void tap_on_state(gw_context_tap_t *tap, kmgr_kernel_state_t state)
{
    test_tap_t *t = H2O_STRUCT_FROM_MEMBER(test_tap_t, super, tap);
    ++t->states;
    t->last_state = state;
}

static void tap_on_destroy(gw_context_tap_t *tap, gw_context_t *ctx)
{
    test_tap_t *t = H2O_STRUCT_FROM_MEMBER(test_tap_t, super, tap);

    cr_expect_null(tap->ctx, "the tap is detached before it is told");
    cr_expect_not_null(ctx);
    ++t->destroyed;
}

static void tap_init(test_tap_t *t)
{
    memset(t, 0, sizeof(*t));
    t->super.on_message = tap_on_message;
    t->super.on_state = tap_on_state;
    t->super.on_destroy = tap_on_destroy;
}

ENGINE_TEST(contexts, every_tap_hears_every_message_and_state_and_may_detach_itself)
{
    kmgr_kernel_t *kernel;
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    test_tap_t a, b;

    tap_init(&a);
    tap_init(&b);
    gw_context_tap_attach(ctx, &a.super);
    gw_context_tap_attach(ctx, &b.super);
    cr_expect_eq(ctx->ntaps, 2);
    cr_assert(fake_kernel_tap_message(kernel, WIRE_CHANNEL_IOPUB, "stream", "p1"), "the kernel has a tap once one is attached");
    cr_expect_eq(a.messages + b.messages, 2);
    cr_expect_str_eq(a.last_type, "stream");
    /* one detaches itself while hearing a message: the other still hears it, and later ones */
    a.detach_on_message = &a;
    fake_kernel_tap_message(kernel, WIRE_CHANNEL_SHELL, "execute_reply", "p1");
    cr_expect_eq(a.messages, 2);
    cr_expect_eq(b.messages, 2);
    fake_kernel_tap_message(kernel, WIRE_CHANNEL_IOPUB, "status", "p2");
    cr_expect_eq(a.messages, 2, "detached: hears nothing more");
    cr_expect_eq(b.messages, 3);
    fake_kernel_set_state(kernel, KMGR_KERNEL_BUSY);
    cr_expect_eq(b.states, 1);
    cr_expect_eq(b.last_state, KMGR_KERNEL_BUSY);
    cr_expect_eq(a.states, 0);
    /* the last tap gone, the kernel has none: kernelmgr stops keeping raw parts */
    gw_context_tap_detach(&b.super);
    cr_expect_eq(ctx->ntaps, 0);
    cr_expect_not(fake_kernel_tap_message(kernel, WIRE_CHANNEL_IOPUB, "stream", "p3"));
}

ENGINE_TEST(contexts, a_tapped_context_is_never_idle_and_its_taps_hear_its_end)
{
    kmgr_kernel_t *kernel;
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    test_tap_t t;

    tap_init(&t);
    gw_context_tap_attach(ctx, &t.super);
    eng.config.context_idle_ms = 100;
    engine_run_for(200, 0);
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(eng.contexts.count, 1, "someone is connected: not idle");
    gw_context_destroy(ctx);
    cr_expect_eq(t.destroyed, 1);
    cr_expect_null(t.super.ctx);
    gw_context_tap_detach(&t.super); /* accepts a detached tap */
}

ENGINE_TEST(contexts, sending_a_clients_message_waits_for_a_ready_kernel)
{
    int ret;
    gw_context_t *ctx = create(&ret);
    wire_frame_t parts[4] = {{"{}", 2}, {"{}", 2}, {"{}", 2}, {"{}", 2}};

    cr_assert_eq(ret, 0);
    cr_expect_eq(gw_context_send_parts(ctx, WIRE_CHANNEL_SHELL, parts, 4), KSYS_ENOTREADY);
    fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_IDLE);
    cr_expect_eq(gw_context_send_parts(ctx, WIRE_CHANNEL_SHELL, parts, 4), 0);
    cr_expect_eq(fake_kernel_seen(ctx->kernel)->sent_parts, 1);
    fake_kernel_die(ctx->kernel, "killed");
    engine_run_for(10, 0);
    cr_expect_eq(gw_context_send_parts(ctx, WIRE_CHANNEL_SHELL, parts, 4), KSYS_EDIED);
}
