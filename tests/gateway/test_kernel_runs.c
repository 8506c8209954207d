/* tests/gateway/test_kernel_runs.c: a context's runs on the fake kernel manager: the queue, stop, stdin, timeouts, errors, death.
 */
#include <stdio.h>
#include <string.h>
#include <criterion/criterion.h>
#include "ksys/errors.h"
#include "core/errors.h"
#include "engine_test.h"

TestSuite(kernel_runs, .init = engine_setup, .fini = engine_teardown, .timeout = 20);

static kmgr_kernel_t *kernel;

static gw_context_t *ready_context(void)
{
    return engine_ready_context(0, &kernel);
}

static gw_run_t *submit_with(gw_context_t *ctx, const char *code, unsigned timeout_ms, int allow_stdin)
{
    gw_kernel_run_options_t opts = {
        .code = code, .timeout_ms = timeout_ms, .allow_stdin = allow_stdin, .limits = {1u << 20, 1u << 20}};
    gw_run_t *run = NULL;
    int ret = gw_kernel_run_submit(ctx, &opts, &run);

    cr_assert_eq(ret, 0, "gw_kernel_run_submit: %s", gw_strerror(ret));
    return run;
}

static kmgr_request_t *request(size_t i)
{
    kmgr_request_t *req = fake_kernel_request(kernel, i);
    cr_assert_not_null(req, "execute_request %zu was not sent", i);
    return req;
}

static json_t *error_content(const char *ename, const char *evalue)
{
    return json_pack("{s:s, s:s, s:s, s:[s]}", "status", "error", "ename", ename, "evalue", evalue, "traceback",
                     "\x1b[31mTraceback\x1b[0m");
}

/* The kernel reports an error as ipykernel does: the iopub error, then the reply saying so, then DONE. */
static void kernel_error(kmgr_request_t *req, const char *ename, const char *evalue)
{
    fake_request_iopub(req, "error", error_content(ename, evalue));
    fake_request_reply(req, error_content(ename, evalue));
    fake_request_done(req);
}

ENGINE_TEST(kernel_runs, a_run_relays_the_kernels_output_and_ends_ok)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *run = engine_submit(ctx, "print('hi'); 6 * 7");
    kmgr_request_t *req = request(0);
    json_t *events, *result;

    cr_expect_str_eq(fake_request_seen(req)->code, "print('hi'); 6 * 7");
    cr_expect_eq(gw_run_state(run), GW_RUN_RUNNING);
    fake_request_iopub(req, "status", json_pack("{s:s}", "execution_state", "busy"));
    fake_request_iopub(req, "execute_input", json_pack("{s:s, s:i}", "code", "", "execution_count", 3));
    fake_request_iopub(req, "stream", json_pack("{s:s, s:s}", "name", "stdout", "text", "hi\n"));
    fake_request_iopub(req, "execute_result",
                       json_pack("{s:{s:s}, s:{}, s:i}", "data", "text/plain", "42", "metadata", "execution_count", 3));
    fake_request_complete(req, 3);
    events = run_events(run);
    cr_expect_str_eq(json_string_value(json_object_get(find_type(events, "stdout"), "text")), "hi\n");
    result = json_object_get(find_type(events, "result"), "results");
    cr_expect_str_eq(json_string_value(json_object_get(result, "text/plain")), "42");
    cr_expect_eq(json_integer_value(json_object_get(find_type(events, "execution_count"), "execution_count")), 3);
    cr_expect_eq(json_integer_value(json_object_get(find_type(events, "execution_complete"), "execution_count")), 3);
    cr_expect_eq(count_type(events, "error"), 0);
    cr_expect_str_eq(run_outcome(run), "ok");
    cr_expect_eq(ctx->execution_count, 3);
    cr_expect_eq(gw_kernel_runs_count(ctx), 0);
    json_decref(events);
}

/* The types of `events`, in order, joined by ' ': what a client reads, at a glance. */
static void event_types(const json_t *events, char *out, size_t size)
{
    size_t i, len = 0;
    json_t *ev;

    out[0] = '\0';
    json_array_foreach(events, i, ev)
    {
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *text = json_string_value(json_object_get(ev, "text"));
        if (strcmp(type, "status") == 0 && text != NULL)
            type = text;
        len += (size_t)snprintf(out + len, len < size ? size - len : 0, "%s%s", len != 0 ? " " : "", type);
    }
}

