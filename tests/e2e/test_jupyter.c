/* tests/e2e/test_jupyter.c: the Jupyter Server kernels API of the real kgate: REST shapes, tokens, both WebSocket framings
 * byte for byte, routing between sockets, one registry with /code, restart, death, sessions, replay to a returning client.
 * Over 600 lines: every test here speaks through the one WebSocket client of both framings below, kept in one file. */
#include <criterion/criterion.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/api.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/jframe.h"
#include "support/ws_client.h"

#define TOKEN "jupyter-test-token"
#define V1 "v1.kernel.websocket.jupyter.org"
#define WAIT_MS 30000

static ts_gateway_t own;
static const char *const auth[] = {"Authorization: token " TOKEN, NULL};

static void init(void)
{
    static const char *const args[] = {"--access-token", TOKEN, NULL};
    int rc = ts_gateway_start(&own, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .label = "jupyter"});
    cr_assert_eq(rc, 0, "kgate did not start: %s", own.error);
}

static void fini(void)
{
    size_t survivors = 0;
    int rc = ts_gateway_stop(&own, &survivors);
    cr_expect_eq(rc, 0, "kgate did not stop cleanly: %s", own.error);
    cr_expect_eq(survivors, 0, "a descendant of kgate survived it");
}

TestSuite(jupyter, .init = init, .fini = fini, .timeout = 180);

/* A request with the token; returns the status, the response in `out` (dispose it). */
static int request(const char *method, const char *path, const char *body, ts_response_t *out)
{
    return ts_http_request_until(own.port, method, path, auth, body, wsc_now_ms() + WAIT_MS, out);
}

static char *start_kernel(const char *body)
{
    ts_response_t r = {0};
    char *id;

    cr_assert_eq(request("POST", "/api/kernels", body, &r), 201, "%s", r.body);
    cr_assert_not_null(r.json);
    id = strdup(json_string_value(json_object_get(r.json, "id")));
    ts_response_dispose(&r);
    return id;
}

static json_t *get_json(const char *path, int status)
{
    ts_response_t r = {0};
    json_t *json;

    cr_assert_eq(request("GET", path, NULL, &r), status, "GET %s: %s", path, r.body);
    json = json_incref(r.json);
    ts_response_dispose(&r);
    return json;
}

/* Runs `code` in context `id` through execd's POST /code; returns its stdout (free it). */
static char *run_stdout(const char *id, const char *code)
{
    ts_events_t evs = {0};
    ts_response_t r = {0};
    char *out;

    cr_assert_eq(ts_run_code(own.port, auth, id, NULL, code, WAIT_MS, &evs, &r), 200, "%s", r.body);
    ts_response_dispose(&r);
    out = ts_events_text(&evs, "stdout");
    ts_events_dispose(&evs);
    return out;
}

/* ---- WebSocket client side of both framings ---- */

typedef struct st_jws_t {
    wsc_t ws;
    int v1;
} jws_t;

static int jws_open_at(jws_t *c, unsigned short port, const char *kernel_id, int v1, const char *query)
{
    char path[256];
    const char *headers[3] = {"Sec-WebSocket-Protocol: " V1, NULL, NULL};

    memset(c, 0, sizeof(*c));
    c->v1 = v1;
    snprintf(path, sizeof(path), "/api/kernels/%s/channels%s", kernel_id, query != NULL ? query : "?token=" TOKEN);
    return wsc_connect(&c->ws, port, path, v1 ? headers : NULL, wsc_now_ms() + 10000);
}

static int jws_open(jws_t *c, const char *kernel_id, int v1, const char *query)
{
    return jws_open_at(c, own.port, kernel_id, v1, query);
}

/* Sends {header, parent_header, metadata, content} on `channel`; returns the msg_id (static buffer). */
static const char *jws_send(jws_t *c, const char *channel, const char *msg_type, json_t *content, json_t *parent)
{
    static char msg_id[64];
    static unsigned serial;
    json_t *header;
    char *h, *p, *m, *ct;

    snprintf(msg_id, sizeof(msg_id), "raw-client-%d-%u", (int)getpid(), ++serial);
    header = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "msg_id", msg_id, "msg_type", msg_type, "session", "raw-session",
                       "username", "tester", "date", "2026-11-23T00:00:00.000000Z", "version", "5.3");
    if (parent == NULL)
        parent = json_object();
    if (!c->v1) {
        json_t *msg = json_pack("{s:o, s:o, s:{}, s:o, s:s, s:[]}", "header", header, "parent_header", parent, "metadata",
                                "content", content, "channel", channel, "buffers");
        char *text = json_dumps(msg, JSON_COMPACT);
        cr_assert_eq(wsc_send(&c->ws, WSC_TEXT, text, strlen(text)), 0);
        free(text);
        json_decref(msg);
        return msg_id;
    }
    h = json_dumps(header, JSON_COMPACT);
    p = json_dumps(parent, JSON_COMPACT);
    m = strdup("{}");
    ct = json_dumps(content, JSON_COMPACT);
    const char *parts[5] = {channel, h, p, m, ct};
    size_t len;
    uint8_t *buf = ts_jframe_v1(parts, 5, &len);
    cr_assert_eq(wsc_send(&c->ws, WSC_BINARY, buf, len), 0);
    free(buf);
    free(h);
    free(p);
    free(m);
    free(ct);
    json_decref(header);
    json_decref(parent);
    json_decref(content);
    return msg_id;
}

/*
 * Receives one message and checks its framing byte for byte: v1, a binary frame whose offsets table
 * starts right after itself, never decreases and ends at the frame's end, channel then four JSON
 * objects; legacy, a text frame holding one JSON object with header, parent_header, metadata,
 * content, channel and buffers (and msg_id / msg_type copied from the header, as Jupyter Server
 * sends). Returns {"channel", "header", "parent_header", "metadata", "content"}, or NULL on timeout.
 */
static json_t *jws_recv(jws_t *c, int64_t deadline)
{
    wsc_msg_t m;
    json_t *out;

    if (wsc_recv(&c->ws, deadline, &m) != 0)
        return NULL;
    cr_assert_neq(m.opcode, WSC_CLOSE, "the server closed the WebSocket (code %u)", m.close_code);
    if (c->v1) {
        cr_assert_eq(m.opcode, WSC_BINARY, "v1 messages are binary frames");
        cr_assert_geq(m.len, 8);
        uint64_t n = ts_jframe_le64(m.data);
        cr_assert(n >= 6 && n < 1024 && m.len >= 8 * (n + 1), "offset count %llu", (unsigned long long)n);
        uint64_t prev = ts_jframe_le64(m.data + 8);
        cr_assert_eq(prev, 8 * (n + 1), "the channel name starts right after the table");
        const char *names[5] = {"channel", "header", "parent_header", "metadata", "content"};
        out = json_object();
        for (uint64_t i = 1; i != n; ++i) {
            uint64_t end = ts_jframe_le64(m.data + 8 * (i + 1));
            cr_assert(end >= prev && end <= m.len, "offsets never decrease and stay inside the frame");
            if (i == 1) {
                json_object_set_new(out, "channel", json_stringn((const char *)m.data + prev, end - prev));
            } else if (i <= 5) {
                json_error_t err;
                json_t *part = json_loadb((const char *)m.data + prev, end - prev, 0, &err);
                cr_assert(json_is_object(part), "%s is a JSON object: %s", names[i - 1], err.text);
                json_object_set_new(out, names[i - 1], part);
            }
            prev = end;
        }
        cr_assert_eq(prev, m.len, "the last offset is the frame's end");
    } else {
        cr_assert_eq(m.opcode, WSC_TEXT, "legacy messages without buffers are text frames");
        json_error_t err;
        out = json_loadb((const char *)m.data, m.len, 0, &err);
        cr_assert(json_is_object(out), "a JSON object: %s", err.text);
        const char *keys[] = {"header", "parent_header", "metadata", "content", "channel", "buffers"};
        for (size_t i = 0; i != sizeof(keys) / sizeof(keys[0]); ++i)
            cr_assert_not_null(json_object_get(out, keys[i]), "legacy frame without %s", keys[i]);
        cr_assert_str_eq(json_string_value(json_object_get(out, "msg_id")),
                         json_string_value(json_object_get(json_object_get(out, "header"), "msg_id")));
        cr_assert_str_eq(json_string_value(json_object_get(out, "msg_type")),
                         json_string_value(json_object_get(json_object_get(out, "header"), "msg_type")));
    }
    free(m.data);
    return out;
}

