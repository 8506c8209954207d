/* tests/gateway/test_clock.c: the engine's timers (run timeouts, idle contexts, retention) when the wall clock is stepped. */
#include <criterion/criterion.h>
#include "engine_test.h"

TestSuite(clock, .init = engine_setup, .fini = engine_teardown, .timeout = 20);

#define HOURS(n) ((int64_t)(n)*3600)

static kmgr_kernel_t *kernel;

static gw_run_t *submit(gw_context_t *ctx, unsigned timeout_ms)
{
    gw_kernel_run_options_t opts = {.code = "while True: pass", .timeout_ms = timeout_ms, .limits = {1u << 20, 1u << 20}};
    gw_run_t *run = NULL;

    cr_assert_eq(gw_kernel_run_submit(ctx, &opts, &run), 0);
    return run;
}

static gw_run_t *new_run(void)
{
    static const gw_run_limits_t limits = {1024, 1024};
    return gw_run_create(&eng.runs, NULL, NULL, &limits);
}

static int interrupted(void *arg)
{
    (void)arg;
    return fake_kernel_seen(kernel)->interrupts > 0;
}

ENGINE_TEST(clock, a_clock_stepped_forward_times_no_run_out)
{
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_run_t *run = submit(ctx, 60000);

    engine_step_wall_clock(HOURS(2));
    engine_run_for(20, 1);
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 0, "the run has used milliseconds of its minute");
    cr_expect_eq(gw_run_state(run), GW_RUN_RUNNING);
}

ENGINE_TEST(clock, a_clock_stepped_back_still_times_runs_out)
{
    gw_context_t *ctx = engine_ready_context(0, &kernel);

    submit(ctx, 20);
    engine_step_wall_clock(-HOURS(2));
    cr_expect(engine_run_until(interrupted, NULL, 2000, 1), "a 20 ms timeout must not wait two hours");
}

ENGINE_TEST(clock, a_clock_stepped_forward_ends_no_input_wait)
{
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_kernel_run_options_t opts = {
        .code = "input()", .timeout_ms = 60000, .allow_stdin = 1, .stdin_timeout_ms = 60000, .limits = {1024, 1024}};
    gw_run_t *run = NULL;

    cr_assert_eq(gw_kernel_run_submit(ctx, &opts, &run), 0);
    fake_request_input(fake_kernel_request(kernel, 0), "? ", 0);
    engine_step_wall_clock(HOURS(2));
    engine_run_for(20, 1);
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 0, "the question was asked milliseconds ago");
    cr_expect_eq(gw_run_input(run, "answer"), 0);
}

ENGINE_TEST(clock, a_clock_stepped_forward_deletes_no_context)
{
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    char id[64];

    snprintf(id, sizeof(id), "%s", ctx->id);
    eng.config.context_idle_ms = 60000;
    engine_step_wall_clock(HOURS(2));
    gw_contexts_tick(&eng.contexts);
    cr_expect_not_null(gw_context_find(&eng.contexts, id), "it has been idle for milliseconds");
}

ENGINE_TEST(clock, a_clock_stepped_forward_collects_no_fresh_run)
{
    gw_run_t *run = new_run();
    char id[64];

    snprintf(id, sizeof(id), "%s", gw_run_id(run));
    gw_run_finish(run, -1, "ok");
    engine_step_wall_clock(HOURS(2));
    gw_runs_collect(&eng.runs);
    cr_expect_not_null(gw_run_find(&eng.runs, id), "it finished milliseconds ago: run_retention_ms has not passed");
}

ENGINE_TEST(clock, execution_time_is_not_thrown_off_by_a_step)
{
    gw_run_t *run = new_run();
    json_t *events, *done;

    gw_run_mark_started(run);
    engine_step_wall_clock(-HOURS(1));
    gw_run_finish(run, -1, "ok");
    events = run_events(run);
    done = find_type(events, "execution_complete");
    cr_expect_lt(json_integer_value(json_object_get(done, "execution_time")), 1000);
    cr_expect_geq(json_integer_value(json_object_get(done, "execution_time")), 0);
    json_decref(events);
}