ENGINE_TEST(kernel_runs, busy_is_said_once_when_the_run_reaches_the_kernel)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *first = engine_submit(ctx, "first"), *second = engine_submit(ctx, "second");
    json_t *events;
    char types[256];

    /* said by kgate as the code is sent, before the kernel says anything: it leaves with init and ping */
    events = run_events(first);
    event_types(events, types, sizeof(types));
    cr_expect_str_eq(types, "init ping busy");
    json_decref(events);
    events = run_events(second);
    event_types(events, types, sizeof(types));
    cr_expect_str_eq(types, "init ping queued", "a waiting run is not busy");
    json_decref(events);

    /* the kernel's own busy is not said again; its idle is not an event */
    fake_request_iopub(request(0), "status", json_pack("{s:s}", "execution_state", "busy"));
    fake_request_complete(request(0), 1);
    events = run_events(first);
    event_types(events, types, sizeof(types));
    cr_expect_str_eq(types, "init ping busy execution_complete");
    json_decref(events);

    /* the waiting run is busy once it reaches the kernel */
    cr_expect_str_eq(fake_request_seen(request(1))->code, "second");
    fake_request_complete(request(1), 2);
    events = run_events(second);
    event_types(events, types, sizeof(types));
    cr_expect_str_eq(types, "init ping queued busy execution_complete");
    json_decref(events);
}

ENGINE_TEST(kernel_runs, runs_of_a_context_execute_one_at_a_time_in_arrival_order)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *first = engine_submit(ctx, "first"), *second = engine_submit(ctx, "second");
    gw_run_t *third = engine_submit(ctx, "third");
    json_t *events, *queued;

    cr_expect_eq(fake_kernel_seen(kernel)->executes, 1, "only the first is sent");
    cr_expect_eq(gw_run_state(second), GW_RUN_QUEUED);
    events = run_events(second);
    queued = find_status(events, "queued");
    cr_assert_not_null(queued, "a waiting run says it is queued");
    cr_expect_eq(json_integer_value(json_object_get(queued, "position")), 1);
    json_decref(events);
    events = run_events(third);
    cr_expect_eq(json_integer_value(json_object_get(find_status(events, "queued"), "position")), 2);
    json_decref(events);
    events = run_events(first);
    cr_expect_null(find_status(events, "queued"), "the first run does not wait");
    json_decref(events);

    fake_request_reply(request(0), json_pack("{s:s, s:i}", "status", "ok", "execution_count", 1));
    cr_expect_eq(fake_kernel_seen(kernel)->executes, 1, "a reply alone does not end the run");
    fake_request_done(request(0));
    cr_expect_str_eq(run_outcome(first), "ok");
    cr_expect_eq(fake_kernel_seen(kernel)->executes, 2, "the next run starts when the first is done");
    cr_expect_str_eq(fake_request_seen(request(1))->code, "second");
    cr_expect_eq(gw_run_state(second), GW_RUN_RUNNING);
    cr_expect_eq(gw_run_state(third), GW_RUN_QUEUED);
    fake_request_complete(request(1), 2);
    cr_expect_str_eq(fake_request_seen(request(2))->code, "third");
    fake_request_complete(request(2), 3);
    cr_expect_str_eq(run_outcome(third), "ok");
    cr_expect_eq(fake_kernel_seen(kernel)->executes, 3);
}

ENGINE_TEST(kernel_runs, a_full_queue_refuses_runs)
{
    gw_context_t *ctx = ready_context();
    gw_kernel_run_options_t opts = {.code = "x", .timeout_ms = 1000};
    gw_run_t *run = NULL;

    eng.config.max_queue = 1;
    engine_submit(ctx, "running");
    engine_submit(ctx, "waiting");
    cr_expect_eq(gw_kernel_run_submit(ctx, &opts, &run), GW_EQUEUEFULL, "max_queue runs already wait");
    cr_expect_null(run);
    cr_expect_eq(gw_kernel_runs_count(ctx), 2);
    fake_request_complete(request(0), 1);
    cr_expect_eq(gw_kernel_run_submit(ctx, &opts, &run), 0, "a place in the queue frees up when a run ends");
}

ENGINE_TEST(kernel_runs, a_dead_kernel_refuses_runs)
{
    gw_context_t *ctx = ready_context();
    gw_kernel_run_options_t opts = {.code = "x", .timeout_ms = 1000};
    gw_run_t *run = NULL;

    fake_kernel_die(kernel, "killed by signal 9 (SIGKILL)");
    cr_expect_eq(gw_kernel_run_submit(ctx, &opts, &run), GW_EKERNELDEAD);
    cr_expect_null(run);
}