static const char *field(json_t *msg, const char *part, const char *key)
{
    const char *s = json_string_value(json_object_get(json_object_get(msg, part), key));
    return s != NULL ? s : "";
}

/* Reads until a message of `msg_type` on `channel` whose parent is `parent`; collects stream text into `out` (may be NULL). */
static json_t *jws_until(jws_t *c, const char *channel, const char *msg_type, const char *parent, char *out, size_t size)
{
    int64_t deadline = wsc_now_ms() + WAIT_MS;
    json_t *msg;

    while ((msg = jws_recv(c, deadline)) != NULL) {
        if (out != NULL && strcmp(field(msg, "header", "msg_type"), "stream") == 0 &&
            strcmp(field(msg, "parent_header", "msg_id"), parent) == 0)
            strncat(out, field(msg, "content", "text"), size - strlen(out) - 1);
        if (strcmp(json_string_value(json_object_get(msg, "channel")), channel) == 0 &&
            strcmp(field(msg, "header", "msg_type"), msg_type) == 0 &&
            (parent == NULL || strcmp(field(msg, "parent_header", "msg_id"), parent) == 0))
            return msg;
        json_decref(msg);
    }
    cr_assert_fail("no %s %s with parent %s arrived: %s", channel, msg_type, parent != NULL ? parent : "(any)", c->ws.error);
    return NULL;
}

static json_t *execute_content(const char *code)
{
    return json_pack("{s:s, s:b, s:b, s:{}, s:b, s:b}", "code", code, "silent", 0, "store_history", 1, "user_expressions",
                     "allow_stdin", 1, "stop_on_error", 1);
}

/*
 * Executes `code` on `c` and waits for its reply and its status idle (in either order: shell and iopub are two sockets, and a
 * loaded machine delivers the output after the reply); the stream output goes into `out`. Returns the reply's status.
 */
static char *jws_execute(jws_t *c, const char *code, char *out, size_t size)
{
    static char status[32];
    int64_t deadline = wsc_now_ms() + WAIT_MS;
    int got_reply = 0, got_idle = 0;
    char id[64];
    json_t *msg;

    snprintf(id, sizeof(id), "%s", jws_send(c, "shell", "execute_request", execute_content(code), NULL));
    if (out != NULL)
        out[0] = '\0';
    status[0] = '\0';
    while ((!got_reply || !got_idle) && (msg = jws_recv(c, deadline)) != NULL) {
        const char *type = field(msg, "header", "msg_type");
        if (strcmp(field(msg, "parent_header", "msg_id"), id) == 0) {
            if (out != NULL && strcmp(type, "stream") == 0)
                strncat(out, field(msg, "content", "text"), size - strlen(out) - 1);
            if (strcmp(type, "execute_reply") == 0) {
                snprintf(status, sizeof(status), "%s", field(msg, "content", "status"));
                got_reply = 1;
            }
            if (strcmp(type, "status") == 0 && strcmp(field(msg, "content", "execution_state"), "idle") == 0)
                got_idle = 1;
        }
        json_decref(msg);
    }
    cr_assert(got_reply && got_idle, "no execute_reply and status idle for %s arrived: %s", id, c->ws.error);
    return status;
}

/* ---- REST ---- */

Test(jupyter, api_version_and_kernelspecs_with_resources)
{
    json_t *api = get_json("/api", 200), *specs = get_json("/api/kernelspecs", 200), *py, *one;
    ts_response_t r = {0};
    const char *logo;

    cr_expect_not_null(json_string_value(json_object_get(api, "version")));
    cr_assert_str_eq(json_string_value(json_object_get(specs, "default")), "python3");
    py = json_object_get(json_object_get(specs, "kernelspecs"), "python3");
    cr_assert_not_null(py);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(py, "spec"), "language")), "python");
    cr_expect(json_is_array(json_object_get(json_object_get(py, "spec"), "argv")));
    logo = json_string_value(json_object_get(json_object_get(py, "resources"), "logo-64x64"));
    cr_assert_str_eq(logo, "/kernelspecs/python3/logo-64x64.png");
    one = get_json("/api/kernelspecs/python3", 200);
    cr_expect_str_eq(json_string_value(json_object_get(one, "name")), "python3");
    /* the logo itself, a PNG */
    cr_assert_eq(request("GET", logo, NULL, &r), 200);
    cr_expect_str_eq(ts_response_header(&r, "content-type"), "image/png");
    cr_expect(r.body_len > 8 && memcmp(r.body, "\x89PNG", 4) == 0);
    ts_response_dispose(&r);
    /* nothing outside the spec's directory, and unknown specs are Jupyter's 404 */
    cr_expect_eq(request("GET", "/kernelspecs/python3/..%2F..%2F..%2F..%2Fetc%2Fpasswd", NULL, &r), 404);
    ts_response_dispose(&r);
    cr_expect_eq(request("GET", "/kernelspecs/python3/.hidden", NULL, &r), 404);
    ts_response_dispose(&r);
    cr_expect_eq(request("GET", "/api/kernelspecs/nope", NULL, &r), 404);
    cr_expect_not_null(json_string_value(json_object_get(r.json, "message")));
    cr_expect_not_null(json_object_get(r.json, "reason"));
    ts_response_dispose(&r);
    json_decref(api);
    json_decref(specs);
    json_decref(one);
}

Test(jupyter, a_kernel_is_a_context_and_a_context_is_a_kernel)
{
    ts_response_t r = {0};
    regex_t iso;
    char path[128], *ctx_id = NULL;
    char *id;
    json_t *model, *list;

    cr_assert_eq(request("POST", "/api/kernels", "{\"name\":\"python3\"}", &r), 201, "%s", r.body);
    id = strdup(json_string_value(json_object_get(r.json, "id")));
    snprintf(path, sizeof(path), "/api/kernels/%s", id);
    cr_expect_str_eq(ts_response_header(&r, "location"), path);
    cr_expect_str_eq(json_string_value(json_object_get(r.json, "name")), "python3");
    cr_expect(json_is_integer(json_object_get(r.json, "connections")));
    ts_response_dispose(&r);
    model = get_json(path, 200);
    cr_assert_eq(regcomp(&iso, "^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{6}Z$", REG_EXTENDED), 0);
    cr_expect_eq(regexec(&iso, json_string_value(json_object_get(model, "last_activity")), 0, NULL, 0), 0, "last_activity %s",
                 json_string_value(json_object_get(model, "last_activity")));
    regfree(&iso);
    json_decref(model);

    /* the same kernel through execd's API: listed, and it runs code */
    snprintf(path, sizeof(path), "/code/contexts/%s", id);
    model = get_json(path, 200);
    json_decref(model);
    char *text = run_stdout(id, "x = 6 * 7\nprint(x)");
    cr_expect_str_eq(text, "42\n");
    free(text);

    /* and a context made through execd is a kernel here */
    cr_assert_eq(ts_context_create(own.port, auth, "python", &ctx_id, NULL), 200);
    list = get_json("/api/kernels", 200);
    int seen = 0;
    for (size_t i = 0; i != json_array_size(list); ++i)
        seen += strcmp(json_string_value(json_object_get(json_array_get(list, i), "id")), ctx_id) == 0;
    cr_expect_eq(seen, 1, "the execd context is listed as a kernel");
    json_decref(list);

    /* shut down here: gone there too */
    snprintf(path, sizeof(path), "/api/kernels/%s", id);
    cr_assert_eq(request("DELETE", path, NULL, &r), 204);
    ts_response_dispose(&r);
    cr_expect_eq(request("GET", path, NULL, &r), 404);
    cr_expect_not_null(json_string_value(json_object_get(r.json, "message")));
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "/code/contexts/%s", id);
    cr_expect_eq(request("GET", path, NULL, &r), 404);
    ts_response_dispose(&r);
    free(ctx_id);
    free(id);
}

