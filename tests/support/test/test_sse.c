/* tests/support/test/test_sse.c: the in-place SSE parser, fed every stream at every split point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "support/sse.h"

typedef struct st_expect_t {
    const char *data;
    long long id;
    int bare;
} expect_t;

#define MAX_EVENTS 8

typedef struct st_got_t {
    char data[MAX_EVENTS][128];
    long long id[MAX_EVENTS];
    int bare[MAX_EVENTS];
    size_t n;
} got_t;

/* Feeds `stream` as the readers do: the unconsumed bytes again, with the next piece appended. Each call
 * sees a buffer of exactly the bytes it may read, so that a read past them is a sanitizer report. */
static void feed(const char *stream, const size_t *cuts, size_t ncuts, got_t *got)
{
    size_t total = strlen(stream), pending_len = 0, from = 0;
    char *pending = malloc(1);
    ts_sse_parser_t p;
    ts_sse_parser_init(&p);
    memset(got, 0, sizeof(*got));
    for (size_t k = 0; k <= ncuts; ++k) {
        size_t to = k < ncuts ? cuts[k] : total;
        char *buf = malloc(pending_len + (to - from) + 1);
        memcpy(buf, pending, pending_len);
        memcpy(buf + pending_len, stream + from, to - from);
        size_t len = pending_len + (to - from), off = 0;
        free(pending);
        from = to;
        for (;;) {
            char *exact = malloc(len - off + 1);
            memcpy(exact, buf + off, len - off);
            size_t used;
            ts_sse_event_t ev;
            int r = ts_sse_parse(&p, exact, len - off, &used, &ev);
            cr_assert_leq(used, len - off);
            if (r == 1) {
                cr_assert_lt(got->n, MAX_EVENTS);
                cr_assert_lt(ev.len, sizeof(got->data[0]));
                memcpy(got->data[got->n], ev.data, ev.len);
                got->id[got->n] = ev.id;
                got->bare[got->n++] = ev.bare;
            }
            free(exact);
            off += used;
            if (r == 0)
                break;
        }
        pending_len = len - off;
        pending = malloc(pending_len + 1);
        memcpy(pending, buf + off, pending_len);
        free(buf);
    }
    free(pending);
    ts_sse_parser_dispose(&p);
}

static void check(const got_t *got, const expect_t *want, size_t n, const char *stream, const char *how)
{
    cr_assert_eq(got->n, n, "%s: %zu events, expected %zu, from \"%s\"", how, got->n, n, stream);
    for (size_t i = 0; i < n; ++i) {
        cr_assert_str_eq(got->data[i], want[i].data, "%s: event %zu of \"%s\"", how, i, stream);
        cr_assert_eq(got->id[i], want[i].id, "%s: event %zu of \"%s\": id %lld", how, i, stream, got->id[i]);
        cr_assert_eq(got->bare[i], want[i].bare, "%s: event %zu of \"%s\"", how, i, stream);
    }
}

/* Whole, then split once at every point, then one byte at a time. */
static void check_all_splits(const char *stream, const expect_t *want, size_t n)
{
    got_t got;
    size_t len = strlen(stream);
    feed(stream, NULL, 0, &got);
    check(&got, want, n, stream, "whole");
    for (size_t cut = 0; cut <= len; ++cut) {
        feed(stream, &cut, 1, &got);
        char how[64];
        snprintf(how, sizeof(how), "split at %zu", cut);
        check(&got, want, n, stream, how);
    }
    size_t *cuts = malloc((len + 1) * sizeof(*cuts));
    for (size_t i = 0; i < len; ++i)
        cuts[i] = i + 1;
    feed(stream, cuts, len, &got);
    check(&got, want, n, stream, "byte by byte");
    free(cuts);
}

Test(sse, id_and_data_as_kgate_frames_them)
{
    static const expect_t want[] = {{"{\"type\":\"init\"}", 0, 0}, {"{\"type\":\"ping\"}", 1, 0}};
    check_all_splits("id: 0\ndata: {\"type\":\"init\"}\n\nid: 1\ndata: {\"type\":\"ping\"}\n\n", want, 2);
}

Test(sse, crlf_and_cr_line_ends)
{
    static const expect_t want[] = {{"a", 7, 0}, {"b", -1, 0}, {"c", -1, 0}};
    check_all_splits("id: 7\r\ndata: a\r\n\r\ndata: b\r\rdata:c\n\r\n", want, 3);
}

Test(sse, data_lines_are_joined)
{
    static const expect_t want[] = {{"one\ntwo\n", -1, 0}, {"x", -1, 0}};
    check_all_splits("data: one\ndata:two\ndata\n\ndata: x\n\n", want, 2);
}

Test(sse, bare_json_lines_execd_framing)
{
    static const expect_t want[] = {{"{\"type\":\"stdout\"}", -1, 1}, {"[1,2]", -1, 1}};
    check_all_splits("{\"type\":\"stdout\"}\n\n[1,2]\n\n", want, 2);
}

Test(sse, comments_other_fields_and_empty_events_are_skipped)
{
    static const expect_t want[] = {{"d", -2, 0}};
    check_all_splits(": hello\n\n\nevent: x\nretry: 5\n\nid: nope\n: c\ndata: d\n\n", want, 1);
}

Test(sse, an_event_without_its_blank_line_is_pending)
{
    static const expect_t want[] = {{"a", -1, 0}};
    check_all_splits("data: a\n\ndata: b\n", want, 1);
}

/* A blank line's lone CR completes the event at once (a stream's last event must not wait for a LF
 * that may never come); a LF in the next read is an empty line of its own, ending nothing. */
Test(sse, a_final_cr_completes_the_event)
{
    static const char first[] = "data: a\r\r";
    ts_sse_parser_t p;
    ts_sse_event_t ev;
    size_t used;
    ts_sse_parser_init(&p);
    cr_assert_eq(ts_sse_parse(&p, first, strlen(first), &used, &ev), 1);
    cr_assert_eq(used, strlen(first));
    cr_assert(ev.len == 1 && ev.data[0] == 'a');
    ts_sse_parser_dispose(&p);

    static const expect_t want[] = {{"a", -1, 0}, {"b", -1, 0}};
    size_t cut = strlen(first);
    got_t got;
    feed("data: a\r\r\ndata: b\n\n", &cut, 1, &got);
    check(&got, want, 2, "data: a\\r\\r | \\ndata: b", "split after the CR");
}