ENGINE_TEST(kernel_runs, kernel_death_ends_the_running_and_the_queued_runs)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *running = engine_submit(ctx, "a"), *queued = engine_submit(ctx, "b");
    json_t *events;

    fake_kernel_die(kernel, "killed by signal 9 (SIGKILL)");
    events = run_events(running);
    cr_expect_str_eq(only_error(events), "KernelDied");
    cr_expect_str_eq(error_evalue(events), "killed by signal 9 (SIGKILL)");
    json_decref(events);
    cr_expect_str_eq(run_error(queued), "KernelDied", "a queued run does not wait forever");
    cr_expect_str_eq(run_outcome(running), "kernel_died");
    cr_expect_str_eq(run_outcome(queued), "kernel_died");
    cr_expect_eq(gw_kernel_runs_count(ctx), 0);
    cr_expect_eq(fake_kernel_seen(kernel)->executes, 1);
}

ENGINE_TEST(kernel_runs, stop_cancels_a_queued_run)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *running = engine_submit(ctx, "a"), *queued = engine_submit(ctx, "b");
    json_t *events;

    gw_run_stop(queued);
    events = run_events(queued);
    cr_expect_str_eq(only_error(events), "Cancelled");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(events, json_array_size(events) - 1), "type")),
                     "execution_complete");
    json_decref(events);
    cr_expect_str_eq(run_outcome(queued), "cancelled");
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 0, "the running run is left alone");
    cr_expect_eq(gw_run_state(running), GW_RUN_RUNNING);
    fake_request_complete(request(0), 1);
    cr_expect_eq(fake_kernel_seen(kernel)->executes, 1, "a cancelled run is never sent");
    cr_expect_eq(gw_kernel_runs_count(ctx), 0);
}

ENGINE_TEST(kernel_runs, stop_interrupts_a_running_run)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *run = engine_submit(ctx, "while True: pass");

    gw_run_stop(run);
    /* ipykernel ignores SIGINT until its handler runs, and loses the reply to one that lands in the handler around the code */
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 0, "interrupted before the kernel said it runs the code");
    fake_request_iopub(request(0), "execute_input", json_pack("{s:s, s:i}", "code", "", "execution_count", 1));
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 1, "the stop waited for execute_input");
    for (int i = 0; i != 20; ++i)
        gw_run_stop(run);
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 1, "a storm of stops is one interrupt");
    cr_expect_eq(gw_run_state(run), GW_RUN_RUNNING, "the kernel decides how the run ends");
    kernel_error(request(0), "KeyboardInterrupt", "");
    cr_expect_str_eq(run_error(run), "KeyboardInterrupt");
    cr_expect_str_eq(run_outcome(run), "error");
}

ENGINE_TEST(kernel_runs, an_input_request_waits_for_gw_run_input)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *queued, *run = submit_with(ctx, "input('Name: ')", 60000, 1);
    json_t *events, *ask, *replies = fake_request_seen(request(0))->input_replies;

    queued = submit_with(ctx, "input()", 60000, 1);
    cr_expect(fake_request_seen(request(0))->allow_stdin);
    cr_expect_eq(gw_run_input(run, "early"), GW_ENOINPUT, "nothing is asked yet");
    cr_expect_eq(gw_run_input(queued, "early"), GW_ENOINPUT, "a queued run is asked nothing");
    fake_request_input(request(0), "Name: ", 0);
    events = run_events(run);
    ask = find_type(events, "input_request");
    cr_assert_not_null(ask);
    cr_expect_str_eq(json_string_value(json_object_get(ask, "text")), "Name: ");
    cr_expect(json_is_false(json_object_get(ask, "password")));
    json_decref(events);
    cr_expect_eq(gw_run_input(run, "Ada"), 0);
    cr_assert_eq(json_array_size(replies), 1);
    cr_expect_str_eq(json_string_value(json_array_get(replies, 0)), "Ada");
    cr_expect_eq(gw_run_input(run, "again"), GW_ENOINPUT, "one answer per request");
    fake_request_input(request(0), "Password: ", 1);
    events = run_events(run);
    cr_expect_eq(count_type(events, "input_request"), 2);
    json_decref(events);
    cr_expect_eq(gw_run_input(run, "secret"), 0);
    cr_expect_eq(json_array_size(replies), 2);
    fake_request_complete(request(0), 1);
    cr_expect_eq(gw_run_input(run, "late"), GW_ENOINPUT, "a finished run awaits nothing");
}

ENGINE_TEST(kernel_runs, an_input_request_without_allow_stdin_gets_an_empty_line)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *run = submit_with(ctx, "input()", 60000, 0);
    json_t *events, *replies = fake_request_seen(request(0))->input_replies;

    cr_expect_not(fake_request_seen(request(0))->allow_stdin);
    fake_request_input(request(0), "", 0);
    cr_assert_eq(json_array_size(replies), 1, "answered at once, never a hang");
    cr_expect_str_eq(json_string_value(json_array_get(replies, 0)), "");
    events = run_events(run);
    cr_expect_null(find_type(events, "input_request"));
    json_decref(events);
    cr_expect_eq(gw_run_input(run, "x"), GW_ENOINPUT);
}

