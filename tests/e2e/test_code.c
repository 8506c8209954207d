/* tests/e2e/test_code.c: running Python through POST /code on the real kgate with real ipykernel kernels. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "shared.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/http.h"
#include "support/stream.h"

#define RUN_MS 60000

static void fini(void)
{
    e2e_shared_cleanup();
}

TestSuite(code, .fini = fini, .timeout = 180);

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
    ts_response_dispose(&r);
    return id;
}

static void run(const char *ctx, const char *code, ts_events_t *evs)
{
    ts_response_t r;
    int st = ts_run_code(port(), NULL, ctx, NULL, code, RUN_MS, evs, &r);
    cr_assert_eq(st, 200, "POST /code `%s`: HTTP %d (%s); body: %.600s", code, st, evs->error, r.body ? r.body : "");
    ts_response_dispose(&r);
}

static void assert_no_error(const ts_events_t *evs, const char *code)
{
    char sum[E2E_MSG_SIZE];
    cr_assert_eq(ts_events_count(evs, "error"), 0, "`%s` produced an error event; %s", code,
                 ts_events_summary(evs, sum, sizeof(sum)));
}

Test(code, state_persists_and_stdout_arrives)
{
    char *id = new_context();
    ts_events_t a, b;
    run(id, "x = 10", &a);
    E2E_ASSERT_RUN(&a, id, E2E_FRAMING_SSE);
    assert_no_error(&a, "x = 10");
    run(id, "print(x + 5)", &b);
    E2E_ASSERT_RUN(&b, id, E2E_FRAMING_SSE);
    assert_no_error(&b, "print(x + 5)");
    E2E_ASSERT_TEXT(&b, "stdout", "15\n");
    ts_events_dispose(&a);
    ts_events_dispose(&b);
    free(id);
}

Test(code, expression_result_and_execution_count)
{
    char *id = new_context();
    ts_events_t evs;
    char sum[E2E_MSG_SIZE];
    run(id, "1+1", &evs);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    const ts_event_t *res = e2e_find_result(&evs, "text/plain");
    cr_assert_not_null(res, "no result event with text/plain; %s", ts_events_summary(&evs, sum, sizeof(sum)));
    json_t *plain = json_object_get(json_object_get(res->json, "results"), "text/plain");
    cr_assert(json_is_string(plain) && strcmp(json_string_value(plain), "2") == 0, "results[\"text/plain\"] is not \"2\": %.400s",
              res->data);
    /* the Python and Kotlin SDKs read results.text: it is there by default, the same string */
    json_t *text = json_object_get(json_object_get(res->json, "results"), "text");
    cr_assert(json_is_string(text) && strcmp(json_string_value(text), "2") == 0, "results.text is not \"2\": %.400s", res->data);
    long i = ts_events_find(&evs, "execution_count", 0);
    cr_assert(i >= 0, "no execution_count event; %s", ts_events_summary(&evs, sum, sizeof(sum)));
    json_t *count = json_object_get(evs.v[i].json, "execution_count");
    cr_assert(json_is_integer(count) && json_integer_value(count) >= 1,
              "execution_count event lacks a positive integer execution_count: %.400s", evs.v[i].data);
    ts_events_dispose(&evs);
    free(id);
}

Test(code, name_error)
{
    char *id = new_context();
    ts_events_t evs;
    char sum[E2E_MSG_SIZE];
    run(id, "undefined_name", &evs);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    cr_assert_eq(ts_events_count(&evs, "error"), 1, "expected exactly one error event; %s",
                 ts_events_summary(&evs, sum, sizeof(sum)));
    const ts_event_t *ev = &evs.v[ts_events_find(&evs, "error", 0)];
    json_t *err = json_object_get(ev->json, "error");
    json_t *ename = json_object_get(err, "ename");
    cr_assert(json_is_string(ename) && strcmp(json_string_value(ename), "NameError") == 0,
              "error.ename is not \"NameError\": %.600s", ev->data);
    cr_assert(json_is_string(json_object_get(err, "evalue")) &&
                  strstr(json_string_value(json_object_get(err, "evalue")), "undefined_name") != NULL,
              "error.evalue does not name the undefined name: %.600s", ev->data);
    cr_assert(json_is_array(json_object_get(err, "traceback")), "error.traceback is not a JSON array: %.600s", ev->data);
    ts_events_dispose(&evs);
    free(id);
}

