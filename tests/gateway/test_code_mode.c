/* tests/gateway/test_code_mode.c: tool calls of a run on the fake kernel manager: setup, batches, answers, bounds, timeouts. */
#include <string.h>
#include <criterion/criterion.h>
#include "core/errors.h"
#include "code/tools.h"
#include "engine_test.h"

TestSuite(code_mode, .init = engine_setup, .fini = engine_teardown, .timeout = 20);

static kmgr_kernel_t *kernel;

static kmgr_request_t *request(size_t i)
{
    kmgr_request_t *req = fake_kernel_request(kernel, i);
    cr_assert_not_null(req, "execute_request %zu was not sent", i);
    return req;
}

static gw_toolset_t *toolset(const char *json)
{
    json_t *tools = json_loads(json, 0, NULL);
    gw_toolset_t *set;
    char err[256] = "";

    cr_assert_not_null(tools);
    cr_assert_eq(gw_toolset_parse(tools, &eng.config, &set, err, sizeof(err)), 0, "%s", err);
    json_decref(tools);
    return set;
}

static gw_run_t *submit_tools(gw_context_t *ctx, const char *code, unsigned timeout_ms, unsigned stdin_timeout_ms)
{
    gw_kernel_run_options_t opts = {.code = code,
                                    .timeout_ms = timeout_ms,
                                    .stdin_timeout_ms = stdin_timeout_ms,
                                    .limits = {1u << 20, 1u << 20},
                                    .tools = toolset("[{\"name\": \"search-records\"}, {\"name\": \"fetch\"}]")};
    gw_run_t *run = NULL;
    int ret = gw_kernel_run_submit(ctx, &opts, &run);

    cr_assert_eq(ret, 0, "gw_kernel_run_submit: %s", gw_strerror(ret));
    return run;
}

/* The setup execute succeeds; the run's code is sent next, as request 1. */
static kmgr_request_t *set_up(void)
{
    fake_request_reply(request(0), json_pack("{s:s}", "status", "ok"));
    fake_request_done(request(0));
    return request(1);
}

/* A gateway with a run waiting on its code (tools declared, setup done). */
static gw_run_t *running(kmgr_request_t **req, unsigned timeout_ms)
{
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_run_t *run = submit_tools(ctx, "a = await fetch(url='x')", timeout_ms, 0);
    *req = set_up();
    return run;
}

static void send_batch(kmgr_request_t *req, const char *calls_json)
{
    char prompt[4096];
    cr_assert_lt((size_t)snprintf(prompt, sizeof(prompt), "%s{\"calls\":%s}", GW_TOOL_CALLS_MARK, calls_json), sizeof(prompt));
    fake_request_input(req, prompt, 0);
}

/* The i-th tool_call event of the run (borrowed from `*events`, which the caller releases). */
static json_t *tool_call(gw_run_t *run, size_t i, json_t **events)
{
    size_t seen = 0, k;
    json_t *ev;

    *events = run_events(run);
    json_array_foreach(*events, k, ev)
    {
        if (strcmp(json_string_value(json_object_get(ev, "type")), "tool_call") == 0 && seen++ == i)
            return ev;
    }
    cr_assert_fail("the run has no tool_call event %zu", i);
    return NULL;
}

static const char *call_id(gw_run_t *run, size_t i)
{
    static char id[64];
    json_t *events, *ev = tool_call(run, i, &events);
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(ev, "id")));
    json_decref(events);
    return id;
}

/* The input_replies the kernel got, parsed (the last one). */
static json_t *last_reply(kmgr_request_t *req)
{
    json_t *replies = fake_request_seen(req)->input_replies;
    size_t n = json_array_size(replies);
    json_t *reply;

    cr_assert_gt(n, 0, "no input_reply was sent");
    reply = json_loads(json_string_value(json_array_get(replies, n - 1)), 0, NULL);
    cr_assert_not_null(reply, "the input_reply is not JSON: %s", json_string_value(json_array_get(replies, n - 1)));
    return reply;
}

static size_t num_replies(kmgr_request_t *req)
{
    return json_array_size(fake_request_seen(req)->input_replies);
}

