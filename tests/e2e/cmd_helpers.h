/* tests/e2e/cmd_helpers.h: streamed POSTs and small JSON requests for the command and session tests (Criterion asserts inside). */
#ifndef KGATE_E2E_CMD_HELPERS_H
#define KGATE_E2E_CMD_HELPERS_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "checks.h"
#include "shared.h"
#include "support/base.h"
#include "support/events.h"
#include "support/stream.h"

#define CH_RUN_MS 60000 /* one short command or session run, from POST to the end of its stream */

static inline unsigned short ch_port(void)
{
    return e2e_shared()->port;
}

/* POSTs `body` (stolen) to `path` and collects the whole event stream; asserts HTTP 200 and a clean end. */
static inline void ch_stream(const char *path, json_t *body, ts_events_t *out)
{
    static const char *const headers[] = {"Content-Type: application/json", NULL};
    char *text = json_dumps(body, JSON_COMPACT), err[256] = "";
    ts_stream_t *s;

    json_decref(body);
    memset(out, 0, sizeof(*out));
    s = ts_stream_open(ch_port(), "POST", path, headers, text, ts_now_ms() + CH_RUN_MS, err);
    free(text);
    cr_assert_not_null(s, "POST %s: %s", path, err);
    cr_assert_eq(ts_stream_response(s)->status, 200, "POST %s: HTTP %d %.600s", path, ts_stream_response(s)->status,
                 ts_stream_response(s)->body != NULL ? ts_stream_response(s)->body : "");
    ts_stream_collect(s, ts_now_ms() + CH_RUN_MS, 0, out);
    ts_stream_close(s);
    cr_assert(out->ended, "POST %s: the stream did not end (%s)", path, out->error);
}

/* The text of every event of `type`, in order, each followed by '|': "a||b|" for "a", "", "b". Caller frees. */
static inline char *ch_texts(const ts_events_t *evs, const char *type)
{
    size_t size = 1, i;
    char *out;

    for (i = 0; i != evs->n; ++i)
        if (strcmp(evs->v[i].type, type) == 0)
            size += strlen(json_string_value(json_object_get(evs->v[i].json, "text")) ?: "") + 1;
    out = calloc(1, size);
    for (i = 0; i != evs->n; ++i)
        if (strcmp(evs->v[i].type, type) == 0) {
            strcat(out, json_string_value(json_object_get(evs->v[i].json, "text")) ?: "");
            strcat(out, "|");
        }
    return out;
}

/* The `error` object of the only error event; asserts there is exactly one. */
static inline json_t *ch_only_error(const ts_events_t *evs)
{
    char sum[E2E_MSG_SIZE];
    long i = ts_events_find(evs, "error", 0);

    cr_assert_eq(ts_events_count(evs, "error"), 1, "expected one error event; %s", ts_events_summary(evs, sum, sizeof(sum)));
    return json_object_get(evs->v[i].json, "error");
}

#endif
