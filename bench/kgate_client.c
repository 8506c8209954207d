/* bench/kgate_client.c: kgate's HTTP API as the benchmark uses it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "wire/json_in.h"
#include "wire/alloc.h"
#include "stats.h"
#include "kgate_client.h"

#define JSON_BODY_MAX (1024 * 1024)
#define SSE_EVENT_MAX ((size_t)512 * 1024 * 1024)

/* Reads a non-200 response's body into the detail, so that errors say what kgate said. */
static int status_error(bench_http_t *c, bench_http_response_t *resp, const char *what)
{
    char *body = NULL;
    int status = resp->status;
    if (bench_http_read_all(c, resp, JSON_BODY_MAX, &body, NULL) != 0)
        body = NULL;
    bench_set_detail("%s: HTTP %d %.300s", what, status, body != NULL ? body : "");
    free(body);
    return BENCH_ESTATUS;
}

int bench_kgate_create_context(bench_http_t *c, const char *language, char **id)
{
    bench_http_response_t resp;
    json_t *req = json_pack("{ss}", "language", language);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    int err = bench_http_request(c, "POST", "/code/context", body, &resp);
    free(body);
    if (err != 0)
        return err;
    if (resp.status != 200)
        return status_error(c, &resp, "POST /code/context");
    char *text;
    if ((err = bench_http_read_all(c, &resp, JSON_BODY_MAX, &text, NULL)) != 0)
        return err;
    json_t *obj = json_loads(text, 0, NULL);
    const char *s = json_string_value(json_object_get(obj, "id"));
    if (s == NULL) {
        bench_set_detail("POST /code/context: no id in %.300s", text);
        err = BENCH_EPROTO;
    } else {
        *id = wire_strdup(s);
    }
    json_decref(obj);
    free(text);
    return err;
}

int bench_kgate_delete_context(bench_http_t *c, const char *id)
{
    bench_http_response_t resp;
    char path[512];
    snprintf(path, sizeof(path), "/code/contexts/%s", id);
    int err = bench_http_request(c, "DELETE", path, NULL, &resp);
    if (err != 0)
        return err;
    if (resp.status != 200)
        return status_error(c, &resp, "DELETE /code/contexts");
    return bench_http_discard_body(c, &resp);
}

int bench_kgate_probe(bench_http_t *c, const char *path, int *status)
{
    bench_http_response_t resp;
    int err = bench_http_request(c, "GET", path, NULL, &resp);
    if (err != 0)
        return err;
    *status = resp.status;
    return bench_http_discard_body(c, &resp);
}

/*
 * The SSE stream as it arrives: body bytes are read straight into one growable buffer, and each
 * event is parsed where it lies once its blank line is there (one copy of each byte, as a ZMQ
 * client has: the direct client reads frames in place).
 */
typedef struct st_sse_t {
    char *buf;
    size_t start, end, capacity; /* unread bytes: [start, end) */
    size_t scanned;              /* bytes from start already searched for an event's end */
    char *joined;                /* scratch for an event of several data lines */
    size_t joined_capacity;
} sse_t;

