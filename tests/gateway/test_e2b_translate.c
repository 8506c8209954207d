/* The E2B door's pure part (gateway/e2b/translate.h): a run's events as the lines E2B's SDK parses. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "e2b/translate.h"

/* Translates `event` (stolen) and returns the lines; checks that every line is one JSON object ending in "\n". */
static char *lines_of(gw_e2b_xlate_t *state, json_t *event)
{
    gw_e2b_lines_t out = {NULL, 0, 0};

    gw_e2b_translate(state, event, &out);
    json_decref(event);
    for (const char *p = out.p, *nl; p != NULL && *p != '\0'; p = nl + 1) {
        nl = strchr(p, '\n');
        cr_assert_not_null(nl, "a line without its \\n: %s", p);
        cr_assert(nl > p, "a blank line: the SDK's JSON.parse(\"\") fails the whole run");
        json_t *v = json_loadb(p, (size_t)(nl - p), 0, NULL);
        cr_assert(json_is_object(v), "not one JSON object: %.*s", (int)(nl - p), p);
        json_decref(v);
    }
    return out.p;
}

/* The one line of `event`, parsed. */
static json_t *line_of(gw_e2b_xlate_t *state, json_t *event)
{
    char *text = lines_of(state, event);
    json_t *v;

    cr_assert_not_null(text, "no line");
    cr_assert_eq(strchr(text, '\n'), text + strlen(text) - 1, "more than one line: %s", text);
    v = json_loads(text, 0, NULL);
    free(text);
    return v;
}

Test(e2b, stdout_keeps_its_text_and_gets_an_iso_timestamp)
{
    gw_e2b_xlate_t st = {0};
    json_t *v =
        line_of(&st, json_pack("{s:s, s:I, s:s}", "type", "stdout", "timestamp", (json_int_t)1700000000123, "text", "a\nb"));

    cr_assert_str_eq(json_string_value(json_object_get(v, "type")), "stdout");
    cr_assert_str_eq(json_string_value(json_object_get(v, "text")), "a\nb");
    cr_assert_str_eq(json_string_value(json_object_get(v, "timestamp")), "2023-11-14T22:13:20.123000Z");
    json_decref(v);
}

Test(e2b, execution_count_becomes_number_of_executions)
{
    gw_e2b_xlate_t st = {0};
    json_t *v = line_of(&st, json_pack("{s:s, s:i}", "type", "execution_count", "execution_count", 7));

    cr_assert_str_eq(json_string_value(json_object_get(v, "type")), "number_of_executions");
    cr_assert_eq(json_integer_value(json_object_get(v, "execution_count")), 7);
    json_decref(v);
}

Test(e2b, a_result_is_flattened_with_its_quotes_stripped)
{
    gw_e2b_xlate_t st = {0};
    json_t *v = line_of(&st, json_pack("{s:s, s:{s:s, s:s, s:s, s:s, s:{s:i}, s:s, s:s}}", "type", "result", "results",
                                       "text/plain", "'abc'", "text", "'abc'", "text/html", "<b>x</b>", "image/png", "iVBO",
                                       "application/json", "a", 1, "application/vnd.custom", "zz", "e2b/chart", "c"));

    cr_assert_str_eq(json_string_value(json_object_get(v, "text")), "abc", "one pair of quotes removed, as E2B's server does");
    cr_assert_str_eq(json_string_value(json_object_get(v, "html")), "<b>x</b>");
    cr_assert_str_eq(json_string_value(json_object_get(v, "png")), "iVBO");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(v, "json"), "a")), 1, "json is an object");
    cr_assert_str_eq(json_string_value(json_object_get(v, "chart")), "c");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(v, "extra"), "application/vnd.custom")), "zz");
    cr_assert(json_is_true(json_object_get(v, "is_main_result")), "an execute_result is the main result");
    cr_assert_null(json_object_get(v, "results"));
    json_decref(v);
}

Test(e2b, a_displayed_result_is_not_the_main_one_and_json_text_is_read_back)
{
    gw_e2b_xlate_t st = {0};
    json_t *v = line_of(&st, json_pack("{s:s, s:b, s:{s:s, s:s}}", "type", "result", "display", 1, "results", "text/plain",
                                       "\"q\"x", "application/json", "{\"k\":[1]}"));

    cr_assert(json_is_false(json_object_get(v, "is_main_result")));
    cr_assert_str_eq(json_string_value(json_object_get(v, "text")), "\"q\"x", "quotes that do not surround stay");
    cr_assert(json_is_array(json_object_get(json_object_get(v, "json"), "k")), "execd's JSON text becomes the object");
    json_decref(v);
}

