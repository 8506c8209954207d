/* tests/gateway/test_pool.c: warm pools on the fake kernel manager: taking, refilling, failures, max_contexts, shutdown. */
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ksys/errors.h"
#include "core/errors.h"
#include "engine_test.h"

TestSuite(pool, .init = engine_setup, .fini = engine_teardown, .timeout = 20);

static gw_pool_t *the_pool(void)
{
    for (h2o_linklist_t *node = eng.contexts.pools.next; node != &eng.contexts.pools; node = node->next) {
        gw_pool_t *pool = H2O_STRUCT_FROM_MEMBER(gw_pool_t, link, node);
        if (pool->spec == &eng.spec)
            return pool;
    }
    cr_assert_fail("the spec has no pool");
    return NULL;
}

/* The `i`-th pooled kernel (oldest first), or NULL. */
static gw_context_t *pooled(size_t i)
{
    gw_pool_t *pool = the_pool();
    for (h2o_linklist_t *node = pool->kernels.next; node != &pool->kernels; node = node->next)
        if (i-- == 0)
            return H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
    return NULL;
}

/* The pooled kernel still starting, or NULL. */
static gw_context_t *pooled_starting(void)
{
    gw_context_t *ctx;
    for (size_t i = 0; (ctx = pooled(i)) != NULL; ++i)
        if (kmgr_kernel_state(ctx->kernel) == KMGR_KERNEL_STARTING)
            return ctx;
    return NULL;
}

/* Ticks and makes each kernel the pool starts ready, until `n` are pooled and ready. */
static void fill_pool(unsigned n)
{
    for (unsigned round = 0; round != 100 && !(eng.contexts.pooled == n && pooled_starting() == NULL); ++round) {
        gw_context_t *starting;
        gw_contexts_tick(&eng.contexts);
        if ((starting = pooled_starting()) != NULL)
            fake_kernel_set_state(starting->kernel, KMGR_KERNEL_IDLE);
    }
    cr_assert_eq(eng.contexts.pooled, n, "the pool holds %u kernels", n);
    cr_assert_null(pooled_starting());
}

static gw_context_t *create_with(const gw_context_options_t *opts, int *ret)
{
    gw_context_t *ctx = NULL;
    *ret = gw_context_create(&eng.contexts, opts, &ctx);
    return ctx;
}

static gw_context_t *create_ok(const gw_context_options_t *opts)
{
    int ret;
    gw_context_t *ctx = create_with(opts, &ret);
    cr_assert_eq(ret, 0, "gw_context_create: %s", gw_strerror(ret));
    return ctx;
}

static gw_context_t *create_plain(void)
{
    gw_context_options_t opts = {.spec = &eng.spec};
    return create_ok(&opts);
}

typedef struct st_test_waiter_t {
    gw_context_waiter_t super;
    unsigned calls;
    int ready;
} test_waiter_t;

static void on_told(gw_context_waiter_t *waiter, gw_context_t *ctx, const char *failure)
{
    test_waiter_t *w = H2O_STRUCT_FROM_MEMBER(test_waiter_t, super, waiter);
    (void)ctx;
    ++w->calls;
    w->ready = failure == NULL;
}

static void wait_ready(gw_context_t *ctx, test_waiter_t *w)
{
    memset(w, 0, sizeof(*w));
    w->super.cb = on_told;
    gw_context_wait_ready(ctx, &w->super);
}

ENGINE_TEST(pool, taking_from_the_pool_gives_a_ready_context_at_once)
{
    gw_context_t *first, *ctx;
    int64_t before;
    test_waiter_t w;
    json_t *list;

    gw_contexts_set_pool(&eng.contexts, &eng.spec, 2);
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 1, "one start at a time");
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 1, "not while the first is starting");
    fill_pool(2);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 2);
    cr_expect_eq(eng.contexts.count, 0, "pooled kernels are no contexts");
    cr_expect(h2o_linklist_is_empty(&eng.contexts.list), "nor listed");
    first = pooled(0);

    engine_run_for(20, 0);
    before = gw_unix_ms();
    ctx = create_plain();
    cr_expect_eq(ctx, first, "the oldest ready kernel is taken");
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 2, "no kernel is started for it");
    cr_expect_not(ctx->is_pooled);
    cr_expect_eq(kmgr_kernel_state(ctx->kernel), KMGR_KERNEL_IDLE);
    wait_ready(ctx, &w);
    cr_expect_eq(w.calls, 1, "ready at once, inside gw_context_wait_ready");
    cr_expect(w.ready);
    cr_expect_geq(ctx->created_at_ms, before, "created now, not when its kernel started");
    cr_expect_geq(ctx->last_activity_ms, before, "and touched");
    cr_expect_eq(strlen(ctx->id), WIRE_UUID_STRLEN);
    cr_expect_eq(gw_context_find(&eng.contexts, ctx->id), ctx);
    cr_expect_eq(eng.contexts.count, 1);
    cr_expect_eq(eng.contexts.pooled, 1);
    list = gw_contexts_pool_to_json(&eng.contexts);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(list, "fake"), "size")), 2);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(list, "fake"), "ready")), 1);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(list, "fake"), "starting")), 0);
    json_decref(list);
}

