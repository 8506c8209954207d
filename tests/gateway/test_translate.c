/* tests/gateway/test_translate.c: iopub and execute_reply messages -> API events, and ANSI stripping. */
#include <criterion/criterion.h>
#include "core/event.h"
#include "code/translate.h"
#include "wire/json_in.h"
#include <stdlib.h>
#include <string.h>
#include "gw_test.h"

TestSuite(translate, .init = gw_test_init);

static const gw_translate_opts_t plain_opts = {0, 0};

/* A message of `type` with `content` (reference stolen), as the kernel would publish it. */
static wire_msg_t *msg_new(const char *type, json_t *content)
{
    return wire_msg_create(type, "kernel-session", content);
}

/* Translates and destroys the message; checks the fields every event has. */
static json_t *translate(const char *type, json_t *content, const gw_translate_opts_t *opts)
{
    wire_msg_t *msg = msg_new(type, content);
    json_t *ev = gw_translate_iopub(msg, opts);

    wire_msg_destroy(msg); /* the event must not depend on the message staying alive */
    if (ev != NULL) {
        cr_assert(json_is_string(json_object_get(ev, "type")), "event without type");
        cr_assert(json_is_integer(json_object_get(ev, "timestamp")), "event without an integer timestamp");
        cr_assert_geq(json_integer_value(json_object_get(ev, "timestamp")), gw_unix_ms() - 60000);
    }
    return ev;
}

static const char *ev_type(const json_t *ev)
{
    return json_string_value(json_object_get(ev, "type"));
}

static const char *ev_str(const json_t *ev, const char *key)
{
    return json_string_value(json_object_get(ev, key));
}

Test(translate, stream_stdout)
{
    json_t *ev = translate("stream", json_pack("{s:s, s:s}", "name", "stdout", "text", "hello\n"), &plain_opts);

    cr_assert_not_null(ev);
    cr_assert_str_eq(ev_type(ev), "stdout");
    cr_assert_str_eq(ev_str(ev, "text"), "hello\n");
    cr_assert_eq(json_object_size(ev), 3, "fields that do not apply are omitted");
    json_decref(ev);
}

Test(translate, stream_stderr)
{
    json_t *ev = translate("stream", json_pack("{s:s, s:s}", "name", "stderr", "text", "oops \xe2\x9a\xa0\n"), &plain_opts);

    cr_assert_not_null(ev);
    cr_assert_str_eq(ev_type(ev), "stderr");
    cr_assert_str_eq(ev_str(ev, "text"), "oops \xe2\x9a\xa0\n");
    json_decref(ev);
}

Test(translate, stream_without_text_is_dropped)
{
    cr_assert_null(translate("stream", json_pack("{s:s}", "name", "stdout"), &plain_opts));
    cr_assert_null(translate("stream", json_pack("{s:s, s:i}", "name", "stdout", "text", 3), &plain_opts));
}

/* The MIME bundle a rich result carries, with application/json as a JSON value (not a string). */
static json_t *bundle(void)
{
    return json_pack("{s:s, s:s, s:s, s:{s:[i,i], s:b}}", "text/plain", "<Figure>", "text/html", "<b>x</b>", "image/png",
                     "iVBORw0KGgo=", "application/json", "a", 1, 2, "ok", 1);
}

static void check_result(const char *type, int with_count)
{
    json_t *content = with_count ? json_pack("{s:o, s:{}, s:i}", "data", bundle(), "metadata", "execution_count", 4)
                                 : json_pack("{s:o, s:{}, s:{}}", "data", bundle(), "metadata", "transient");
    json_t *expected = bundle();
    json_t *ev = translate(type, content, &plain_opts);
    json_t *results;

    cr_assert_not_null(ev, "%s dropped", type);
    cr_assert_str_eq(ev_type(ev), "result");
    results = json_object_get(ev, "results");
    /* Python and Kotlin SDKs read results.text, Go reads text/plain: both, the same string */
    cr_assert_str_eq(json_string_value(json_object_get(results, "text")), "<Figure>", "%s: results.text", type);
    json_object_set_new(expected, "text", json_string("<Figure>"));
    cr_assert(json_equal(results, expected), "%s: the whole bundle, as sent, plus text", type);
    cr_assert(json_is_object(json_object_get(results, "application/json")), "a JSON value stays JSON by default");
    /* what the code displayed is told from its value (E2B's is_main_result) */
    if (strcmp(type, "display_data") == 0)
        cr_assert(json_is_true(json_object_get(ev, "display")), "a display_data result says display: true");
    else
        cr_assert_null(json_object_get(ev, "display"), "an execute_result is the run's value, not a display");
    json_decref(expected);
    json_decref(ev);
}

