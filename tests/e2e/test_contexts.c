/* tests/e2e/test_contexts.c: context lifecycle (/code/context, /code/contexts) and isolation on the real kgate. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "checks.h"
#include "shared.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/http.h"
#include "support/proc.h"
#include "support/stream.h"

#define RUN_MS 60000

static void fini(void)
{
    e2e_shared_cleanup();
}

TestSuite(contexts, .fini = fini, .timeout = 180);

static unsigned short port(void)
{
    return e2e_shared()->port;
}

static char *new_context(void)
{
    ts_response_t r;
    char *id = NULL;
    int st = ts_context_create(port(), NULL, "python", &id, &r);
    cr_assert_eq(st, 200, "POST /code/context {\"language\":\"python\"}: HTTP %d %s %.600s", st, r.error, r.body);
    cr_assert(e2e_is_uuid(id), "the context id is not a UUID; body: %.600s", r.body);
    json_t *lang = json_object_get(r.json, "language");
    cr_assert(json_is_string(lang) && strcmp(json_string_value(lang), "python") == 0,
              "the created context's language is not \"python\": %.600s", r.body);
    ts_response_dispose(&r);
    return id;
}

static void run_in(const char *ctx, const char *language, const char *code, ts_events_t *evs)
{
    ts_response_t r;
    int st = ts_run_code(port(), NULL, ctx, language, code, RUN_MS, evs, &r);
    cr_assert_eq(st, 200, "POST /code `%s`: HTTP %d (%s); body: %.600s", code, st, evs->error, r.body ? r.body : "");
    ts_response_dispose(&r);
}

static const char *error_name(const ts_events_t *evs)
{
    long i = ts_events_find(evs, "error", 0);
    json_t *ename = i < 0 ? NULL : json_object_get(json_object_get(evs->v[i].json, "error"), "ename");
    return json_is_string(ename) ? json_string_value(ename) : "(no error event)";
}

/* GETs `path`, asserts 200 with a JSON array, and returns it (new reference). */
static json_t *get_list(const char *path)
{
    ts_response_t r;
    int st = ts_http_request(port(), "GET", path, NULL, NULL, &r);
    cr_assert_eq(st, 200, "GET %s: HTTP %d (%s) %.600s", path, st, r.error, r.body);
    cr_assert(json_is_array(r.json), "GET %s did not answer a JSON array: %.600s", path, r.body);
    json_t *list = json_incref(r.json);
    ts_response_dispose(&r);
    return list;
}

static int list_has(json_t *list, const char *id)
{
    size_t i;
    json_t *item;
    json_array_foreach(list, i, item)
    {
        json_t *jid = json_object_get(item, "id");
        if (json_is_string(jid) && strcmp(json_string_value(jid), id) == 0)
            return 1;
    }
    return 0;
}

/* Asserts a payload-less success: 200 with an empty body that says Content-Length: 0 (not an empty chunked
 * body, which some SDKs fail to parse); a JSON body is tolerated. */
static void assert_ok_response(const ts_response_t *r, const char *what)
{
    cr_assert_eq(r->status, 200, "%s: HTTP %d (%s) %.600s", what, r->status, r->error, r->body);
    if (r->body_len == 0) {
        const char *cl = ts_response_header(r, "Content-Length");
        cr_assert(cl != NULL && strcmp(cl, "0") == 0 && !r->chunked,
                  "%s: empty 200 body without Content-Length: 0 (Content-Length %s, chunked %d)", what, cl ? cl : "absent",
                  r->chunked);
    }
}

Test(contexts, isolated_from_each_other)
{
    char *a = new_context(), *b = new_context();
    cr_assert_str_neq(a, b, "two contexts got the same id");
    ts_events_t e1, e2, e3;
    run_in(a, NULL, "x = 1", &e1);
    E2E_ASSERT_RUN(&e1, a, E2E_FRAMING_SSE);
    run_in(b, NULL, "print(x)", &e2);
    E2E_ASSERT_RUN(&e2, b, E2E_FRAMING_SSE);
    cr_assert_str_eq(error_name(&e2), "NameError", "x leaked from context A into context B");
    run_in(a, NULL, "print(x)", &e3);
    E2E_ASSERT_RUN(&e3, a, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&e3, "stdout", "1\n");
    ts_events_dispose(&e1);
    ts_events_dispose(&e2);
    ts_events_dispose(&e3);
    free(a);
    free(b);
}

