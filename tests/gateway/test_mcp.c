/* tests/gateway/test_mcp.c: the MCP door's pure parts: JSON-RPC parsing, header checks, tool arguments, results. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "mcp/jsonrpc.h"
#include "mcp/output.h"
#include "mcp/tools.h"
#include "gw_test.h"

TestSuite(mcp, .init = gw_test_init);

/* Parses `s` from an exact-size copy (ASan catches a read past its end); returns the code. */
static int parse(const char *s, gw_mcp_message_t *msg, const char **why, json_t **bad_id)
{
    char *copy = gw_test_exact_copy(s, strlen(s));
    int ret = gw_mcp_message_parse(copy, strlen(s), msg, why, bad_id);
    free(copy);
    return ret;
}

Test(mcp, message_kinds)
{
    gw_mcp_message_t msg;
    const char *why;
    json_t *bad;

    cr_assert_eq(parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", &msg, &why, &bad), 0);
    cr_expect_eq(msg.kind, GW_MCP_REQUEST);
    cr_expect_str_eq(msg.method, "tools/list");
    cr_expect_eq(json_integer_value(msg.id), 1);
    cr_expect_null(msg.params);
    gw_mcp_message_dispose(&msg);

    cr_assert_eq(
        parse("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"a\"}}", &msg, &why, &bad),
        0);
    cr_expect_eq(msg.kind, GW_MCP_NOTIFICATION);
    cr_expect_null(msg.id);
    cr_expect(json_is_object(msg.params));
    gw_mcp_message_dispose(&msg);

    cr_assert_eq(parse("{\"jsonrpc\":\"2.0\",\"id\":\"x\",\"result\":{}}", &msg, &why, &bad), 0);
    cr_expect_eq(msg.kind, GW_MCP_RESPONSE);
    cr_expect_str_eq(json_string_value(msg.id), "x");
    gw_mcp_message_dispose(&msg);
}

Test(mcp, message_errors)
{
    static const struct {
        const char *body;
        int code;
        int has_id;
    } cases[] = {
        {"", GW_MCP_PARSE_ERROR, 0},
        {"{\"jsonrpc\":", GW_MCP_PARSE_ERROR, 0},
        {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", GW_MCP_INVALID_REQUEST, 0},
        {"42", GW_MCP_INVALID_REQUEST, 0},
        {"{\"id\":1,\"method\":\"ping\"}", GW_MCP_INVALID_REQUEST, 1},
        {"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", GW_MCP_INVALID_REQUEST, 1},
        {"{\"jsonrpc\":\"2.0\\u0000x\",\"id\":1,\"method\":\"ping\"}", GW_MCP_INVALID_REQUEST, 1},
        {"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", GW_MCP_INVALID_REQUEST, 0},
        {"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", GW_MCP_INVALID_REQUEST, 0},
        /* valid JSON whose id jansson cannot hold: refused as a request, not as a body that fails to parse */
        {"{\"jsonrpc\":\"2.0\",\"id\":18446744073709551616,\"method\":\"ping\"}", GW_MCP_INVALID_REQUEST, 0},
        {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"n\":-99999999999999999999}}", GW_MCP_INVALID_REQUEST, 0},
        {"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":3}", GW_MCP_INVALID_REQUEST, 1},
        {"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"\"}", GW_MCP_INVALID_REQUEST, 1},
        {"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"pi\\u0000ng\"}", GW_MCP_INVALID_REQUEST, 1},
        {"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"result\":{}}", GW_MCP_INVALID_REQUEST, 1},
        {"{\"jsonrpc\":\"2.0\",\"id\":7}", GW_MCP_INVALID_REQUEST, 1},
        {"{\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{},\"error\":{}}", GW_MCP_INVALID_REQUEST, 1},
        {"{\"jsonrpc\":\"2.0\",\"result\":{}}", GW_MCP_INVALID_REQUEST, 0},
    };
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        gw_mcp_message_t msg;
        const char *why = NULL;
        json_t *bad = NULL;
        int ret = parse(cases[i].body, &msg, &why, &bad);
        cr_expect_eq(ret, cases[i].code, "%s: %d, want %d", cases[i].body, ret, cases[i].code);
        cr_expect_not_null(why, "%s: no reason", cases[i].body);
        cr_expect_eq(bad != NULL, cases[i].has_id, "%s: id named %d", cases[i].body, bad != NULL);
        cr_expect_null(msg.root);
        json_decref(bad);
    }
}

/* Every split of a valid message is refused without a crash (the body arrives whole, but its length is the caller's). */
Test(mcp, message_every_prefix)
{
    const char *s = "{\"jsonrpc\":\"2.0\",\"id\":\"r\",\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\"}}";
    for (size_t n = 0; n < strlen(s); ++n) {
        gw_mcp_message_t msg;
        const char *why;
        json_t *bad;
        char *copy = gw_test_exact_copy(s, n);
        cr_expect_neq(gw_mcp_message_parse(copy, n, &msg, &why, &bad), 0, "prefix of %zu bytes accepted", n);
        json_decref(bad);
        free(copy);
    }
}

Test(mcp, responses)
{
    json_t *id = json_integer(3), *m;
    char *s;

    m = gw_mcp_result(id, json_object());
    s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    cr_expect_str_eq(s, "{\"id\":3,\"jsonrpc\":\"2.0\",\"result\":{}}");
    free(s);
    json_decref(m);
    m = gw_mcp_error(NULL, GW_MCP_METHOD_NOT_FOUND, "nope");
    s = json_dumps(m, JSON_COMPACT | JSON_SORT_KEYS);
    cr_expect_str_eq(s, "{\"error\":{\"code\":-32601,\"message\":\"nope\"},\"id\":null,\"jsonrpc\":\"2.0\"}");
    free(s);
    json_decref(m);
    json_decref(id);
}

Test(mcp, versions)
{
    cr_expect_str_eq(gw_mcp_negotiate_version("2025-06-18"), "2025-06-18");
    cr_expect_str_eq(gw_mcp_negotiate_version("2025-11-25"), "2025-11-25");
    cr_expect_str_eq(gw_mcp_negotiate_version("2024-11-05"), "2025-11-25");
    cr_expect_str_eq(gw_mcp_negotiate_version(NULL), "2025-11-25");
    cr_expect(gw_mcp_version_supported("2025-06-18", 10));
    cr_expect(!gw_mcp_version_supported("2025-03-26", 10));
    cr_expect(!gw_mcp_version_supported("2025-06-1", 9));
}

#define ACCEPTS(s) gw_mcp_accepts(s, strlen(s))

Test(mcp, accept_header)
{
    cr_expect_eq(gw_mcp_accepts(NULL, 0), GW_MCP_ACCEPT_JSON | GW_MCP_ACCEPT_SSE);
    cr_expect_eq(ACCEPTS("application/json, text/event-stream"), GW_MCP_ACCEPT_JSON | GW_MCP_ACCEPT_SSE);
    cr_expect_eq(ACCEPTS("text/event-stream"), GW_MCP_ACCEPT_SSE);
    cr_expect_eq(ACCEPTS("Application/JSON;q=0.9"), GW_MCP_ACCEPT_JSON);
    cr_expect_eq(ACCEPTS("*/*"), GW_MCP_ACCEPT_JSON | GW_MCP_ACCEPT_SSE);
    cr_expect_eq(ACCEPTS("text/html, image/png"), 0);
    cr_expect_eq(ACCEPTS(""), 0);
    cr_expect_eq(ACCEPTS(" , ,text/*"), GW_MCP_ACCEPT_SSE);
}

Test(mcp, session_ids)
{
    cr_expect(gw_mcp_session_id_valid("0123456789abcdef0123456789abcdef", 32));
    cr_expect(!gw_mcp_session_id_valid("0123456789ABCDEF0123456789abcdef", 32));
    cr_expect(!gw_mcp_session_id_valid("0123456789abcdef0123456789abcde", 31));
}

Test(mcp, tools_list)
{
    json_t *list = gw_mcp_tools_list(1234), *tool, *timeout;
    size_t i;

    cr_assert_eq(json_array_size(json_object_get(list, "tools")), 7);
    json_array_foreach(json_object_get(list, "tools"), i, tool)
    {
        const char *name = json_string_value(json_object_get(tool, "name"));
        cr_expect_neq(gw_mcp_tool_find(name), GW_MCP_TOOL_UNKNOWN, "%s", name);
        cr_expect_str_eq(json_string_value(json_object_get(json_object_get(tool, "inputSchema"), "type")), "object", "%s", name);
        cr_expect_not_null(json_object_get(tool, "description"));
    }
    cr_expect_eq(gw_mcp_tool_find("run_code"), GW_MCP_TOOL_RUN_CODE);
    cr_expect_eq(gw_mcp_tool_find("interrupt"), GW_MCP_TOOL_INTERRUPT);
    cr_expect_eq(gw_mcp_tool_find("restart"), GW_MCP_TOOL_RESTART);
    cr_expect_eq(gw_mcp_tool_find("list_contexts"), GW_MCP_TOOL_LIST_CONTEXTS);
    cr_expect_eq(gw_mcp_tool_find("runcode"), GW_MCP_TOOL_UNKNOWN);
    /* the model reads the cap where it reads the argument */
    timeout = json_object_get(
        json_object_get(json_object_get(json_array_get(json_object_get(list, "tools"), 0), "inputSchema"), "properties"),
        "timeout_ms");
    cr_expect(strstr(json_string_value(json_object_get(timeout, "description")), "The cap is 1234 ms.") != NULL);
    json_decref(list);
}

static json_t *args(const char *s)
{
    json_t *j = json_loads(s, JSON_ALLOW_NUL, NULL);
    cr_assert_not_null(j, "%s", s);
    return j;
}

Test(mcp, run_code_arguments)
{
    gw_mcp_run_args_t a;
    char why[256];
    json_t *j;

    j = args("{\"code\":\"1+1\"}");
    cr_expect_eq(gw_mcp_run_code_args(j, 1000, &a, why, sizeof(why)), 0);
    cr_expect_str_eq(a.code, "1+1");
    cr_expect_str_eq(a.language, "python");
    cr_expect_eq(a.timeout_ms, 0);
    json_decref(j);
    j = args("{\"code\":\"1\",\"language\":\"R\",\"timeout_ms\":1000}");
    cr_expect_eq(gw_mcp_run_code_args(j, 1000, &a, why, sizeof(why)), 0);
    cr_expect_str_eq(a.language, "R");
    cr_expect_eq(a.timeout_ms, 1000);
    cr_expect_eq(a.asked_timeout_ms, 0);
    json_decref(j);
    /* over the cap: capped, and the asked value kept for the result to say so */
    j = args("{\"code\":\"1\",\"timeout_ms\":99999999999}");
    cr_expect_eq(gw_mcp_run_code_args(j, 1000, &a, why, sizeof(why)), 0);
    cr_expect_eq(a.timeout_ms, 1000);
    cr_expect_eq(a.asked_timeout_ms, UINT_MAX);
    json_decref(j);
    j = args("{\"code\":\"1\",\"timeout_ms\":1001}");
    cr_expect_eq(gw_mcp_run_code_args(j, 1000, &a, why, sizeof(why)), 0);
    cr_expect_eq(a.timeout_ms, 1000);
    cr_expect_eq(a.asked_timeout_ms, 1001);
    json_decref(j);
    static const char *const bad[] = {"{}",
                                      "{\"code\":\"\"}",
                                      "{\"code\":7}",
                                      "{\"code\":\"a\\u0000b\"}",
                                      "{\"code\":\"1\",\"language\":\"\"}",
                                      "{\"code\":\"1\",\"timeout_ms\":0}",
                                      "{\"code\":\"1\",\"timeout_ms\":\"5\"}",
                                      "[]"};
    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        j = args(bad[i]);
        why[0] = '\0';
        cr_expect_eq(gw_mcp_run_code_args(j, 1000, &a, why, sizeof(why)), -1, "%s accepted", bad[i]);
        cr_expect_neq(why[0], '\0', "%s: no reason", bad[i]);
        json_decref(j);
    }
    cr_expect_eq(gw_mcp_run_code_args(NULL, 1000, &a, why, sizeof(why)), -1);
}