Test(translate, execute_result_carries_the_whole_bundle)
{
    check_result("execute_result", 1);
}

Test(translate, display_data_carries_the_whole_bundle)
{
    check_result("display_data", 0);
}

Test(translate, results_text_leaves_the_message_alone)
{
    wire_msg_t *msg = msg_new("execute_result", json_pack("{s:o, s:{}, s:i}", "data", bundle(), "metadata", "execution_count", 1));
    json_t *original = json_deep_copy(msg->content);
    json_t *ev = gw_translate_iopub(msg, &plain_opts);

    cr_assert_not_null(ev);
    cr_assert(json_equal(msg->content, original), "the message content must not be modified");
    cr_assert_null(json_object_get(json_object_get(msg->content, "data"), "text"));
    wire_msg_destroy(msg);
    /* the event outlives the message */
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ev, "results"), "text")), "<Figure>");
    json_decref(original);
    json_decref(ev);
}

/* Go's SDK types results as map[string]string: under --compat execd every non-string value is its JSON text. */
Test(translate, compat_execd_sends_json_values_as_text)
{
    static const gw_translate_opts_t execd = {1, 0};
    json_t *ev =
        translate("execute_result", json_pack("{s:o, s:{}, s:i}", "data", bundle(), "metadata", "execution_count", 1), &execd);
    json_t *results = json_object_get(ev, "results"), *value;
    const char *mime;

    cr_assert_not_null(ev);
    json_object_foreach(results, mime, value)
    {
        cr_assert(json_is_string(value), "results[%s] is not a string under --compat execd", mime);
    }
    cr_assert_str_eq(json_string_value(json_object_get(results, "application/json")), "{\"a\":[1,2],\"ok\":true}");
    cr_assert_str_eq(json_string_value(json_object_get(results, "text")), "<Figure>");
    cr_assert_str_eq(json_string_value(json_object_get(results, "image/png")), "iVBORw0KGgo=");
    json_decref(ev);
}

Test(translate, without_text_plain_adds_no_text)
{
    json_t *ev = translate("display_data", json_pack("{s:{s:s}, s:{}}", "data", "image/png", "AAAA", "metadata"), &plain_opts);

    cr_assert_not_null(ev);
    cr_assert_null(json_object_get(json_object_get(ev, "results"), "text"));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ev, "results"), "image/png")), "AAAA");
    json_decref(ev);
}

static json_t *traceback_content(void)
{
    return json_pack("{s:s, s:s, s:[s,s,s]}", "ename", "ZeroDivisionError", "evalue", "division by zero", "traceback",
                     "\x1b[0;31m---------------------------------------------------------------------------\x1b[0m",
                     "\x1b[0;32m<ipython-input-1>\x1b[0m in \x1b[0;36m<module>\x1b[0;34m\n\x1b[0;32m----> 1\x1b[0;31m 1/0\n",
                     "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero");
}

Test(translate, error_strips_ansi_by_default)
{
    json_t *ev = translate("error", traceback_content(), &plain_opts);
    json_t *err = json_object_get(ev, "error"), *tb;

    cr_assert_not_null(ev);
    cr_assert_str_eq(ev_type(ev), "error");
    cr_assert_str_eq(ev_str(err, "ename"), "ZeroDivisionError");
    cr_assert_str_eq(ev_str(err, "evalue"), "division by zero");
    tb = json_object_get(err, "traceback");
    cr_assert(json_is_array(tb));
    cr_assert_eq(json_array_size(tb), 3);
    cr_assert_str_eq(json_string_value(json_array_get(tb, 0)),
                     "---------------------------------------------------------------------------");
    cr_assert_str_eq(json_string_value(json_array_get(tb, 1)), "<ipython-input-1> in <module>\n----> 1 1/0\n");
    cr_assert_str_eq(json_string_value(json_array_get(tb, 2)), "ZeroDivisionError: division by zero");
    json_decref(ev);
}

