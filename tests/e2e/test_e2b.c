/* tests/e2e/test_e2b.c: E2B's code-interpreter SDK, unmodified, against kgate's E2B door (docs/e2b.md, docs/API.md 6.2). */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec_helpers.h"
#include "jserver.h"
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"
#include "support/skip.h"

/*
 * The SDK (@e2b/code-interpreter, pinned by tests/e2e/e2b_client's lock) is driven by e2b_client/e2b_client.mjs, which
 * prints one JSON line per step. Debug mode (`debug: true`) with `sandboxUrl` pointing at this test's kgate for most
 * steps; the SDK's own debug address (localhost:49999, kgate's --e2b-listen) only when that port is free here.
 */

#define SCRIPT KGATE_SOURCE_DIR "/tests/e2e/e2b_client/e2b_client.mjs"
#define DEFAULT_MODULES_DIR "/usr/local/lib/kgate/e2b-client" /* where deploy/deps.sh installs the npm lock */
#define SCRIPT_MS 420000
#define SCRIPT_TIMEOUT_S "400"
#define E2B_DEBUG_PORT 49999 /* where the SDK sends code in debug mode */

static ts_gateway_t gateway;

/* This binary checks kgate, not itself (as test_mcp.c: a failed assertion abandons the test's heap). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(e2b, .fini = fini, .timeout = 600);

/* Runs the script's `scenario` (`token` may be NULL; no --url when `with_url` is 0) and asserts every step in `steps` passed. */
static void run_client(const char *scenario, int with_url, const char *token, const char *const *steps)
{
    const char *modules = js_modules_dir("KGATE_E2B_CLIENT_DIR", DEFAULT_MODULES_DIR);
    char url[64];
    const char *argv[16] = {js_node(),   SCRIPT,  "--scenario",   scenario,
                            "--modules", modules, "--timeout-ms", SCRIPT_TIMEOUT_S "000"};
    size_t n = 8;
    js_run_t run;

    js_assert_installed(modules, "@e2b/code-interpreter", KGATE_SOURCE_DIR "/tests/e2e/e2b_client/package-lock.json");
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", gateway.port);
    if (with_url) {
        argv[n++] = "--url";
        argv[n++] = url;
    }
    if (token != NULL) {
        argv[n++] = "--token";
        argv[n++] = token;
    }
    argv[n] = NULL;
    cr_assert_eq(js_run(argv, NULL, SCRIPT_MS, &run), 0, "cannot run node: %s", run.error);

    char who[96];
    snprintf(who, sizeof(who), "E2B (%s)", scenario);
    if (!js_expect_steps(who, &run, steps))
        ts_gateway_dump_log(&gateway, 8192);
    js_run_dispose(&run);
}

/* Every item of the list, through sandboxUrl (debug mode: no control plane is called). */
Test(e2b, sdk_runs_code_and_manages_contexts)
{
    static const char *const steps[] = {"stdout_stderr_callbacks",
                                        "main_result_text",
                                        "matplotlib_png",
                                        "html_and_json_results",
                                        "error_with_traceback",
                                        "state_across_calls",
                                        "create_context_python",
                                        "create_context_js_ts",
                                        "list_contexts",
                                        "restart_context",
                                        "remove_context",
                                        "envs_for_one_run",
                                        "print_20mb_in_order",
                                        "sdk_timeout_leaves_context_usable",
                                        "keepalive_is_ignored_by_the_sdk",
                                        "done",
                                        NULL};

    xh_gateway_start(&gateway, NULL);
    run_client("main", 1, NULL, steps);
    xh_gateway_stop(&gateway);
}

/* The tokens a connected sandbox carries are kgate's token; a wrong one or none is refused (401). */
Test(e2b, sdk_tokens_are_kgates_token)
{
    static const char *const steps[] = {"tokens_accepted", "wrong_token_refused", "done", NULL};
    char token[64];

    ts_random_hex(token, sizeof(token));
    const char *args[] = {"--access-token", token, NULL};
    xh_gateway_start(&gateway, args);
    run_client("token", 1, token, steps);
    xh_gateway_stop(&gateway);
}