Test(e2b, only_the_first_error_is_sent_with_its_traceback_joined)
{
    gw_e2b_xlate_t st = {0};
    json_t *v = line_of(&st, json_pack("{s:s, s:{s:s, s:s, s:[s,s]}}", "type", "error", "error", "ename", "ValueError", "evalue",
                                       "bad", "traceback", "line 1\n", "ValueError: bad"));
    char *again;

    cr_assert_str_eq(json_string_value(json_object_get(v, "name")), "ValueError");
    cr_assert_str_eq(json_string_value(json_object_get(v, "value")), "bad");
    cr_assert_str_eq(json_string_value(json_object_get(v, "traceback")), "line 1\nValueError: bad");
    json_decref(v);
    again = lines_of(
        &st, json_pack("{s:s, s:{s:s, s:s, s:[]}}", "type", "error", "error", "ename", "TimeoutError", "evalue", "x", "traceback"));
    cr_assert_null(again, "a second error was sent: %s", again);
}

Test(e2b, a_restart_ends_the_run_as_context_restarting)
{
    gw_e2b_xlate_t st = {0};
    json_t *v = line_of(&st, json_pack("{s:s, s:{s:s, s:s, s:[]}}", "type", "error", "error", "ename", "KernelRestarted", "evalue",
                                       "the kernel was restarted", "traceback"));

    cr_assert_str_eq(json_string_value(json_object_get(v, "name")), "ContextRestarting");
    cr_assert_str_eq(json_string_value(json_object_get(v, "value")), "Context was restarted");
    json_decref(v);
}

Test(e2b, truncation_is_said_once_on_stderr_and_kgates_own_events_say_nothing)
{
    gw_e2b_xlate_t st = {0};
    json_t *v = line_of(&st, json_pack("{s:s, s:s, s:s}", "type", "status", "text", "output_truncated", "reason", "over 1 MiB"));

    cr_assert_str_eq(json_string_value(json_object_get(v, "type")), "stderr");
    cr_assert_not_null(strstr(json_string_value(json_object_get(v, "text")), "over 1 MiB"));
    json_decref(v);
    cr_assert_null(lines_of(&st, json_pack("{s:s, s:s}", "type", "status", "text", "output_truncated")));
    cr_assert_null(lines_of(&st, json_pack("{s:s, s:s}", "type", "status", "text", "busy")));
    cr_assert_null(lines_of(&st, json_pack("{s:s}", "type", "ping")));
    cr_assert_null(lines_of(&st, json_pack("{s:s}", "type", "init")));
    cr_assert_null(lines_of(&st, json_pack("{s:s, s:i}", "type", "execution_complete", "execution_time", 3)));
}

Test(e2b, languages_are_named_as_e2b_names_them)
{
    char buf[32];

    cr_assert_str_eq(gw_e2b_language(NULL, buf, sizeof(buf)), "python");
    cr_assert_str_eq(gw_e2b_language("  ", buf, sizeof(buf)), "python");
    cr_assert_str_eq(gw_e2b_language(" JS ", buf, sizeof(buf)), "javascript");
    cr_assert_str_eq(gw_e2b_language("ts", buf, sizeof(buf)), "typescript");
    cr_assert_str_eq(gw_e2b_language("R", buf, sizeof(buf)), "r");
    cr_assert_str_eq(gw_e2b_kernel_language("typescript"), "javascript");
    cr_assert_str_eq(gw_e2b_kernel_language("bash"), "bash");
}

Test(e2b, env_code_exists_for_the_languages_e2b_sets_variables_in)
{
    json_t *env = json_pack("{s:s}", "K_1", "it's \"q\"");
    const char *langs[] = {"python", "javascript", "typescript", "bash", "r"};

    for (size_t i = 0; i != sizeof(langs) / sizeof(langs[0]); ++i) {
        char *set = gw_e2b_env_code(langs[i], env, 0), *restore = gw_e2b_env_code(langs[i], env, 1);
        cr_assert_not_null(set, "%s", langs[i]);
        cr_assert_not_null(restore, "%s", langs[i]);
        cr_assert_not_null(strstr(set, "K_1"), "%s: %s", langs[i], set);
        free(set);
        free(restore);
    }
    cr_assert_null(gw_e2b_env_code("java", env, 0));
    json_decref(env);
}

Test(e2b, a_text_error_quoting_caller_bytes_is_valid_utf8_without_control_characters)
{
    char out[64];
    /* an id with an ANSI escape, a newline, DEL, a stray continuation byte, a character cut short at the end */
    static const char id[] = "Context \x1b[31mx\ny\x7f\x80 \xc3\xa9 \xe2\x82";
    size_t n = gw_e2b_plain_text(out, sizeof(out), id, sizeof(id) - 1);

    cr_expect_str_eq(out, "Context ?[31mx?y?\xef\xbf\xbd \xc3\xa9 \xef\xbf\xbd\xef\xbf\xbd");
    cr_expect_eq(n, strlen(out));

    /* a character that would not fit whole is left out, and the text still ends */
    n = gw_e2b_plain_text(out, 4, "ab\xc3\xa9", 4);
    cr_expect_str_eq(out, "ab");
    cr_expect_eq(n, 2);
    cr_expect_eq(gw_e2b_plain_text(out, 1, "abc", 3), 0);
    cr_expect_str_eq(out, "");
}