Test(translate, error_keeps_ansi_when_asked)
{
    static const gw_translate_opts_t keep = {0, 1};
    json_t *expected = traceback_content();
    json_t *ev = translate("error", traceback_content(), &keep);
    json_t *tb = json_object_get(json_object_get(ev, "error"), "traceback");

    cr_assert_not_null(ev);
    cr_assert(json_equal(tb, json_object_get(expected, "traceback")));
    json_decref(expected);
    json_decref(ev);
}

Test(translate, error_traceback_is_always_an_array)
{
    json_t *ev = translate("error", json_pack("{s:s}", "ename", "KeyboardInterrupt"), &plain_opts);
    json_t *err = json_object_get(ev, "error");

    cr_assert_not_null(ev);
    cr_assert_str_eq(ev_str(err, "ename"), "KeyboardInterrupt");
    cr_assert(json_is_string(json_object_get(err, "evalue")));
    cr_assert(json_is_array(json_object_get(err, "traceback")));
    cr_assert_eq(json_array_size(json_object_get(err, "traceback")), 0);
    json_decref(ev);
}

Test(translate, execute_input_gives_the_execution_count)
{
    json_t *ev = translate("execute_input", json_pack("{s:s, s:i}", "code", "1+1", "execution_count", 12), &plain_opts);

    cr_assert_not_null(ev);
    cr_assert_str_eq(ev_type(ev), "execution_count");
    cr_assert_eq(json_integer_value(json_object_get(ev, "execution_count")), 12);
    cr_assert_null(json_object_get(ev, "code"));
    json_decref(ev);
}

Test(translate, the_rest_is_not_forwarded)
{
    /* a run's busy is kgate's own (kernel_runs.busy_is_said_once_when_the_run_reaches_the_kernel) */
    cr_assert_null(translate("status", json_pack("{s:s}", "execution_state", "busy"), &plain_opts));
    cr_assert_null(translate("status", json_pack("{s:s}", "execution_state", "idle"), &plain_opts));
    cr_assert_null(translate("status", json_pack("{s:s}", "execution_state", "starting"), &plain_opts));
    cr_assert_null(translate("clear_output", json_pack("{s:b}", "wait", 0), &plain_opts));
    cr_assert_null(translate("comm_msg", json_pack("{s:s, s:{}}", "comm_id", "c1", "data"), &plain_opts));
    cr_assert_null(translate("comm_open", json_pack("{s:s, s:s, s:{}}", "comm_id", "c1", "target_name", "t", "data"), &plain_opts));
    cr_assert_null(translate("execute_result", json_pack("{s:i}", "execution_count", 1), &plain_opts), "no data bundle");
}

/* ---- execute_reply ---- */

static json_t *reply(json_t *content, int saw_error, int *count)
{
    wire_msg_t *msg = wire_msg_create("execute_reply", "kernel-session", content);
    json_t *ev = gw_translate_execute_reply(msg, saw_error, &plain_opts, count);

    wire_msg_destroy(msg);
    return ev;
}

Test(translate, reply_ok_gives_nothing_but_the_count)
{
    int count = -1;

    cr_assert_null(
        reply(json_pack("{s:s, s:i, s:[], s:{}}", "status", "ok", "execution_count", 5, "payload", "user_expressions"), 0, &count));
    cr_assert_eq(count, 5);
}

Test(translate, reply_without_count_leaves_it)
{
    int count = 77;

    cr_assert_null(reply(json_pack("{s:s}", "status", "ok"), 0, &count));
    cr_assert_eq(count, 77);
    cr_assert_null(reply(json_pack("{s:s, s:i}", "status", "ok", "execution_count", 2), 0, NULL), "a NULL count is allowed");
}

Test(translate, reply_aborted_is_an_execution_aborted_error)
{
    int count = -1;
    json_t *ev = reply(json_pack("{s:s, s:i}", "status", "aborted", "execution_count", 9), 0, &count);
    json_t *err = json_object_get(ev, "error");

    cr_assert_not_null(ev);
    cr_assert_str_eq(ev_type(ev), "error");
    cr_assert_str_eq(ev_str(err, "ename"), "ExecutionAborted");
    cr_assert(json_is_string(json_object_get(err, "evalue")));
    cr_assert(json_is_array(json_object_get(err, "traceback")));
    cr_assert(json_is_integer(json_object_get(ev, "timestamp")));
    cr_assert_eq(count, 9);
    json_decref(ev);
}

