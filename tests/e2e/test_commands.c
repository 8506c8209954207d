/* tests/e2e/test_commands.c: execd's /command routes on the real kgate: line events, exit codes, background logs, kills. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd_helpers.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/http.h"
#include "support/proc.h"

TestSuite(commands, .timeout = 120);

/* {"command": command} plus the fields of `extra` (stolen, may be NULL). */
static json_t *command_body(const char *command, json_t *extra)
{
    json_t *body = json_pack("{s:s}", "command", command);
    if (extra != NULL) {
        json_object_update(body, extra);
        json_decref(extra);
    }
    return body;
}

static void run_command(const char *command, json_t *extra, ts_events_t *out)
{
    ch_stream("/command", command_body(command, extra), out);
    E2E_ASSERT_RUN(out, NULL, E2E_FRAMING_SSE);
}

/* The command id of a stream (its init text). */
static const char *command_id(const ts_events_t *evs)
{
    return json_string_value(json_object_get(evs->v[0].json, "text"));
}

/* GET `path` as JSON; asserts `status`. */
static json_t *get_json(const char *path, int status)
{
    ts_response_t r;
    json_t *json;

    ts_http_request(ch_port(), "GET", path, NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, status);
    cr_assert_not_null(r.json, "GET %s: not JSON: %.400s", path, r.body);
    json = json_incref(r.json);
    ts_response_dispose(&r);
    return json;
}

/* Polls the status of command `id` until it no longer runs (within `ms`); returns it. */
static json_t *wait_finished(const char *id, int ms)
{
    char path[128];
    int64_t deadline = ts_now_ms() + ms;

    snprintf(path, sizeof(path), "/command/status/%s", id);
    for (;;) {
        json_t *status = get_json(path, 200);
        if (json_is_false(json_object_get(status, "running")))
            return status;
        cr_assert(ts_now_ms() < deadline, "command %s still running after %d ms", id, ms);
        json_decref(status);
        usleep(20000);
    }
}