ENGINE_TEST(code_mode, the_tools_are_bound_by_a_silent_setup_before_the_runs_code)
{
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_run_t *run = submit_tools(ctx, "print(await fetch(url='x'))", 60000, 0);
    const char *setup = fake_request_seen(request(0))->code;
    json_t *events;

    cr_expect_not_null(strstr(setup, "exec("), "the setup runs in its own namespace: %.200s", setup);
    cr_expect_not_null(strstr(setup, "search_records"), "the sanitised name is bound");
    cr_expect_not_null(strstr(setup, "kgate-tool-calls/1"), "the shim travels with it");
    cr_expect_not(fake_request_seen(request(0))->allow_stdin);
    cr_expect_null(fake_kernel_request(kernel, 1), "the run's code waits for the setup");
    cr_expect_eq(gw_run_state(run), GW_RUN_RUNNING);
    set_up();
    cr_expect_str_eq(fake_request_seen(request(1))->code, "print(await fetch(url='x'))");
    cr_expect(fake_request_seen(request(1))->allow_stdin, "tool calls travel on stdin: the kernel must be allowed to ask");
    fake_request_input(request(1), "name? ", 0);
    cr_expect_str_eq(json_string_value(json_array_get(fake_request_seen(request(1))->input_replies, 0)), "\x04",
                     "input() without stdin opted in ends at once (EOF), as without tools");
    fake_request_complete(request(1), 1);
    events = run_events(run);
    cr_expect_eq(count_type(events, "error"), 0);
    cr_expect_eq(count_type(events, "tool_call"), 0);
    json_decref(events);
    cr_expect_str_eq(run_outcome(run), "ok");
}

ENGINE_TEST(code_mode, a_setup_that_fails_ends_the_run_without_running_its_code)
{
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_run_t *run = submit_tools(ctx, "fetch(url='x')", 60000, 0);

    fake_request_reply(request(0), json_pack("{s:s, s:s, s:s}", "status", "error", "ename", "ModuleNotFoundError", "evalue",
                                             "No module named 'IPython'"));
    fake_request_done(request(0));
    cr_expect_null(fake_kernel_request(kernel, 1));
    cr_expect_str_eq(run_error(run), "ToolSetupFailed");
    cr_expect_str_eq(run_outcome(run), "error");
}

ENGINE_TEST(code_mode, a_batch_becomes_one_event_per_call_and_one_reply_once_all_are_answered)
{
    kmgr_request_t *req;
    gw_run_t *run = running(&req, 60000);
    json_t *events, *ev, *reply, *results;
    char first[64];

    send_batch(req,
               "[{\"name\":\"fetch\",\"arguments\":{\"url\":\"a\"}},{\"name\":\"search-records\",\"arguments\":{\"q\":[1,2]}}]");
    ev = tool_call(run, 0, &events);
    cr_expect_str_eq(json_string_value(json_object_get(ev, "name")), "fetch");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(ev, "arguments"), "url")), "a");
    cr_expect_eq(strlen(json_string_value(json_object_get(ev, "id"))), 36, "call ids are UUIDs");
    json_decref(events);
    ev = tool_call(run, 1, &events);
    cr_expect_str_eq(json_string_value(json_object_get(ev, "name")), "search-records", "events carry the declared name");
    cr_expect_eq(count_type(events, "input_request"), 0, "a batch of calls is no question for a person");
    json_decref(events);
    cr_expect_eq(gw_run_input(run, "x"), GW_ENOINPUT, "POST /input does not answer tool calls");

    snprintf(first, sizeof(first), "%s", call_id(run, 0));
    /* answered out of order: the reply keeps the batch's order */
    cr_expect_eq(gw_run_tool_result(run, call_id(run, 1), NULL, "no such record"), 0);
    cr_expect_eq(num_replies(req), 0, "the kernel hears once every call of the batch is answered");
    json_t *value = json_pack("{s:i}", "status", 200);
    cr_expect_eq(gw_run_tool_result(run, first, value, NULL), 0);
    json_decref(value);
    cr_assert_eq(num_replies(req), 1);
    reply = last_reply(req);
    results = json_object_get(reply, "results");
    cr_assert_eq(json_array_size(results), 2);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(json_array_get(results, 0), "result"), "status")), 200);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(results, 1), "error")), "no such record");
    json_decref(reply);

    cr_expect_eq(gw_run_tool_result(run, first, json_null(), NULL), GW_ETOOLCALLANSWERED, "a second answer");
    cr_expect_eq(gw_run_tool_result(run, "00000000-0000-4000-8000-000000000000", json_null(), NULL), GW_ETOOLCALLNOTFOUND);
    fake_request_complete(req, 1);
    cr_expect_str_eq(run_outcome(run), "ok");
    /* the run has finished: an answered call is still answered, an id it never emitted still unknown */
    cr_expect_eq(gw_run_tool_result(run, first, json_null(), NULL), GW_ETOOLCALLANSWERED, "a second answer after the run's end");
    cr_expect_eq(gw_run_tool_result(run, "00000000-0000-4000-8000-000000000000", json_null(), NULL), GW_ETOOLCALLNOTFOUND);
}