/* tslab answers "abort" where ipykernel says "aborted"; an unknown status is never a silent success. */
Test(translate, reply_with_any_other_status_is_an_error)
{
    json_t *ev = reply(json_pack("{s:s}", "status", "abort"), 0, NULL);

    cr_assert_not_null(ev);
    cr_assert_str_eq(ev_str(json_object_get(ev, "error"), "ename"), "ExecutionAborted");
    json_decref(ev);
    ev = reply(json_pack("{s:s}", "status", "weird"), 0, NULL);
    cr_assert_not_null(ev);
    cr_assert_str_eq(ev_str(json_object_get(ev, "error"), "ename"), "ExecutionFailed");
    cr_assert_not_null(strstr(ev_str(json_object_get(ev, "error"), "evalue"), "weird"));
    json_decref(ev);
    cr_assert_null(reply(json_pack("{s:s}", "status", "abort"), 1, NULL), "an error already reported is not repeated");
}

Test(translate, reply_error_without_iopub_error_is_reported)
{
    json_t *content = traceback_content();
    json_t *ev;
    int count = -1;

    json_object_set_new(content, "status", json_string("error"));
    json_object_set_new(content, "execution_count", json_integer(3));
    ev = reply(content, 0, &count);
    cr_assert_not_null(ev);
    cr_assert_str_eq(ev_type(ev), "error");
    cr_assert_str_eq(ev_str(json_object_get(ev, "error"), "ename"), "ZeroDivisionError");
    cr_assert_str_eq(json_string_value(json_array_get(json_object_get(json_object_get(ev, "error"), "traceback"), 2)),
                     "ZeroDivisionError: division by zero", "the same ANSI stripping as iopub errors");
    cr_assert_eq(count, 3);
    json_decref(ev);
}

Test(translate, reply_error_after_iopub_error_is_not_repeated)
{
    json_t *content = traceback_content();
    int count = -1;

    json_object_set_new(content, "status", json_string("error"));
    json_object_set_new(content, "execution_count", json_integer(3));
    cr_assert_null(reply(content, 1, &count));
    cr_assert_eq(count, 3);
}

Test(translate, error_event_builder)
{
    json_t *ev = gw_error_event("TimeoutError", "ran past 100 ms");
    json_t *err = json_object_get(ev, "error");

    cr_assert_str_eq(ev_type(ev), "error");
    cr_assert(json_is_integer(json_object_get(ev, "timestamp")));
    cr_assert_str_eq(ev_str(err, "ename"), "TimeoutError");
    cr_assert_str_eq(ev_str(err, "evalue"), "ran past 100 ms");
    cr_assert(json_is_array(json_object_get(err, "traceback")));
    json_decref(ev);
}

/* ---- gw_strip_ansi ---- */

/* Strips an exact-size copy (ASan sees any read past the end) and checks the result. */
static void check_strip(const char *in, size_t in_len, const char *expected)
{
    char *copy = gw_test_exact_copy(in, in_len);
    size_t out_len = (size_t)-1;
    char *out = gw_strip_ansi(copy, in_len, &out_len);

    cr_assert_eq(out_len, strlen(expected), "length %zu, expected %zu for \"%s\"", out_len, strlen(expected), expected);
    cr_assert(memcmp(out, expected, out_len + 1) == 0, "got \"%s\", expected \"%s\"", out, expected);
    free(out);
    free(copy);
}

#define CHECK_STRIP(in, expected) check_strip(in, sizeof(in) - 1, expected)

Test(strip_ansi, text_without_escapes_is_unchanged)
{
    CHECK_STRIP("", "");
    CHECK_STRIP("plain text [not an escape] 100%", "plain text [not an escape] 100%");
    CHECK_STRIP("caf\xc3\xa9 \xf0\x9f\x98\x80\n", "caf\xc3\xa9 \xf0\x9f\x98\x80\n");
}

Test(strip_ansi, csi_colours_and_cursor_moves)
{
    CHECK_STRIP("\x1b[0;31mred\x1b[0m", "red");
    CHECK_STRIP("\x1b[1mbold\x1b[22m \x1b[38;5;208morange\x1b[39m", "bold orange");
    CHECK_STRIP("\x1b[38;2;255;0;0mtrue colour\x1b[m", "true colour");
    CHECK_STRIP("a\x1b[2Kb\x1b[1Ac\x1b[10;20Hd\x1b[?25le", "abcde");
}

Test(strip_ansi, osc_with_bel_and_st)
{
    CHECK_STRIP("\x1b]0;window title\x07text", "text");
    CHECK_STRIP("\x1b]8;;https://example.com\x1b\\link\x1b]8;;\x1b\\ after", "link after");
}

