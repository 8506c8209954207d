/* tests/support/src/stream.c: SSE bodies parsed where they arrive, and the e2e streams that collect them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "support/base.h"
#include "support/stream.h"

#define READ_ROOM (64 * 1024)              /* free space below which the buffer grows before a read */
#define STREAM_READER_INITIAL (128 * 1024) /* e2e streams: most events are small; the buffer grows for big ones */

void ts_sse_reader_init(ts_sse_reader_t *r, size_t initial, size_t max)
{
    memset(r, 0, sizeof(*r));
    ts_sse_parser_init(&r->parser);
    r->initial = initial > 2 * READ_ROOM ? initial : 2 * READ_ROOM;
    r->max = max > r->initial ? max : r->initial;
}

void ts_sse_reader_dispose(ts_sse_reader_t *r)
{
    ts_sse_parser_dispose(&r->parser);
    free(r->buf);
    r->buf = NULL;
    r->start = r->end = r->capacity = 0;
}

int ts_sse_reader_parse(ts_sse_reader_t *r, ts_sse_event_t *ev)
{
    size_t used;
    int got = ts_sse_parse(&r->parser, r->buf + r->start, r->end - r->start, &used, ev);
    r->start += used;
    return got;
}

int ts_sse_reader_next(ts_sse_reader_t *r, ts_http_t *c, ts_response_t *resp, int64_t deadline_ms, ts_sse_event_t *ev)
{
    if (r->buf == NULL) {
        r->capacity = r->initial;
        r->buf = ts_malloc(r->capacity);
    }
    for (;;) {
        if (ts_sse_reader_parse(r, ev))
            return 1;
        if (r->start > 0 && r->capacity - r->end < r->capacity / 4) {
            /* keep the unread part at the front, so the buffer grows only for a big event */
            memmove(r->buf, r->buf + r->start, r->end - r->start);
            r->end -= r->start;
            r->start = 0;
        }
        if (r->capacity - r->end < READ_ROOM) {
            if (r->capacity >= r->max) {
                snprintf(resp->error, sizeof(resp->error), "an event exceeded %zu bytes", r->max);
                return TS_ETOOBIG;
            }
            r->capacity *= 2;
            r->buf = ts_realloc(r->buf, r->capacity);
        }
        ssize_t n = ts_http_read_body(c, resp, r->buf + r->end, r->capacity - r->end, deadline_ms);
        if (n <= 0)
            return (int)n;
        r->end += (size_t)n;
    }
}

struct st_ts_stream_t {
    ts_http_t http;
    ts_response_t resp;
    ts_sse_reader_t reader;
    int is_sse;
};

static void set_err(char *err, const char *msg)
{
    if (err != NULL)
        snprintf(err, 256, "%s", msg);
}

ts_stream_t *ts_stream_open(unsigned short port, const char *method, const char *path, const char *const *headers, const char *body,
                            int64_t deadline_ms, char *err)
{
    ts_stream_t *s = ts_malloc(sizeof(*s));
    memset(s, 0, sizeof(*s));
    ts_http_init(&s->http, port, 0);
    ts_sse_reader_init(&s->reader, STREAM_READER_INITIAL, TS_MAX_BODY);
    if (ts_http_start(&s->http, method, path, headers, body, deadline_ms, &s->resp) != 0) {
        set_err(err, s->resp.error);
        ts_stream_close(s);
        return NULL;
    }
    const char *ct = ts_response_header(&s->resp, "Content-Type");
    s->is_sse = ct != NULL && strncasecmp(ct, "text/event-stream", 17) == 0;
    if (!s->is_sse && ts_http_read_all(&s->http, &s->resp, TS_MAX_BODY, deadline_ms) != 0) {
        set_err(err, s->resp.error);
        ts_stream_close(s);
        return NULL;
    }
    if (s->resp.body == NULL)
        s->resp.body = ts_strndup("", 0);
    return s;
}

const ts_response_t *ts_stream_response(const ts_stream_t *s)
{
    return &s->resp;
}

int ts_stream_is_sse(const ts_stream_t *s)
{
    return s->is_sse;
}

void ts_stream_take_response(ts_stream_t *s, ts_response_t *out)
{
    *out = s->resp;
    memset(&s->resp, 0, sizeof(s->resp));
    s->is_sse = 0;
}

int ts_stream_next(ts_stream_t *s, int64_t deadline_ms, ts_events_t *out)
{
    size_t before = out->n;
    int truncated_before = out->truncated;
    ts_sse_event_t ev;
    int r = s->is_sse ? ts_sse_reader_next(&s->reader, &s->http, &s->resp, deadline_ms, &ev) : 0;
    if (r <= 0) {
        out->end_ms = ts_now_ms();
        if (r == 0)
            out->ended = 1;
        else if (out->end_ms >= deadline_ms)
            out->timed_out = 1;
        else
            snprintf(out->error, sizeof(out->error), "%s", s->resp.error);
        return r;
    }
    do
        ts_events_push(out, &ev);
    while (ts_sse_reader_parse(&s->reader, &ev));
    return (int)(out->n - before) + (out->truncated != truncated_before);
}

int ts_stream_collect(ts_stream_t *s, int64_t deadline_ms, size_t max_events, ts_events_t *out)
{
    if (max_events == 0 || max_events > TS_MAX_EVENTS)
        max_events = TS_MAX_EVENTS;
    size_t seen = 0;
    for (;;) {
        int r = ts_stream_next(s, deadline_ms, out);
        if (r <= 0)
            return r;
        for (; seen < out->n; seen++)
            if (strcmp(out->v[seen].type, "execution_complete") == 0) {
                int64_t grace = ts_now_ms() + TS_END_GRACE_MS;
                if (grace < deadline_ms)
                    deadline_ms = grace;
            }
        if (out->n >= max_events || out->truncated) {
            out->truncated = 1;
            out->end_ms = ts_now_ms();
            return TS_ETOOBIG;
        }
    }
}

void ts_stream_close(ts_stream_t *s)
{
    if (s == NULL)
        return;
    ts_http_dispose(&s->http);
    ts_response_dispose(&s->resp);
    ts_sse_reader_dispose(&s->reader);
    free(s);
}