/* Handles one event's JSON; returns 1 when it was execution_complete, 0 otherwise, or an error. */
static int on_event(const char *data, size_t len, bench_outcome_t *out)
{
    /* the parser the direct client's wire_decode uses: both sides pay the same for JSON */
    json_t *ev = wire_json_parse(data, len);
    if (!json_is_object(ev)) {
        bench_set_detail("SSE event is not a JSON object: %.100s", data);
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

/* One event's lines [p, e): its data lines, joined by newlines, are the event's JSON. As
 * execd's compatibility framing sends bare JSON lines, those count as data lines too. */
static int on_event_block(sse_t *sse, const char *p, const char *e, bench_outcome_t *out)
{
    const char *data = NULL;
    size_t data_len = 0, lines = 0;

    while (p < e) {
        const char *nl = memchr(p, '\n', (size_t)(e - p)), *le = nl != NULL ? nl : e, *v = NULL;
        size_t n = (size_t)(le - p);
        if (n > 0 && p[n - 1] == '\r')
            --n;
        if (n >= 5 && memcmp(p, "data:", 5) == 0)
            v = p + 5 + (n > 5 && p[5] == ' ');
        else if (n > 0 && *p == '{')
            v = p;
        if (v != NULL) {
            size_t vn = (size_t)(p + n - v);
            if (lines++ == 0) {
                data = v, data_len = vn;
            } else {
                if (lines == 2) { /* the first line moves into the scratch buffer */
                    if (sse->joined_capacity < data_len + 1)
                        sse->joined = wire_realloc(sse->joined, sse->joined_capacity = data_len + 1);
                    memmove(sse->joined, data, data_len);
                    data = sse->joined;
                }
                if (sse->joined_capacity < data_len + 1 + vn)
                    sse->joined = wire_realloc(sse->joined, sse->joined_capacity = 2 * (data_len + 1 + vn));
                sse->joined[data_len] = '\n';
                memcpy(sse->joined + data_len + 1, v, vn);
                data = sse->joined;
                data_len += 1 + vn;
            }
        }
        p = le + 1;
    }
    return lines != 0 ? on_event(data, data_len, out) : 0;
}

/* Handles every complete event in the buffer; returns 1 once execution_complete was seen. */
static int on_events(sse_t *sse, bench_outcome_t *out)
{
    for (;;) {
        /* an event ends at an empty line: "\n\n" (or "\n\r\n") */
        char *p = sse->buf + sse->start, *end = sse->buf + sse->end, *q = p + sse->scanned, *blank = NULL;
        while (q < end && (q = memchr(q, '\n', (size_t)(end - q))) != NULL) {
            if (q + 1 < end && q[1] == '\n') {
                blank = q + 1;
                break;
            }
            if (q + 2 < end && q[1] == '\r' && q[2] == '\n') {
                blank = q + 2;
                break;
            }
            if (q + 2 >= end)
                break; /* the blank line may still come */
            ++q;
        }
        if (blank == NULL) {
            /* resume the search a little before the end: its "\n" may pair with what comes */
            sse->scanned = sse->end - sse->start > 2 ? sse->end - sse->start - 2 : 0;
            return 0;
        }
        int r = on_event_block(sse, p, q, out);
        sse->start = (size_t)(blank + 1 - sse->buf);
        sse->scanned = 0;
        if (r != 0)
            return r;
    }
}

int bench_kgate_execute(bench_http_t *c, const char *context_id, const char *code, size_t output_limit, bench_outcome_t *out)
{
    memset(out, 0, sizeof(*out));
    json_t *req = json_pack("{s{ss}ss}", "context", "id", context_id, "code", code);
    if (output_limit != 0)
        json_object_set_new(req, "output_limit", json_integer((json_int_t)output_limit));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);

    bench_http_response_t resp;
    sse_t sse = {0};
    int err, complete = 0;
    double t0 = bench_now_ms();
    if ((err = bench_http_request(c, "POST", "/code", body, &resp)) != 0)
        goto Exit;
    if (resp.status != 200) {
        err = status_error(c, &resp, "POST /code");
        goto Exit;
    }
    sse.capacity = 4 * 1024 * 1024;
    sse.buf = wire_malloc(sse.capacity);
    while (!complete) {
        if (sse.start > 0 && sse.capacity - sse.end < sse.capacity / 4) {
            /* keep the unread part at the front, so the buffer grows only for a big event */
            memmove(sse.buf, sse.buf + sse.start, sse.end - sse.start);
            sse.end -= sse.start;
            sse.start = 0;
        }
        if (sse.capacity - sse.end < 64 * 1024) {
            if (sse.capacity >= SSE_EVENT_MAX) {
                bench_set_detail("POST /code: an event exceeds %zu bytes", SSE_EVENT_MAX);
                err = BENCH_ETOOBIG;
                goto Exit;
            }
            sse.buf = wire_realloc(sse.buf, sse.capacity *= 2);
        }
        ssize_t n = bench_http_read_body(c, &resp, sse.buf + sse.end, sse.capacity - sse.end);
        if (n < 0) {
            err = (int)n;
            goto Exit;
        }
        if (n == 0) {
            bench_set_detail("POST /code: the stream ended without execution_complete");
            err = BENCH_EPROTO;
            goto Exit;
        }
        sse.end += (size_t)n;
        if ((complete = on_events(&sse, out)) < 0) {
            err = complete;
            goto Exit;
        }
    }
    out->ms = bench_now_ms() - t0;
    /* Whatever follows the last event (the chunked terminator) is read outside the timing. */
    err = bench_http_discard_body(c, &resp);

Exit:
    if (err != 0 && err != BENCH_ESTATUS)
        bench_http_close(c);
    free(sse.buf);
    free(sse.joined);
    free(body);
    return err;
}