/* GET /command/{id}/logs?cursor=N: the body, and the next cursor from the header (asserted present). */
static char *get_logs(const char *id, unsigned long long cursor, unsigned long long *next)
{
    char path[160], *body, *end;
    const char *header;
    ts_response_t r;

    snprintf(path, sizeof(path), "/command/%s/logs?cursor=%llu", id, cursor);
    ts_http_request(ch_port(), "GET", path, NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    header = ts_response_header(&r, "EXECD-COMMANDS-TAIL-CURSOR");
    cr_assert_not_null(header, "GET %s: no EXECD-COMMANDS-TAIL-CURSOR header", path);
    *next = strtoull(header, &end, 10);
    cr_assert(*end == '\0' && end != header, "cursor header \"%s\" is not a number", header);
    body = strdup(r.body);
    ts_response_dispose(&r);
    return body;
}

Test(commands, stdout_comes_line_by_line_blank_lines_kept)
{
    ts_events_t evs;
    char *texts;

    run_command("printf 'a\\n\\nb\\n'; printf 'no newline'", NULL, &evs);
    texts = ch_texts(&evs, "stdout");
    cr_assert_str_eq(texts, "a||b|no newline|", "stdout events (text|...): %s", texts);
    cr_assert_eq(ts_events_count(&evs, "error"), 0);
    free(texts);
    ts_events_dispose(&evs);
}

Test(commands, a_failing_command_reports_its_exit_code)
{
    ts_events_t evs;
    json_t *error;
    char *texts;

    run_command("echo out; echo err >&2; exit 3", NULL, &evs);
    error = ch_only_error(&evs);
    cr_assert_str_eq(json_string_value(json_object_get(error, "evalue")), "3");
    cr_assert_str_eq(json_string_value(json_object_get(error, "ename")), "CommandExecError");
    texts = ch_texts(&evs, "stderr");
    cr_assert_str_eq(texts, "err|");
    free(texts);
    ts_events_dispose(&evs);
}

Test(commands, envs_and_cwd_reach_the_command)
{
    char dir[] = "/tmp/kgate-e2e-cwd-XXXXXX", expected[128];
    ts_events_t evs;
    char *texts;

    cr_assert_not_null(mkdtemp(dir));
    run_command("pwd; echo \"$KG_ONE $KG_TWO\"",
                json_pack("{s:s, s:{s:s, s:s}}", "cwd", dir, "envs", "KG_ONE", "1", "KG_TWO", "two words"), &evs);
    texts = ch_texts(&evs, "stdout");
    snprintf(expected, sizeof(expected), "%s|1 two words|", dir);
    cr_assert_str_eq(texts, expected);
    free(texts);
    ts_events_dispose(&evs);
    rmdir(dir);
}

Test(commands, status_of_a_finished_command)
{
    ts_events_t evs;
    json_t *status, *missing;
    char path[128];

    run_command("exit 4", NULL, &evs);
    status = wait_finished(command_id(&evs), 5000);
    cr_assert_str_eq(json_string_value(json_object_get(status, "id")), command_id(&evs));
    cr_assert_str_eq(json_string_value(json_object_get(status, "command")), "exit 4");
    cr_assert_str_eq(json_string_value(json_object_get(status, "content")), "exit 4", "execd's SDKs read `content`");
    cr_assert(json_is_false(json_object_get(status, "running")));
    cr_assert_eq(json_integer_value(json_object_get(status, "exit_code")), 4);
    cr_assert(json_is_string(json_object_get(status, "error")), "a failed command says why: %s", json_dumps(status, 0));
    cr_assert(json_is_string(json_object_get(status, "started_at")) && json_is_string(json_object_get(status, "finished_at")),
              "started_at and finished_at are RFC 3339 strings");
    json_decref(status);
    /* while it runs: running true, and exit_code, finished_at and error present as null */
    ts_events_t bg;
    ch_stream("/command", command_body("sleep 5", json_pack("{s:b}", "background", 1)), &bg);
    snprintf(path, sizeof(path), "/command/status/%s", command_id(&bg));
    status = get_json(path, 200);
    cr_assert(json_is_true(json_object_get(status, "running")));
    cr_assert(json_is_null(json_object_get(status, "exit_code")) && json_is_null(json_object_get(status, "finished_at")) &&
                  json_is_null(json_object_get(status, "error")),
              "a running command's exit_code, finished_at and error are null");
    json_decref(status);
    snprintf(path, sizeof(path), "/command?id=%s", command_id(&bg));
    ts_response_t r;
    ts_http_request(e2e_shared()->port, "DELETE", path, NULL, NULL, &r);
    ts_response_dispose(&r);
    ts_events_dispose(&bg);
    snprintf(path, sizeof(path), "/command/status/%s", "00000000-0000-4000-8000-000000000000");
    missing = get_json(path, 404);
    cr_assert_str_eq(json_string_value(json_object_get(missing, "code")), "COMMAND_NOT_FOUND");
    json_decref(missing);
    ts_events_dispose(&evs);
}

Test(commands, background_logs_are_read_incrementally_by_cursor)
{
    ts_events_t evs;
    unsigned long long c1, c2, c3;
    char *first, *second, *third;
    int64_t deadline = ts_now_ms() + 10000;
    json_t *status;

    ch_stream("/command", command_body("echo first; sleep 1; echo second >&2", json_pack("{s:b}", "background", 1)), &evs);
    cr_assert_eq(evs.n, 1, "a background command's stream is its init event alone (got %zu events)", evs.n);
    cr_assert_str_eq(evs.v[0].type, "init");
    /* the first line arrives at once; the second a second later */
    for (;;) {
        first = get_logs(command_id(&evs), 0, &c1);
        if (strcmp(first, "first\n") == 0)
            break;
        cr_assert(ts_now_ms() < deadline, "logs from 0: \"%s\"", first);
        free(first);
        usleep(20000);
    }
    cr_assert_eq(c1, 6, "the cursor after \"first\\n\" is 6, got %llu", c1);
    json_decref(wait_finished(command_id(&evs), 10000));
    second = get_logs(command_id(&evs), c1, &c2);
    cr_assert_str_eq(second, "second\n", "the second read continues where the first ended");
    cr_assert_eq(c2, 13);
    third = get_logs(command_id(&evs), c2, &c3);
    cr_assert_str_eq(third, "");
    cr_assert_eq(c3, c2);
    status = wait_finished(command_id(&evs), 1000);
    cr_assert_eq(json_integer_value(json_object_get(status, "exit_code")), 0);
    cr_assert(json_is_true(json_object_get(status, "background")));
    json_decref(status);
    free(first), free(second), free(third);
    ts_events_dispose(&evs);
}

/* PIDs printed on stdout, one per line. */
static size_t stdout_pids(const ts_events_t *evs, ts_proc_t *out, size_t max)
{
    size_t n = 0, i;
    for (i = 0; i != evs->n && n < max; ++i)
        if (strcmp(evs->v[i].type, "stdout") == 0)
            out[n++] = (ts_proc_t){.pid = atoi(json_string_value(json_object_get(evs->v[i].json, "text")))};
    return n;
}

static void assert_gone(const ts_proc_t *procs, size_t n, int ms)
{
    int64_t deadline = ts_now_ms() + ms;
    for (size_t i = 0; i != n; ++i) {
        cr_assert_gt(procs[i].pid, 1);
        while (ts_proc_alive(&procs[i])) {
            cr_assert(ts_now_ms() < deadline, "process %d is still alive", (int)procs[i].pid);
            usleep(20000);
        }
    }
}

Test(commands, a_timeout_kills_the_whole_process_group)
{
    ts_events_t evs;
    ts_proc_t pids[2];
    json_t *error;
    int64_t started = ts_now_ms();

    /* a background sleep, and a foreground one that is not the shell itself */
    run_command("sleep 30 & echo $!; sh -c 'echo $$; exec sleep 30'; wait", json_pack("{s:i}", "timeout", 500), &evs);
    cr_assert_lt(ts_now_ms() - started, 10000, "the command outlived its 500 ms timeout");
    cr_assert_eq(stdout_pids(&evs, pids, 2), 2, "both PIDs printed");
    error = ch_only_error(&evs);
    cr_assert_str_eq(json_string_value(json_object_get(error, "ename")), "TimeoutError");
    cr_assert_str_eq(json_string_value(json_object_get(error, "evalue")), "137", "SIGKILL: 128 + 9");
    assert_gone(pids, 2, 3000);
    ts_events_dispose(&evs);
}

Test(commands, delete_terminates_a_running_command)
{
    ts_events_t evs;
    ts_response_t r;
    ts_proc_t pid;
    json_t *status;
    char path[160];

    ch_stream("/command", command_body("echo $$; exec sleep 30", json_pack("{s:b}", "background", 1)), &evs);
    snprintf(path, sizeof(path), "/command?id=%s", command_id(&evs));
    ts_http_request(ch_port(), "DELETE", path, NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
    status = wait_finished(command_id(&evs), 5000);
    cr_assert_eq(json_integer_value(json_object_get(status, "exit_code")), 143, "SIGTERM: 128 + 15");
    pid.pid = (pid_t)json_integer_value(json_object_get(status, "pid"));
    pid.starttime = 0;
    assert_gone(&pid, 1, 3000);
    json_decref(status);
    ts_http_request(ch_port(), "DELETE", "/command", NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 400, "MISSING_QUERY");
    ts_response_dispose(&r);
    ts_events_dispose(&evs);
}

Test(commands, bad_requests_are_plain_json_errors)
{
    ts_response_t r;
    json_t *body = json_pack("{s:s}", "cwd", "/tmp");

    ts_post_json(ch_port(), "/command", NULL, body, &r);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
    ts_response_dispose(&r);
    json_decref(body);
    body = json_pack("{s:s, s:s}", "command", "true", "cwd", "/nonexistent/kgate-e2e");
    ts_post_json(ch_port(), "/command", NULL, body, &r);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
    cr_assert(strstr(r.body, "chdir") != NULL, "the error names the failed step: %s", r.body);
    ts_response_dispose(&r);
    json_decref(body);
}

/* argv instead of command (docs/API.md 6.3): each word reaches the program as it was, quotes and spaces included. */
Test(commands, argv_reaches_the_program_word_by_word)
{
    ts_events_t evs;
    char *texts;

    ch_stream("/command", json_pack("{s:[s, s, s, s]}", "argv", "printf", "%s|", "it's two words", "$HOME;x"), &evs);
    E2E_ASSERT_RUN(&evs, NULL, E2E_FRAMING_SSE);
    texts = ch_texts(&evs, "stdout");
    cr_assert_str_eq(texts, "it's two words|$HOME;x||");
    free(texts);
    ts_events_dispose(&evs);
}

Test(commands, argv_and_command_together_or_malformed_are_refused)
{
    static const char *const bodies[] = {
        "{\"argv\": [\"true\"], \"command\": \"true\"}", "{\"argv\": []}",    "{\"argv\": \"true\"}", "{\"argv\": [\"echo\", 3]}",
        "{\"argv\": [\"echo\", \"a\\u0000b\"]}",         "{\"argv\": [\"\"]}"};
    for (size_t i = 0; i != sizeof(bodies) / sizeof(bodies[0]); ++i) {
        ts_response_t r;
        json_t *body = json_loads(bodies[i], JSON_ALLOW_NUL, NULL);
        cr_assert_not_null(body, "%s", bodies[i]);
        ts_post_json(ch_port(), "/command", NULL, body, &r);
        E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
        ts_response_dispose(&r);
        json_decref(body);
    }
}
