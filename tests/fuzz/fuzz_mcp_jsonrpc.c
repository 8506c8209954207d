/* tests/fuzz/fuzz_mcp_jsonrpc.c: the MCP door's pure parts on any bytes: JSON-RPC parsing, header checks (against headers
 * that mirror the body too), tool arguments, results, errors and text results quoting what a client sent. */
#include <jansson.h>
#include "fuzz.h"
#include "core/auth.h"
#include "wire/alloc.h"
#include "mcp/jsonrpc.h"
#include "mcp/output.h"
#include "mcp/revision.h"
#include "mcp/tools.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_global_init();
    return 0;
}

/* What a parsed message promises its dispatcher. */
static void check_message(const gw_mcp_message_t *msg)
{
    switch (msg->kind) {
    case GW_MCP_REQUEST:
        FUZZ_CHECK(json_is_string(msg->id) || json_is_integer(msg->id), "a request without a usable id");
        FUZZ_CHECK(msg->method != NULL && msg->method[0] != '\0', "a request without a method");
        break;
    case GW_MCP_NOTIFICATION:
        FUZZ_CHECK(msg->id == NULL && msg->method != NULL, "a notification with an id or without a method");
        break;
    case GW_MCP_RESPONSE:
        FUZZ_CHECK(msg->id != NULL && msg->method == NULL, "a response without an id, or with a method");
        break;
    }
}

static int same(const char *header, size_t len, const char *value)
{
    return header != NULL && value != NULL && len == strlen(value) && memcmp(header, value, len) == 0;
}

/* The check on one set of headers: an error is a JSON-RPC error with the request's id and HTTP 400, a pass is 200 with
 * version and method headers that are the body's. */
static void check_headers(const gw_mcp_headers_t *h, const gw_mcp_message_t *msg)
{
    json_t *meta = json_object_get(msg->params, "_meta"), *error;
    int status = 0;

    if ((error = gw_mcp_stateless_check(h, msg, &status)) != NULL) {
        FUZZ_CHECK(status == 400 || status == 200, "status %d", status);
        FUZZ_CHECK(json_is_integer(json_object_get(json_object_get(error, "error"), "code")), "an error without a code");
        FUZZ_CHECK(json_equal(json_object_get(error, "id"), msg->id), "an error without the request's id");
        json_decref(error);
    } else {
        FUZZ_CHECK(status == 200, "a pass with status %d", status);
        FUZZ_CHECK(same(h->version, h->version_len, json_string_value(json_object_get(meta, GW_MCP_META_VERSION))) &&
                       same(h->method, h->method_len, msg->method),
                   "a pass with headers that are not the body's");
    }
}

/*
 * Revision 2026-07-28's checks on a request: under headers cut from the input's bytes, and under headers that mirror the
 * body but for one (picked by the input's length) that gets the input's last third, bytes that need not be UTF-8; a
 * stamped result gets its resultType.
 */
static void exercise_revision(const gw_mcp_message_t *msg, const char *bytes, size_t size)
{
    gw_mcp_headers_t h = {bytes, bytes + size / 3, bytes + 2 * (size / 3), size / 3, size / 3, size - 2 * (size / 3)};
    const char *version = json_string_value(json_object_get(json_object_get(msg->params, "_meta"), GW_MCP_META_VERSION));
    const char *name = json_string_value(json_object_get(msg->params, "name"));
    json_t *result;

    gw_mcp_is_stateless(&h, msg);
    if (msg->kind != GW_MCP_REQUEST)
        return;
    check_headers(&h, msg);
    const gw_mcp_headers_t body = {
        version, msg->method, name, version != NULL ? strlen(version) : 0, strlen(msg->method), name != NULL ? strlen(name) : 0};
    gw_mcp_headers_t mirror = body;
    switch (size % 3) {
    case 0:
        mirror.version = h.name, mirror.version_len = h.name_len;
        break;
    case 1:
        mirror.method = h.name, mirror.method_len = h.name_len;
        break;
    default:
        mirror.name = h.name, mirror.name_len = h.name_len;
        break;
    }
    check_headers(&mirror, msg);
    /* headers the body names itself (params._headers: version, method, name), such as a Base64 sentinel in Mcp-Name, which
     * the input's last third cannot be: it ends with the body's '}' */
    json_t *given = json_object_get(msg->params, "_headers"), *v;
    if (json_is_object(given)) {
        gw_mcp_headers_t named = body;
        if (json_is_string(v = json_object_get(given, "version")))
            named.version = json_string_value(v), named.version_len = json_string_length(v);
        if (json_is_string(v = json_object_get(given, "method")))
            named.method = json_string_value(v), named.method_len = json_string_length(v);
        if (json_is_string(v = json_object_get(given, "name")))
            named.name = json_string_value(v), named.name_len = json_string_length(v);
        check_headers(&named, msg);
    }
    result = gw_mcp_result(msg->id, json_object());
    gw_mcp_stateless_stamp(result);
    FUZZ_CHECK(json_is_string(json_object_get(json_object_get(result, "result"), "resultType")), "a stamp without resultType");
    json_decref(result);
}