ENGINE_TEST(pool, the_pool_is_refilled_after_a_take)
{
    gw_context_t *a, *b;

    gw_contexts_set_pool(&eng.contexts, &eng.spec, 1);
    fill_pool(1);
    a = create_plain();
    cr_expect_eq(eng.contexts.pooled, 0);
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 2, "the tick starts a replacement");
    cr_expect_eq(eng.contexts.pooled, 1);
    fill_pool(1);
    b = create_plain();
    cr_expect_neq(a, b);
    cr_expect_neq(strcmp(a->id, b->id), 0);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 2);
}

ENGINE_TEST(pool, a_request_takes_a_starting_kernel_and_waits_for_it)
{
    gw_context_t *starting, *ctx;
    test_waiter_t w;

    gw_contexts_set_pool(&eng.contexts, &eng.spec, 1);
    gw_contexts_tick(&eng.contexts);
    cr_assert_not_null(starting = pooled_starting());
    ctx = create_plain();
    cr_expect_eq(ctx, starting, "a kernel half started is nearer ready than one started now");
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 1);
    wait_ready(ctx, &w);
    cr_expect_eq(w.calls, 0);
    fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_IDLE);
    cr_expect_eq(w.calls, 1);
    cr_expect(w.ready);
}

ENGINE_TEST(pool, refilling_waits_while_a_requests_kernel_starts)
{
    gw_context_t *ctx;

    gw_contexts_set_pool(&eng.contexts, &eng.spec, 1);
    gw_contexts_tick(&eng.contexts);
    ctx = create_plain(); /* takes the starting one */
    engine_run_for(20, 1);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 1, "no pool start beside a request's kernel start");
    fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_IDLE);
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 2, "refilled once it is ready");
    /* nor beside a restart */
    fill_pool(1);
    gw_contexts_set_pool(&eng.contexts, &eng.spec, 2);
    cr_assert_eq(gw_context_restart(ctx), 0);
    engine_run_for(20, 1);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 2, "no pool start while a context restarts");
    fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_IDLE);
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 3);
}

ENGINE_TEST(pool, a_pooled_kernel_that_dies_is_replaced_after_a_back_off)
{
    gw_pool_t *pool;
    gw_context_t *dying;
    kmgr_kernel_t *kernel;
    int64_t wait;

    gw_contexts_set_pool(&eng.contexts, &eng.spec, 1);
    fill_pool(1);
    pool = the_pool();
    dying = pooled(0);
    kernel = dying->kernel;
    fake_kernel_die(kernel, "killed by signal 9");
    cr_expect_eq(eng.contexts.pooled, 0, "discarded at once");
    cr_expect(fake_kernel_seen(kernel)->destroyed);
    cr_expect_eq(eng.contexts.count, 0, "it never was a context");
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 1, "not replaced before the back-off");
    wait = pool->next_start_ms - gw_now_ms();
    cr_expect(wait > 800 && wait <= 1000, "the first back-off is 1 s (%lld ms left)", (long long)wait);

    /* a start that fails doubles it, a kernel that fails while starting too */
    engine_run_for(1050, 1);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 2, "replaced after the back-off");
    fake_kernel_die(pooled(0)->kernel, "exited with code 1");
    wait = pool->next_start_ms - gw_now_ms();
    cr_expect(wait > 1800 && wait <= 2000, "the second is 2 s (%lld ms left)", (long long)wait);
    pool->next_start_ms = 0;
    fake_kmgr_fail_next_start(eng.kmgr, KSYS_ESPAWN);
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(eng.contexts.pooled, 0);
    cr_expect_eq(pool->failures, 3);
    wait = pool->next_start_ms - gw_now_ms();
    cr_expect(wait > 3800 && wait <= 4000, "the third is 4 s (%lld ms left)", (long long)wait);

    /* one ready resets it */
    pool->next_start_ms = 0;
    fill_pool(1);
    cr_expect_eq(pool->failures, 0);
    cr_expect_eq(pool->next_start_ms, 0);
}