static int interrupted(void *arg)
{
    (void)arg;
    return fake_kernel_seen(kernel)->interrupts > 0;
}

static int restarted(void *arg)
{
    (void)arg;
    return fake_kernel_seen(kernel)->restarts > 0;
}

static int finished(void *arg)
{
    return gw_run_state(arg) == GW_RUN_FINISHED;
}

ENGINE_TEST(kernel_runs, a_timeout_interrupts_then_restarts_and_reports_one_timeout_error)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *run = submit_with(ctx, "while True: pass", 20, 0), *queued = submit_with(ctx, "after", 60000, 0);
    int64_t interrupted_at;
    json_t *events;

    cr_assert(engine_run_until(interrupted, NULL, 5000, 1), "the run is interrupted past its timeout");
    interrupted_at = gw_now_ms();
    cr_expect_eq(fake_kernel_seen(kernel)->restarts, 0);
    /* what the interrupt makes the kernel say is not the run's story: TimeoutError is */
    fake_request_iopub(request(0), "error", error_content("KeyboardInterrupt", ""));
    cr_assert(engine_run_until(restarted, NULL, 5000, 1), "the kernel that does not stop is restarted");
    cr_expect_geq(gw_now_ms() - interrupted_at, (int64_t)eng.config.timeout_grace_ms - 5, "after timeout_grace_ms");
    cr_assert(engine_run_until(finished, run, 5000, 1));
    events = run_events(run);
    cr_expect_str_eq(only_error(events), "TimeoutError");
    cr_expect_not_null(strstr(error_evalue(events), "restarted"));
    cr_expect_not_null(find_status(events, "restarting"));
    json_decref(events);
    cr_expect_str_eq(run_outcome(run), "timeout");
    events = run_events(queued);
    cr_expect_not_null(find_status(events, "restarting"), "queued runs hear that state is lost");
    json_decref(events);
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 1);
    cr_expect_eq(fake_kernel_seen(kernel)->restarts, 1);
    /* the restarted kernel comes back and the queue goes on */
    fake_kernel_set_state(kernel, KMGR_KERNEL_IDLE);
    cr_expect_eq(fake_kernel_seen(kernel)->executes, 2);
    fake_request_complete(request(1), 1);
    cr_expect_str_eq(run_outcome(queued), "ok");
}

/*
 * A stopped run on a kernel whose interrupts may hang (Deno's: a cell interrupted while it awaits never ends) is ended by a
 * restart past timeout_grace_ms, with KernelRestarted; on any other kernel a stop only interrupts, again and again, and
 * the state is kept however long the kernel takes.
 */
ENGINE_TEST(kernel_runs, a_stop_an_interrupt_never_ends_restarts_only_a_kernel_whose_interrupts_may_hang)
{
    for (int may_hang = 0; may_hang != 2; ++may_hang) {
        eng.spec.interrupt_may_hang = may_hang;
        gw_context_t *ctx = ready_context();
        gw_run_t *run = engine_submit(ctx, "await new Promise(r => setTimeout(r, 60000))");
        int64_t interrupted_at;
        json_t *events;

        fake_request_iopub(request(0), "execute_input", json_pack("{s:s, s:i}", "code", "", "execution_count", 1));
        gw_run_stop(run);
        interrupted_at = gw_now_ms();
        cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 1);
        if (!may_hang) {
            engine_run_for(eng.config.timeout_grace_ms + 3000, 1); /* past STOP_RETRY_MS (2.5 s) */
            cr_expect_eq(fake_kernel_seen(kernel)->restarts, 0, "a stop keeps the state: no restart");
            cr_expect_geq(fake_kernel_seen(kernel)->interrupts, 2, "the unheeded interrupt is sent again");
            cr_expect_eq(gw_run_state(run), GW_RUN_RUNNING, "the kernel decides how the run ends");
            kernel_error(request(0), "KeyboardInterrupt", "");
            cr_expect_str_eq(run_outcome(run), "error");
            gw_context_destroy(ctx);
            continue;
        }
        cr_assert(engine_run_until(restarted, NULL, 10000, 1), "the kernel whose interrupt hangs is restarted");
        cr_expect_geq(gw_now_ms() - interrupted_at, (int64_t)eng.config.timeout_grace_ms - 5, "after timeout_grace_ms");
        cr_assert(engine_run_until(finished, run, 5000, 1), "the run ends with the restart");
        events = run_events(run);
        cr_expect_str_eq(only_error(events), "KernelRestarted");
        cr_expect_not_null(strstr(error_evalue(events), "did not end when interrupted"), "%s", error_evalue(events));
        cr_expect_not_null(find_status(events, "restarting"));
        json_decref(events);
        cr_expect_str_eq(run_outcome(run), "error");
        cr_expect_eq(fake_kernel_seen(kernel)->restarts, 1);
    }
}