ENGINE_TEST(code_mode, calls_that_cannot_be_made_are_answered_at_once_without_events)
{
    kmgr_request_t *req;
    gw_run_t *run;
    json_t *reply, *results, *events;
    char big[2048];

    eng.config.max_pending_tool_calls = 2;
    eng.config.max_tool_calls = 3;
    eng.config.max_tool_argument_bytes = 100;
    run = running(&req, 60000);
    memset(big, 'x', 200);
    big[200] = '\0';
    char calls[4096];
    snprintf(calls, sizeof(calls),
             "[{\"name\":\"nope\",\"arguments\":{}},{\"name\":\"fetch\",\"arguments\":[]},"
             "{\"name\":\"fetch\",\"arguments\":{\"s\":\"%s\"}},{\"name\":\"fetch\",\"arguments\":{}}]",
             big);
    send_batch(req, calls);
    cr_assert_eq(num_replies(req), 1, "nothing waits: the reply is immediate");
    reply = last_reply(req);
    results = json_object_get(reply, "results");
    cr_assert_eq(json_array_size(results), 4);
    cr_expect_not_null(strstr(json_string_value(json_object_get(json_array_get(results, 0), "error")), "no tool named \"nope\""));
    cr_expect_not_null(strstr(json_string_value(json_object_get(json_array_get(results, 1), "error")), "JSON object"));
    cr_expect_not_null(
        strstr(json_string_value(json_object_get(json_array_get(results, 2), "error")), "--max-tool-argument-bytes"));
    cr_expect_not_null(strstr(json_string_value(json_object_get(json_array_get(results, 3), "error")), "--max-pending-tool-calls"));
    json_decref(reply);
    events = run_events(run);
    cr_expect_eq(count_type(events, "tool_call"), 0);
    json_decref(events);

    /* three calls per run: the third is made, the fourth refused */
    send_batch(req, "[{\"name\":\"fetch\",\"arguments\":{}},{\"name\":\"fetch\",\"arguments\":{}}]");
    cr_expect_eq(gw_run_tool_result(run, call_id(run, 0), json_true(), NULL), 0);
    cr_expect_eq(gw_run_tool_result(run, call_id(run, 1), json_true(), NULL), 0);
    send_batch(req, "[{\"name\":\"fetch\",\"arguments\":{}},{\"name\":\"fetch\",\"arguments\":{}}]");
    events = run_events(run);
    cr_expect_eq(count_type(events, "tool_call"), 3);
    json_decref(events);
    cr_expect_eq(gw_run_tool_result(run, call_id(run, 2), json_true(), NULL), 0);
    reply = last_reply(req);
    cr_expect_not_null(strstr(json_string_value(json_object_get(json_array_get(json_object_get(reply, "results"), 1), "error")),
                              "--max-tool-calls"));
    json_decref(reply);
    fake_request_complete(req, 1);
}

/* An undeclared tool whose name the refusal quotes cut at "%.128s" inside a character: still refused, with no tool_call
 * event (error_answer's NULL, jansson refusing the half character, read as "the call can be made"). */
ENGINE_TEST(code_mode, an_undeclared_tool_named_past_the_quote_is_refused)
{
    kmgr_request_t *req;
    gw_run_t *run = running(&req, 60000);
    char name[160], calls[512];
    json_t *reply, *events;

    memset(name, 'n', 127);
    memcpy(name + 127, "\xc3\xa9", 3);
    snprintf(calls, sizeof(calls), "[{\"name\":\"%s\",\"arguments\":{}}]", name);
    send_batch(req, calls);
    cr_assert_eq(num_replies(req), 1, "nothing waits: the reply is immediate");
    reply = last_reply(req);
    const char *error = json_string_value(json_object_get(json_array_get(json_object_get(reply, "results"), 0), "error"));
    cr_expect(error != NULL && strstr(error, "no tool named") != NULL && strstr(error, "\xef\xbf\xbd\"") != NULL, "%s",
              error != NULL ? error : "(no error)");
    json_decref(reply);
    events = run_events(run);
    cr_expect_eq(count_type(events, "tool_call"), 0, "an undeclared tool was called");
    json_decref(events);
    fake_request_complete(req, 1);
}