/* execution_count in GET /code/contexts follows every execute, whichever door ran it. */
Test(jupyter, cells_run_through_the_websocket_advance_the_contexts_execution_count)
{
    char *id = start_kernel("{}"), path[160], out[256];
    json_t *model;
    jws_t c;

    cr_assert_eq(jws_open(&c, id, 0, NULL), 0, "%s", c.ws.error);
    cr_assert_str_eq(jws_execute(&c, "a = 1", out, sizeof(out)), "ok");
    cr_assert_str_eq(jws_execute(&c, "print(a + 1)", out, sizeof(out)), "ok");
    snprintf(path, sizeof(path), "/code/contexts/%s", id);
    model = get_json(path, 200);
    cr_expect_eq(json_integer_value(json_object_get(model, "execution_count")), 2, "after two cells over the WebSocket: %s",
                 json_dumps(model, 0));
    json_decref(model);
    /* then one through execd's /code, then one more over the socket: one count */
    free(run_stdout(id, "a"));
    cr_assert_str_eq(jws_execute(&c, "a", out, sizeof(out)), "ok");
    model = get_json(path, 200);
    cr_expect_eq(json_integer_value(json_object_get(model, "execution_count")), 4, "after four cells through both doors: %s",
                 json_dumps(model, 0));
    json_decref(model);
    wsc_close(&c.ws);
    free(id);
}

Test(jupyter, tokens_in_the_query_and_refusals_before_the_upgrade)
{
    ts_response_t r = {0};
    char *id = start_kernel("{}");
    jws_t c;

    cr_expect_eq(ts_http_request(own.port, "GET", "/api/kernels", NULL, NULL, &r), 401, "no token");
    ts_response_dispose(&r);
    cr_expect_eq(ts_http_request(own.port, "GET", "/api/kernels?token=" TOKEN, NULL, NULL, &r), 200,
                 "?token= as Jupyter Server takes it");
    ts_response_dispose(&r);
    cr_expect_eq(ts_http_request(own.port, "GET", "/api/kernels?1700000000000&token=wrong", NULL, NULL, &r), 401);
    ts_response_dispose(&r);
    /* the query token is the Jupyter door's: execd's routes still want a header */
    cr_expect_eq(ts_http_request(own.port, "GET", "/code/contexts?token=" TOKEN, NULL, NULL, &r), 401);
    ts_response_dispose(&r);
    /* clients add a bare ?<epoch-ms>: ignored */
    cr_expect_eq(request("GET", "/api/kernels?1700000000000", NULL, &r), 200);
    ts_response_dispose(&r);

    cr_expect_neq(jws_open(&c, id, 0, "?token=wrong"), 0);
    cr_expect_eq(c.ws.status, 401, "a bad token is refused before the upgrade");
    wsc_close(&c.ws);
    cr_expect_neq(jws_open(&c, "00000000-0000-4000-8000-000000000000", 0, NULL), 0);
    cr_expect_eq(c.ws.status, 404, "an unknown kernel is refused before the upgrade");
    wsc_close(&c.ws);
    free(id);
}

/* ---- the WebSocket ---- */

static void kernel_info_round_trip(int v1)
{
    char *id = start_kernel("{\"name\":\"python3\"}");
    json_t *reply, *sent_parent;
    char proto[128];
    jws_t c;
    const char *msg_id;

    cr_assert_eq(jws_open(&c, id, v1, NULL), 0, "%s (status %d)", c.ws.error, c.ws.status);
    if (v1)
        cr_expect_str_eq(wsc_header(&c.ws, "sec-websocket-protocol", proto, sizeof(proto)), V1);
    else
        cr_expect_null(wsc_header(&c.ws, "sec-websocket-protocol", proto, sizeof(proto)));
    msg_id = jws_send(&c, "shell", "kernel_info_request", json_object(), NULL);
    reply = jws_until(&c, "shell", "kernel_info_reply", msg_id, NULL, 0);
    /* the parent is our header, verbatim: session and username untouched by kgate */
    sent_parent = json_object_get(reply, "parent_header");
    cr_expect_str_eq(field(reply, "parent_header", "msg_id"), msg_id);
    cr_expect_str_eq(json_string_value(json_object_get(sent_parent, "session")), "raw-session");
    cr_expect_str_eq(json_string_value(json_object_get(sent_parent, "username")), "tester");
    cr_expect_str_eq(field(reply, "content", "status"), "ok");
    cr_expect_str_eq(
        json_string_value(json_object_get(json_object_get(json_object_get(reply, "content"), "language_info"), "name")), "python");
    json_decref(reply);
    wsc_close(&c.ws);
    free(id);
}

Test(jupyter, kernel_info_over_the_legacy_json_framing)
{
    kernel_info_round_trip(0);
}

Test(jupyter, kernel_info_over_the_v1_binary_framing)
{
    kernel_info_round_trip(1);
}

Test(jupyter, replies_go_to_the_socket_that_asked_and_iopub_to_every_socket)
{
    char *id = start_kernel("{}");
    jws_t a, b;
    char out[256];
    json_t *msg;

    cr_assert_eq(jws_open(&a, id, 1, NULL), 0);
    cr_assert_eq(jws_open(&b, id, 0, NULL), 0);
    cr_assert_str_eq(jws_execute(&a, "print('from a')", out, sizeof(out)), "ok");
    cr_expect_str_eq(out, "from a\n");
    /* b saw a's output on iopub, never a's reply */
    int saw_stream = 0, saw_reply = 0;
    int64_t deadline = wsc_now_ms() + 2000;
    while ((msg = jws_recv(&b, deadline)) != NULL) {
        saw_stream += strcmp(field(msg, "header", "msg_type"), "stream") == 0;
        saw_reply += strcmp(json_string_value(json_object_get(msg, "channel")), "shell") == 0;
        json_decref(msg);
    }
    cr_expect_eq(saw_stream, 1, "iopub reaches every socket of the kernel");
    cr_expect_eq(saw_reply, 0, "a reply reaches only the socket that asked");
    /* and the model counts both connections */
    char path[128];
    snprintf(path, sizeof(path), "/api/kernels/%s", id);
    json_t *model = get_json(path, 200);
    cr_expect_eq(json_integer_value(json_object_get(model, "connections")), 2);
    json_decref(model);
    wsc_close(&a.ws);
    wsc_close(&b.ws);
    free(id);
}

