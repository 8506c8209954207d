/* tests/support/src/events.c: a stream's events with their JSON: kept, searched and summarised. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/base.h"
#include "support/events.h"

void ts_events_push(ts_events_t *evs, const ts_sse_event_t *ev)
{
    if (evs->n >= TS_MAX_EVENTS) {
        evs->truncated = 1;
        return;
    }
    if (evs->n == evs->cap) {
        evs->cap = evs->cap ? evs->cap * 2 : 32;
        evs->v = ts_realloc(evs->v, evs->cap * sizeof(*evs->v));
    }
    ts_event_t *e = &evs->v[evs->n++];
    *e = (ts_event_t){.id = ev->id, .bare = ev->bare, .recv_ms = ts_now_ms()};
    e->data = ts_strndup(ev->data, ev->len);
    /* "\u0000" is valid JSON (kernels print NUL bytes): clients in Python, Go and JS read it */
    e->json = json_loadb(e->data, ev->len, JSON_ALLOW_NUL, NULL);
    json_t *t = json_object_get(e->json, "type");
    e->type = json_is_string(t) ? json_string_value(t) : "";
}

void ts_events_dispose(ts_events_t *evs)
{
    for (size_t i = 0; i < evs->n; i++) {
        free(evs->v[i].data);
        json_decref(evs->v[i].json);
    }
    free(evs->v);
    memset(evs, 0, sizeof(*evs));
}

long ts_events_find(const ts_events_t *evs, const char *type, size_t from)
{
    for (size_t i = from; i < evs->n; i++)
        if (strcmp(evs->v[i].type, type) == 0)
            return (long)i;
    return -1;
}

size_t ts_events_count(const ts_events_t *evs, const char *type)
{
    size_t c = 0;
    for (size_t i = 0; i < evs->n; i++)
        c += strcmp(evs->v[i].type, type) == 0;
    return c;
}

char *ts_events_text(const ts_events_t *evs, const char *type)
{
    size_t len = 0, cap = 256;
    char *buf = ts_malloc(cap);
    buf[0] = '\0';
    for (size_t i = 0; i < evs->n; i++) {
        json_t *t = json_object_get(evs->v[i].json, "text");
        if (strcmp(evs->v[i].type, type) != 0 || !json_is_string(t))
            continue;
        /* a whole run's text: the tests print up to a few hundred MiB */
        size_t n = json_string_length(t);
        if (len + n + 1 > TS_MAX_TEXT)
            break;
        if (len + n + 1 > cap) {
            while (cap < len + n + 1)
                cap *= 2;
            buf = ts_realloc(buf, cap);
        }
        memcpy(buf + len, json_string_value(t), n);
        len += n;
        buf[len] = '\0';
    }
    return buf;
}

const char *ts_events_summary(const ts_events_t *evs, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    len += (size_t)snprintf(buf, size, "%zu events%s%s%s%s%s:", evs->n, evs->ended ? ", ended" : "",
                            evs->timed_out ? ", TIMED OUT" : "", evs->truncated ? ", truncated" : "",
                            evs->error[0] ? ", error: " : "", evs->error);
    for (size_t i = 0; i < evs->n && len + 1 < size; i++) {
        /* Long streams: show the head and the tail. */
        if (evs->n > 24 && i == 12) {
            len += (size_t)snprintf(buf + len, size - len, "\n  ... %zu more ...", evs->n - 24);
            i = evs->n - 12;
        }
        if (len + 1 >= size)
            break;
        len += (size_t)snprintf(buf + len, size - len, "\n  [%zu] id=%lld %.160s", i, evs->v[i].id, evs->v[i].data);
    }
    return buf;
}