/* The kernel stops when interrupted; the run must end with one `ename` error, as a timeout. Returns its evalue. */
static const char *stop_and_expect_timeout(gw_run_t *run, const char *ename)
{
    static char evalue[256];
    json_t *events;

    kernel_error(request(0), "KeyboardInterrupt", "");
    events = run_events(run);
    cr_expect_str_eq(only_error(events), ename);
    snprintf(evalue, sizeof(evalue), "%s", error_evalue(events));
    json_decref(events);
    cr_expect_str_eq(run_outcome(run), "timeout");
    return evalue;
}

/* A context whose kernel is still starting (engine_ready_context's, before it is made ready). */
static gw_context_t *starting_context(void)
{
    gw_context_options_t opts = {.spec = &eng.spec};
    gw_context_t *ctx = NULL;
    int ret = gw_context_create(&eng.contexts, &opts, &ctx);

    cr_assert_eq(ret, 0, "gw_context_create: %s", gw_strerror(ret));
    cr_assert_eq(kmgr_kernel_state(ctx->kernel), KMGR_KERNEL_STARTING);
    kernel = ctx->kernel;
    return ctx;
}

ENGINE_TEST(kernel_runs, the_timeout_counts_from_when_the_kernel_gets_the_run_not_while_it_starts)
{
    gw_run_t *run = submit_with(starting_context(), "import time; time.sleep(10)", 40, 0);
    int64_t ready_at;
    json_t *events;

    /* a start longer than the timeout and its grace: the run has not reached the kernel, so its time has not begun */
    engine_run_for(40 + 4 * eng.config.timeout_grace_ms, 1);
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 0, "a run its starting kernel has not been sent is not timed out");
    cr_expect_eq(fake_kernel_seen(kernel)->restarts, 0, "a slow start restarts nothing");
    cr_assert_neq(gw_run_state(run), GW_RUN_FINISHED, "the run waits for its kernel");
    /* the kernel is ready: the execute_request goes, and the timeout counts from there */
    fake_kernel_set_state(kernel, KMGR_KERNEL_IDLE);
    ready_at = gw_now_ms();
    cr_assert(engine_run_until(interrupted, NULL, 5000, 1), "the run is interrupted past its timeout once sent");
    cr_expect_geq(gw_now_ms() - ready_at, 40, "not before its 40 ms from the send");
    events = run_events(run);
    cr_expect_null(find_status(events, "restarting"));
    json_decref(events);
    stop_and_expect_timeout(run, "TimeoutError");
    cr_expect_eq(fake_kernel_seen(kernel)->restarts, 0);
}

ENGINE_TEST(kernel_runs, a_kernel_that_never_becomes_ready_fails_its_start_not_the_runs_timeout)
{
    gw_run_t *run = submit_with(starting_context(), "1", 40, 0);
    json_t *events;

    engine_run_for(40 + 4 * eng.config.timeout_grace_ms, 1);
    cr_expect_eq(fake_kernel_seen(kernel)->restarts, 0);
    /* kernelmgr's own bound on a start (kmgr_config_t.startup_timeout_ms) ends it */
    fake_kernel_die(kernel, "did not become ready within 60000 ms");
    cr_assert(engine_run_until(finished, run, 5000, 1));
    events = run_events(run);
    cr_expect_str_eq(only_error(events), "KernelDied");
    cr_expect_str_eq(error_evalue(events), "did not become ready within 60000 ms", "the start's failure, as such");
    json_decref(events);
    cr_expect_str_eq(run_outcome(run), "kernel_died");
}

ENGINE_TEST(kernel_runs, a_timeout_the_interrupt_stops_reports_one_timeout_error)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *run = submit_with(ctx, "import time; time.sleep(10)", 20, 0);

    cr_assert(engine_run_until(interrupted, NULL, 5000, 1));
    cr_expect_null(strstr(stop_and_expect_timeout(run, "TimeoutError"), "restarted"));
    engine_run_for(3 * eng.config.timeout_grace_ms, 1);
    cr_expect_eq(fake_kernel_seen(kernel)->restarts, 0, "a kernel that stopped is not restarted");
}

