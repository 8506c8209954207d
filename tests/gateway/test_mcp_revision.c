/* tests/gateway/test_mcp_revision.c: MCP revision 2026-07-28's pure parts: era, header/body checks, errors, names. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "mcp/output.h"
#include "mcp/revision.h"
#include "gw_test.h"

TestSuite(mcp_revision, .init = gw_test_init);

#define META                                                                                                                       \
    "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\",\"io.modelcontextprotocol/clientCapabilities\":{}}"
#define CALL "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\",\"arguments\":{}," META "}}"

static void parse(const char *s, gw_mcp_message_t *msg)
{
    const char *why;
    json_t *bad = NULL;
    char *copy = gw_test_exact_copy(s, strlen(s));

    cr_assert_eq(gw_mcp_message_parse(copy, strlen(s), msg, &why, &bad), 0, "%s: %s", s, why);
    free(copy);
}

static gw_mcp_headers_t headers(const char *version, const char *method, const char *name)
{
    gw_mcp_headers_t h = {
        version, method, name, version ? strlen(version) : 0, method ? strlen(method) : 0, name ? strlen(name) : 0};
    return h;
}

/* Checks `body` under headers; returns the error code (0: passed) and the HTTP status. */
static int check(const char *body, gw_mcp_headers_t h, int *status, char *message, size_t size)
{
    gw_mcp_message_t msg;
    json_t *err;
    int code = 0;

    parse(body, &msg);
    if ((err = gw_mcp_stateless_check(&h, &msg, status)) != NULL) {
        json_t *e = json_object_get(err, "error");
        code = (int)json_integer_value(json_object_get(e, "code"));
        cr_expect(json_equal(json_object_get(err, "id"), msg.id), "the error names the request's id");
        snprintf(message, size, "%s", json_string_value(json_object_get(e, "message")));
        json_decref(err);
    }
    gw_mcp_message_dispose(&msg);
    return code;
}

Test(mcp_revision, era)
{
    gw_mcp_message_t msg;
    gw_mcp_headers_t none = headers(NULL, NULL, NULL);

    parse(CALL, &msg);
    cr_expect(gw_mcp_is_stateless(&none, &msg), "a _meta protocol version claims the stateless revision");
    gw_mcp_message_dispose(&msg);

    parse("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\"}}", &msg);
    cr_expect(!gw_mcp_is_stateless(&none, &msg), "initialize is a session revision's");
    gw_mcp_headers_t old = headers("2025-06-18", NULL, NULL), future = headers("1900-01-01", NULL, NULL);
    cr_expect(!gw_mcp_is_stateless(&old, &msg), "a session revision's header");
    cr_expect(gw_mcp_is_stateless(&future, &msg), "an unknown version is answered by the stateless path (-32022)");
    gw_mcp_message_dispose(&msg);
}

Test(mcp_revision, checks)
{
    char m[400];
    int status;

    cr_expect_eq(check(CALL, headers("2026-07-28", "tools/call", "run_code"), &status, m, sizeof(m)), 0, "%s", m);
    cr_expect_eq(status, 200);
    /* Mcp-Name against params.name, Mcp-Method against method, the version header against _meta */
    cr_expect_eq(check(CALL, headers("2026-07-28", "tools/call", "bash"), &status, m, sizeof(m)), GW_MCP_HEADER_MISMATCH);
    cr_expect_eq(status, 400);
    cr_expect_str_eq(m, "Header mismatch: Mcp-Name header value 'bash' does not match body value 'run_code'");
    cr_expect_eq(check(CALL, headers("2026-07-28", "tools/call", NULL), &status, m, sizeof(m)), GW_MCP_HEADER_MISMATCH,
                 "Mcp-Name is required for tools/call");
    cr_expect_eq(check(CALL, headers("2026-07-28", "tools/list", "run_code"), &status, m, sizeof(m)), GW_MCP_HEADER_MISMATCH);
    cr_expect_eq(check(CALL, headers("2026-07-28", NULL, "run_code"), &status, m, sizeof(m)), GW_MCP_HEADER_MISMATCH);
    cr_expect_eq(check(CALL, headers(NULL, "tools/call", "run_code"), &status, m, sizeof(m)), GW_MCP_HEADER_MISMATCH);
    cr_expect_eq(check(CALL, headers("2025-11-25", "tools/call", "run_code"), &status, m, sizeof(m)), GW_MCP_HEADER_MISMATCH);
    /* the Base64 sentinel is decoded before the comparison: "run_code" */
    cr_expect_eq(check(CALL, headers("2026-07-28", "tools/call", "=?base64?cnVuX2NvZGU=?="), &status, m, sizeof(m)), 0, "%s", m);
    cr_expect_eq(check(CALL, headers("2026-07-28", "tools/call", "=?base64?cnVuX2NvZGX=?="), &status, m, sizeof(m)),
                 GW_MCP_HEADER_MISMATCH);
    cr_expect_eq(check(CALL, headers("2026-07-28", "tools/call", "=?base64?!!?="), &status, m, sizeof(m)), GW_MCP_HEADER_MISMATCH);
    /* methods without Mcp-Name need none */
    cr_expect_eq(check("{\"jsonrpc\":\"2.0\",\"id\":\"d\",\"method\":\"server/discover\",\"params\":{" META "}}",
                       headers("2026-07-28", "server/discover", NULL), &status, m, sizeof(m)),
                 0, "%s", m);
    /* no clientCapabilities: invalid params */
    cr_expect_eq(check("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{\"io.modelcontextprotocol/"
                       "protocolVersion\":\"2026-07-28\"}}}",
                       headers("2026-07-28", "tools/list", NULL), &status, m, sizeof(m)),
                 GW_MCP_INVALID_PARAMS);
    /* no _meta at all under the revision's header: the body does not match it */
    cr_expect_eq(check("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}", headers("2026-07-28", "tools/list", NULL),
                       &status, m, sizeof(m)),
                 GW_MCP_HEADER_MISMATCH);
}