/* True when 127.0.0.1:`port` can be bound now (nobody else listens there). */
static int port_is_free(unsigned short port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

    cr_assert(fd >= 0, "socket: %s", strerror(errno));
    ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

/* The SDK's own debug address, served by --e2b-listen: `Sandbox.create({debug: true})` and nothing else. */
Test(e2b, sdk_debug_mode_reaches_the_e2b_listener)
{
    static const char *const steps[] = {"debug_mode_runs_code", "done", NULL};
    const char *args[] = {"--e2b-listen", "127.0.0.1:49999", NULL};

    if (!port_is_free(E2B_DEBUG_PORT))
        cr_skip_test("%s", ts_skip_note(__func__, "127.0.0.1:%u, where the SDK looks in debug mode, is taken on this machine",
                                        E2B_DEBUG_PORT));
    xh_gateway_start(&gateway, args);
    run_client("debug", 0, NULL, steps);
    xh_gateway_stop(&gateway);
}

/* The lines of an /execute body: every line one JSON object, no blank line, the last end_of_execution. */
static json_t *parse_lines(const char *body, size_t len)
{
    json_t *lines = json_array();
    const char *p, *nl;

    cr_assert(len > 0 && body[len - 1] == '\n', "the body ends with a line's \\n: %.300s", body);
    for (p = body; *p != '\0'; p = nl + 1) {
        nl = strchr(p, '\n');
        cr_assert(nl > p, "a blank line at byte %zu: the SDK's JSON.parse(\"\") would fail the run", (size_t)(p - body));
        json_t *v = json_loadb(p, (size_t)(nl - p), 0, NULL);
        cr_assert(json_is_object(v), "not one JSON object: %.*s", (int)(nl - p), p);
        json_array_append_new(lines, v);
    }
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(lines, json_array_size(lines) - 1), "type")),
                     "end_of_execution", "the last line");
    return lines;
}

/* One /execute, read whole; returns its lines (parse_lines). */
static json_t *execute_lines(const char *body)
{
    ts_response_t resp = {0};
    json_t *lines;

    cr_assert_eq(ts_http_request_until(gateway.port, "POST", "/execute", NULL, body, ts_now_ms() + XH_RUN_MS, &resp), 200,
                 "POST /execute: %d %s %s", resp.status, resp.error, resp.body);
    lines = parse_lines(resp.body, resp.body_len);
    ts_response_dispose(&resp);
    return lines;
}

/* The first line of `type`, or NULL. */
static json_t *find_type(const json_t *lines, const char *type)
{
    size_t i;
    json_t *v;

    json_array_foreach(lines, i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "type")), type) == 0)
            return v;
    }
    return NULL;
}

static size_t count_type(const json_t *lines, const char *type)
{
    size_t i, n = 0;
    json_t *v;

    json_array_foreach(lines, i, v)
    {
        n += strcmp(json_string_value(json_object_get(v, "type")), type) == 0;
    }
    return n;
}

/* A Python context made through the door: its id, which lives in `resp` (the caller disposes of it). */
static const char *create_python_context(ts_response_t *resp)
{
    cr_assert_eq(ts_http_request(gateway.port, "POST", "/contexts", NULL, "{\"language\": \"python\"}", resp), 200, "%s",
                 resp->body);
    const char *id = json_string_value(json_object_get(resp->json, "id"));
    cr_assert_not_null(id, "%s", resp->body);
    return id;
}

