/* tests/e2e/test_code_mode.c: tool calls from running code (docs/API.md 5.4) against the real kgate and ipykernel. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_helpers.h"
#include "shared.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/stream.h"

static void fini(void)
{
    xh_gateways_stop_all();
    e2e_shared_cleanup();
}

TestSuite(code_mode, .fini = fini, .timeout = 240);

static unsigned short port(void)
{
    return e2e_shared()->port;
}

#define TOOLS                                                                                                                      \
    "[{\"name\": \"get_weather\", \"description\": \"The weather of a city\", \"input_schema\": {\"type\": \"object\","            \
    " \"properties\": {\"city\": {\"type\": \"string\"}}, \"required\": [\"city\"]}}, {\"name\": \"search-records\"}]"

/* A POST /code body with the two tools of TOOLS. */
static json_t *tools_body(const char *ctx, const char *code)
{
    json_t *body = xh_body(ctx, code);
    json_object_set_new(body, "tools", json_loads(TOOLS, 0, NULL));
    return body;
}

/* POST /code/executions/{exec}/tool_results {"id", "result"} (or {"id", "error"} when `error`); returns the response. */
static void answer(const char *exec_id, const char *call_id, json_t *result, const char *error, ts_response_t *r)
{
    char path[256];
    json_t *body = json_pack("{s:s}", "id", call_id);

    snprintf(path, sizeof(path), "/code/executions/%s/tool_results", exec_id);
    if (error != NULL)
        json_object_set_new(body, "error", json_string(error));
    else
        json_object_set_new(body, "result", result);
    ts_post_json(port(), path, NULL, body, r);
    json_decref(body);
}

static void answer_ok(const char *exec_id, const ts_event_t *call, json_t *result)
{
    ts_response_t r;
    answer(exec_id, xh_str(call->json, "id"), result, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
}

/* Opens the run and waits for its first tool_call; returns the stream, the execution id in exec_id. */
static ts_stream_t *open_until_call(json_t *body, ts_events_t *evs, size_t *i, char *exec_id, size_t size, int64_t deadline)
{
    ts_stream_t *s = xh_open(port(), body, deadline);
    cr_assert_eq(ts_stream_response(s)->status, 200, "POST /code: HTTP %d %.400s", ts_stream_response(s)->status,
                 ts_stream_response(s)->body);
    *i = xh_wait_event(s, evs, "tool_call", 0, deadline);
    snprintf(exec_id, size, "%s", xh_execution_id(evs));
    return s;
}

Test(code_mode, one_call_is_answered_and_its_result_returned_to_the_code)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = tools_body(ctx, "w = get_weather(city='Paris')\nprint(w['city'], w['temp_c'])");
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    ts_events_t evs = {0};
    char exec_id[64];
    size_t i;
    ts_stream_t *s = open_until_call(body, &evs, &i, exec_id, sizeof(exec_id), deadline);

    json_decref(body);
    cr_assert_str_eq(xh_str(evs.v[i].json, "name"), "get_weather", "%s", evs.v[i].data);
    cr_assert_str_eq(xh_str(json_object_get(evs.v[i].json, "arguments"), "city"), "Paris", "%s", evs.v[i].data);
    cr_assert_eq(strlen(xh_str(evs.v[i].json, "id")), 36, "call ids are UUIDs: %s", evs.v[i].data);
    answer_ok(exec_id, &evs.v[i], json_pack("{s:s, s:i}", "city", "Paris", "temp_c", 21));
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&evs, "stdout", "Paris 21\n");
    cr_assert_eq(ts_events_count(&evs, "tool_call"), 1);
    cr_assert_eq(ts_events_count(&evs, "input_request"), 0, "a tool call is no input_request");
    ts_events_dispose(&evs);

    /* the tool stays a function of the context, and nothing else of kgate's is left in its namespace */
    xh_run_ok(port(), ctx, "print(sorted(k for k in globals() if 'kgate' in k.lower() or k == 'get_weather'))", &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "['get_weather']\n");
    ts_events_dispose(&evs);
    free(ctx);
}

Test(code_mode, calls_fired_before_awaiting_are_all_announced_before_either_is_answered)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = tools_body(ctx, "import asyncio\n"
                                   "a, b = await asyncio.gather(get_weather(city='Paris'), get_weather(city='Tokyo'))\n"
                                   "later = [get_weather(city=c) for c in ('Oslo', 'Rome')]\n"
                                   "print(a, b, [await f for f in later])");
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    ts_events_t evs = {0};
    char exec_id[64];
    size_t i, j;
    ts_stream_t *s = open_until_call(body, &evs, &i, exec_id, sizeof(exec_id), deadline);

    json_decref(body);
    j = xh_wait_event(s, &evs, "tool_call", i + 1, deadline);
    cr_assert_str_eq(xh_str(json_object_get(evs.v[i].json, "arguments"), "city"), "Paris");
    cr_assert_str_eq(xh_str(json_object_get(evs.v[j].json, "arguments"), "city"), "Tokyo");
    /* answered in the other order: each result goes to its own call */
    answer_ok(exec_id, &evs.v[j], json_string("rain"));
    answer_ok(exec_id, &evs.v[i], json_string("sun"));
    i = xh_wait_event(s, &evs, "tool_call", j + 1, deadline);
    j = xh_wait_event(s, &evs, "tool_call", i + 1, deadline);
    answer_ok(exec_id, &evs.v[i], json_integer(1));
    answer_ok(exec_id, &evs.v[j], json_integer(2));
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&evs, "stdout", "sun rain [1, 2]\n");
    ts_events_dispose(&evs);
    free(ctx);
}