/* A header that is no UTF-8, or a body value quoted cut inside a character, still makes a mismatch an error, never a pass
 * (jansson refused the message, gw_mcp_error returned NULL, and the check said the request passed, with status 400). */
Test(mcp_revision, mismatches_quoting_bytes_that_are_no_utf8_are_errors)
{
    /* a name of 99 ASCII bytes, then "\u00e9" (2 bytes): '%.100s' cuts the character in half */
    char long_name[128], body[512], m[400];
    int status;

    memset(long_name, 'n', 99);
    memcpy(long_name + 99, "\xc3\xa9", 3);
    snprintf(body, sizeof(body), "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\"," META "}}",
             long_name);
    cr_expect_eq(check(CALL, headers("2026-07-28", "tools/c\xffll", "run_code"), &status, m, sizeof(m)), GW_MCP_HEADER_MISMATCH,
                 "an Mcp-Method header with a byte 0xff passed");
    cr_expect_eq(status, 400);
    cr_expect_str_eq(m, "Header mismatch: Mcp-Method header value 'tools/c\xef\xbf\xbdll' does not match body value 'tools/call'");
    cr_expect_eq(check(CALL, headers("2026-07-\xe2\x82", "tools/call", "run_code"), &status, m, sizeof(m)), GW_MCP_HEADER_MISMATCH,
                 "a version header cut inside a character passed");
    cr_expect_eq(check(body, headers("2026-07-28", "tools/call", "run_code"), &status, m, sizeof(m)), GW_MCP_HEADER_MISMATCH,
                 "a name quoted cut inside a character passed");
    cr_expect_eq(status, 400);
}

/* The doors quote a client's method or tool name with '%.100s' (routes.c, stateless.c, call.c): an error and a tool result
 * are still made when that cuts a character (a NULL one was sent as a crash, json_typeof(NULL) in gw_send_json). */