/*
 * Two contexts run at once: run A says it waits, then waits for a file that run B (in the other context, sent only once A
 * waits) creates; A finds it. Were the runs of two contexts serialised, B would start only after A ended, and A, its wait
 * bounded (a hang guard, not a measure: 60 s), would end without it. No bound on how long either takes.
 */
Test(contexts, run_concurrently)
{
    char *ids[2] = {new_context(), new_context()};
    char flag[128], code[2][512], err[256] = "", *out;
    ts_stream_t *s[2];
    ts_events_t evs[2] = {{0}, {0}};
    int64_t deadline;

    snprintf(flag, sizeof(flag), "/tmp/kgate-e2e-contexts-%d-met", (int)getpid());
    unlink(flag);
    snprintf(code[0], sizeof(code[0]),
             "import os, time\nprint('waiting', flush=True)\nend = time.monotonic() + 60\n"
             "while not os.path.exists('%s') and time.monotonic() < end:\n    time.sleep(0.01)\n"
             "print('met' if os.path.exists('%s') else 'alone')",
             flag, flag);
    snprintf(code[1], sizeof(code[1]), "open('%s', 'w').close()\nprint('created')", flag);
    deadline = ts_now_ms() + 120000; /* a hang guard */
    for (int i = 0; i < 2; i++) {
        json_t *body = ts_code_body(ids[i], NULL, code[i]);
        char *text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        s[i] = ts_stream_open(port(), "POST", "/code", NULL, text, deadline, err);
        free(text);
        cr_assert_not_null(s[i], "POST /code #%d: %s", i, err);
        cr_assert_eq(ts_stream_response(s[i])->status, 200, "POST /code #%d: HTTP %d %.400s", i, ts_stream_response(s[i])->status,
                     ts_stream_response(s[i])->body);
        /* B goes only once A runs: B first would create the file before A looks, whatever the order kgate keeps */
        while (i == 0 && ts_events_find(&evs[0], "stdout", 0) < 0)
            cr_assert(ts_stream_next(s[0], deadline, &evs[0]) > 0, "run A ended or timed out before it printed");
    }
    for (int i = 0; i < 2; i++) {
        ts_stream_collect(s[i], deadline, 0, &evs[i]);
        ts_stream_close(s[i]);
        E2E_ASSERT_RUN(&evs[i], ids[i], E2E_FRAMING_SSE);
        cr_assert_eq(ts_events_count(&evs[i], "error"), 0, "run #%d failed: %s", i, error_name(&evs[i]));
        if (i == 0) {
            unlink(flag);
            out = ts_events_text(&evs[0], "stdout");
            cr_assert_str_eq(out, "waiting\nmet\n", "run A did not see run B (another context) start while it ran: serialised");
            free(out);
        }
    }
    for (int i = 0; i < 2; i++) {
        ts_events_dispose(&evs[i]);
        free(ids[i]);
    }
}