ENGINE_TEST(pool, pooled_kernels_count_against_max_contexts_and_make_room)
{
    json_t *env = json_pack("{s:s}", "A", "1");
    gw_context_options_t cold = {.spec = &eng.spec, .env = env};
    gw_context_t *oldest;
    int ret;

    eng.config.max_contexts = 3;
    gw_contexts_set_pool(&eng.contexts, &eng.spec, 5);
    fill_pool(3);
    engine_run_for(10, 1);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 3, "never beyond max_contexts");
    oldest = pooled(0);

    /* cold starts while the pool holds every place: a pooled kernel makes room, no 429 */
    create_ok(&cold);
    cr_expect_eq(eng.contexts.count, 1);
    cr_expect_eq(eng.contexts.pooled, 2, "one pooled kernel was given up");
    cr_expect_eq(pooled(0), oldest, "the newest");
    create_ok(&cold);
    cr_expect_eq(eng.contexts.count, 2);
    cr_expect_eq(eng.contexts.pooled, 1);
    create_plain(); /* the last pooled one */
    cr_expect_eq(eng.contexts.count, 3);
    cr_expect_eq(eng.contexts.pooled, 0);
    cr_expect_null(create_with(&cold, &ret));
    cr_expect_eq(ret, GW_ETOOMANYCONTEXTS, "the contexts themselves are at the maximum");
    engine_run_for(10, 1);
    cr_expect_eq(eng.contexts.pooled, 0, "no refill without a free place");

    gw_context_destroy(H2O_STRUCT_FROM_MEMBER(gw_context_t, link, eng.contexts.list.next));
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(eng.contexts.pooled, 0, "not while the cold-started kernels start");
    for (h2o_linklist_t *node = eng.contexts.list.next; node != &eng.contexts.list; node = node->next)
        fake_kernel_set_state(H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node)->kernel, KMGR_KERNEL_IDLE);
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(eng.contexts.pooled, 1, "a free place is refilled");
    json_decref(env);
}

ENGINE_TEST(pool, a_starting_pooled_kernel_is_given_up_first)
{
    json_t *env = json_pack("{s:s}", "A", "1");
    gw_context_options_t cold = {.spec = &eng.spec, .env = env};
    gw_context_t *ready, *starting;

    eng.config.max_contexts = 2;
    gw_contexts_set_pool(&eng.contexts, &eng.spec, 2);
    fill_pool(1);
    ready = pooled(0);
    gw_contexts_tick(&eng.contexts);
    cr_assert_not_null(starting = pooled_starting());
    create_ok(&cold);
    cr_expect_eq(eng.contexts.pooled, 1);
    cr_expect_eq(pooled(0), ready, "the starting one went");
    json_decref(env);
}