Test(mcp_revision, errors_and_text_results_of_text_that_is_no_utf8)
{
    char text[256], method[128];
    json_t *id = json_integer(3), *err, *res;

    memset(method, 'm', 99);
    memcpy(method + 99, "\xc3\xa9", 3);
    snprintf(text, sizeof(text), "Method not found: %.100s", method);
    cr_assert_not_null(err = gw_mcp_error(id, GW_MCP_METHOD_NOT_FOUND, text));
    const char *message = json_string_value(json_object_get(json_object_get(err, "error"), "message"));
    cr_assert_not_null(message);
    cr_expect_eq(strlen(message), strlen("Method not found: ") + 99 + 3, "the half character became U+FFFD");
    cr_expect_eq(memcmp(message + strlen(message) - 3, "\xef\xbf\xbd", 3), 0);
    json_decref(err);
    cr_assert_not_null(res = gw_mcp_text_result(text, strlen(text), 1));
    cr_expect(json_is_string(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text")));
    json_decref(res);
    /* valid text (NUL bytes too) is kept as it is */
    cr_assert_not_null(res = gw_mcp_text_result("a\0\xc3\xa9", 4, 0));
    cr_expect_eq(json_string_length(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text")), 4);
    json_decref(res);
    json_decref(id);
}

Test(mcp_revision, unsupported_version)
{
    const char *body = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"server/discover\",\"params\":{\"_meta\":{\"io."
                       "modelcontextprotocol/protocolVersion\":\"1900-01-01\",\"io.modelcontextprotocol/clientCapabilities\":{}}}}";
    gw_mcp_headers_t h = headers("1900-01-01", "server/discover", NULL);
    gw_mcp_message_t msg;
    json_t *err, *data;
    int status;

    parse(body, &msg);
    cr_assert_not_null(err = gw_mcp_stateless_check(&h, &msg, &status));
    cr_expect_eq(status, 400);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(err, "error"), "code")), -32022);
    data = json_object_get(json_object_get(err, "error"), "data");
    cr_expect_str_eq(json_string_value(json_object_get(data, "requested")), "1900-01-01");
    cr_expect_str_eq(json_string_value(json_array_get(json_object_get(data, "supported"), 0)), "2026-07-28");
    cr_expect_eq(json_array_size(json_object_get(data, "supported")), 3);
    json_decref(err);
    gw_mcp_message_dispose(&msg);

    /* a header of bytes that are not UTF-8 still gets the list */
    err = gw_mcp_unsupported_version(NULL, "\xff\xfe", 2);
    data = json_object_get(json_object_get(err, "error"), "data");
    cr_expect_eq(json_array_size(json_object_get(data, "supported")), 3);
    cr_expect_str_eq(json_string_value(json_object_get(data, "requested")), "(not UTF-8)");
    json_decref(err);
}

static int decodes(const char *in, const char *want, size_t want_len)
{
    size_t len = 0;
    char *copy = gw_test_exact_copy(in, strlen(in)), *out = gw_mcp_header_value_decode(copy, strlen(in), &len);
    int ok = want == NULL ? out == NULL : out != NULL && len == want_len && memcmp(out, want, len) == 0;

    free(out);
    free(copy);
    return ok;
}

Test(mcp_revision, header_values)
{
    cr_expect(decodes("us-west1", "us-west1", 8));
    cr_expect(decodes("=?base64?SGVsbG8sIOS4lueVjA==?=", "Hello, \xe4\xb8\x96\xe7\x95\x8c", 13));
    cr_expect(decodes("=?base64?IHBhZGRlZCA=?=", " padded ", 8));
    cr_expect(decodes("=?base64?bGluZTEKbGluZTI=?=", "line1\nline2", 11));
    cr_expect(decodes("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=", "=?base64?literal?=", 18));
    cr_expect(decodes("=?base64?\?=", "", 0)); /* (a backslash: no trigraph) */
    cr_expect(decodes("=?base64?QQ?=", "A", 1), "padding is optional");
    cr_expect(decodes("=?base64?Q?=", NULL, 0), "one digit is no byte");
    cr_expect(decodes("=?base64?QQ#=?=", NULL, 0));
    cr_expect(decodes("=?base64?QR==?=", NULL, 0), "non-zero unused bits: not canonical");
    cr_expect(decodes("caf\xc3\xa9", NULL, 0), "a raw non-ASCII value must be encoded");
    cr_expect(decodes("a\rb", NULL, 0));
    cr_expect(decodes("a\tb", "a\tb", 3));
}

Test(mcp_revision, context_names)
{
    cr_expect(gw_mcp_context_name_valid("default", 7));
    cr_expect(gw_mcp_context_name_valid("a.b_c-D9", 8));
    cr_expect(!gw_mcp_context_name_valid("", 0));
    cr_expect(!gw_mcp_context_name_valid("a b", 3));
    cr_expect(!gw_mcp_context_name_valid("../x", 4));
    char long_name[GW_MCP_CONTEXT_NAME_MAX + 2];
    memset(long_name, 'x', sizeof(long_name));
    cr_expect(gw_mcp_context_name_valid(long_name, GW_MCP_CONTEXT_NAME_MAX));
    cr_expect(!gw_mcp_context_name_valid(long_name, GW_MCP_CONTEXT_NAME_MAX + 1));
}

Test(mcp_revision, stamp)
{
    json_t *id = json_integer(4), *result = gw_mcp_result(id, json_pack("{s:[]}", "content"));
    json_t *error = gw_mcp_error(id, GW_MCP_INVALID_PARAMS, "no"), *copy = json_deep_copy(error);

    gw_mcp_stateless_stamp(result);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(result, "result"), "resultType")), "complete");
    cr_expect_str_eq(
        json_string_value(json_object_get(
            json_object_get(json_object_get(json_object_get(result, "result"), "_meta"), GW_MCP_META_SERVER_INFO), "name")),
        "kgate");
    gw_mcp_stateless_stamp(error);
    cr_expect(json_equal(error, copy), "an error is left as it is");
    json_decref(result);
    json_decref(error);
    json_decref(copy);
    json_decref(id);
}
