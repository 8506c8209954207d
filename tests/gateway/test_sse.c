/* tests/gateway/test_sse.c: events rendered as SSE frames (standard and execd framing), shared by reference. */
#include <inttypes.h>
#include <stdio.h>
#include <criterion/criterion.h>
#include "core/event.h"
#include "gw_test.h"

TestSuite(sse, .init = gw_test_init);

/* The frame as a NUL-terminated string (frames are not NUL-terminated). */
static char *frame_str(const gw_event_t *ev)
{
    char *s = malloc(ev->len + 1);
    memcpy(s, ev->frame, ev->len);
    s[ev->len] = '\0';
    return s;
}

/* Checks `id: <id>\ndata: <json>\n\n` with exactly three newlines, and returns the parsed data. */
static json_t *parse_sse_frame(const gw_event_t *ev, uint64_t id)
{
    char prefix[64], *s = frame_str(ev), *nl;
    size_t prefix_len = (size_t)snprintf(prefix, sizeof(prefix), "id: %" PRIu64 "\ndata: ", id);
    json_error_t error;
    json_t *data;

    cr_assert_geq(ev->len, prefix_len + 2, "frame too short: %s", s);
    cr_assert(strncmp(s, prefix, prefix_len) == 0, "frame does not start with %s: %s", prefix, s);
    cr_assert(strcmp(s + ev->len - 2, "\n\n") == 0, "frame does not end with a blank line: %s", s);
    nl = strchr(s + prefix_len, '\n');
    cr_assert_eq(nl, s + ev->len - 2, "the data line is not one line: %s", s);
    data = json_loadb(s + prefix_len, ev->len - prefix_len - 2, 0, &error);
    cr_assert_not_null(data, "data is not JSON (%s): %s", error.text, s);
    free(s);
    return data;
}

Test(sse, standard_frame_is_id_data_blank_line)
{
    json_t *event = json_pack("{s:s, s:I}", "type", "stdout", "timestamp", (json_int_t)1700000000123);
    gw_event_t *ev = gw_event_render(event, 7, 0);
    char *s = frame_str(ev);

    /* compact: no spaces after ':' or ','; object keys keep their insertion order */
    cr_assert_str_eq(s, "id: 7\ndata: {\"type\":\"stdout\",\"timestamp\":1700000000123}\n\n");
    cr_assert_eq(ev->len, strlen(s));
    cr_assert_eq(ev->id, 7);
    cr_assert_eq(ev->refcnt, 1);
    free(s);
    gw_event_release(ev);
    json_decref(event);
}

Test(sse, large_ids_are_written_in_full)
{
    json_t *event = json_pack("{s:s}", "type", "ping");
    gw_event_t *ev = gw_event_render(event, UINT64_MAX, 0);
    json_t *data = parse_sse_frame(ev, UINT64_MAX);

    cr_assert(json_equal(data, event));
    json_decref(data);
    gw_event_release(ev);
    json_decref(event);
}

Test(sse, execd_frame_is_json_blank_line)
{
    json_t *event = json_pack("{s:s, s:s}", "type", "init", "text", "ctx");
    gw_event_t *ev = gw_event_render(event, 3, 1);
    char *s = frame_str(ev);

    cr_assert_str_eq(s, "{\"type\":\"init\",\"text\":\"ctx\"}\n\n");
    cr_assert_eq(ev->id, 3, "the id is kept for resumption even when it is not framed");
    free(s);
    gw_event_release(ev);
    json_decref(event);
}