Test(strip_ansi, two_byte_escapes)
{
    CHECK_STRIP("a\x1b"
                "7b\x1b"
                "8c\x1b"
                "Md",
                "abcd");
    CHECK_STRIP("\x1b(Bplain\x1b[m", "plain"); /* what `tput sgr0` prints: a charset selection first */
    CHECK_STRIP("\x1b)0\x1b#8x", "x");
}

Test(strip_ansi, truncated_escapes_at_the_end)
{
    CHECK_STRIP("text\x1b", "text");
    CHECK_STRIP("text\x1b[", "text");
    CHECK_STRIP("text\x1b[0;3", "text");
    CHECK_STRIP("text\x1b]0;unterminated title", "text");
    CHECK_STRIP("text\x1b]0;title\x1b", "text");
}

Test(strip_ansi, utf8_around_escapes_is_preserved)
{
    CHECK_STRIP("\x1b[31m\xe4\xb8\xad\xe6\x96\x87\x1b[0m\xc3\xa9", "\xe4\xb8\xad\xe6\x96\x87\xc3\xa9");
    CHECK_STRIP("\x1b]0;\xc3\xa9\x07\xe2\x82\xac", "\xe2\x82\xac");
}

Test(strip_ansi, out_len_may_be_null)
{
    char *out = gw_strip_ansi("\x1b[1mx", 5, NULL);

    cr_assert_str_eq(out, "x");
    free(out);
}

/* An ESC before a non-ASCII byte is not an escape sequence the stripper knows: dropping the byte
 * after ESC would cut a UTF-8 character in half, and the traceback is later stored unchecked. */
Test(strip_ansi, never_splits_a_utf8_character)
{
    CHECK_STRIP("a\x1b\xc3\xa9z", "a\xc3\xa9z");
    CHECK_STRIP("a\x1b[\xc3\xa9z", "a\xc3\xa9z");
    CHECK_STRIP("a\x1b[1;\xe2\x82\xacz", "a\xe2\x82\xacz");
    CHECK_STRIP("a\x1b(\xc3\xa9z", "a\xc3\xa9z");
    CHECK_STRIP("a\x1b\nz", "a\nz"); /* nor a control character */
}

Test(translate, a_traceback_with_a_stray_escape_still_renders)
{
    json_t *ev =
        translate("error", json_pack("{s:s, s:s, s:[s]}", "ename", "ValueError", "evalue", "bad", "traceback", "x\x1b\xc3\xa9 y"),
                  &plain_opts);
    gw_event_t *frame = gw_event_render(ev, 1, 0);
    json_t *data = json_loadb(frame->frame + 12, frame->len - 14, 0, NULL);

    cr_assert_not_null(data, "the frame's data is not JSON: %.*s", (int)frame->len, frame->frame);
    json_decref(data);
    gw_event_release(frame);
    json_decref(ev);
}

/* Content kgate could not decode is reported where it was awaited: a notice for output, an error for a reply. */
Test(translate, undecodable_content_is_reported)
{
    wire_msg_t *msg = msg_new("display_data", json_object());
    json_t *ev;

    msg->content_undecodable = 1;
    ev = gw_translate_iopub(msg, &plain_opts);
    cr_assert_not_null(ev, "an undecodable display_data vanished");
    cr_assert_str_eq(ev_type(ev), "status");
    cr_assert_str_eq(json_string_value(json_object_get(ev, "text")), "message_undecodable");
    cr_assert_str_eq(json_string_value(json_object_get(ev, "msg_type")), "display_data");
    json_decref(ev);
    wire_msg_destroy(msg);

    msg = msg_new("execute_reply", json_object());
    msg->content_undecodable = 1;
    ev = gw_translate_execute_reply(msg, 0, &plain_opts, NULL);
    cr_assert_not_null(ev);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ev, "error"), "ename")), "ExecutionFailed");
    json_decref(ev);
    cr_assert_null(gw_translate_execute_reply(msg, 1, &plain_opts, NULL), "an error already seen is not repeated");
    wire_msg_destroy(msg);
}

/* ---- results as the kernel encoded them (gw_translate_raw_bundle) ---- */