Test(mcp, bash_and_editor_arguments)
{
    gw_mcp_run_args_t a;
    char why[256];
    json_t *j;

    j = args("{\"command\":\"ls\"}");
    cr_expect_eq(gw_mcp_bash_args(j, 1000, &a, why, sizeof(why)), 0);
    cr_expect_str_eq(a.code, "ls");
    cr_expect_eq(a.restart, 0);
    json_decref(j);
    j = args("{\"restart\":true}");
    cr_expect_eq(gw_mcp_bash_args(j, 1000, &a, why, sizeof(why)), 0);
    cr_expect_null(a.code);
    cr_expect_eq(a.restart, 1);
    json_decref(j);
    static const char *const bad_bash[] = {"{}", "{\"command\":\"\"}", "{\"restart\":\"yes\",\"command\":\"ls\"}",
                                           "{\"command\":\"l\\u0000s\"}"};
    for (size_t i = 0; i != sizeof(bad_bash) / sizeof(bad_bash[0]); ++i) {
        j = args(bad_bash[i]);
        cr_expect_eq(gw_mcp_bash_args(j, 1000, &a, why, sizeof(why)), -1, "%s accepted", bad_bash[i]);
        json_decref(j);
    }
    j = args("{\"command\":\"view\",\"path\":\"a\"}");
    cr_expect_eq(gw_mcp_editor_args(j, why, sizeof(why)), 0);
    json_decref(j);
    static const char *const bad_editor[] = {"{\"command\":\"view\"}", "{\"path\":\"a\"}",
                                             "{\"command\":\"delete\",\"path\":\"a\"}", "{\"command\":\"view\",\"path\":3}"};
    for (size_t i = 0; i != sizeof(bad_editor) / sizeof(bad_editor[0]); ++i) {
        j = args(bad_editor[i]);
        cr_expect_eq(gw_mcp_editor_args(j, why, sizeof(why)), -1, "%s accepted", bad_editor[i]);
        json_decref(j);
    }
}