Test(code_mode, an_error_answer_raises_in_the_code_naming_the_tool)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = tools_body(ctx, "try:\n    get_weather(city='Atlantis')\nexcept Exception as e:\n"
                                   "    print(type(e).__name__, e)\nget_weather(city='Atlantis')");
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    ts_events_t evs = {0};
    char exec_id[64];
    size_t i;
    ts_stream_t *s = open_until_call(body, &evs, &i, exec_id, sizeof(exec_id), deadline);
    ts_response_t r;

    json_decref(body);
    answer(exec_id, xh_str(evs.v[i].json, "id"), NULL, "no such city", &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
    i = xh_wait_event(s, &evs, "tool_call", i + 1, deadline);
    answer(exec_id, xh_str(evs.v[i].json, "id"), NULL, "still no such city", &r);
    ts_response_dispose(&r);
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&evs, "stdout", "ToolError tool 'get_weather' failed: no such city\n");
    const ts_event_t *err = xh_error_event(&evs, "ToolError");
    cr_assert(strstr(err->data, "tool 'get_weather' failed: still no such city") != NULL, "%s", err->data);
    cr_assert(strstr(err->data, "get_weather(city='Atlantis')") != NULL, "the traceback shows the call: %s", err->data);
    cr_assert(strstr(err->data, "skipping hidden") != NULL, "kgate's frames are hidden but the one that raised: %s", err->data);
    ts_events_dispose(&evs);
    free(ctx);
}

Test(code_mode, a_name_that_is_no_identifier_is_sanitised_and_events_keep_the_declared_one)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = tools_body(ctx, "try:\n    input('stdin is not open for input()')\nexcept EOFError:\n    print('eof')\n"
                                   "print(search_records(query='kgate', limit=2), search_records.__name__)");
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    ts_events_t evs = {0};
    char exec_id[64];
    size_t i;
    ts_stream_t *s = open_until_call(body, &evs, &i, exec_id, sizeof(exec_id), deadline);

    json_decref(body);
    cr_assert_str_eq(xh_str(evs.v[i].json, "name"), "search-records", "%s", evs.v[i].data);
    cr_assert_eq(xh_int(json_object_get(evs.v[i].json, "arguments"), "limit"), 2, "%s", evs.v[i].data);
    answer_ok(exec_id, &evs.v[i], json_pack("[s,s]", "r1", "r2"));
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&evs, "stdout", "eof\n['r1', 'r2'] search_records\n");
    cr_assert_eq(ts_events_count(&evs, "input_request"), 0);
    ts_events_dispose(&evs);
    free(ctx);
}

Test(code_mode, a_caller_that_disconnects_after_a_tool_call_resumes_and_answers)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = tools_body(ctx, "print(get_weather(city='Lima'))");
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    ts_events_t evs = {0}, rest = {0};
    char exec_id[64], path[256], header[64];
    size_t i;
    ts_stream_t *s = open_until_call(body, &evs, &i, exec_id, sizeof(exec_id), deadline);
    long long before_call = evs.v[i].id - 1;

    json_decref(body);
    ts_stream_close(s);
    ts_sleep_ms(300);
    json_t *ex = xh_execution(port(), exec_id);
    cr_assert_str_eq(xh_str(ex, "state"), "running", "the run waits for its tool, caller or not");
    json_decref(ex);

    /* back, from just before the call: the tool_call is replayed, and answering it finishes the run */
    snprintf(path, sizeof(path), "/code/executions/%s/events", exec_id);
    snprintf(header, sizeof(header), "Last-Event-ID: %lld", before_call);
    const char *headers[] = {header, NULL};
    char err[256] = "";
    s = ts_stream_open(port(), "GET", path, headers, NULL, deadline, err);
    cr_assert_not_null(s, "GET %s: %s", path, err);
    cr_assert_eq(ts_stream_response(s)->status, 200);
    size_t k = xh_wait_event(s, &rest, "tool_call", 0, deadline);
    cr_assert_eq(rest.v[0].id, before_call + 1, "the resumed stream starts right after Last-Event-ID");
    cr_assert_str_eq(rest.v[k].data, evs.v[i].data, "the replayed tool_call is the one first sent");
    answer_ok(exec_id, &rest.v[k], json_string("fog"));
    ts_stream_collect(s, deadline, 0, &rest);
    ts_stream_close(s);
    cr_assert(rest.ended, "the resumed stream ends with the run");
    cr_assert_eq(ts_events_count(&rest, "execution_complete"), 1);
    E2E_ASSERT_TEXT(&rest, "stdout", "fog\n");
    ts_events_dispose(&evs);
    ts_events_dispose(&rest);
    free(ctx);
}

