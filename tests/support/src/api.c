/* tests/support/src/api.c: kgate's API calls that the tests and the benchmark share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/base.h"
#include "support/api.h"
#include "support/stream.h"

static char *dump_compact(json_t *body)
{
    char *text = json_dumps(body, JSON_COMPACT);
    if (text == NULL)
        abort();
    return text;
}

int ts_post_json(unsigned short port, const char *path, const char *const *headers, json_t *body, ts_response_t *out)
{
    char *text = dump_compact(body);
    int st = ts_http_request(port, "POST", path, headers, text, out);
    free(text);
    return st;
}

int ts_context_create_until(unsigned short port, const char *const *headers, const char *language, int64_t deadline_ms, char **id,
                            ts_response_t *resp)
{
    ts_response_t local;
    ts_response_t *r = resp != NULL ? resp : &local;
    json_t *body = json_object();
    json_object_set_new(body, "language", json_string(language));
    char *text = dump_compact(body);
    json_decref(body);
    int st = ts_http_request_until(port, "POST", "/code/context", headers, text, deadline_ms, r);
    free(text);
    if (id != NULL) {
        json_t *jid = json_object_get(r->json, "id");
        *id = st == 200 && json_is_string(jid) ? strdup(json_string_value(jid)) : NULL;
    }
    if (resp == NULL)
        ts_response_dispose(&local);
    return st;
}

int ts_context_create(unsigned short port, const char *const *headers, const char *language, char **id, ts_response_t *resp)
{
    return ts_context_create_until(port, headers, language, ts_now_ms() + TS_REQUEST_MS, id, resp);
}

int ts_context_delete_until(unsigned short port, const char *const *headers, const char *id, int64_t deadline_ms,
                            ts_response_t *resp)
{
    char path[512];
    snprintf(path, sizeof(path), "/code/contexts/%s", id);
    ts_response_t local;
    ts_response_t *r = resp != NULL ? resp : &local;
    int st = ts_http_request_until(port, "DELETE", path, headers, NULL, deadline_ms, r);
    if (resp == NULL)
        ts_response_dispose(&local);
    return st;
}

int ts_context_delete(unsigned short port, const char *const *headers, const char *id)
{
    return ts_context_delete_until(port, headers, id, ts_now_ms() + TS_REQUEST_MS, NULL);
}

json_t *ts_code_body(const char *ctx_id, const char *language, const char *code)
{
    json_t *body = json_object();
    if (ctx_id != NULL || language != NULL) {
        json_t *ctx = json_object();
        if (ctx_id != NULL)
            json_object_set_new(ctx, "id", json_string(ctx_id));
        if (language != NULL)
            json_object_set_new(ctx, "language", json_string(language));
        json_object_set_new(body, "context", ctx);
    }
    json_object_set_new(body, "code", json_string(code));
    return body;
}

int ts_run_code(unsigned short port, const char *const *headers, const char *ctx_id, const char *language, const char *code,
                int timeout_ms, ts_events_t *out, ts_response_t *resp)
{
    memset(out, 0, sizeof(*out));
    if (resp != NULL)
        memset(resp, 0, sizeof(*resp));
    json_t *body = ts_code_body(ctx_id, language, code);
    char *text = dump_compact(body);
    json_decref(body);
    int64_t deadline = ts_now_ms() + timeout_ms;
    ts_stream_t *s = ts_stream_open(port, "POST", "/code", headers, text, deadline, out->error);
    free(text);
    if (s == NULL)
        return TS_EIO;
    int status = ts_stream_response(s)->status;
    if (ts_stream_is_sse(s))
        ts_stream_collect(s, deadline, 0, out);
    if (resp != NULL)
        ts_stream_take_response(s, resp);
    ts_stream_close(s);
    return status;
}
