/* tests/support/src/sse.c: SSE events found in place; only an event of several data lines is copied, to join them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/base.h"
#include "support/sse.h"

static void reset_event(ts_sse_parser_t *p)
{
    p->line = p->scanned = 0;
    p->has_data = p->bare = p->joined = 0;
    p->id = -1;
    p->data_off = p->data_len = 0;
    p->join_len = 0;
}

void ts_sse_parser_init(ts_sse_parser_t *p)
{
    memset(p, 0, sizeof(*p));
    reset_event(p);
}

void ts_sse_parser_dispose(ts_sse_parser_t *p)
{
    free(p->join);
    ts_sse_parser_init(p);
}

static void join(ts_sse_parser_t *p, const char *s, size_t n)
{
    if (p->join_len + n > p->join_cap) {
        p->join_cap = 2 * (p->join_len + n);
        p->join = ts_realloc(p->join, p->join_cap);
    }
    memcpy(p->join + p->join_len, s, n);
    p->join_len += n;
}

/* One data line at `v` (`n` bytes) of the event that starts at `ev0`. */
static void add_data(ts_sse_parser_t *p, const char *ev0, const char *v, size_t n)
{
    if (!p->has_data) {
        p->has_data = 1;
        p->data_off = (size_t)(v - ev0);
        p->data_len = n;
        return;
    }
    if (!p->joined) {
        p->joined = 1;
        p->join_len = 0;
        join(p, ev0 + p->data_off, p->data_len);
    }
    join(p, "\n", 1);
    join(p, v, n);
}

static void on_line(ts_sse_parser_t *p, const char *ev0, const char *line, size_t n)
{
    if (line[0] == ':')
        return;
    if (line[0] == '{' || line[0] == '[') {
        add_data(p, ev0, line, n);
        p->bare = 1;
        return;
    }
    const char *colon = memchr(line, ':', n), *v = colon != NULL ? colon + 1 : line + n, *end = line + n;
    size_t name_len = (size_t)((colon != NULL ? colon : end) - line);
    if (v < end && *v == ' ')
        ++v;
    if (name_len == 4 && memcmp(line, "data", 4) == 0) {
        add_data(p, ev0, v, (size_t)(end - v));
    } else if (name_len == 2 && memcmp(line, "id", 2) == 0) {
        char tmp[32], *tail;
        size_t vn = (size_t)(end - v);
        snprintf(tmp, sizeof(tmp), "%.*s", (int)(vn < 31 ? vn : 31), v);
        long long id = strtoll(tmp, &tail, 10);
        p->id = tail != tmp && *tail == '\0' ? id : -2;
    }
}

int ts_sse_parse(ts_sse_parser_t *p, const char *buf, size_t len, size_t *consumed, ts_sse_event_t *ev)
{
    size_t base = 0; /* where the pending event starts in buf */
    *consumed = 0;
    if (len == 0)
        return 0;
    for (;;) {
        const char *ev0 = buf + base, *end = buf + len, *line = ev0 + p->line, *q = ev0 + p->scanned;
        /* Each byte is searched twice, for LF and for CR (a lone CR ends a line too); lines are handled
         * as they complete, so no second walk over the event follows its end. */
        const char *nl = memchr(q, '\n', (size_t)(end - q));
        const char *cr = memchr(q, '\r', (size_t)((nl != NULL ? nl : end) - q)), *t = cr != NULL ? cr : nl;
        /* A CR last in a non-blank line may be half of a CRLF: wait for the next byte, which the event needs anyway. */
        if (t == NULL || (*t == '\r' && t + 1 == end && t > line)) {
            p->scanned = (size_t)((t != NULL ? t : end) - ev0);
            *consumed = base;
            return 0;
        }
        /* A blank line's CR last in the buffer completes the event now: a LF after it would only
         * make one more blank line, which ends no event. */
        const char *next = t + 1;
        if (*t == '\r' && next < end && *next == '\n')
            ++next;
        if (t > line) {
            on_line(p, ev0, line, (size_t)(t - line));
            p->line = p->scanned = (size_t)(next - ev0);
            continue;
        }
        int complete = p->has_data;
        if (complete) {
            ev->data = p->joined ? p->join : ev0 + p->data_off;
            ev->len = p->joined ? p->join_len : p->data_len;
            ev->id = p->id;
            ev->bare = p->bare;
        }
        base = (size_t)(next - buf);
        reset_event(p);
        if (complete) {
            *consumed = base;
            return 1;
        }
    }
}