Test(jupyter, an_sse_run_and_a_websocket_of_one_kernel_each_see_their_own_replies)
{
    char *id = start_kernel("{}");
    jws_t c;
    char out[256];
    char *text;

    cr_assert_eq(jws_open(&c, id, 0, NULL), 0);
    cr_assert_str_eq(jws_execute(&c, "shared = 'set over the websocket'", out, sizeof(out)), "ok");
    text = run_stdout(id, "print(shared)");
    cr_expect_str_eq(text, "set over the websocket\n", "one kernel, one state");
    free(text);
    /* the execd run's reply never reached the socket */
    json_t *msg;
    int64_t deadline = wsc_now_ms() + 1000;
    while ((msg = jws_recv(&c, deadline)) != NULL) {
        cr_expect_str_neq(json_string_value(json_object_get(msg, "channel")), "shell", "the SSE run's reply leaked to the socket");
        json_decref(msg);
    }
    wsc_close(&c.ws);
    free(id);
}

Test(jupyter, stdin_interrupt_restart_and_reconnect)
{
    char *id = start_kernel("{}");
    char path[160], out[256];
    jws_t c;
    json_t *req, *reply;
    ts_response_t r = {0};
    const char *exec_id;

    cr_assert_eq(jws_open(&c, id, 1, NULL), 0);
    /* input() answered over stdin */
    exec_id = jws_send(&c, "shell", "execute_request", execute_content("print('hi ' + input('who? '))"), NULL);
    char exec_copy[64];
    snprintf(exec_copy, sizeof(exec_copy), "%s", exec_id);
    req = jws_until(&c, "stdin", "input_request", exec_copy, NULL, 0);
    cr_expect_str_eq(field(req, "content", "prompt"), "who? ");
    jws_send(&c, "stdin", "input_reply", json_pack("{s:s}", "value", "ann"), json_incref(json_object_get(req, "header")));
    json_decref(req);
    out[0] = '\0';
    reply = jws_until(&c, "shell", "execute_reply", exec_copy, out, sizeof(out));
    cr_expect_str_eq(field(reply, "content", "status"), "ok");
    cr_expect_str_eq(out, "hi ann\n");
    json_decref(reply);

    /* interrupt a sleep through REST: the reply says KeyboardInterrupt, the kernel lives on */
    /* stop_on_error off: after the KeyboardInterrupt, ipykernel would abort requests arriving soon after (the reconnect's) */
    json_t *sleep_content = execute_content("import time; kept = 1; time.sleep(60)");
    json_object_set_new(sleep_content, "stop_on_error", json_false());
    exec_id = jws_send(&c, "shell", "execute_request", sleep_content, NULL);
    snprintf(exec_copy, sizeof(exec_copy), "%s", exec_id);
    usleep(500 * 1000);
    snprintf(path, sizeof(path), "/api/kernels/%s/interrupt", id);
    cr_assert_eq(request("POST", path, "", &r), 204);
    ts_response_dispose(&r);
    reply = jws_until(&c, "shell", "execute_reply", exec_copy, NULL, 0);
    cr_expect_str_eq(field(reply, "content", "status"), "error");
    cr_expect_str_eq(field(reply, "content", "ename"), "KeyboardInterrupt");
    json_decref(reply);

    /* reconnect: a new socket sees the same state */
    wsc_close(&c.ws);
    cr_assert_eq(jws_open(&c, id, 0, NULL), 0);
    cr_assert_str_eq(jws_execute(&c, "print(kept + 41)", out, sizeof(out)), "ok");
    cr_expect_str_eq(out, "42\n", "a reconnect keeps the kernel and its state");

    /* restart: answered once the new kernel is ready, with its model; state is gone */
    snprintf(path, sizeof(path), "/api/kernels/%s/restart", id);
    cr_assert_eq(request("POST", path, "", &r), 200, "%s", r.body);
    cr_expect_str_eq(json_string_value(json_object_get(r.json, "id")), id);
    ts_response_dispose(&r);
    cr_assert_str_eq(jws_execute(&c, "print('kept' in globals())", out, sizeof(out)), "ok");
    cr_expect_str_eq(out, "False\n");
    wsc_close(&c.ws);
    free(id);
}

/* kgate again, with `args` added to the suite's: for a test of another setting. */
static void restart_kgate(const char *const *more)
{
    const char *args[16] = {"--access-token", TOKEN};
    size_t n = 2;
    size_t survivors = 0;

    while (*more != NULL && n < 15)
        args[n++] = *more++;
    args[n] = NULL;
    cr_assert_eq(ts_gateway_stop(&own, &survivors), 0, "%s", own.error);
    int rc = ts_gateway_start(&own, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .label = "jupyter"});
    cr_assert_eq(rc, 0, "kgate did not start: %s", own.error);
}

/* A kernel that dies on its own comes back, as Jupyter Server's restarter brings it: `restarting` on the socket, then it works
 * again through the same socket, its state gone. */
Test(jupyter, a_killed_kernel_is_restarted_and_the_socket_says_so)
{
    char *id = start_kernel("{}");
    char out[64];
    jws_t c;
    json_t *msg;

    cr_assert_eq(jws_open(&c, id, 0, NULL), 0);
    cr_assert_str_eq(jws_execute(&c, "kept = 1; import os; print(os.getpid())", out, sizeof(out)), "ok");
    pid_t pid = (pid_t)atoi(out);
    cr_assert_gt(pid, 1);
    int64_t t0 = wsc_now_ms();
    cr_assert_eq(kill(pid, SIGKILL), 0);
    while ((msg = jws_recv(&c, t0 + 5000)) != NULL) {
        int restarting = strcmp(field(msg, "content", "execution_state"), "restarting") == 0;
        cr_expect(strcmp(field(msg, "content", "execution_state"), "dead") != 0, "dead, not restarting");
        json_decref(msg);
        if (restarting)
            break;
    }
    cr_assert_not_null(msg, "no status restarting arrived");
    cr_expect_lt(wsc_now_ms() - t0, 2000, "death reported within 2 s");
    cr_assert_str_eq(jws_execute(&c, "print('kept' in globals())", out, sizeof(out)), "ok");
    cr_expect_str_eq(out, "False\n");
    wsc_close(&c.ws);
    free(id);
}

/* --kernel-restart-limit 0: a kernel that died stays dead, and the socket and the model say so. */
Test(jupyter, a_dead_kernel_is_reported_on_the_socket_and_in_the_model)
{
    restart_kgate((const char *const[]){"--kernel-restart-limit", "0", NULL});
    char *id = start_kernel("{}");
    char path[128], out[64];
    jws_t c;
    json_t *msg, *model;

    cr_assert_eq(jws_open(&c, id, 0, NULL), 0);
    cr_assert_str_eq(jws_execute(&c, "import os; print(os.getpid())", out, sizeof(out)), "ok");
    pid_t pid = (pid_t)atoi(out);
    cr_assert_gt(pid, 1);
    int64_t t0 = wsc_now_ms();
    cr_assert_eq(kill(pid, SIGKILL), 0);
    while ((msg = jws_recv(&c, t0 + 5000)) != NULL) {
        int dead = strcmp(field(msg, "content", "execution_state"), "dead") == 0;
        json_decref(msg);
        if (dead)
            break;
    }
    cr_assert_not_null(msg, "no status dead arrived");
    cr_expect_lt(wsc_now_ms() - t0, 2000, "death reported within 2 s");
    snprintf(path, sizeof(path), "/api/kernels/%s", id);
    model = get_json(path, 200);
    cr_expect_str_eq(json_string_value(json_object_get(model, "execution_state")), "dead");
    json_decref(model);
    wsc_close(&c.ws);
    free(id);
}