ENGINE_TEST(kernel_runs, an_unanswered_input_request_ends_the_run_with_stdin_timeout)
{
    gw_context_t *ctx = ready_context();
    gw_kernel_run_options_t opts = {
        .code = "input()", .timeout_ms = 60000, .allow_stdin = 1, .stdin_timeout_ms = 20, .limits = {1u << 20, 1u << 20}};
    gw_run_t *run = NULL;

    cr_assert_eq(gw_kernel_run_submit(ctx, &opts, &run), 0);
    engine_run_for(40, 1);
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 0, "the stdin wait counts from the input request");
    fake_request_input(request(0), "? ", 0);
    cr_assert(engine_run_until(interrupted, NULL, 5000, 1), "an input request unanswered for stdin_timeout_ms interrupts");
    cr_expect_eq(gw_run_input(run, "late"), GW_ENOINPUT, "the question is withdrawn");
    cr_expect_not_null(strstr(stop_and_expect_timeout(run, "StdinTimeout"), "20 ms"));
}

ENGINE_TEST(kernel_runs, an_error_reported_on_iopub_and_in_the_reply_is_one_error)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *run = engine_submit(ctx, "1/0"), *reply_first = engine_submit(ctx, "1/0");
    json_t *events, *error;

    kernel_error(request(0), "ZeroDivisionError", "division by zero");
    events = run_events(run);
    cr_expect_str_eq(only_error(events), "ZeroDivisionError");
    error = json_object_get(find_type(events, "error"), "error");
    cr_expect_str_eq(json_string_value(json_array_get(json_object_get(error, "traceback"), 0)), "Traceback",
                     "ANSI codes are stripped");
    json_decref(events);
    cr_expect_str_eq(run_outcome(run), "error");
    /* shell and iopub are separate sockets: the reply may come first */
    fake_request_reply(request(1), error_content("ZeroDivisionError", "division by zero"));
    fake_request_iopub(request(1), "error", error_content("ZeroDivisionError", "division by zero"));
    fake_request_done(request(1));
    cr_expect_str_eq(run_error(reply_first), "ZeroDivisionError");
    cr_expect_str_eq(run_outcome(reply_first), "error");
}

ENGINE_TEST(kernel_runs, an_error_only_in_the_reply_is_reported)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *aborted = engine_submit(ctx, "a"), *failed = engine_submit(ctx, "b");

    fake_request_reply(request(0), json_pack("{s:s}", "status", "aborted"));
    fake_request_done(request(0));
    fake_request_reply(request(1), error_content("NameError", "name 'b' is not defined"));
    fake_request_done(request(1));
    cr_expect_str_eq(run_error(aborted), "ExecutionAborted", "never a silent success");
    cr_expect_str_eq(run_error(failed), "NameError");
    cr_expect_str_eq(run_outcome(aborted), "error");
    cr_expect_str_eq(run_outcome(failed), "error");
}

ENGINE_TEST(kernel_runs, shutdown_abandons_the_kernel_requests)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *running = engine_submit(ctx, "a"), *queued = engine_submit(ctx, "b");

    gw_runs_shutdown(&eng.runs);
    cr_expect(fake_request_seen(request(0))->cancelled, "the kernel no longer calls back into the run");
    cr_expect_eq(gw_kernel_runs_count(ctx), 0);
    cr_expect_str_eq(run_error(queued), "ServerShutdown");
    cr_expect_str_eq(run_outcome(running), "cancelled");
    fake_request_complete(request(0), 1); /* heard by nobody */
    cr_expect_eq(fake_kernel_seen(kernel)->executes, 1);
}

/* kernelmgr restarts a kernel that died on its own (kmgr_kernel_options_t.restart_limit): the running run ends saying the
 * state was lost, a queued one hears `restarting` and runs on the new kernel, and the context keeps its id. */