ENGINE_TEST(code_mode, a_malformed_batch_or_one_from_a_run_without_tools_gets_an_error_reply)
{
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_kernel_run_options_t opts = {.code = "x", .timeout_ms = 60000, .allow_stdin = 1, .limits = {1u << 20, 1u << 20}};
    gw_run_t *run = NULL;
    json_t *reply, *events;

    cr_assert_eq(gw_kernel_run_submit(ctx, &opts, &run), 0);
    send_batch(request(0), "[{\"name\":\"fetch\",\"arguments\":{}}]");
    reply = last_reply(request(0));
    cr_expect_not_null(strstr(json_string_value(json_object_get(reply, "error")), "declared no tools"));
    json_decref(reply);
    fake_request_input(request(0), GW_TOOL_CALLS_MARK "{not json", 0);
    reply = last_reply(request(0));
    cr_expect_not_null(strstr(json_string_value(json_object_get(reply, "error")), "could not read"));
    json_decref(reply);
    events = run_events(run);
    cr_expect_eq(count_type(events, "tool_call") + count_type(events, "input_request"), 0);
    json_decref(events);
    fake_request_complete(request(0), 1);
}

static int interrupted(void *arg)
{
    (void)arg;
    return fake_kernel_seen(kernel)->interrupts > 0;
}

ENGINE_TEST(code_mode, waiting_for_tools_is_bounded_by_the_run_timeout_not_the_stdin_timeout)
{
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_run_t *run = submit_tools(ctx, "fetch(url='x')", 300, 20);
    kmgr_request_t *req = set_up();
    char id[64];
    json_t *events;

    send_batch(req, "[{\"name\":\"fetch\",\"arguments\":{\"url\":\"x\"}}]");
    snprintf(id, sizeof(id), "%s", call_id(run, 0));
    engine_run_for(100, 1);
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 0, "the stdin timeout (20 ms) does not apply to tool calls");
    cr_assert(engine_run_until(interrupted, NULL, 5000, 1), "the run's timeout interrupts a run waiting on a tool");
    cr_expect_eq(gw_run_tool_result(run, id, json_null(), NULL), GW_ETOOLCALLCLOSED, "the interrupt withdrew the call");
    cr_expect_eq(num_replies(req), 0);
    fake_request_iopub(req, "error", json_pack("{s:s, s:s, s:[]}", "ename", "KeyboardInterrupt", "evalue", "", "traceback"));
    fake_request_reply(
        req, json_pack("{s:s, s:s, s:s, s:[]}", "status", "error", "ename", "KeyboardInterrupt", "evalue", "", "traceback"));
    fake_request_done(req);
    events = run_events(run);
    cr_expect_str_eq(only_error(events), "TimeoutError");
    json_decref(events);
    cr_expect_str_eq(run_outcome(run), "timeout");
    cr_expect_eq(gw_run_tool_result(run, id, json_null(), NULL), GW_ETOOLCALLCLOSED, "withdrawn, and still so after the end");
}

ENGINE_TEST(code_mode, stopping_a_run_withdraws_its_waiting_calls_and_a_new_batch_replaces_an_old_one)
{
    kmgr_request_t *req;
    gw_run_t *run = running(&req, 60000);
    char first[64];

    send_batch(req, "[{\"name\":\"fetch\",\"arguments\":{}}]");
    snprintf(first, sizeof(first), "%s", call_id(run, 0));
    /* the kernel asks again without an answer: it stopped waiting on the first batch (the code caught an interrupt) */
    send_batch(req, "[{\"name\":\"fetch\",\"arguments\":{}}]");
    cr_expect_eq(gw_run_tool_result(run, first, json_null(), NULL), GW_ETOOLCALLCLOSED);
    fake_request_iopub(req, "execute_input", json_pack("{s:s, s:i}", "code", "", "execution_count", 1));
    gw_run_stop(run);
    cr_expect_eq(fake_kernel_seen(kernel)->interrupts, 1);
    cr_expect_eq(gw_run_tool_result(run, call_id(run, 1), json_null(), NULL), GW_ETOOLCALLCLOSED);
    cr_expect_eq(num_replies(req), 0);
    fake_request_complete(req, 1);
}

ENGINE_TEST(code_mode, tools_need_a_python_context)
{
    gw_context_t *ctx = engine_ready_context(0, &kernel);
    gw_kernel_run_options_t opts = {.code = "x", .timeout_ms = 60000, .limits = {1u << 20, 1u << 20}};
    gw_run_t *run = NULL;

    opts.tools = toolset("[{\"name\": \"fetch\"}]");
    eng.spec.language = "javascript";
    cr_expect_eq(gw_kernel_run_submit(ctx, &opts, &run), GW_ETOOLSUNSUPPORTED);
    eng.spec.language = "python";
    cr_expect_null(fake_kernel_request(kernel, 0));
    gw_toolset_destroy(opts.tools);
}