/* The framing the SDK parses, read raw: output, results, an error, and a keepalive after 5 s of silence. */
Test(e2b, execute_is_ndjson_ending_in_end_of_execution)
{
    json_t *lines;

    xh_gateway_start(&gateway, NULL);
    lines = execute_lines("{\"code\": \"print('a')\\nimport sys; print('b', file=sys.stderr)\\n'q'\"}");
    cr_expect_eq(count_type(lines, "number_of_executions"), 1);
    cr_expect_eq(count_type(lines, "stdout"), 1);
    cr_expect_eq(count_type(lines, "stderr"), 1);
    cr_expect_eq(count_type(lines, "result"), 1);
    cr_expect_eq(count_type(lines, "end_of_execution"), 1, "exactly one end");
    json_decref(lines);

    lines = execute_lines("{\"code\": \"import time\\ntime.sleep(6)\\nraise ValueError('x')\"}");
    cr_expect_geq(count_type(lines, "keepalive"), 1, "no keepalive in 6 s of silence");
    cr_expect_eq(count_type(lines, "error"), 1, "one error");
    cr_expect_eq(count_type(lines, "end_of_execution"), 1);
    json_decref(lines);

    /* an unknown context is E2B's 404 with a text body (the SDK's NotFoundError shows it) */
    ts_response_t resp = {0};
    cr_expect_eq(ts_http_request(gateway.port, "POST", "/execute", NULL, "{\"code\": \"1\", \"context_id\": \"nope\"}", &resp),
                 404);
    cr_expect_str_eq(resp.body, "Context nope not found");
    ts_response_dispose(&resp);
    /* an id that would paint the caller's terminal or break the body's charset comes back harmless */
    cr_expect_eq(
        ts_http_request(gateway.port, "POST", "/execute", NULL, "{\"code\": \"1\", \"context_id\": \"\\u001b[2Jx\"}", &resp), 404);
    cr_expect_str_eq(resp.body, "Context ?[2Jx not found");
    ts_response_dispose(&resp);
    cr_expect_eq(ts_http_request(gateway.port, "DELETE", "/contexts/\xff\xc3x", NULL, NULL, &resp), 404);
    cr_expect_str_eq(resp.body, "Context \xef\xbf\xbd\xef\xbf\xbdx not found");
    ts_response_dispose(&resp);
    cr_expect_eq(ts_http_request(gateway.port, "GET", "/health", NULL, NULL, &resp), 200);
    ts_response_dispose(&resp);
    xh_gateway_stop(&gateway);
}

/* A restart ends the run it interrupts as E2B's server does (ContextRestarting), a kernel's death with kgate's KernelDied; both
 * streams still end with end_of_execution, and the context runs again. */
Test(e2b, restart_and_death_end_the_stream_with_their_error)
{
    ts_response_t resp = {0}, run = {0};
    ts_http_t c;
    char path[128], body[256];
    json_t *lines, *err;
    int64_t deadline;

    xh_gateway_start(&gateway, NULL);
    const char *id = create_python_context(&resp);
    snprintf(path, sizeof(path), "/contexts/%s/restart", id);
    snprintf(body, sizeof(body),
             "{\"code\": \"import time\\nprint('sleeping', flush=True)\\ntime.sleep(60)\", \"context_id\": \"%s\"}", id);

    ts_http_init(&c, gateway.port, 0);
    deadline = ts_now_ms() + XH_RUN_MS;
    cr_assert_eq(ts_http_start(&c, "POST", "/execute", NULL, body, deadline, &run), 0, "%s", run.error);
    cr_assert_eq(run.status, 200);
    ts_response_t restart = {0};
    cr_assert_eq(ts_http_request(gateway.port, "POST", path, NULL, NULL, &restart), 200, "restart: %s", restart.body);
    ts_response_dispose(&restart);
    cr_assert_eq(ts_http_read_all(&c, &run, 1 << 20, deadline), 0, "%s", run.error);
    lines = parse_lines(run.body, run.body_len);
    err = find_type(lines, "error");
    cr_assert_not_null(err, "no error line: %s", run.body);
    cr_expect_str_eq(json_string_value(json_object_get(err, "name")), "ContextRestarting");
    cr_expect_str_eq(json_string_value(json_object_get(err, "value")), "Context was restarted");
    json_decref(lines);
    ts_response_dispose(&run);
    ts_http_dispose(&c);

    snprintf(body, sizeof(body), "{\"code\": \"import os\\nos._exit(3)\", \"context_id\": \"%s\"}", id);
    lines = execute_lines(body);
    err = find_type(lines, "error");
    cr_assert_not_null(err, "a dead kernel's run reported no error");
    cr_expect_str_eq(json_string_value(json_object_get(err, "name")), "KernelDied");
    json_decref(lines);

    /* kgate restarts a kernel that died on its own: the context runs again */
    snprintf(body, sizeof(body), "{\"code\": \"6 * 7\", \"context_id\": \"%s\"}", id);
    for (int i = 0; i != 50; ++i) {
        lines = execute_lines(body);
        json_t *result = find_type(lines, "result");
        int ok = result != NULL && strcmp(json_string_value(json_object_get(result, "text")), "42") == 0;
        json_decref(lines);
        if (ok)
            break;
        cr_assert_lt(i, 49, "the context never ran again after its kernel died");
        usleep(200000);
    }
    ts_response_dispose(&resp);
    xh_gateway_stop(&gateway);
}