ENGINE_TEST(kernel_runs, an_automatic_restart_ends_the_running_run_and_keeps_the_context)
{
    gw_context_t *ctx = ready_context();
    char id[sizeof(ctx->id)];
    gw_run_t *first = engine_submit(ctx, "x = 1"), *dying, *waiting;
    json_t *events, *obj;

    memcpy(id, ctx->id, sizeof(id));
    fake_request_complete(request(0), 8);
    cr_assert_str_eq(run_outcome(first), "ok");
    cr_assert_eq(ctx->execution_count, 8);
    dying = engine_submit(ctx, "c");
    waiting = engine_submit(ctx, "d");
    fake_kernel_die_and_restart(kernel, "killed by signal 9 (SIGKILL)");
    events = run_events(dying);
    cr_expect_str_eq(only_error(events), "KernelDied");
    cr_expect_str_eq(error_evalue(events), "killed by signal 9 (SIGKILL); kgate restarted the kernel (automatic restart 1 of 5 in "
                                           "a row): its state was lost");
    json_decref(events);
    cr_expect_str_eq(run_outcome(dying), "kernel_died");
    events = run_events(waiting);
    cr_expect_not_null(find_status(events, "restarting"), "the queued run hears of the restart");
    cr_expect_eq(count_type(events, "error"), 0);
    json_decref(events);
    cr_expect_null(run_outcome(waiting), "it waits for the new kernel");
    cr_expect_eq(gw_context_find(&eng.contexts, id), ctx, "same id");
    cr_expect_eq(ctx->execution_count, 0, "a fresh kernel counts from 1");
    obj = gw_context_to_json(ctx);
    cr_expect_eq(json_integer_value(json_object_get(obj, "restarts")), 1);
    cr_expect_str_eq(json_string_value(json_object_get(obj, "last_death")), "killed by signal 9 (SIGKILL)");
    cr_expect_str_eq(json_string_value(json_object_get(obj, "status")), "restarting");
    json_decref(obj);
    fake_kernel_set_state(kernel, KMGR_KERNEL_IDLE);
    fake_request_complete(request(2), 1);
    cr_expect_str_eq(run_outcome(waiting), "ok");
    cr_expect_str_eq(fake_request_seen(request(2))->code, "d");
}

/* Contexts' kernels come back on their own within --kernel-restart-limit; a stateless run's own kernel does not. */
ENGINE_TEST(kernel_runs, contexts_give_their_kernels_the_restart_limit)
{
    kmgr_kernel_t *ephemeral;

    ready_context();
    cr_expect_eq(fake_kernel_seen(kernel)->restart_limit, eng.config.kernel_restart_limit);
    cr_expect_eq(eng.config.kernel_restart_limit, 5, "Jupyter Server's default");
    engine_ready_context(1, &ephemeral);
    cr_expect_eq(fake_kernel_seen(ephemeral)->restart_limit, 0);
}

/* A kernel that misses heartbeats (IRkernel in a long cell) is not answering: its runs and its context object say so, and
 * nothing ends. */
ENGINE_TEST(kernel_runs, a_kernel_not_answering_is_told_not_killed)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *run = engine_submit(ctx, "Sys.sleep(10)");
    json_t *events, *obj;

    fake_kernel_set_answering(kernel, 0);
    obj = gw_context_to_json(ctx);
    cr_expect(json_is_false(json_object_get(obj, "answering")));
    json_decref(obj);
    events = run_events(run);
    cr_expect_not_null(find_status(events, "not answering"));
    json_decref(events);
    fake_kernel_set_answering(kernel, 1);
    events = run_events(run);
    cr_expect_not_null(find_status(events, "answering"));
    json_decref(events);
    fake_request_complete(request(0), 1);
    cr_expect_str_eq(run_outcome(run), "ok");
    cr_expect_eq(fake_kernel_seen(kernel)->restarts, 0);
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 0);
    obj = gw_context_to_json(ctx);
    cr_expect(json_is_true(json_object_get(obj, "answering")));
    cr_expect(json_is_null(json_object_get(obj, "last_death")));
    json_decref(obj);
}

/* A run tells kernelmgr how much of a stream message's text it can still keep (its output budget left): a message over the
 * message cap is then read with a head no longer than that, not the cap's 64 MiB (kmgr_request_set_text_room). */
ENGINE_TEST(kernel_runs, a_run_tells_its_request_the_text_it_can_still_keep)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *run = submit_with(ctx, "print('x' * 1000)", 0, 0); /* 1 MiB of output */
    kmgr_request_t *req = request(0);
    static const char content[] = "{\"name\":\"stdout\",\"text\":\"0123456789\"}";

    cr_expect_eq(fake_request_seen(req)->text_room, 1u << 20, "the room told at the start: %llu",
                 (unsigned long long)fake_request_seen(req)->text_room);
    fake_request_iopub_bytes(req, "stream", content, sizeof(content) - 1);
    cr_expect_eq(fake_request_seen(req)->text_room, (1u << 20) - 10, "the room after 10 bytes of output: %llu",
                 (unsigned long long)fake_request_seen(req)->text_room);
    fake_request_complete(req, 1);
    cr_expect_str_eq(run_outcome(run), "ok");
}

/* `key` of the `dropped` object GET /code/executions/{id} answers with (gw_run_to_json). */
static long long dropped_of(gw_run_t *run, const char *key)
{
    json_t *obj = gw_run_to_json(run);
    long long n = json_integer_value(json_object_get(json_object_get(obj, "dropped"), key));

    json_decref(obj);
    return n;
}