static void feed(gw_mcp_output_t *out, const char *event)
{
    json_t *j = args(event);
    gw_mcp_output_add(out, j);
    json_decref(j);
}

Test(mcp, output_in_order)
{
    gw_mcp_output_t out;
    json_t *r, *content;

    gw_mcp_output_init(&out, 1 << 20);
    feed(&out, "{\"type\":\"init\",\"text\":\"ctx\"}");
    feed(&out, "{\"type\":\"execution_count\",\"execution_count\":4}");
    feed(&out, "{\"type\":\"stdout\",\"text\":\"a\\n\"}");
    feed(&out, "{\"type\":\"stderr\",\"text\":\"warn\\n\"}");
    feed(&out, "{\"type\":\"result\",\"results\":{\"text/plain\":\"<Figure>\",\"text\":\"<Figure>\",\"image/png\":\"iVBORw0=\"}}");
    feed(&out, "{\"type\":\"stdout\",\"text\":\"b\"}");
    feed(&out, "{\"type\":\"error\",\"error\":{\"ename\":\"ValueError\",\"evalue\":\"bad\",\"traceback\":[\"Traceback\","
               "\"ValueError: bad\"]}}");
    cr_expect_eq(out.outputs, 5);
    r = gw_mcp_output_result(&out, "python", 1);
    content = json_object_get(r, "content");
    cr_assert_eq(json_array_size(content), 2);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(content, 0), "text")),
                     "a\nwarn\n<Figure>\nb\nTraceback\nValueError: bad\n");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(content, 1), "type")), "image");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(content, 1), "mimeType")), "image/png");
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(content, 1), "data")), "iVBORw0=");
    cr_expect(json_is_true(json_object_get(r, "isError")));
    json_t *sc = json_object_get(r, "structuredContent");
    cr_expect_str_eq(json_string_value(json_object_get(sc, "stdout")), "a\nb");
    cr_expect_str_eq(json_string_value(json_object_get(sc, "stderr")), "warn\n");
    cr_expect_eq(json_integer_value(json_object_get(sc, "execution_count")), 4);
    cr_expect_null(json_object_get(json_array_get(json_object_get(sc, "results"), 0), "text"), "the execd duplicate stays out");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(sc, "error"), "ename")), "ValueError");
    cr_expect_null(json_object_get(sc, "truncated"));
    json_decref(r);
    gw_mcp_output_dispose(&out);
}