Test(code, display_html)
{
    char *id = new_context();
    ts_events_t evs;
    char sum[E2E_MSG_SIZE];
    run(id, "import IPython.display as d; d.display(d.HTML('<b>x</b>'))", &evs);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    assert_no_error(&evs, "display(HTML)");
    const ts_event_t *res = e2e_find_result(&evs, "text/html");
    cr_assert_not_null(res, "no result event with text/html; %s", ts_events_summary(&evs, sum, sizeof(sum)));
    json_t *html = json_object_get(json_object_get(res->json, "results"), "text/html");
    cr_assert(json_is_string(html) && strstr(json_string_value(html), "<b>x</b>") != NULL,
              "results[\"text/html\"] does not contain <b>x</b>: %.400s", res->data);
    ts_events_dispose(&evs);
    free(id);
}

Test(code, interrupt_keeps_the_context)
{
    char *id = new_context();
    json_t *body = ts_code_body(id, NULL, "import time; time.sleep(30)");
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    char err[256] = "";
    int64_t t0 = ts_now_ms();
    ts_stream_t *s = ts_stream_open(port(), "POST", "/code", NULL, text, t0 + RUN_MS, err);
    free(text);
    cr_assert_not_null(s, "POST /code (sleep 30): %s", err);
    cr_assert_eq(ts_stream_response(s)->status, 200, "POST /code (sleep 30): HTTP %d %.400s", ts_stream_response(s)->status,
                 ts_stream_response(s)->body);

    /* Let the sleep get going for about a second, reading what arrives meanwhile. */
    ts_events_t evs = {0};
    char sum[E2E_MSG_SIZE];
    while (!evs.ended && ts_now_ms() < t0 + 1000)
        if (ts_stream_next(s, t0 + 1000, &evs) < 0 && !evs.timed_out)
            break;
    evs.timed_out = 0;
    cr_assert(!evs.ended && evs.error[0] == '\0', "the stream ended before the interrupt; %s",
              ts_events_summary(&evs, sum, sizeof(sum)));

    char path[256];
    snprintf(path, sizeof(path), "/code?id=%s", id);
    ts_response_t r;
    int64_t t_delete = ts_now_ms();
    int st = ts_http_request(port(), "DELETE", path, NULL, NULL, &r);
    cr_assert_eq(st, 200, "DELETE %s: HTTP %d (%s) %.400s", path, st, r.error, r.body);
    ts_response_dispose(&r);

    ts_stream_collect(s, t_delete + 10000, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    cr_assert(evs.end_ms - t_delete <= 1000, "the stream ended %lld ms after DELETE /code?id=, expected within 1000 ms",
              (long long)(evs.end_ms - t_delete));
    long i = ts_events_find(&evs, "error", 0);
    cr_assert(i >= 0, "no error event after the interrupt; %s", ts_events_summary(&evs, sum, sizeof(sum)));
    json_t *ename = json_object_get(json_object_get(evs.v[i].json, "error"), "ename");
    cr_assert(json_is_string(ename) && strcmp(json_string_value(ename), "KeyboardInterrupt") == 0,
              "error.ename is not KeyboardInterrupt: %.600s", evs.v[i].data);
    ts_events_dispose(&evs);

    ts_events_t after;
    run(id, "print('alive')", &after);
    E2E_ASSERT_RUN(&after, id, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&after, "stdout", "alive\n");
    ts_events_dispose(&after);
    free(id);
}

Test(code, stdout_order_is_exact)
{
    char *id = new_context();
    size_t cap = 10000 * 6, len = 0;
    char *expected = malloc(cap);
    cr_assert_not_null(expected);
    for (int i = 0; i < 10000; i++)
        len += (size_t)snprintf(expected + len, cap - len, "%d\n", i);
    ts_events_t evs;
    run(id, "for i in range(10000): print(i)", &evs);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    assert_no_error(&evs, "for i in range(10000): print(i)");
    E2E_ASSERT_TEXT(&evs, "stdout", expected);
    ts_events_dispose(&evs);
    free(expected);
    free(id);
}

Test(code, stream_response_headers)
{
    char *id = new_context();
    ts_events_t evs;
    ts_response_t r;
    int st = ts_run_code(port(), NULL, id, NULL, "1+1", RUN_MS, &evs, &r);
    cr_assert_eq(st, 200, "POST /code: HTTP %d (%s) %.400s", st, evs.error, r.body ? r.body : "");
    const char *ct = ts_response_header(&r, "Content-Type");
    const char *cc = ts_response_header(&r, "Cache-Control");
    const char *xab = ts_response_header(&r, "X-Accel-Buffering");
    cr_assert(ct != NULL && strncmp(ct, "text/event-stream", 17) == 0, "Content-Type: %s", ct ? ct : "(absent)");
    cr_assert(cc != NULL && strcmp(cc, "no-cache") == 0, "Cache-Control: %s", cc ? cc : "(absent)");
    cr_assert(xab != NULL && strcmp(xab, "no") == 0, "X-Accel-Buffering: %s", xab ? xab : "(absent)");
    /* every kgate response names its version, streams included (the run stream once forgot it) */
    const char *version = ts_response_header(&r, "x-kgate-version");
    cr_assert(version != NULL && version[0] != '\0', "x-kgate-version: %s", version ? version : "(absent)");
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    ts_response_dispose(&r);
    ts_events_dispose(&evs);
    free(id);
}

/* `stateless: true` with a context id is refused, never quietly run in that context (its state untouched). */
Test(code, stateless_with_a_context_id_is_refused)
{
    char *id = new_context();
    ts_events_t evs;
    ts_response_t r;
    json_t *body = ts_code_body(id, NULL, "marker = 'stateless leaked'");
    json_object_set_new(body, "stateless", json_true());
    ts_post_json(port(), "/code", NULL, body, &r);
    json_decref(body);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
    cr_assert(strstr(r.body, "stateless") != NULL, "the message says why: %.400s", r.body);
    ts_response_dispose(&r);
    run(id, "print('marker' in globals())", &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "False\n");
    ts_events_dispose(&evs);
    free(id);
}

/* The text of every `type` event, joined, with its length (NUL bytes included); caller frees. */
static char *joined_text(const ts_events_t *evs, const char *type, size_t *len)
{
    char *buf = malloc(1);
    cr_assert_not_null(buf);
    *len = 0;
    for (size_t i = 0; i != evs->n; ++i) {
        json_t *t = json_object_get(evs->v[i].json, "text");
        if (strcmp(evs->v[i].type, type) != 0 || !json_is_string(t))
            continue;
        buf = realloc(buf, *len + json_string_length(t) + 1);
        cr_assert_not_null(buf);
        memcpy(buf + *len, json_string_value(t), json_string_length(t));
        *len += json_string_length(t);
    }
    return buf;
}

/* Stream text arrives exactly as printed whatever its bytes (kgate relays the kernel's own JSON encoding of it). */
Test(code, stream_text_with_escapes_and_non_ascii_arrives_exactly)
{
    /* '"', '\\', ESC [1m, 'a', é, €, U+1F600, NUL, U+2028, '/', '\n', '\t', 'b' */
    static const char once[] = "\"\\\x1b[1ma\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\0\xe2\x80\xa8/\n\tb";
    const char *code = "import sys\n"
                       "s = ''.join(map(chr, [34, 92, 27, 91, 49, 109, 97, 233, 8364, 128512, 0, 8232, 47, 10, 9, 98])) * 3\n"
                       "sys.stdout.write(s); sys.stdout.flush(); sys.stderr.write(s)";
    char expected[3 * (sizeof(once) - 1)], *got, sum[E2E_MSG_SIZE];
    const char *types[] = {"stdout", "stderr"};
    char *id = new_context();
    ts_events_t evs;
    size_t len;

    for (size_t i = 0; i != 3; ++i)
        memcpy(expected + i * (sizeof(once) - 1), once, sizeof(once) - 1);
    run(id, code, &evs);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    assert_no_error(&evs, code);
    for (size_t t = 0; t != 2; ++t) {
        got = joined_text(&evs, types[t], &len);
        cr_assert(len == sizeof(expected) && memcmp(got, expected, len) == 0, "%s: %zu bytes, not the %zu printed; %s", types[t],
                  len, sizeof(expected), ts_events_summary(&evs, sum, sizeof(sum)));
        free(got);
    }
    ts_events_dispose(&evs);
    free(id);
}
