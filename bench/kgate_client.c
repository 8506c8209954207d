/* bench/kgate_client.c: kgate's HTTP API as the benchmark uses it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "wire/json_in.h"
#include "wire/alloc.h"
#include "support/api.h"
#include "support/base.h"
#include "support/stream.h"
#include "stats.h"
#include "kgate_client.h"

#define JSON_BODY_MAX (1024 * 1024)
#define SSE_BUFFER_INITIAL ((size_t)4 * 1024 * 1024)
#define SSE_EVENT_MAX ((size_t)512 * 1024 * 1024)

static int64_t deadline_after(unsigned timeout_ms)
{
    return ts_now_ms() + timeout_ms;
}

int bench_kgate_create_context(ts_http_t *c, unsigned timeout_ms, const char *language, char **id)
{
    ts_response_t resp;
    int st = ts_context_create_until(c->port, NULL, language, deadline_after(timeout_ms), id, &resp), err = 0;
    if (st != 200)
        err = bench_request_error("POST /code/context", st, &resp);
    else if (*id == NULL) {
        bench_set_detail("POST /code/context: no id in %.300s", resp.body);
        err = BENCH_EPROTO;
    }
    ts_response_dispose(&resp);
    return err;
}

void bench_kgate_drop_context(ts_http_t *c, unsigned timeout_ms, const char *id)
{
    if (id == NULL)
        return;
    /* Keep the first error's detail: deleting is clean-up, its failure only a warning. */
    char saved[512];
    snprintf(saved, sizeof(saved), "%s", bench_detail());
    ts_response_t resp;
    int st = ts_context_delete_until(c->port, NULL, id, deadline_after(timeout_ms), &resp);
    if (st != 200) {
        int err = bench_request_error("DELETE /code/contexts", st, &resp);
        fprintf(stderr, "warning: deleting context %s: %s (%s)\n", id, bench_strerror(err), bench_detail());
    }
    ts_response_dispose(&resp);
    bench_set_detail("%s", saved);
}

int bench_kgate_start_kernel(ts_http_t *c, unsigned timeout_ms, const char *name, char **id)
{
    char body[128];
    ts_response_t resp;
    int st, err = 0;

    *id = NULL;
    snprintf(body, sizeof(body), "{\"name\":\"%s\"}", name);
    st = ts_http_request_until(c->port, "POST", "/api/kernels", NULL, body, deadline_after(timeout_ms), &resp);
    if (st != 201) {
        err = bench_request_error("POST /api/kernels", st, &resp);
    } else if (json_string_value(json_object_get(resp.json, "id")) == NULL) {
        bench_set_detail("POST /api/kernels: no id in %.300s", resp.body);
        err = BENCH_EPROTO;
    } else {
        *id = wire_strdup(json_string_value(json_object_get(resp.json, "id")));
    }
    ts_response_dispose(&resp);
    return err;
}

void bench_kgate_shutdown_kernel(ts_http_t *c, unsigned timeout_ms, const char *id)
{
    char saved[512], path[160];
    ts_response_t resp;
    int st;

    if (id == NULL)
        return;
    snprintf(saved, sizeof(saved), "%s", bench_detail());
    snprintf(path, sizeof(path), "/api/kernels/%s", id);
    st = ts_http_request_until(c->port, "DELETE", path, NULL, NULL, deadline_after(timeout_ms), &resp);
    if (st != 204) {
        int err = bench_request_error("DELETE /api/kernels", st, &resp);
        fprintf(stderr, "warning: shutting kernel %s down: %s (%s)\n", id, bench_strerror(err), bench_detail());
    }
    ts_response_dispose(&resp);
    bench_set_detail("%s", saved);
}

/* Handles one event's JSON; returns 1 when it was execution_complete, 0 otherwise, or an error. */
static int on_event(const char *data, size_t len, bench_outcome_t *out)
{
    /* the parser the direct client's wire_decode uses: both sides pay the same for JSON */
    json_t *ev = wire_json_parse(data, len);
    if (!json_is_object(ev)) {
        bench_set_detail("SSE event is not a JSON object: %.*s", (int)(len < 100 ? len : 100), data);
        json_decref(ev);
        return BENCH_EPROTO;
    }
    const char *type = json_string_value(json_object_get(ev, "type"));
    int complete = 0;
    if (type == NULL) {
    } else if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        ++out->stream_messages;
        if (type[3] == 'o')
            out->stdout_bytes += json_string_length(json_object_get(ev, "text"));
    } else if (strcmp(type, "result") == 0) {
        const char *text = json_string_value(json_object_get(json_object_get(ev, "results"), "text/plain"));
        if (text != NULL && out->result_text == NULL)
            out->result_text = wire_strdup(text);
    } else if (strcmp(type, "error") == 0) {
        json_t *e = json_object_get(ev, "error");
        const char *ename = json_string_value(json_object_get(e, "ename"));
        const char *evalue = json_string_value(json_object_get(e, "evalue"));
        char buf[512];
        snprintf(buf, sizeof(buf), "%s: %s", ename ? ename : "?", evalue ? evalue : "");
        if (out->error == NULL)
            out->error = wire_strdup(buf);
    } else if (strcmp(type, "status") == 0) {
        const char *text = json_string_value(json_object_get(ev, "text"));
        if (text != NULL && strcmp(text, "output_truncated") == 0)
            out->output_truncated = 1;
    } else if (strcmp(type, "execution_complete") == 0) {
        complete = 1;
    }
    json_decref(ev);
    return complete;
}

int bench_kgate_execute(ts_http_t *c, unsigned timeout_ms, const char *context_id, const char *code, size_t output_limit,
                        bench_outcome_t *out)
{
    memset(out, 0, sizeof(*out));
    json_t *req = ts_code_body(context_id, NULL, code);
    if (output_limit != 0)
        json_object_set_new(req, "output_limit", json_integer((json_int_t)output_limit));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);

    ts_response_t resp;
    ts_sse_reader_t sse;
    ts_sse_event_t ev;
    int err, complete = 0;
    ts_sse_reader_init(&sse, SSE_BUFFER_INITIAL, SSE_EVENT_MAX);
    int64_t deadline = deadline_after(timeout_ms);
    double t0 = bench_now_ms();
    if ((err = ts_http_start(c, "POST", "/code", NULL, body, deadline, &resp)) != 0) {
        bench_set_detail("POST /code: %s", resp.error);
        goto Exit;
    }
    if (resp.status != 200) {
        /* the body says why; without it (it could not be read) the status alone does */
        ts_http_read_all(c, &resp, JSON_BODY_MAX, deadline);
        err = bench_request_error("POST /code", resp.status, &resp);
        goto Exit;
    }
    while (!complete) {
        int got = ts_sse_reader_next(&sse, c, &resp, deadline, &ev);
        if (got < 0) {
            bench_set_detail("POST /code: %s", resp.error);
            err = got;
            goto Exit;
        }
        if (got == 0) {
            bench_set_detail("POST /code: the stream ended without execution_complete");
            err = BENCH_EPROTO;
            goto Exit;
        }
        if ((complete = on_event(ev.data, ev.len, out)) < 0) {
            err = complete;
            goto Exit;
        }
    }
    out->ms = bench_now_ms() - t0;
    /* Whatever follows the last event (the chunked terminator) is read outside the timing. */
    if ((err = ts_http_discard_body(c, &resp, deadline)) != 0)
        bench_set_detail("POST /code: %s", resp.error);

Exit:
    if (err != 0 && err != BENCH_ESTATUS)
        ts_http_close(c);
    ts_sse_reader_dispose(&sse);
    ts_response_dispose(&resp);
    free(body);
    return err;
}