/* A line of 300 KB is one stream event whose text kgate holds in the kernel connection's buffer (core/event.h's body): it
 * reaches the E2B client whole. */
Test(e2b, a_300_kilobyte_line_arrives_whole)
{
    json_t *lines;
    size_t i, total = 0;
    json_t *v;

    xh_gateway_start(&gateway, NULL);
    lines = execute_lines("{\"code\": \"print('w' * 300_000)\"}");
    json_array_foreach(lines, i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "type")), "stdout") == 0) {
            const char *text = json_string_value(json_object_get(v, "text"));
            for (size_t k = 0; text[k] != '\0'; ++k)
                cr_assert(text[k] == 'w' || text[k] == '\n', "byte %zu of a stdout line is '%c'", total + k, text[k]);
            total += strlen(text);
        }
    }
    cr_expect_eq(total, 300001, "%zu bytes of stdout, expected the line and its newline", total);
    json_decref(lines);
    xh_gateway_stop(&gateway);
}

/*
 * A 50 MB line, once sent, is not kept while its run goes on: kgate holds what the run's own log holds (as on the execd
 * door), not the stream's copies too. Before: the stream kept the event it put together from the log (the whole line's
 * bytes) and the writer kept the line (its last event) until the next line; kgate's RSS stayed 144 MiB over idle while
 * the run slept, against 48 MiB on /code.
 */
#define HELD_LINE_BYTES 50000000
#define HELD_LIMIT_KB (80 * 1024)
Test(e2b, a_long_line_is_not_kept_once_sent)
{
    ts_response_t resp = {0}, run = {0};
    ts_http_t c;
    char body[256], *buf = malloc(1 << 20);
    size_t got = 0;
    long long idle_kb, held_kb;
    int64_t deadline = ts_now_ms() + XH_RUN_MS;

    xh_gateway_start(&gateway, NULL);
    const char *id = create_python_context(&resp);
    snprintf(body, sizeof(body), "{\"code\": \"1\", \"context_id\": \"%s\"}", id);
    ts_response_t warm = {0};
    cr_assert_eq(ts_http_request(gateway.port, "POST", "/execute", NULL, body, &warm), 200, "%s", warm.body);
    ts_response_dispose(&warm);
    usleep(500000);
    idle_kb = ts_proc_rss_kb(gateway.pid);
    snprintf(body, sizeof(body),
             "{\"code\": \"print('x' * %d, flush=True)\\nimport time\\ntime.sleep(20)\", \"context_id\": \"%s\"}", HELD_LINE_BYTES,
             id);
    ts_http_init(&c, gateway.port, 0);
    cr_assert_eq(ts_http_start(&c, "POST", "/execute", NULL, body, deadline, &run), 0, "%s", run.error);
    cr_assert_eq(run.status, 200);
    while (got < HELD_LINE_BYTES) {
        ssize_t n = ts_http_read_body(&c, &run, buf, 1 << 20, deadline);
        cr_assert_gt(n, 0, "the stream ended after %zu bytes", got);
        got += (size_t)n;
    }
    /* the line is out and the run sleeps: what kgate still holds is the run's */
    usleep(2000000);
    held_kb = ts_proc_rss_kb(gateway.pid);
    fprintf(stderr, "e2b, a %d-byte line sent, its run still going: kgate VmRSS %lld kB over idle (%lld kB)\n", HELD_LINE_BYTES,
            held_kb - idle_kb, idle_kb);
    cr_expect_lt(held_kb - idle_kb, HELD_LIMIT_KB, "kgate holds %lld kB over idle once the line is sent", held_kb - idle_kb);
    ts_http_dispose(&c); /* the client gone interrupts the run */
    ts_response_dispose(&run);
    ts_response_dispose(&resp);
    free(buf);
    xh_gateway_stop(&gateway);
}