Test(code_mode, the_run_timeout_covers_a_call_that_waits_and_the_context_keeps_its_state)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    ts_events_t evs = {0};
    xh_run_ok(port(), ctx, "kept = 6", &evs);
    ts_events_dispose(&evs);

    /* an async cell waiting on two calls; the stdin timeout (300 ms) is no bound on tool calls, the run's (2 s) is */
    json_t *body = tools_body(ctx, "import asyncio\nawait asyncio.gather(get_weather(city='A'), get_weather(city='B'))");
    json_object_set_new(body, "timeout", json_integer(2000));
    json_object_set_new(body, "stdin_timeout", json_integer(300));
    int64_t t0 = ts_now_ms(), deadline = t0 + XH_RUN_MS;
    char exec_id[64];
    size_t i;
    ts_stream_t *s = open_until_call(body, &evs, &i, exec_id, sizeof(exec_id), deadline);
    json_decref(body);
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    const ts_event_t *err = xh_error_event(&evs, "TimeoutError");
    cr_assert(strstr(err->data, "2000 ms") != NULL, "%s", err->data);
    cr_assert_eq(ts_events_count(&evs, "error"), 1);
    cr_assert_eq(xh_status_count(&evs, "restarting"), 0, "a wait for tools is interruptible: no restart");
    cr_assert(evs.end_ms - t0 >= 1900, "the run ended after %lld ms, before its timeout", (long long)(evs.end_ms - t0));

    /* the call is withdrawn */
    ts_response_t r;
    answer(exec_id, xh_str(evs.v[i].json, "id"), json_null(), NULL, &r);
    E2E_ASSERT_ERROR(&r, 409, "TOOL_CALL_CLOSED");
    ts_response_dispose(&r);
    ts_events_dispose(&evs);

    xh_run_ok(port(), ctx, "print(kept * 7)", &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "42\n");
    ts_events_dispose(&evs);
    free(ctx);
}

Test(code_mode, unknown_call_ids_are_404_second_answers_409_and_bad_requests_400)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = tools_body(ctx, "print(get_weather(city='Bern'))");
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    ts_events_t evs = {0};
    char exec_id[64], path[256], call[64];
    size_t i;
    ts_stream_t *s = open_until_call(body, &evs, &i, exec_id, sizeof(exec_id), deadline);
    ts_response_t r;

    snprintf(call, sizeof(call), "%s", xh_str(evs.v[i].json, "id")); /* kept after the events go */

    json_decref(body);
    answer(exec_id, "00000000-0000-4000-8000-000000000000", json_null(), NULL, &r);
    E2E_ASSERT_ERROR(&r, 404, "TOOL_CALL_NOT_FOUND");
    ts_response_dispose(&r);
    answer("00000000-0000-4000-8000-000000000000", call, json_null(), NULL, &r);
    E2E_ASSERT_ERROR(&r, 404, "EXECUTION_NOT_FOUND");
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "/code/executions/%s/tool_results", exec_id);
    json_t *both = json_pack("{s:s, s:i, s:s}", "id", call, "result", 1, "error", "x");
    ts_post_json(port(), path, NULL, both, &r);
    json_decref(both);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
    ts_response_dispose(&r);

    answer(exec_id, call, json_string("cold"), NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_TEXT(&evs, "stdout", "cold\n");
    ts_events_dispose(&evs);
    /* the run has ended (its stream is complete): a second answer is still "answered", not "closed", and an id the
     * run never emitted still unknown */
    answer(exec_id, call, json_string("warm"), NULL, &r);
    E2E_ASSERT_ERROR(&r, 409, "TOOL_CALL_ANSWERED");
    ts_response_dispose(&r);
    answer(exec_id, "00000000-0000-4000-8000-000000000000", json_null(), NULL, &r);
    E2E_ASSERT_ERROR(&r, 404, "TOOL_CALL_NOT_FOUND");
    ts_response_dispose(&r);

    /* declarations are checked before anything runs */
    body = xh_body(ctx, "1");
    json_object_set_new(body, "tools", json_loads("[{\"name\": \"a-b\"}, {\"name\": \"a_b\"}]", 0, NULL));
    ts_post_json(port(), "/code", NULL, body, &r);
    json_decref(body);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
    cr_assert(strstr(r.body, "a_b()") != NULL, "the collision is named: %s", r.body);
    ts_response_dispose(&r);
    body = xh_body(NULL, "echo hi");
    json_object_set_new(body, "tools", json_loads(TOOLS, 0, NULL));
    ts_post_json(port(), "/code", NULL, body, &r);
    json_decref(body);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
    ts_response_dispose(&r);
    free(ctx);
}