Test(sse, awkward_strings_stay_on_one_line_and_round_trip)
{
    static const char *const texts[] = {
        "line one\nline two\n\n",
        "carriage\r\nreturn\r",
        "\"quoted\" and \\backslashed\\",
        "tab\there, nul-free control \x01\x1f",
        "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe4\xb8\xad\xe6\x96\x87",
        "\xe2\x80\xa8 line and paragraph separators \xe2\x80\xa9",
        "data: id: fake\n\nid: 99\ndata: {}\n\n",
        "",
    };
    size_t i;

    for (i = 0; i != sizeof(texts) / sizeof(texts[0]); ++i) {
        json_t *event = json_pack("{s:s, s:s}", "type", "stdout", "text", texts[i]);
        gw_event_t *ev = gw_event_render(event, i + 1, 0);
        json_t *data = parse_sse_frame(ev, i + 1);

        cr_assert_str_eq(json_string_value(json_object_get(data, "text")), texts[i], "text %zu changed", i);
        cr_assert(memchr(ev->frame, '\r', ev->len) == NULL, "a raw CR would end the SSE line (text %zu)", i);
        json_decref(data);
        gw_event_release(ev);

        /* execd framing: the JSON is the whole line */
        ev = gw_event_render(event, i + 1, 1);
        cr_assert_eq(ev->frame[ev->len - 1], '\n');
        cr_assert_eq(ev->frame[ev->len - 2], '\n');
        cr_assert(memchr(ev->frame, '\n', ev->len - 2) == NULL, "execd frame %zu spans lines", i);
        data = json_loadb(ev->frame, ev->len - 2, 0, NULL);
        cr_assert_not_null(data);
        cr_assert(json_equal(data, event));
        json_decref(data);
        gw_event_release(ev);
        json_decref(event);
    }
}

Test(sse, nested_bundles_render_compactly)
{
    json_t *event = json_pack("{s:s, s:{s:s, s:{s:[i,i], s:n}}}", "type", "result", "results", "text/plain", "[1,2]",
                              "application/json", "a", 1, 2, "b");
    gw_event_t *ev = gw_event_render(event, 1, 0);
    json_t *data = parse_sse_frame(ev, 1);

    cr_assert(json_equal(data, event));
    /* no string holds a space, so any space after "data: " would be pretty-printing */
    cr_assert(memchr(ev->frame + 12, ' ', ev->len - 12) == NULL);
    json_decref(data);
    gw_event_release(ev);
    json_decref(event);
}

Test(sse, the_event_does_not_keep_the_json)
{
    json_t *event = json_pack("{s:s}", "type", "stdout");
    gw_event_t *ev = gw_event_render(event, 1, 0);

    cr_assert_eq(event->refcount, 1, "rendering borrows the JSON");
    json_decref(event); /* the frame must survive its source (ASan would see a use-after-free) */
    cr_assert(memmem(ev->frame, ev->len, "\"stdout\"", 8) != NULL);
    gw_event_release(ev);
}

Test(sse, references_free_at_zero)
{
    json_t *event = json_pack("{s:s}", "type", "stdout");
    gw_event_t *ev = gw_event_render(event, 1, 0);

    json_decref(event);
    gw_event_addref(ev);
    gw_event_addref(ev);
    cr_assert_eq(ev->refcnt, 3);
    gw_event_release(ev);
    gw_event_release(ev);
    cr_assert_eq(ev->refcnt, 1);
    cr_assert_eq(ev->frame[0], 'i', "still readable while one reference remains");
    gw_event_release(ev); /* freed here: a leak or a double free is reported by ASan */
    gw_event_release(NULL);
}

Test(sse, event_new_has_type_and_timestamp_now)
{
    int64_t before = gw_unix_ms();
    json_t *event = gw_event_new("execution_complete");
    int64_t after = gw_unix_ms();
    json_t *ts = json_object_get(event, "timestamp");

    cr_assert_str_eq(json_string_value(json_object_get(event, "type")), "execution_complete");
    cr_assert(json_is_integer(ts), "timestamp must be an integer (Unix ms)");
    cr_assert_geq(json_integer_value(ts), before);
    cr_assert_leq(json_integer_value(ts), after);
    cr_assert_eq(json_object_size(event), 2);
    json_decref(event);
}

Test(sse, unix_ms_is_wall_clock_milliseconds)
{
    int64_t ms = gw_unix_ms();
    int64_t s = (int64_t)time(NULL);

    cr_assert_geq(ms / 1000, s - 1);
    cr_assert_leq(ms / 1000, s + 1);
}