/* A run beyond --max-queue is 429 Too Many Requests, as execd's QUEUE_FULL (before: 503 Service Unavailable, which says
 * kgate is down when only this context is busy), with or without env_vars; the context's other run goes on. */
Test(e2b, a_run_beyond_the_queue_is_429)
{
    const char *args[] = {"--max-queue", "1", NULL};
    const char *extras[] = {"", ", \"env_vars\": {\"A\": \"b\"}"}; /* env_vars queue two runs, or none */
    ts_response_t resp = {0}, runs[2] = {{0}};
    ts_http_t c[2];
    char body[256];
    int64_t deadline = ts_now_ms() + XH_RUN_MS;

    xh_gateway_start(&gateway, args);
    const char *id = create_python_context(&resp);
    /* one run running, one waiting: the queue of 1 is full */
    snprintf(body, sizeof(body), "{\"code\": \"import time\\ntime.sleep(60)\", \"context_id\": \"%s\"}", id);
    for (int k = 0; k != 2; ++k) {
        ts_http_init(&c[k], gateway.port, 0);
        cr_assert_eq(ts_http_start(&c[k], "POST", "/execute", NULL, body, deadline, &runs[k]), 0, "%s", runs[k].error);
        cr_assert_eq(runs[k].status, 200);
    }
    for (size_t i = 0; i != sizeof(extras) / sizeof(extras[0]); ++i) {
        ts_response_t refused = {0};
        snprintf(body, sizeof(body), "{\"code\": \"1\", \"context_id\": \"%s\"%s}", id, extras[i]);
        cr_expect_eq(ts_http_request(gateway.port, "POST", "/execute", NULL, body, &refused), 429, "%s: HTTP %d %s", body,
                     refused.status, refused.body);
        cr_expect(refused.body != NULL && strstr(refused.body, "--max-queue") != NULL, "%s", refused.body);
        ts_response_dispose(&refused);
    }
    for (int k = 0; k != 2; ++k) {
        ts_http_dispose(&c[k]); /* the client gone interrupts its run */
        ts_response_dispose(&runs[k]);
    }
    ts_response_dispose(&resp);
    xh_gateway_stop(&gateway);
}

/* A context beyond --max-contexts is 429 Too Many Requests, as TOO_MANY_CONTEXTS on the other doors (before: 503). */
Test(e2b, a_context_beyond_max_contexts_is_429)
{
    const char *args[] = {"--max-contexts", "1", NULL};
    ts_response_t first = {0}, second = {0};

    xh_gateway_start(&gateway, args);
    cr_assert_eq(ts_http_request(gateway.port, "POST", "/contexts", NULL, "{\"language\": \"python\"}", &first), 200, "%s",
                 first.body);
    cr_expect_eq(ts_http_request(gateway.port, "POST", "/contexts", NULL, "{\"language\": \"python\"}", &second), 429, "HTTP %d %s",
                 second.status, second.body);
    cr_expect(second.body != NULL && strstr(second.body, "--max-contexts") != NULL, "%s", second.body);
    ts_response_dispose(&first);
    ts_response_dispose(&second);
    xh_gateway_stop(&gateway);
}
