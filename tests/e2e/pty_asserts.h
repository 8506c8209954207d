/* tests/e2e/pty_asserts.h: the PTY tests' steps over pty_client.h, each asserting with Criterion (one kgate per call, by port). */
#ifndef KGATE_E2E_PTY_ASSERTS_H
#define KGATE_E2E_PTY_ASSERTS_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "checks.h"
#include "support/base.h"
#include "support/http.h"
#include "support/proc.h"
#include "pty_client.h"

#define PT_WAIT_MS 15000 /* one shell round trip, generous for a loaded machine */

static inline int64_t pt_deadline(void)
{
    return ts_now_ms() + PT_WAIT_MS;
}

/* POST /pty; the session id (caller frees). */
static inline char *pt_create(unsigned short port, const char *token, const char *body)
{
    int status;
    char *id = ptc_create(port, token, body, &status);
    cr_assert_not_null(id, "POST /pty answered %d", status);
    return id;
}

static inline void pt_attach(ptc_t *c, unsigned short port, const char *id, const char *query, const char *token)
{
    cr_assert_eq(ptc_connect(c, port, id, query, token, pt_deadline()), 0, "GET /pty/%s/ws%s: %s; %s", id, query, c->error,
                 c->body);
}

static inline void pt_expect_output(ptc_t *c, const char *needle, int in_stderr)
{
    cr_assert_eq(ptc_wait_output(c, needle, in_stderr, pt_deadline()), 0, "\"%s\" never came on %s (%s); stdout so far: %.2000s",
                 needle, in_stderr ? "stderr" : "stdout", c->error, c->out.base != NULL ? c->out.base : "");
}

/* Pumps until a text frame of `type` has arrived; returns it (owned by the client). */
static inline json_t *pt_expect_text(ptc_t *c, const char *type)
{
    json_t *frame;

    while ((frame = ptc_find_text(c, type)) == NULL)
        cr_assert_eq(ptc_pump(c, pt_deadline()), 0, "no \"%s\" frame: %s", type, c->error);
    return frame;
}

/* `method` /pty/{id}: the status (a 404 must be SESSION_NOT_FOUND), and the body in `*json` (new reference) when given. */
static inline int pt_request(unsigned short port, const char *method, const char *id, json_t **json)
{
    char path[128];
    ts_response_t r;
    int status;

    snprintf(path, sizeof(path), "/pty/%s", id);
    status = ts_http_request(port, method, path, NULL, NULL, &r);
    if (status == 404)
        E2E_ASSERT_ERROR(&r, 404, "SESSION_NOT_FOUND");
    if (json != NULL)
        *json = json_incref(r.json);
    ts_response_dispose(&r);
    return status;
}

/* GET /pty/{id}'s output_offset. */
static inline uint64_t pt_offset(unsigned short port, const char *id)
{
    json_t *json;
    uint64_t offset;

    cr_assert_eq(pt_request(port, "GET", id, &json), 200);
    offset = (uint64_t)json_integer_value(json_object_get(json, "output_offset"));
    json_decref(json);
    return offset;
}

/* Waits until none of `procs` is alive. */
static inline void pt_expect_dead(const ts_proc_t *procs, size_t n, const char *after)
{
    for (int64_t end = pt_deadline();; usleep(50 * 1000)) {
        size_t alive = 0;
        for (size_t i = 0; i != n; ++i)
            alive += (size_t)ts_proc_alive(&procs[i]);
        if (alive == 0)
            return;
        cr_assert_lt(ts_now_ms(), end, "%zu process(es) survived %s", alive, after);
    }
}

#endif