/* The tool checks and the result builder on whatever the message carries: none may crash, and a result is JSON. */
static void exercise_tools(json_t *root)
{
    json_t *params = json_object_get(root, "params"), *args = json_object_get(params, "arguments"), *result;
    gw_mcp_run_args_t a;
    gw_mcp_output_t out;
    char why[256];
    size_t i;

    if (gw_mcp_run_code_args(args, 86400000, &a, why, sizeof(why)) == 0)
        FUZZ_CHECK(a.code != NULL && a.code[0] != '\0' && a.language != NULL, "run_code accepted without code");
    if (gw_mcp_bash_args(args, 86400000, &a, why, sizeof(why)) == 0)
        FUZZ_CHECK(a.code != NULL || a.restart, "bash accepted without a command or a restart");
    gw_mcp_editor_args(args, why, sizeof(why));
    if (json_is_string(json_object_get(params, "name")))
        gw_mcp_tool_find(json_string_value(json_object_get(params, "name")));
    /* the message's values as a run's events: the budget is small, so that cuts happen */
    gw_mcp_output_init(&out, 64);
    gw_mcp_output_add(&out, root);
    if (json_is_array(json_object_get(root, "events"))) {
        json_t *ev;
        json_array_foreach(json_object_get(root, "events"), i, ev) gw_mcp_output_add(&out, ev);
    }
    result = gw_mcp_output_result(&out, "python", 1);
    FUZZ_CHECK(json_is_array(json_object_get(result, "content")), "a result without content");
    FUZZ_CHECK(out.used_bytes <= out.max_bytes, "output past its budget: %zu > %zu", out.used_bytes, out.max_bytes);
    json_decref(result);
    gw_mcp_output_dispose(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *copy = fuzz_copy(data, size);
    gw_mcp_message_t msg;
    const char *why = NULL;
    json_t *bad_id = NULL;
    size_t half = size / 2;
    int ret = gw_mcp_message_parse(copy, size, &msg, &why, &bad_id);

    if (ret == 0) {
        char text[256];
        json_t *error;
        check_message(&msg);
        /* the doors quote a method (or a tool's name) cut at 100 bytes: the error is made whatever that cuts */
        snprintf(text, sizeof(text), "Method not found: %.100s", msg.method != NULL ? msg.method : "");
        FUZZ_CHECK((error = gw_mcp_error(msg.id, GW_MCP_METHOD_NOT_FOUND, text)) != NULL, "no error for \"%s\"", text);
        json_decref(error);
        exercise_tools(msg.root);
        exercise_revision(&msg, copy, size);
        gw_mcp_message_dispose(&msg);
    } else {
        FUZZ_CHECK(ret == GW_MCP_PARSE_ERROR || ret == GW_MCP_INVALID_REQUEST, "code %d", ret);
        FUZZ_CHECK(why != NULL, "no reason");
        FUZZ_CHECK(bad_id == NULL || json_is_string(bad_id) || json_is_integer(bad_id), "a named id that is no id");
        json_decref(bad_id);
    }
    /* the header checks on the same bytes: an Accept value, and (core's) a loopback authority */
    FUZZ_CHECK((gw_mcp_accepts(copy, size) & ~(GW_MCP_ACCEPT_JSON | GW_MCP_ACCEPT_SSE)) == 0, "unknown accept flags");
    gw_auth_is_loopback_authority(copy, half);
    gw_mcp_version_supported(copy, size);
    gw_mcp_session_id_valid(copy, size);
    gw_mcp_context_name_valid(copy, size);
    {
        json_t *result = gw_mcp_text_result(copy, size, 1);
        FUZZ_CHECK(json_is_array(json_object_get(result, "content")), "no text result for %zu bytes", size);
        json_decref(result);
    }
    {
        size_t len = 0;
        char *value = gw_mcp_header_value_decode(copy, size, &len);
        FUZZ_CHECK(value == NULL || (len <= size && value[len] == '\0'), "a decoded value longer than its header");
        free(value);
    }
    free(copy);
    return 0;
}