Test(jupyter, sessions_create_rename_list_and_delete_with_their_kernel)
{
    ts_response_t r = {0};
    char path[160], kpath[160], *sid, *kid;
    json_t *list;

    cr_assert_eq(request("POST", "/api/sessions",
                         "{\"path\":\"work/a.ipynb\",\"name\":\"a.ipynb\",\"type\":\"notebook\",\"kernel\":{\"name\":\"python3\"}}",
                         &r),
                 201, "%s", r.body);
    sid = strdup(json_string_value(json_object_get(r.json, "id")));
    kid = strdup(json_string_value(json_object_get(json_object_get(r.json, "kernel"), "id")));
    snprintf(path, sizeof(path), "/api/sessions/%s", sid);
    cr_expect_str_eq(ts_response_header(&r, "location"), path);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(r.json, "notebook"), "path")), "work/a.ipynb");
    ts_response_dispose(&r);
    /* the same path again is the same session */
    cr_assert_eq(request("POST", "/api/sessions", "{\"path\":\"work/a.ipynb\",\"type\":\"notebook\"}", &r), 201);
    cr_expect_str_eq(json_string_value(json_object_get(r.json, "id")), sid);
    ts_response_dispose(&r);
    /* rename */
    cr_assert_eq(request("PATCH", path, "{\"path\":\"work/b.ipynb\",\"name\":\"b.ipynb\"}", &r), 200, "%s", r.body);
    cr_expect_str_eq(json_string_value(json_object_get(r.json, "path")), "work/b.ipynb");
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(r.json, "kernel"), "id")), kid, "a rename keeps the kernel");
    ts_response_dispose(&r);
    list = get_json("/api/sessions", 200);
    cr_expect_eq(json_array_size(list), 1);
    json_decref(list);
    cr_expect_eq(request("POST", "/api/sessions", "{\"name\":\"no path\"}", &r), 400);
    cr_expect_not_null(json_string_value(json_object_get(r.json, "message")));
    ts_response_dispose(&r);
    /* delete: the session and its kernel go */
    cr_assert_eq(request("DELETE", path, NULL, &r), 204);
    ts_response_dispose(&r);
    cr_expect_eq(request("GET", path, NULL, &r), 404);
    ts_response_dispose(&r);
    snprintf(kpath, sizeof(kpath), "/api/kernels/%s", kid);
    cr_expect_eq(request("GET", kpath, NULL, &r), 404, "deleting a session shuts its kernel down");
    ts_response_dispose(&r);
    free(sid);
    free(kid);
}

Test(jupyter, only_kernel_variables_of_a_clients_env_reach_the_kernel)
{
    char *id =
        start_kernel("{\"name\":\"python3\",\"env\":{\"KERNEL_USERNAME\":\"alice\",\"PATH\":\"/nowhere\",\"HOME\":\"/elsewhere\","
                     "\"JUPYTER_PATH\":\"/other/host\",\"KERNEL_bad-name\":\"x\"}}");
    char *text = run_stdout(id, "import os\nprint(os.environ.get('KERNEL_USERNAME'), os.environ.get('PATH') == '/nowhere', "
                                "os.environ.get('HOME') == '/elsewhere', os.environ.get('JUPYTER_PATH'))");

    cr_expect_str_eq(text, "alice False False None\n");
    free(text);
    free(id);
}

/* ---- big output and a socket that stops reading ---- */

Test(jupyter, a_big_output_arrives_whole_over_both_framings)
{
    char *id = start_kernel("{}");

    for (int v1 = 0; v1 != 2; ++v1) {
        jws_t c;
        json_t *msg;
        size_t got = 0;
        const char *exec_id;
        char exec_copy[64];

        cr_assert_eq(jws_open(&c, id, v1, NULL), 0);
        /* one 24 MiB stream message: bigger than the socket's 16 MiB queue bound, which a client that reads must still get */
        exec_id = jws_send(&c, "shell", "execute_request",
                           execute_content("import sys; sys.stdout.write('y' * (24 << 20)); sys.stdout.flush()"), NULL);
        snprintf(exec_copy, sizeof(exec_copy), "%s", exec_id);
        int64_t deadline = wsc_now_ms() + 60000;
        int replied = 0, idle = 0;
        /* the reply (shell) and the output (iopub) come on two sockets of the kernel: no order between them */
        while ((msg = jws_recv(&c, deadline)) != NULL) {
            int ours = strcmp(field(msg, "parent_header", "msg_id"), exec_copy) == 0;
            replied |= ours && strcmp(field(msg, "header", "msg_type"), "execute_reply") == 0;
            idle |= ours && strcmp(field(msg, "content", "execution_state"), "idle") == 0;
            if (ours && strcmp(field(msg, "header", "msg_type"), "stream") == 0)
                got += strlen(field(msg, "content", "text"));
            json_decref(msg);
            if (replied && idle)
                break;
        }
        cr_expect_eq(got, (size_t)24 << 20, "every byte of the output (framing %s): %zu", v1 ? "v1" : "legacy", got);
        cr_assert_not_null(msg, "no execute_reply (framing %s): %s", v1 ? "v1" : "legacy", c.ws.error);
        wsc_close(&c.ws);
    }
    free(id);
}

/* The kernel's execution_state as GET /api/kernels/{id} tells it (free it). */
static char *kernel_state(const char *id)
{
    char path[160];
    snprintf(path, sizeof(path), "/api/kernels/%s", id);
    json_t *model = get_json(path, 200);
    char *state = strdup(json_string_value(json_object_get(model, "execution_state")));
    json_decref(model);
    return state;
}

/* Polls the kernel until its execution_state is `state` or `deadline` passes; returns whether it was. */
static int wait_kernel_state(const char *id, const char *state, int64_t deadline)
{
    for (;;) {
        char *now = kernel_state(id);
        int same = strcmp(now, state) == 0;
        free(now);
        if (same || wsc_now_ms() >= deadline)
            return same;
        usleep(100 * 1000);
    }
}

/*
 * A socket that reads nothing while its kernel prints 256 MiB (16 times the 16 MiB send bound, 4 times the most it may queue
 * during its 10 s of grace) is closed, and what kgate queued for it before is bounded: the socket reads nothing until the cell
 * has ended (all its output went through kgate), then finds the close after at most the hard bound and one message. Before,
 * the test read after 5 s, shorter than the grace: on a loaded machine the kernel had not printed 64 MiB by then, the test
 * read the whole output as a client that reads (which is never cut off), and counted its own 60 s timeout as the cut.
 * Each print is flushed, so each is a message of its own: unflushed, a fast kernel batched them into one message over the
 * 64 MiB cap, whose head kgate cuts to what the socket's bound holds (15.9 MiB read, and rightly no cut-off).
 */
Test(jupyter, a_socket_that_stops_reading_is_cut_off_and_others_go_on)
{
    char *id = start_kernel("{}");
    jws_t idle, other;
    char out[64];
    wsc_msg_t m;
    int closed = 0;
    size_t got = 0;

    cr_assert_eq(jws_open(&idle, id, 1, NULL), 0);
    jws_send(&idle, "shell", "execute_request", execute_content("for i in range(256): print('z' * (1 << 20), flush=True)"), NULL);
    cr_assert(wait_kernel_state(id, "busy", wsc_now_ms() + WAIT_MS), "the 256 MiB cell never started");
    cr_assert(wait_kernel_state(id, "idle", wsc_now_ms() + 120000), "the 256 MiB cell did not end in 120 s");
    /* kgate must not have held it all: past its send bound the socket was cut off */
    int64_t deadline = wsc_now_ms() + WAIT_MS;
    while (!closed) {
        if (wsc_recv(&idle.ws, deadline, &m) != 0) {
            closed = wsc_now_ms() < deadline; /* closed after the close frame, or reset; a timeout is no close */
            break;
        }
        got += m.len;
        closed = m.opcode == WSC_CLOSE;
        free(m.data);
    }
    cr_expect(closed, "a socket that stopped reading was never cut off (%zu bytes read): %s", got, idle.ws.error);
    cr_expect_leq(got, (size_t)80 << 20, "kgate queued %zu bytes for a socket that reads nothing", got);
    wsc_close(&idle.ws);
    /* the kernel and its other clients are fine */
    cr_assert_eq(jws_open(&other, id, 0, NULL), 0);
    const char *status = jws_execute(&other, "print(6 * 7)", out, sizeof(out));
    cr_assert_str_eq(status, "ok");
    cr_expect_str_eq(out, "42\n");
    wsc_close(&other.ws);
    free(id);
}