Test(contexts, list_get_delete)
{
    char *a = new_context(), *b = new_context();

    json_t *all = get_list("/code/contexts");
    cr_assert(list_has(all, a) && list_has(all, b), "GET /code/contexts lacks a created context: %s",
              json_dumps(all, JSON_COMPACT));
    json_decref(all);
    json_t *py = get_list("/code/contexts?language=python");
    cr_assert(list_has(py, a) && list_has(py, b), "GET /code/contexts?language=python lacks a created context: %s",
              json_dumps(py, JSON_COMPACT));
    json_decref(py);
    json_t *none = get_list("/code/contexts?language=nonexistent");
    cr_assert_eq(json_array_size(none), 0, "GET /code/contexts?language=nonexistent is not []: %s", json_dumps(none, JSON_COMPACT));
    json_decref(none);

    char path[256];
    snprintf(path, sizeof(path), "/code/contexts/%s", a);
    ts_response_t r;
    int st = ts_http_request(port(), "GET", path, NULL, NULL, &r);
    cr_assert_eq(st, 200, "GET %s: HTTP %d %.600s", path, st, r.body);
    json_t *jid = json_object_get(r.json, "id"), *lang = json_object_get(r.json, "language");
    cr_assert(json_is_string(jid) && strcmp(json_string_value(jid), a) == 0, "GET %s: wrong or missing id: %.600s", path, r.body);
    cr_assert(json_is_string(lang) && strcmp(json_string_value(lang), "python") == 0, "GET %s: language is not \"python\": %.600s",
              path, r.body);
    ts_response_dispose(&r);

    ts_http_request(port(), "DELETE", path, NULL, NULL, &r);
    assert_ok_response(&r, "DELETE /code/contexts/{id}");
    ts_response_dispose(&r);
    ts_http_request(port(), "GET", path, NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 404, "CONTEXT_NOT_FOUND");
    ts_response_dispose(&r);
    ts_http_request(port(), "DELETE", path, NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 404, "CONTEXT_NOT_FOUND");
    ts_response_dispose(&r);

    all = get_list("/code/contexts");
    cr_assert(!list_has(all, a) && list_has(all, b), "after deleting one context the list is wrong: %s",
              json_dumps(all, JSON_COMPACT));
    json_decref(all);
    free(a);
    free(b);
}

Test(contexts, delete_by_language)
{
    char *a = new_context(), *b = new_context();
    ts_response_t r;
    ts_http_request(port(), "DELETE", "/code/contexts?language=python", NULL, NULL, &r);
    assert_ok_response(&r, "DELETE /code/contexts?language=python");
    ts_response_dispose(&r);
    json_t *py = get_list("/code/contexts?language=python");
    cr_assert_eq(json_array_size(py), 0, "python contexts remain after DELETE ?language=python: %s", json_dumps(py, JSON_COMPACT));
    json_decref(py);
    char path[256];
    snprintf(path, sizeof(path), "/code/contexts/%s", b);
    ts_http_request(port(), "GET", path, NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 404, "CONTEXT_NOT_FOUND");
    ts_response_dispose(&r);

    ts_http_request(port(), "DELETE", "/code/contexts", NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 400, "MISSING_QUERY");
    ts_response_dispose(&r);
    free(a);
    free(b);
}

Test(contexts, default_context_by_language)
{
    ts_events_t a, b;
    run_in(NULL, "python", "y = 41", &a);
    E2E_ASSERT_RUN(&a, NULL, E2E_FRAMING_SSE);
    cr_assert_eq(ts_events_count(&a, "error"), 0, "`y = 41` failed: %s", error_name(&a));
    const char *id = json_string_value(json_object_get(a.v[0].json, "text"));
    run_in(NULL, "python", "print(y + 1)", &b);
    E2E_ASSERT_RUN(&b, id, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&b, "stdout", "42\n");
    json_t *py = get_list("/code/contexts?language=python");
    cr_assert(list_has(py, id), "the default python context %s is not listed: %s", id, json_dumps(py, JSON_COMPACT));
    json_decref(py);
    ts_events_dispose(&a);
    ts_events_dispose(&b);
}

Test(contexts, idle_context_costs_no_cpu)
{
    char *id = new_context();
    ts_events_t evs;
    run_in(id, NULL, "1+1", &evs);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    ts_events_dispose(&evs);
    /* kgate with one live, idle context: nothing to do but wait for events. */
    pid_t pid = e2e_shared()->pid;
    struct timespec settle = {0, 500 * 1000000L}, window = {2, 0};
    nanosleep(&settle, NULL);
    int64_t cpu0 = ts_proc_cpu_ms(pid), t0 = ts_now_ms();
    nanosleep(&window, NULL);
    int64_t cpu1 = ts_proc_cpu_ms(pid), t1 = ts_now_ms();
    cr_assert(cpu0 >= 0 && cpu1 >= 0, "cannot read kgate's CPU time from /proc/%d/stat", (int)pid);
    cr_assert(cpu1 - cpu0 <= (t1 - t0) / 10,
              "kgate used %lld ms of CPU in %lld ms while its only context was idle (expected <= 10%%: a busy loop?)",
              (long long)(cpu1 - cpu0), (long long)(t1 - t0));
    free(id);
}
