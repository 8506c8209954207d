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

/* SSE parsing state: a growable line, and the `data` of the event being assembled. */
typedef struct st_sse_t {
    char *line;
    size_t line_len, line_cap;
    char *data;
    size_t data_len, data_cap;
    int has_data;
} sse_t;

static void append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n + 1 > *cap) {
        size_t ncap = *cap ? *cap : 4096;
        while (ncap < *len + n + 1)
            ncap *= 2;
        *buf = wire_realloc(*buf, ncap);
        *cap = ncap;
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = '\0';
}

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

/* One line of the stream (without its line end); returns as on_event, or 0 when nothing completed. */
static int on_line(sse_t *sse, bench_outcome_t *out)
{
    const char *l = sse->line;
    size_t n = sse->line_len;
    if (n > 0 && l[n - 1] == '\r')
        --n;
    if (n == 0) {
        int r = 0;
        if (sse->has_data)
            r = on_event(sse->data, sse->data_len, out);
        sse->data_len = 0;
        sse->has_data = 0;
        return r;
    }
    if (n >= 5 && memcmp(l, "data:", 5) == 0) {
        l += 5, n -= 5;
        if (n > 0 && *l == ' ')
            ++l, --n;
    } else if (*l != '{') {
        return 0; /* id:, event:, retry:, comments */
    }
    /* execd's compatibility framing sends bare JSON lines: treat them as data lines. */
    if (sse->has_data) {
        if (sse->data_len + 1 > SSE_EVENT_MAX)
            return BENCH_ETOOBIG;
        append(&sse->data, &sse->data_len, &sse->data_cap, "\n", 1);
    }
    append(&sse->data, &sse->data_len, &sse->data_cap, l, n);
    sse->has_data = 1;
    return 0;
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
    char buf[65536];
    int err, complete = 0;
    double t0 = bench_now_ms();
    if ((err = bench_http_request(c, "POST", "/code", body, &resp)) != 0)
        goto Exit;
    if (resp.status != 200) {
        err = status_error(c, &resp, "POST /code");
        goto Exit;
    }
    while (!complete) {
        ssize_t n = bench_http_read_body(c, &resp, buf, sizeof(buf));
        if (n < 0) {
            err = (int)n;
            goto Exit;
        }
        if (n == 0) {
            bench_set_detail("POST /code: the stream ended without execution_complete");
            err = BENCH_EPROTO;
            goto Exit;
        }
        const char *p = buf, *end = buf + n;
        while (p < end && !complete) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            size_t take = (size_t)((nl != NULL ? nl : end) - p);
            if (sse.line_len + take > SSE_EVENT_MAX) {
                bench_set_detail("POST /code: an event exceeds %zu bytes", SSE_EVENT_MAX);
                err = BENCH_ETOOBIG;
                goto Exit;
            }
            append(&sse.line, &sse.line_len, &sse.line_cap, p, take);
            p += take;
            if (nl == NULL)
                break;
            ++p;
            int r = on_line(&sse, out);
            sse.line_len = 0;
            if (r < 0) {
                err = r;
                goto Exit;
            }
            complete = r;
        }
    }
    out->ms = bench_now_ms() - t0;
    /* Whatever follows the last event (the chunked terminator) is read outside the timing. */
    err = bench_http_discard_body(c, &resp);

Exit:
    if (err != 0 && err != BENCH_ESTATUS)
        bench_http_close(c);
    free(sse.line);
    free(sse.data);
    free(body);
    return err;
}