/* Kernels still starting (no pool: the first forked or spawned at once, the second queued behind it, one start at a time),
 * interrupted through the Jupyter door and execd's at once: nothing runs in them, so it is no error and no death (before, a
 * kernel without its process yet answered "dead", and one started and not ready died of the SIGINT); each runs its first
 * cell with no death recorded and no restart counted. */
Test(jupyter, an_interrupt_of_a_kernel_still_starting_is_no_error_and_no_death)
{
    static const char *const more[] = {"--pool", "none", "--max-starting-kernels", "1", "--max-forking-kernels", "1", NULL};
    char path[160], *ids[2], *text;
    ts_response_t r = {0};

    restart_kgate(more);
    ids[0] = start_kernel("{}");
    ids[1] = start_kernel("{}");
    snprintf(path, sizeof(path), "/api/kernels/%s/interrupt", ids[0]);
    cr_expect_eq(request("POST", path, "", &r), 204, "interrupt of a starting kernel (Jupyter): %s", r.body);
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "/code?id=%s", ids[1]);
    cr_expect_eq(request("DELETE", path, NULL, &r), 200, "interrupt of a queued kernel (execd): %s", r.body);
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "/api/kernels/%s/interrupt", ids[1]);
    cr_expect_eq(request("POST", path, "", &r), 204, "interrupt of a queued kernel (Jupyter): %s", r.body);
    ts_response_dispose(&r);
    for (int i = 0; i != 2; ++i) {
        text = run_stdout(ids[i], "print(6 * 7)");
        cr_expect_str_eq(text, "42\n", "kernel %d runs its first cell", i);
        free(text);
        snprintf(path, sizeof(path), "/code/contexts/%s", ids[i]);
        json_t *ctx = get_json(path, 200);
        cr_expect_eq(json_integer_value(json_object_get(ctx, "restarts")), 0, "kernel %d: no restart counted", i);
        cr_expect(json_is_null(json_object_get(ctx, "last_death")), "kernel %d: no death recorded", i);
        json_decref(ctx);
        free(ids[i]);
    }
}

Test(jupyter, pages_of_another_site_are_refused)
{
    ts_response_t r = {0};
    char *id = start_kernel("{}");
    const char *evil[] = {"Authorization: token " TOKEN, "Origin: https://evil.example", NULL};
    char path[128];
    jws_t c;

    /* even with the token (a page cannot know it, but a header cannot be trusted either): refused */
    cr_expect_eq(ts_http_request(own.port, "POST", "/code", evil, "{\"code\":\"1\"}", &r), 403);
    ts_response_dispose(&r);
    cr_expect_eq(ts_http_request(own.port, "GET", "/api/kernels", evil, NULL, &r), 403);
    ts_response_dispose(&r);
    /* a WebSocket opened by another site's page (CORS does not cover WebSockets) */
    snprintf(path, sizeof(path), "/api/kernels/%s/channels?token=" TOKEN, id);
    memset(&c, 0, sizeof(c));
    const char *ws_headers[] = {"Origin: https://evil.example", NULL};
    cr_expect_neq(wsc_connect(&c.ws, own.port, path, ws_headers, wsc_now_ms() + 10000), 0);
    cr_expect_eq(c.ws.status, 403);
    wsc_close(&c.ws);
    /* kgate's own origin passes */
    char same[128];
    snprintf(same, sizeof(same), "Origin: http://127.0.0.1:%u", own.port);
    const char *own_headers[] = {"Authorization: token " TOKEN, same, NULL};
    cr_expect_eq(ts_http_request(own.port, "GET", "/api/kernels", own_headers, NULL, &r), 200, "%s", r.body);
    ts_response_dispose(&r);
    free(id);
}

Test(jupyter, malformed_messages_close_the_socket_and_nothing_else)
{
    char *id = start_kernel("{}");
    char out[64];
    jws_t c;
    wsc_msg_t m;
    static const uint8_t bad_v1[] = {3, 0, 0, 0, 0, 0, 0, 0, 99, 0, 0, 0, 0, 0, 0, 0};

    /* v1: an offsets table that points past the frame */
    cr_assert_eq(jws_open(&c, id, 1, NULL), 0);
    cr_assert_eq(wsc_send(&c.ws, WSC_BINARY, bad_v1, sizeof(bad_v1)), 0);
    cr_assert_eq(wsc_recv(&c.ws, wsc_now_ms() + 10000, &m), 0, "%s", c.ws.error);
    cr_expect_eq(m.opcode, WSC_CLOSE);
    cr_expect_eq(m.close_code, 1002, "a protocol error");
    free(m.data);
    wsc_close(&c.ws);
    /* legacy: not JSON */
    cr_assert_eq(jws_open(&c, id, 0, NULL), 0);
    cr_assert_eq(wsc_send(&c.ws, WSC_TEXT, "{\"header\": ", 11), 0);
    cr_assert_eq(wsc_recv(&c.ws, wsc_now_ms() + 10000, &m), 0, "%s", c.ws.error);
    cr_expect_eq(m.opcode, WSC_CLOSE);
    cr_expect_eq(m.close_code, 1002);
    free(m.data);
    wsc_close(&c.ws);
    /* a well-formed message on iopub, which clients cannot send on, is dropped and the socket goes on */
    cr_assert_eq(jws_open(&c, id, 0, NULL), 0);
    jws_send(&c, "iopub", "execute_request", execute_content("print('never')"), NULL);
    cr_assert_str_eq(jws_execute(&c, "print('still here')", out, sizeof(out)), "ok");
    cr_expect_str_eq(out, "still here\n");
    wsc_close(&c.ws);
    free(id);
}

/* ---- a client that goes away and comes back (Jupyter Server's buffering by session_id) ---- */

#define COUNT_TO_FIVE "import time\nfor i in range(5): print(i, flush=True); time.sleep(0.2)"

/* What reached a socket for one request. */
typedef struct st_got_t {
    char text[8192];       /* its stdout */
    int reply, idle;       /* its execute_reply and its status idle arrived */
    int messages;          /* every message with that parent */
    int lost;              /* a stream to stderr from kgate saying output was lost */
    int over_cap;          /* a stream to stderr from kgate saying a message over the message cap was dropped */
    size_t text_bytes;     /* its stdout, every byte counted */
    long long cut_dropped; /* what kgate's notice of a message cut to its head says was dropped after it (-1: no notice) */
} got_t;

