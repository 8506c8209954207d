/* bench/mcp_client.c: kgate's /mcp as the `mcp` case speaks it: initialize, then tools/call run_code, JSON or SSE answers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <jansson.h>
#include "wire/alloc.h"
#include "wire/json_in.h"
#include "support/base.h"
#include "support/stream.h"
#include "stats.h"
#include "mcp_client.h"

#define BODY_MAX ((size_t)1 << 20)
#define SSE_BUFFER_INITIAL ((size_t)64 * 1024)
#define SSE_EVENT_MAX ((size_t)16 << 20)

/* Reads the rest of a body into a new NUL-terminated buffer (`*out`, the caller frees it). */
static int read_body(bench_mcp_t *m, ts_response_t *resp, int64_t deadline, char **out, size_t *len)
{
    size_t cap = 4096, used = 0;
    char *buf = wire_malloc(cap);
    ssize_t n;

    for (;;) {
        if (cap - used < 2048) {
            if (cap >= BODY_MAX) {
                free(buf);
                bench_set_detail("POST /mcp: a JSON body over %zu bytes", BODY_MAX);
                return TS_ETOOBIG;
            }
            cap *= 2;
            buf = wire_realloc(buf, cap);
        }
        if ((n = ts_http_read_body(&m->http, resp, buf + used, cap - used - 1, deadline)) < 0) {
            free(buf);
            bench_set_detail("POST /mcp: %s", resp->error);
            return (int)n;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    buf[used] = '\0';
    *out = buf;
    *len = used;
    return 0;
}

/* 1 if `msg` is the JSON-RPC response to request `id` (a result or an error), else 0 (a notification, say). */
static int is_response_to(const json_t *msg, long long id)
{
    const json_t *mid = json_object_get(msg, "id");
    return json_is_integer(mid) && json_integer_value(mid) == id &&
           (json_object_get(msg, "result") != NULL || json_object_get(msg, "error") != NULL);
}

/*
 * POSTs one JSON-RPC message and, for a request (`id` >= 0), returns its response in `*reply` (the caller
 * decrefs it) with the time from writing the request to parsing that response in `*ms`. A notification
 * (`id` < 0) must get 202. kgate answers a request in JSON or in an SSE stream; either is read through.
 */
static int exchange(bench_mcp_t *m, const char *what, const char *body, long long id, json_t **reply, double *ms)
{
    const char *headers[6];
    char session_header[128];
    size_t nh = 0;
    ts_response_t resp;
    ts_sse_reader_t sse;
    int64_t deadline = ts_now_ms() + m->timeout_ms;
    const char *type;
    double t0;
    int err;

    *reply = NULL;
    /* kgate answers a client that takes only SSE with a stream whose head goes out at once (`--mcp-sse-only`) */
    headers[nh++] = m->sse_only && (m->session_id[0] != '\0' || m->stateless) ? "Accept: text/event-stream"
                                                                              : "Accept: application/json, text/event-stream";
    if (m->session_id[0] != '\0') {
        snprintf(session_header, sizeof(session_header), "Mcp-Session-Id: %s", m->session_id);
        headers[nh++] = session_header;
        headers[nh++] = "MCP-Protocol-Version: " BENCH_MCP_VERSION;
    } else if (m->stateless) {
        /* the revision's metadata headers, which kgate checks against the body (the only request sent is run_code) */
        headers[nh++] = "MCP-Protocol-Version: " BENCH_MCP_VERSION_STATELESS;
        headers[nh++] = "Mcp-Method: tools/call";
        headers[nh++] = "Mcp-Name: run_code";
    }
    headers[nh] = NULL;
    ts_sse_reader_init(&sse, SSE_BUFFER_INITIAL, SSE_EVENT_MAX);
    t0 = bench_now_ms();
    if ((err = ts_http_start(&m->http, "POST", "/mcp", headers, body, deadline, &resp)) != 0) {
        bench_set_detail("%s: %s", what, resp.error);
        goto Exit;
    }
    if (resp.status != (id < 0 ? 202 : 200)) {
        ts_http_read_all(&m->http, &resp, BODY_MAX, deadline);
        err = bench_request_error(what, resp.status, &resp);
        goto Exit;
    }
    if (id < 0) {
        *ms = bench_now_ms() - t0;
        if ((err = ts_http_discard_body(&m->http, &resp, deadline)) != 0)
            bench_set_detail("%s: %s", what, resp.error);
        goto Exit;
    }
    type = ts_response_header(&resp, "content-type");
    if (type != NULL && strncasecmp(type, "text/event-stream", 17) == 0) {
        ts_sse_event_t ev;
        for (;;) {
            int got = ts_sse_reader_next(&sse, &m->http, &resp, deadline, &ev);
            if (got <= 0) {
                bench_set_detail("%s: %s", what, got < 0 ? resp.error : "the SSE stream ended without the response");
                err = got < 0 ? got : BENCH_EPROTO;
                goto Exit;
            }
            json_t *msg = wire_json_parse(ev.data, ev.len);
            if (is_response_to(msg, id)) {
                *reply = msg;
                break;
            }
            /* progress notifications before the answer */
            json_decref(msg);
        }
        *ms = bench_now_ms() - t0;
        ++m->sse_answers;
        /* the end of the stream is read outside the timing, as the /code client does */
        if ((err = ts_http_discard_body(&m->http, &resp, deadline)) != 0)
            bench_set_detail("%s: %s", what, resp.error);
    } else {
        char *text = NULL;
        size_t len = 0;
        if ((err = read_body(m, &resp, deadline, &text, &len)) != 0)
            goto Exit;
        /* the parser the /code client uses: both sides pay the same for JSON */
        json_t *msg = wire_json_parse(text, len);
        *ms = bench_now_ms() - t0;
        if (is_response_to(msg, id)) {
            *reply = msg;
            ++m->json_answers;
        } else {
            json_decref(msg);
            bench_set_detail("%s: not the JSON-RPC response to request %lld: %.300s", what, id, text);
            err = BENCH_EPROTO;
        }
        free(text);
    }

Exit:
    if (err != 0 && err != BENCH_ESTATUS && err != BENCH_EPROTO)
        ts_http_close(&m->http);
    if (err != 0) {
        json_decref(*reply);
        *reply = NULL;
    }
    ts_sse_reader_dispose(&sse);
    ts_response_dispose(&resp);
    return err;
}

int bench_mcp_open(bench_mcp_t *m, unsigned short port, unsigned timeout_ms, int sse_only, int stateless)
{
    static const char initialized[] = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
    char body[512];
    json_t *reply = NULL;
    double ms;
    int err;

    memset(m, 0, sizeof(*m));
    ts_http_init(&m->http, port, 1);
    m->timeout_ms = timeout_ms;
    m->next_id = 1;
    m->sse_only = sse_only;
    if ((m->stateless = stateless) != 0)
        return 0;
    snprintf(body, sizeof(body),
             "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"" BENCH_MCP_VERSION
             "\",\"capabilities\":{},\"clientInfo\":{\"name\":\"kgate_bench_execute\",\"version\":\"1\"}}}",
             m->next_id);
    /* The session id comes in the response head, which exchange() does not return: the head is read here. */
    {
        const char *headers[] = {"Accept: application/json, text/event-stream", NULL};
        ts_response_t resp;
        int64_t deadline = ts_now_ms() + timeout_ms;
        const char *sid;
        int st = 0;

        if ((err = ts_http_start(&m->http, "POST", "/mcp", headers, body, deadline, &resp)) != 0) {
            bench_set_detail("initialize: %s", resp.error);
        } else {
            st = resp.status;
            if ((sid = ts_response_header(&resp, "mcp-session-id")) != NULL)
                snprintf(m->session_id, sizeof(m->session_id), "%s", sid);
            if ((err = ts_http_read_all(&m->http, &resp, BODY_MAX, deadline)) != 0)
                bench_set_detail("initialize: %s", resp.error);
            else if (st != 200)
                err = bench_request_error("initialize", st, &resp);
            else if (m->session_id[0] == '\0' || json_object_get(resp.json, "result") == NULL) {
                bench_set_detail("initialize: no Mcp-Session-Id or no result: %.300s", resp.body);
                err = BENCH_EPROTO;
            }
        }
        ts_response_dispose(&resp);
        ++m->next_id;
        if (err != 0)
            return err;
    }
    err = exchange(m, "notifications/initialized", initialized, -1, &reply, &ms);
    json_decref(reply);
    return err;
}

int bench_mcp_run_code(bench_mcp_t *m, const char *code, const char *language, bench_outcome_t *out)
{
    long long id = m->next_id++;
    json_t *req = json_pack("{s:s, s:I, s:s, s:{s:s, s:{s:s, s:s}}}", "jsonrpc", "2.0", "id", (json_int_t)id, "method",
                            "tools/call", "params", "name", "run_code", "arguments", "code", code, "language", language);
    if (m->stateless) {
        json_t *params = json_object_get(req, "params");
        json_object_set_new(json_object_get(params, "arguments"), "context", json_string(BENCH_MCP_CONTEXT));
        json_object_set_new(params, "_meta",
                            json_pack("{s:s, s:{s:s, s:s}, s:{}}", "io.modelcontextprotocol/protocolVersion",
                                      BENCH_MCP_VERSION_STATELESS, "io.modelcontextprotocol/clientInfo", "name",
                                      "kgate_bench_execute", "version", "1", "io.modelcontextprotocol/clientCapabilities"));
    }
    char *body = json_dumps(req, JSON_COMPACT);
    json_t *reply = NULL, *result, *content, *error;
    const char *text;
    size_t len;
    int err;

    json_decref(req);
    memset(out, 0, sizeof(*out));
    err = exchange(m, "tools/call run_code", body, id, &reply, &out->ms);
    free(body);
    if (err != 0)
        return err;
    if ((error = json_object_get(reply, "error")) != NULL) {
        const char *message = json_string_value(json_object_get(error, "message"));
        char buf[512];
        snprintf(buf, sizeof(buf), "JSON-RPC error %lld: %s", (long long)json_integer_value(json_object_get(error, "code")),
                 message != NULL ? message : "?");
        out->error = wire_strdup(buf);
        goto Exit;
    }
    result = json_object_get(reply, "result");
    content = json_object_get(result, "content");
    text = NULL;
    for (size_t i = 0; i != json_array_size(content) && text == NULL; ++i) {
        json_t *block = json_array_get(content, i);
        const char *type = json_string_value(json_object_get(block, "type"));
        if (type != NULL && strcmp(type, "text") == 0)
            text = json_string_value(json_object_get(block, "text"));
    }
    if (text == NULL) {
        bench_set_detail("tools/call run_code: a result without a text block");
        err = BENCH_EPROTO;
        goto Exit;
    }
    /* the text ends each output with a newline: "2\n" for `1+1` */
    for (len = strlen(text); len != 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'); --len)
        ;
    if (json_is_true(json_object_get(result, "isError"))) {
        out->error = wire_strndup(text, len);
        goto Exit;
    }
    /*
     * The text holds stdout, stderr and results in order: IPython's warning on stderr when its output cache
     * fills (the 1000th execute, then every 200) comes before the `2`. So the result is the text's last line,
     * which must also be structuredContent's first result.
     */
    {
        const char *plain = json_string_value(json_object_get(
            json_array_get(json_object_get(json_object_get(result, "structuredContent"), "results"), 0), "text/plain"));
        size_t start = len;
        while (start != 0 && text[start - 1] != '\n')
            --start;
        if (plain == NULL || strlen(plain) != len - start || memcmp(plain, text + start, len - start) != 0) {
            bench_set_detail("tools/call run_code: the text's last line (%.*s) is not structuredContent's result (%s)",
                             (int)(len - start), text + start, plain != NULL ? plain : "none");
            err = BENCH_EPROTO;
            goto Exit;
        }
        out->result_text = wire_strndup(text + start, len - start);
    }

Exit:
    json_decref(reply);
    return err;
}

void bench_mcp_close(bench_mcp_t *m)
{
    char saved[512], header[128];
    ts_response_t resp;
    int st;

    if (m->timeout_ms == 0)
        return; /* never opened */
    if (m->session_id[0] != '\0') {
        const char *headers[] = {header, NULL};
        snprintf(saved, sizeof(saved), "%s", bench_detail());
        snprintf(header, sizeof(header), "Mcp-Session-Id: %s", m->session_id);
        st = ts_http_request_until(m->http.port, "DELETE", "/mcp", headers, NULL, ts_now_ms() + m->timeout_ms, &resp);
        if (st < 200 || st > 299) {
            int err = bench_request_error("DELETE /mcp", st, &resp);
            fprintf(stderr, "warning: ending MCP session %s: %s (%s)\n", m->session_id, bench_strerror(err), bench_detail());
        }
        ts_response_dispose(&resp);
        bench_set_detail("%s", saved);
        m->session_id[0] = '\0';
    }
    ts_http_dispose(&m->http);
    m->timeout_ms = 0;
}