/* The results text of content `json` (which the bundle scan must call simple), NUL-terminated (free it). */
static char *raw_results(const char *json, const gw_translate_opts_t *opts)
{
    wire_bundle_fields_t f;
    size_t len;
    char *out, *text;

    cr_assert_eq(wire_json_scan_bundle(json, strlen(json), &f), 1, "%s", json);
    out = gw_translate_raw_bundle(&f, opts, &len);
    text = malloc(len + 1);
    memcpy(text, out, len);
    text[len] = '\0';
    free(out);
    cr_assert_null(memchr(text, '\n', len), "one line: %s", text);
    return text;
}

Test(translate, raw_bundle_keeps_big_integers_and_floats_as_written)
{
    char *got = raw_results("{\"data\": {\"text/plain\": \"{'n': 10**81}\", \"application/json\": {\"n\": "
                            "1000000000000000000000000000000000000000000000000000000000000000000000000000000000, \"f\": 1.5e+300}},"
                            " \"metadata\": {}, \"execution_count\": 1}",
                            &plain_opts);

    cr_assert_str_eq(got, "{\"text/plain\":\"{'n': 10**81}\",\"application/json\":{\"n\": "
                          "1000000000000000000000000000000000000000000000000000000000000000000000000000000000, \"f\": 1.5e+300},"
                          "\"text\":\"{'n': 10**81}\"}");
    free(got);
}

/* For a bundle the parser takes, the raw way gives the same results as the parsed way (gw_translate_iopub). */
Test(translate, raw_bundle_agrees_with_the_parsed_translation)
{
    static const char *const cases[] = {
        "{\"data\":{\"text/plain\":\"2\",\"text/html\":\"<b>2</b>\",\"image/png\":\"iVBOR\"},\"metadata\":{}}",
        "{\"data\":{\"application/json\":{\"a\":[1,2.5,\"x\"],\"b\":null}},\"metadata\":{}}",
        "{\"data\":{\"text/plain\":\"p\",\"text\":\"other\"}}",
        "{\"data\":{\"text/plain\":\"\\u001b[33m2\\u001b[39m\"}}",
        "{\"data\":{}}",
    };
    const gw_translate_opts_t opts[] = {{0, 0}, {1, 0}, {0, 1}};

    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        for (size_t o = 0; o != sizeof(opts) / sizeof(opts[0]); ++o) {
            char *raw = raw_results(cases[i], &opts[o]);
            json_t *parsed = wire_json_parse(raw, strlen(raw));
            json_t *ev = translate("display_data", wire_json_parse(cases[i], strlen(cases[i])), &opts[o]);
            cr_assert_not_null(parsed, "case %zu: %s", i, raw);
            cr_assert(json_equal(parsed, json_object_get(ev, "results")), "case %zu, opts %zu: %s", i, o, raw);
            json_decref(parsed);
            json_decref(ev);
            free(raw);
        }
    }
}

Test(translate, result_text_plain_loses_ansi_unless_asked_both_ways)
{
    const char *json = "{\"data\":{\"text/plain\":\"\\u001b[33m2\\u001b[39m\",\"text/html\":\"<i>\\u001b[1m</i>\"}}";
    const gw_translate_opts_t keep = {0, 1};
    char *raw = raw_results(json, &plain_opts), *kept = raw_results(json, &keep);
    json_t *ev = translate("execute_result", wire_json_parse(json, strlen(json)), &plain_opts);

    cr_assert_str_eq(raw, "{\"text/plain\":\"2\",\"text/html\":\"<i>\\u001b[1m</i>\",\"text\":\"2\"}");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ev, "results"), "text/plain")), "2");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(ev, "results"), "text")), "2");
    cr_assert_not_null(strstr(kept, "\"text\":\"\\u001b[33m2\\u001b[39m\""), "%s", kept);
    json_decref(ev);
    free(raw);
    free(kept);
}

Test(translate, raw_bundle_in_compat_execd_sends_values_as_their_text_and_keeps_one_line)
{
    const gw_translate_opts_t compat = {1, 0};
    char *got = raw_results("{\"data\":{\"application/json\":{\n  \"n\": 123456789012345678901234567890\n}}}", &compat);
    char *plain = raw_results("{\"data\":{\"application/json\":{\n  \"n\": [1,\r\n 2]\n}}}", &plain_opts);

    cr_assert_str_eq(got, "{\"application/json\":\"{\\\"n\\\":123456789012345678901234567890}\"}");
    cr_assert_str_eq(plain, "{\"application/json\":{\"n\":[1,2]}}");
    free(got);
    free(plain);
}
