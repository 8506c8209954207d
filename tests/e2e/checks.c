/* tests/e2e/checks.c: checks of kgate's observable behaviour (error bodies, stream envelopes, output). */
#include "checks.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/events.h"
#include "support/http.h"

__attribute__((format(printf, 3, 4))) static bool fail(char *msg, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, size, fmt, ap);
    va_end(ap);
    return false;
}

/* Appends the stream's summary to a failure message, so that every failure shows what came. */
static bool fail_run(const ts_events_t *evs, char *msg, size_t size, const char *what)
{
    size_t len = (size_t)snprintf(msg, size, "%s; stream: ", what);
    if (len < size)
        ts_events_summary(evs, msg + len, size - len);
    return false;
}

bool e2e_check_error(const ts_response_t *r, int status, const char *code, char *msg, size_t size)
{
    const char *body = r->body != NULL ? r->body : "";
    if (r->status != status)
        return fail(msg, size, "expected HTTP %d, got %d%s%s; body: %.800s", status, r->status, r->error[0] ? ": " : "", r->error,
                    body);
    if (!json_is_object(r->json))
        return fail(msg, size, "HTTP %d error body is not a JSON object: '%.800s'", status, body);
    json_t *c = json_object_get(r->json, "code"), *m = json_object_get(r->json, "message");
    if (!json_is_string(c) || json_string_length(c) == 0)
        return fail(msg, size, "error body lacks a non-empty string \"code\": %.800s", body);
    if (!json_is_string(m) || json_string_length(m) == 0)
        return fail(msg, size, "error body lacks a non-empty string \"message\": %.800s", body);
    if (code != NULL && strcmp(json_string_value(c), code) != 0)
        return fail(msg, size, "expected error code %s, got %s; body: %.800s", code, json_string_value(c), body);
    return true;
}

int e2e_is_uuid(const char *s)
{
    static const int groups[] = {8, 4, 4, 4, 12};
    if (s == NULL)
        return 0;
    for (size_t g = 0; g < 5; g++) {
        for (int i = 0; i < groups[g]; i++, s++)
            if (!isxdigit((unsigned char)*s))
                return 0;
        if (g < 4 && *s++ != '-')
            return 0;
    }
    return *s == '\0';
}

bool e2e_check_run(const ts_events_t *evs, const char *ctx_id, int framing, char *msg, size_t size)
{
    char what[512];
    if (!evs->ended)
        return fail_run(evs, msg, size,
                        evs->timed_out ? "the stream did not end before the deadline" : "the stream did not end cleanly");
    if (evs->n < 3)
        return fail_run(evs, msg, size, "expected at least init, ping and execution_complete");
    for (size_t i = 0; i < evs->n; i++) {
        const ts_event_t *ev = &evs->v[i];
        if (!json_is_object(ev->json)) {
            snprintf(what, sizeof(what), "event %zu is not a JSON object", i);
            return fail_run(evs, msg, size, what);
        }
        if (ev->type[0] == '\0') {
            snprintf(what, sizeof(what), "event %zu has no string \"type\"", i);
            return fail_run(evs, msg, size, what);
        }
        if (!json_is_integer(json_object_get(ev->json, "timestamp"))) {
            snprintf(what, sizeof(what), "event %zu (%s) has no integer \"timestamp\"", i, ev->type);
            return fail_run(evs, msg, size, what);
        }
        if (framing == E2E_FRAMING_SSE) {
            if (ev->bare || ev->id < 0) {
                snprintf(what, sizeof(what), "event %zu (%s) is not framed as SSE `id: <n>` + `data:`", i, ev->type);
                return fail_run(evs, msg, size, what);
            }
            if (i > 0 && ev->id <= evs->v[i - 1].id) {
                snprintf(what, sizeof(what), "event ids do not increase: event %zu has id %lld after %lld", i, ev->id,
                         evs->v[i - 1].id);
                return fail_run(evs, msg, size, what);
            }
        } else if (!ev->bare || ev->id != -1) {
            snprintf(what, sizeof(what), "event %zu (%s) is not framed as a bare JSON line (execd compat)", i, ev->type);
            return fail_run(evs, msg, size, what);
        }
    }
    if (strcmp(evs->v[0].type, "init") != 0)
        return fail_run(evs, msg, size, "the first event is not init");
    json_t *text = json_object_get(evs->v[0].json, "text");
    if (!json_is_string(text))
        return fail_run(evs, msg, size, "init has no string text");
    if (ctx_id != NULL && strcmp(json_string_value(text), ctx_id) != 0) {
        snprintf(what, sizeof(what), "init text is not the context id %s", ctx_id);
        return fail_run(evs, msg, size, what);
    }
    if (ctx_id == NULL && !e2e_is_uuid(json_string_value(text)))
        return fail_run(evs, msg, size, "init text is not a UUID");
    if (strcmp(evs->v[1].type, "ping") != 0)
        return fail_run(evs, msg, size, "the second event (right after init) is not ping");
    size_t completes = ts_events_count(evs, "execution_complete");
    if (completes != 1) {
        snprintf(what, sizeof(what), "execution_complete occurs %zu times, expected exactly once", completes);
        return fail_run(evs, msg, size, what);
    }
    if (strcmp(evs->v[evs->n - 1].type, "execution_complete") != 0)
        return fail_run(evs, msg, size, "execution_complete is not the last event");
    return true;
}

bool e2e_check_text(const ts_events_t *evs, const char *type, const char *expected, char *msg, size_t size)
{
    char *got = ts_events_text(evs, type);
    size_t glen = strlen(got), elen = strlen(expected), i = 0;
    while (i < glen && i < elen && got[i] == expected[i])
        i++;
    bool ok = i == glen && i == elen;
    if (!ok) {
        char what[1024];
        size_t from = i > 20 ? i - 20 : 0;
        snprintf(what, sizeof(what),
                 "%s text differs at byte %zu (got %zu bytes, expected %zu): got ...'%.60s'..., expected ...'%.60s'...", type, i,
                 glen, elen, got + from, expected + from);
        fail_run(evs, msg, size, what);
    }
    free(got);
    return ok;
}

const ts_event_t *e2e_find_result(const ts_events_t *evs, const char *mime)
{
    for (size_t i = 0; i < evs->n; i++) {
        if (strcmp(evs->v[i].type, "result") != 0)
            continue;
        json_t *results = json_object_get(evs->v[i].json, "results");
        if (json_object_get(results, mime) != NULL)
            return &evs->v[i];
    }
    return NULL;
}