/* Reads until `parent`'s execute_reply and idle both arrived, or until `deadline`. */
static void jws_collect(jws_t *c, const char *parent, int64_t deadline, got_t *got)
{
    json_t *msg;

    while (!(got->reply && got->idle) && (msg = jws_recv(c, deadline)) != NULL) {
        if (strcmp(field(msg, "parent_header", "msg_id"), parent) == 0) {
            const char *type = field(msg, "header", "msg_type");
            ++got->messages;
            if (strcmp(type, "stream") == 0 && strcmp(field(msg, "content", "name"), "stdout") == 0) {
                strncat(got->text, field(msg, "content", "text"), sizeof(got->text) - strlen(got->text) - 1);
                got->text_bytes += strlen(field(msg, "content", "text"));
            }
            const char *cut = strcmp(type, "stream") == 0 && strcmp(field(msg, "content", "name"), "stderr") == 0
                                  ? strstr(field(msg, "content", "text"), "cut to its head, and the ")
                                  : NULL;
            if (cut != NULL)
                got->cut_dropped = strtoll(cut + strlen("cut to its head, and the "), NULL, 10);
            if (strcmp(type, "stream") == 0 && strcmp(field(msg, "content", "name"), "stderr") == 0 &&
                strstr(field(msg, "content", "text"), "output lost") != NULL)
                got->lost = 1;
            if (strcmp(type, "stream") == 0 && strcmp(field(msg, "content", "name"), "stderr") == 0 &&
                strstr(field(msg, "content", "text"), "larger than the message cap") != NULL &&
                strstr(field(msg, "content", "text"), "and was dropped") != NULL)
                got->over_cap = 1;
            if (strcmp(type, "execute_reply") == 0 && strcmp(json_string_value(json_object_get(msg, "channel")), "shell") == 0)
                got->reply = 1;
            if (strcmp(type, "status") == 0 && strcmp(field(msg, "content", "execution_state"), "idle") == 0)
                got->idle = 1;
        }
        json_decref(msg);
    }
}

/* Opens a socket of client `session` (v1 or legacy) on kgate `port`, starts COUNT_TO_FIVE (or `code`), reads its first
 * output, and closes the socket. Returns the request's msg_id (static) and what arrived in `got`. */
static const char *start_then_leave(unsigned short port, const char *token, const char *id, const char *session, const char *code,
                                    got_t *got)
{
    static char exec_id[64];
    char query[160];
    jws_t c;
    json_t *msg;

    snprintf(query, sizeof(query), "?token=%s&session_id=%s", token, session);
    cr_assert_eq(jws_open_at(&c, port, id, 1, query), 0);
    snprintf(exec_id, sizeof(exec_id), "%s", jws_send(&c, "shell", "execute_request", execute_content(code), NULL));
    /* jws_until keeps the stream's text in got->text */
    msg = jws_until(&c, "iopub", "stream", exec_id, got->text, sizeof(got->text));
    json_decref(msg);
    wsc_close(&c.ws);
    return exec_id;
}

Test(jupyter, a_client_back_with_its_session_id_gets_what_the_kernel_sent_while_it_was_away)
{
    char *id = start_kernel("{}"), path[128];
    got_t got = {0};
    const char *exec_id;
    jws_t c;

    exec_id = start_then_leave(own.port, TOKEN, id, "client-a", COUNT_TO_FIVE, &got);
    cr_expect_str_eq(got.text, "0\n");
    usleep(1500 * 1000);
    /* away, it is no connection (Jupyter Server's model counts 0 while it buffers) */
    snprintf(path, sizeof(path), "/api/kernels/%s", id);
    json_t *model = get_json(path, 200);
    cr_expect_eq(json_integer_value(json_object_get(model, "connections")), 0);
    json_decref(model);
    /* back in the other framing: everything it missed, in order, then live */
    cr_assert_eq(jws_open(&c, id, 0, "?token=" TOKEN "&session_id=client-a"), 0);
    jws_collect(&c, exec_id, wsc_now_ms() + WAIT_MS, &got);
    cr_expect_str_eq(got.text, "0\n1\n2\n3\n4\n", "every output sent while the client was away");
    cr_expect(got.reply, "the execute_reply, routed to the client that asked, was replayed");
    cr_expect(got.idle, "the status idle of the request was replayed");
    char out[64];
    cr_assert_str_eq(jws_execute(&c, "print('live')", out, sizeof(out)), "ok");
    cr_expect_str_eq(out, "live\n");
    wsc_close(&c.ws);
    free(id);
}

Test(jupyter, a_client_of_another_session_id_gets_nothing_replayed_and_the_buffer_is_gone)
{
    char *id = start_kernel("{}"), out[64];
    got_t got = {0}, other = {0}, late = {0};
    const char *exec_id;
    char exec_copy[64];
    jws_t c;

    exec_id = start_then_leave(own.port, TOKEN, id, "client-a", COUNT_TO_FIVE, &got);
    snprintf(exec_copy, sizeof(exec_copy), "%s", exec_id);
    usleep(1500 * 1000);
    cr_assert_eq(jws_open(&c, id, 1, "?token=" TOKEN "&session_id=client-b"), 0);
    jws_collect(&c, exec_copy, wsc_now_ms() + 1500, &other);
    cr_expect_eq(other.messages, 0, "another client got %d of client-a's messages", other.messages);
    cr_assert_str_eq(jws_execute(&c, "print(6 * 7)", out, sizeof(out)), "ok");
    cr_expect_str_eq(out, "42\n");
    /* client-a's buffer was dropped, not kept aside: coming back later it gets nothing either */
    wsc_close(&c.ws);
    cr_assert_eq(jws_open(&c, id, 1, "?token=" TOKEN "&session_id=client-a"), 0);
    jws_collect(&c, exec_copy, wsc_now_ms() + 1500, &late);
    cr_expect_eq(late.messages, 0, "a dropped buffer came back with %d messages", late.messages);
    wsc_close(&c.ws);
    free(id);
}

Test(jupyter, past_the_replay_bound_the_returning_client_is_told_output_was_lost_and_past_the_time_gets_nothing)
{
    static const char *const args[] = {"--access-token", TOKEN, "--jupyter-replay-bytes", "65536", "--jupyter-replay-ms",
                                       "4000",           NULL};
    ts_gateway_t small;
    ts_response_t r = {0};
    got_t got = {0}, back = {0}, late = {0};
    const char *exec_id;
    char exec_copy[64], *id;
    jws_t c;

    cr_assert_eq(
        ts_gateway_start(&small, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .label = "jreplay"}), 0,
        "%s", small.error);
    cr_assert_eq(ts_http_request_until(small.port, "POST", "/api/kernels", auth, "{}", wsc_now_ms() + WAIT_MS, &r), 201, "%s",
                 r.body);
    id = strdup(json_string_value(json_object_get(r.json, "id")));
    ts_response_dispose(&r);
    /* 1 MB of output while away, in 10 kB prints: far past 64 KiB */
    exec_id = start_then_leave(
        small.port, TOKEN, id, "client-a",
        "import time\nprint('first', flush=True); time.sleep(0.3)\nfor i in range(100): print('x' * 10000, flush=True)", &got);
    snprintf(exec_copy, sizeof(exec_copy), "%s", exec_id);
    usleep(1500 * 1000);
    cr_assert_eq(jws_open_at(&c, small.port, id, 1, "?token=" TOKEN "&session_id=client-a"), 0);
    jws_collect(&c, exec_copy, wsc_now_ms() + WAIT_MS, &back);
    cr_expect(back.lost, "no notice that output was lost");
    cr_expect_lt(strlen(back.text), 65536, "more than the bound was replayed");
    cr_expect(back.reply && back.idle, "the request's end is replayed even past the bound");
    /* away again, past --jupyter-replay-ms: the buffer is dropped */
    const char *second =
        jws_send(&c, "shell", "execute_request", execute_content("import time; time.sleep(1); print('late')"), NULL);
    snprintf(exec_copy, sizeof(exec_copy), "%s", second);
    wsc_close(&c.ws);
    sleep(5);
    cr_assert_eq(jws_open_at(&c, small.port, id, 1, "?token=" TOKEN "&session_id=client-a"), 0);
    jws_collect(&c, exec_copy, wsc_now_ms() + 1500, &late);
    cr_expect_eq(late.messages, 0, "an expired buffer was replayed (%d messages)", late.messages);
    wsc_close(&c.ws);
    free(id);
    size_t survivors = 0;
    cr_expect_eq(ts_gateway_stop(&small, &survivors), 0, "%s", small.error);
    cr_expect_eq(survivors, 0);
}