Test(mcp, the_runs_own_drops_are_counted_in_the_note_and_the_structured_result)
{
    gw_mcp_output_t out;
    json_t *r, *tr;
    const char *text;

    /* the run's output limit is the call's budget: 100 MB printed reaches this budget as 1 MiB, the rest counted by the run */
    gw_mcp_output_init(&out, 10);
    feed(&out, "{\"type\":\"stdout\",\"text\":\"0123456789\"}");
    feed(&out, "{\"type\":\"status\",\"text\":\"output_truncated\"}");
    feed(&out, "{\"type\":\"execution_complete\",\"dropped\":{\"output_bytes\":98951424,\"results\":2,\"messages\":1}}");
    r = gw_mcp_output_result(&out, "python", 1);
    text = json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
    cr_expect_str_eq(text, "0123456789\n[kgate: output truncated: 98951424 bytes of text and 2 results dropped beyond 10 bytes per "
                           "call, and 1 kernel message over the message cap (--max-message-bytes), whole]\n");
    tr = json_object_get(json_object_get(r, "structuredContent"), "truncated");
    cr_expect_eq(json_integer_value(json_object_get(tr, "dropped_bytes")), 98951424);
    cr_expect_eq(json_integer_value(json_object_get(tr, "dropped_results")), 2);
    cr_expect_eq(json_integer_value(json_object_get(tr, "dropped_messages")), 1);
    cr_expect(json_is_true(json_object_get(tr, "dropped_by_run")));
    json_decref(r);
    gw_mcp_output_dispose(&out);

    /* this budget's drops and the run's add up */
    gw_mcp_output_init(&out, 4);
    feed(&out, "{\"type\":\"stdout\",\"text\":\"abcdef\"}");
    feed(&out, "{\"type\":\"execution_complete\",\"dropped\":{\"output_bytes\":5,\"results\":0,\"messages\":0}}");
    r = gw_mcp_output_result(&out, "python", 1);
    text = json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
    cr_expect_str_eq(text, "abcd\n[kgate: output truncated: 7 bytes of text and 0 results dropped beyond 4 bytes per call]\n");
    json_decref(r);
    gw_mcp_output_dispose(&out);
}