ENGINE_TEST(pool, requests_that_ask_for_more_start_a_kernel_of_their_own)
{
    json_t *env = json_pack("{s:s}", "A", "1"), *empty = json_object();
    char cwd[4096], other[] = "/tmp/kgate-pool-test-XXXXXX";
    gw_context_sandbox_t limited, defaults;
    gw_context_options_t opts;
    gw_context_t *ctx, *in_pool;

    cr_assert_not_null(getcwd(cwd, sizeof(cwd)));
    cr_assert_not_null(mkdtemp(other));
    gw_context_sandbox_defaults(&eng.config, &defaults);
    limited = defaults;
    limited.limits.memory_bytes = 256u << 20;
    eng.config.max_contexts = 16;
    gw_contexts_set_pool(&eng.contexts, &eng.spec, 1);
    fill_pool(1);
    in_pool = pooled(0);

    const struct {
        const char *what;
        gw_context_options_t opts;
    } cold[] = {
        {"env", {.spec = &eng.spec, .env = env}},
        {"another cwd", {.spec = &eng.spec, .cwd = other}},
        {"a cwd that does not exist", {.spec = &eng.spec, .cwd = "/nonexistent/kgate"}},
        {"limits", {.spec = &eng.spec, .sandbox = &limited}},
    };
    for (size_t i = 0; i != sizeof(cold) / sizeof(cold[0]); ++i) {
        size_t started = fake_kmgr_num_started(eng.kmgr);
        ctx = create_ok(&cold[i].opts);
        cr_expect_neq(ctx, in_pool, "%s: a kernel of its own", cold[i].what);
        cr_expect_eq(fake_kmgr_num_started(eng.kmgr), started + 1, "%s: started now", cold[i].what);
        cr_expect_eq(eng.contexts.pooled, 1, "%s: the pool keeps its kernel", cold[i].what);
        fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_IDLE);
    }
    limited.share_net = 1;
    limited.limits = defaults.limits;
    opts = (gw_context_options_t){.spec = &eng.spec, .sandbox = &limited};
    cr_expect_neq(ctx = create_ok(&opts), in_pool, "share_net: a kernel of its own");
    fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_IDLE);

    /* what a pooled kernel has anyway: kgate's own directory by any name, an empty env, the default sandbox */
    const gw_context_options_t warm[] = {
        {.spec = &eng.spec, .cwd = cwd},        {.spec = &eng.spec, .cwd = "."},
        {.spec = &eng.spec, .env = empty},      {.spec = &eng.spec, .sandbox = &defaults, .is_default = 1},
        {.spec = &eng.spec, .is_ephemeral = 1},
    };
    for (size_t i = 0; i != sizeof(warm) / sizeof(warm[0]); ++i) {
        size_t started;
        fill_pool(1);
        in_pool = pooled(0);
        started = fake_kmgr_num_started(eng.kmgr);
        ctx = create_ok(&warm[i]);
        cr_expect_eq(ctx, in_pool, "options %zu: taken from the pool", i);
        cr_expect_eq(fake_kmgr_num_started(eng.kmgr), started);
        cr_expect_eq(ctx->is_default, warm[i].is_default);
        cr_expect_eq(ctx->is_ephemeral, warm[i].is_ephemeral);
        if (warm[i].cwd != NULL)
            cr_expect_str_eq(ctx->cwd, warm[i].cwd, "the context reports the cwd it was asked for");
        else
            cr_expect_null(ctx->cwd);
    }
    rmdir(other);
    json_decref(env);
    json_decref(empty);
}

ENGINE_TEST(pool, pooled_kernels_are_neither_found_nor_expired)
{
    gw_context_t *a, *b;

    gw_contexts_set_pool(&eng.contexts, &eng.spec, 2);
    fill_pool(2);
    a = pooled(0);
    b = pooled(1);
    cr_expect_eq(a->id[0], '\0', "no id until taken");
    eng.config.context_idle_ms = 50;
    engine_run_for(120, 1);
    cr_expect_eq(eng.contexts.pooled, 2, "idle expiry leaves pooled kernels alone");
    cr_expect_eq(pooled(0), a);
    cr_expect_eq(pooled(1), b);
    cr_expect_not(fake_kernel_seen(a->kernel)->destroyed);
    cr_expect_null(gw_context_find_default(&eng.contexts, &eng.spec));
}

ENGINE_TEST(pool, a_smaller_pool_shuts_down_the_extra_kernels)
{
    kmgr_kernel_t *newest;

    gw_contexts_set_pool(&eng.contexts, &eng.spec, 3);
    fill_pool(3);
    newest = pooled(2)->kernel;
    gw_contexts_set_pool(&eng.contexts, &eng.spec, 2);
    cr_expect_eq(eng.contexts.pooled, 2);
    cr_expect(fake_kernel_seen(newest)->destroyed);
    gw_contexts_set_pool(&eng.contexts, &eng.spec, 0);
    cr_expect_eq(eng.contexts.pooled, 0);
    engine_run_for(10, 1);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 3, "size 0: nothing started");
}

ENGINE_TEST(pool, shutdown_takes_the_pooled_kernels_along)
{
    kmgr_kernel_t *ready, *starting;
    int ret;

    gw_contexts_set_pool(&eng.contexts, &eng.spec, 2);
    fill_pool(1);
    gw_contexts_tick(&eng.contexts);
    ready = pooled(0)->kernel;
    cr_assert_not_null(pooled_starting());
    starting = pooled_starting()->kernel;
    eng.host.shutting_down = 1;
    cr_expect_null(create_with(&(gw_context_options_t){.spec = &eng.spec}, &ret));
    cr_expect_eq(ret, GW_ESHUTTINGDOWN, "not even from the pool");
    gw_contexts_destroy_all(&eng.contexts);
    cr_expect(fake_kernel_seen(ready)->destroyed);
    cr_expect(fake_kernel_seen(starting)->destroyed);
    cr_expect_eq(eng.contexts.pooled, 0);
    cr_expect(h2o_linklist_is_empty(&eng.contexts.pools));
    gw_contexts_tick(&eng.contexts);
    cr_expect_eq(fake_kmgr_num_started(eng.kmgr), 2, "nothing is refilled after");
}