/* The Jupyter door relays what the kernel wrote, colours included (frontends render them). */
Test(jupyter, results_keep_their_ansi_colours)
{
    char *id = start_kernel("{}"), exec_id[64];
    jws_t c;
    json_t *msg;

    cr_assert_eq(jws_open(&c, id, 1, NULL), 0);
    snprintf(exec_id, sizeof(exec_id), "%s",
             jws_send(&c, "shell", "execute_request",
                      execute_content("class C:\n    def __repr__(self): return '\\x1b[33m2\\x1b[39m'\nC()"), NULL));
    msg = jws_until(&c, "iopub", "execute_result", exec_id, NULL, 0);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(msg, "content"), "data"), "text/plain")),
                     "\x1b[33m2\x1b[39m");
    json_decref(msg);
    wsc_close(&c.ws);
    free(id);
}

/* ---- a message over --max-message-bytes ---- */

Test(jupyter, a_stream_message_over_the_cap_reaches_the_client_as_its_head_with_the_exact_dropped_count)
{
    /* the head: the client's send bound (--ws-queue-bytes, 16 MiB) less 64 KiB (jupyter/channels.c fit_head); the line and
     * its newline are one message */
    enum { PRINTED = 70000000 + 1, HEAD = (16 << 20) - (64 << 10) };
    char *id = start_kernel("{}");
    char exec_copy[64];
    got_t got = {.cut_dropped = -1};
    jws_t c;

    cr_assert_eq(jws_open(&c, id, 1, NULL), 0);
    /* 70 MB in one stream message, over the default 64 MiB cap (flushed: the next print is a message of its own) */
    snprintf(
        exec_copy, sizeof(exec_copy), "%s",
        jws_send(&c, "shell", "execute_request", execute_content("print('A' * 70_000_000, flush=True); print('after')"), NULL));
    jws_collect(&c, exec_copy, wsc_now_ms() + 60000, &got);
    cr_expect(!got.over_cap, "the message was said to be dropped whole");
    cr_expect_eq(strspn(got.text, "A"), sizeof(got.text) - 1, "stdout does not begin with the line: %.40s", got.text);
    cr_expect_eq(got.text_bytes, (size_t)HEAD + strlen("after\n"), "%zu bytes of stdout, expected the head and 'after'",
                 got.text_bytes);
    cr_expect_eq(got.cut_dropped, (long long)(PRINTED - HEAD), "the notice says %lld bytes were dropped", got.cut_dropped);
    cr_expect(got.reply && got.idle, "the request ended (reply %d, idle %d): %s", got.reply, got.idle, c.ws.error);
    wsc_close(&c.ws);
    free(id);
}

/* ---- a client that reconnects while its old socket is still open (Jupyter Server's "Replacing stale connection") ---- */

/* Reads legacy-framed `c` until the server closes it (a close frame or EOF) or `deadline`; its stdout for `parent` goes to
 * got->text. Returns 1 when it was closed (`*code`: the close code, 0 for EOF), 0 on timeout. */
static int jws_until_closed(jws_t *c, const char *parent, int64_t deadline, got_t *got, uint16_t *code)
{
    wsc_msg_t m;

    cr_assert(!c->v1, "text frames only");
    *code = 0;
    while (wsc_recv(&c->ws, deadline, &m) == 0) {
        json_t *msg = m.opcode == WSC_TEXT ? json_loadb((const char *)m.data, m.len, 0, NULL) : NULL;
        if (m.opcode == WSC_CLOSE)
            *code = m.close_code;
        if (msg != NULL && strcmp(field(msg, "parent_header", "msg_id"), parent) == 0 &&
            strcmp(field(msg, "header", "msg_type"), "stream") == 0)
            strncat(got->text, field(msg, "content", "text"), sizeof(got->text) - strlen(got->text) - 1);
        json_decref(msg);
        free(m.data);
        if (*code != 0)
            return 1;
    }
    return strstr(c->ws.error, "connection closed") != NULL;
}

Test(jupyter, a_socket_of_a_session_id_already_open_replaces_the_stale_one)
{
    char *id = start_kernel("{}"), path[128], exec_id[64], out[64];
    got_t on_a = {0}, on_b = {0}, on_c = {0};
    uint16_t code;
    json_t *msg;
    jws_t a, b, c;

    cr_assert_eq(jws_open(&a, id, 0, "?token=" TOKEN "&session_id=client-x"), 0);
    cr_assert_eq(jws_open(&c, id, 1, "?token=" TOKEN "&session_id=client-y"), 0);
    snprintf(exec_id, sizeof(exec_id), "%s",
             jws_send(&a, "shell", "execute_request",
                      execute_content("import time\nfor i in range(10): print(i, flush=True); time.sleep(0.2)"), NULL));
    msg = jws_until(&a, "iopub", "stream", exec_id, on_a.text, sizeof(on_a.text));
    json_decref(msg);
    /* the client comes back on a new connection (the other framing) while the old one still looks open to kgate */
    cr_assert_eq(jws_open(&b, id, 1, "?token=" TOKEN "&session_id=client-x"), 0);
    cr_expect(jws_until_closed(&a, exec_id, wsc_now_ms() + 2000, &on_a, &code), "the stale socket was not closed: %s", a.ws.error);
    cr_expect(code == 1000 || code == 0, "closed with %u", code);
    /* the new socket gets the rest of the output and the reply its predecessor awaited; no output reaches both */
    jws_collect(&b, exec_id, wsc_now_ms() + WAIT_MS, &on_b);
    cr_expect(on_b.reply, "the execute_reply asked for on the stale socket did not reach the new one");
    cr_expect(on_b.idle);
    char both[2 * sizeof(on_a.text)];
    snprintf(both, sizeof(both), "%s%s", on_a.text, on_b.text);
    cr_expect_str_eq(both, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n", "stale %s + new %s", on_a.text, on_b.text);
    cr_expect_neq(on_b.text[0], '\0', "the new socket got none of the output");
    /* another session_id is another client: untouched, it saw everything and is still served */
    /* (its idle has arrived by now; never the reply: it is not c's request) */
    jws_collect(&c, exec_id, wsc_now_ms() + 1500, &on_c);
    cr_expect_str_eq(on_c.text, "0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n");
    cr_expect(on_c.idle && !on_c.reply);
    cr_assert_str_eq(jws_execute(&c, "print('c')", out, sizeof(out)), "ok");
    cr_expect_str_eq(out, "c\n");
    cr_assert_str_eq(jws_execute(&b, "print('b')", out, sizeof(out)), "ok");
    cr_expect_str_eq(out, "b\n");
    snprintf(path, sizeof(path), "/api/kernels/%s", id);
    json_t *model = get_json(path, 200);
    cr_expect_eq(json_integer_value(json_object_get(model, "connections")), 2, "the stale socket still counts");
    json_decref(model);
    wsc_close(&a.ws);
    wsc_close(&b.ws);
    wsc_close(&c.ws);
    free(id);
}