/* The type of the last event of `run`'s log (a static buffer). */
static const char *last_event_type(gw_run_t *run)
{
    static char type[64];
    json_t *events = run_events(run);

    snprintf(type, sizeof(type), "%s",
             json_string_value(json_object_get(json_array_get(events, json_array_size(events) - 1), "type")) ?: "");
    json_decref(events);
    return type;
}

/* Output the kernel publishes for a run after the run has ended (kernelmgr's late sink; docs/kernels.md, "Late output": a
 * kernel not yet known to publish late, a quiet window that guessed short, a timer's output) is counted on the finished run
 * while it is retained, so that GET of it says what came too late; the run's log stays as it ended, execution_complete
 * last. A run with nothing late shows nothing dropped. */
ENGINE_TEST(kernel_runs, output_after_a_run_ended_is_counted_on_the_finished_run)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *run = engine_submit(ctx, "threading.Timer(1, print, ['later']).start()"), *next;
    kmgr_request_t *req = request(0);
    json_t *events;
    size_t n_events;

    fake_request_iopub(req, "stream", json_pack("{s:s, s:s}", "name", "stdout", "text", "now\n"));
    cr_expect_eq(gw_run_report_late(run, 6), 0, "a run still running gets its output: nothing is counted as late");
    fake_request_complete(req, 1);
    cr_expect_str_eq(run_outcome(run), "ok");
    cr_expect_eq(dropped_of(run, "messages"), 0, "nothing was lost by the end");
    events = run_events(run);
    n_events = json_array_size(events);
    cr_expect_null(json_object_get(find_type(events, "execution_complete"), "dropped"));
    json_decref(events);

    cr_expect_eq(fake_request_late(req, "stream", 6), 1, "the finished run is retained: it counts the late line");
    cr_expect_eq(fake_request_late(req, "display_data", 0), 1);
    cr_expect_eq(dropped_of(run, "messages"), 2, "GET of the run: each message that came after its end");
    cr_expect_eq(dropped_of(run, "output_bytes"), 6, "and the stream text they carried");
    cr_expect_eq(dropped_of(run, "results"), 0, "no result was dropped by the result limit");
    events = run_events(run);
    cr_expect_eq(json_array_size(events), n_events, "nothing is appended to a log that ended");
    json_decref(events);
    cr_expect_str_eq(last_event_type(run), "execution_complete");

    /* the context's next run, with nothing late, shows nothing dropped; the first one keeps its count */
    next = engine_submit(ctx, "1 + 1");
    fake_request_complete(request(1), 2);
    cr_expect_eq(dropped_of(next, "messages"), 0);
    cr_expect_eq(dropped_of(next, "output_bytes"), 0);
    cr_expect_eq(dropped_of(run, "messages"), 2);
}

/* A run no longer retained (past --run-retention-ms) has nobody to tell: kernelmgr hears so, and its count and log are all
 * that remains of the loss. */
ENGINE_TEST(kernel_runs, late_output_of_a_run_no_longer_retained_is_left_to_kernelmgr)
{
    gw_context_t *ctx = ready_context();
    gw_run_t *run = engine_submit(ctx, "x");
    kmgr_request_t *req = request(0);
    char id[WIRE_UUID_STRLEN + 1];

    fake_request_complete(req, 1);
    snprintf(id, sizeof(id), "%s", gw_run_id(run));
    eng.config.run_retention_ms = 0;
    gw_runs_collect(&eng.runs);
    cr_assert_null(gw_run_find(&eng.runs, id), "the run was collected");
    cr_expect_eq(fake_request_late(req, "stream", 5), 0, "no run to count it on");
}

/* Late output is the run's code's: a setup execute before it (a door's setup_code, code mode's tools) reads none of its
 * output even on time, and tells kernelmgr of no late sink. */
ENGINE_TEST(kernel_runs, only_the_runs_own_code_reports_late_output)
{
    gw_context_t *ctx = ready_context();
    gw_kernel_run_options_t opts = {.code = "x", .setup_code = "setup()", .timeout_ms = 60000, .limits = {1u << 20, 1u << 20}};
    gw_run_t *run = NULL;

    cr_assert_eq(gw_kernel_run_submit(ctx, &opts, &run), 0);
    fake_request_complete(request(0), 1);
    fake_request_complete(request(1), 2);
    cr_expect_eq(fake_request_late(request(0), "stream", 5), -1, "the setup's request has no late sink");
    cr_expect_eq(fake_request_late(request(1), "stream", 5), 1, "the code's has");
    cr_expect_eq(dropped_of(run, "messages"), 1);
}