Test(mcp, output_budget)
{
    gw_mcp_output_t out;
    json_t *r, *sc;
    const char *text;

    /* 10 bytes: "héllo" is 6, then 4 of "wörld" fit: "w", "ö" (2 bytes), "r" */
    gw_mcp_output_init(&out, 10);
    feed(&out, "{\"type\":\"stdout\",\"text\":\"h\\u00e9llo\"}");
    feed(&out, "{\"type\":\"stdout\",\"text\":\"w\\u00f6rld\"}");
    feed(&out, "{\"type\":\"result\",\"results\":{\"text/plain\":\"1\"}}");
    r = gw_mcp_output_result(&out, "python", 1);
    text = json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
    cr_expect(strncmp(text, "h\xc3\xa9llow\xc3\xb6r\n[kgate: output truncated: 2 bytes of text and 1 results dropped", 60) == 0,
              "%s", text);
    sc = json_object_get(r, "structuredContent");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(sc, "truncated"), "dropped_bytes")), 2);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(sc, "truncated"), "dropped_results")), 1);
    cr_expect_null(json_object_get(r, "isError"));
    json_decref(r);
    gw_mcp_output_dispose(&out);

    /* a cut inside a character backs off to its first byte */
    gw_mcp_output_init(&out, 2);
    feed(&out, "{\"type\":\"stdout\",\"text\":\"a\\u00e9\"}");
    r = gw_mcp_output_result(&out, "python", 0);
    cr_expect_null(json_object_get(r, "structuredContent"));
    text = json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
    cr_expect(strncmp(text, "a\n[kgate: output truncated: 2 bytes", 35) == 0, "%s", text);
    json_decref(r);
    gw_mcp_output_dispose(&out);

    gw_mcp_output_init(&out, 100);
    r = gw_mcp_output_result(&out, "python", 1);
    cr_expect_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text")), "(no output)");
    json_decref(r);
    gw_mcp_output_dispose(&out);
}

Test(mcp, output_timeout_capped)
{
    gw_mcp_output_t out;
    const char *text;
    json_t *r, *capped;

    gw_mcp_output_init(&out, 100);
    out.timeout_asked_ms = 900000;
    out.timeout_applied_ms = 3000;
    feed(&out, "{\"type\":\"stdout\",\"text\":\"hi\"}");
    r = gw_mcp_output_result(&out, "python", 1);
    text = json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
    cr_expect_str_eq(text, "hi\n[kgate: timeout_ms 900000 is over the server's cap (--max-timeout-ms): the run had 3000 ms]\n");
    capped = json_object_get(json_object_get(r, "structuredContent"), "timeout_capped");
    cr_expect_eq(json_integer_value(json_object_get(capped, "asked_ms")), 900000);
    cr_expect_eq(json_integer_value(json_object_get(capped, "applied_ms")), 3000);
    json_decref(r);
    gw_mcp_output_dispose(&out);
}

Test(mcp, language_arguments)
{
    const char *language;
    char why[256];
    json_t *j;

    cr_expect_eq(gw_mcp_language_args(NULL, &language, why, sizeof(why)), 0);
    cr_expect_str_eq(language, "python");
    j = args("{\"language\":\"bash\"}");
    cr_expect_eq(gw_mcp_language_args(j, &language, why, sizeof(why)), 0);
    cr_expect_str_eq(language, "bash");
    json_decref(j);
    static const char *const bad[] = {"{\"language\":\"\"}", "{\"language\":3}", "{\"language\":\"a\\u0000b\"}", "[]"};
    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        j = args(bad[i]);
        why[0] = '\0';
        cr_expect_eq(gw_mcp_language_args(j, &language, why, sizeof(why)), -1, "%s accepted", bad[i]);
        cr_expect_neq(why[0], '\0', "%s: no reason", bad[i]);
        json_decref(j);
    }
}
