/* tests/e2e/test_languages.c: bash, JavaScript, TypeScript (Deno) and R contexts through kgate's HTTP API, with real kernels.
 * The kernel matrix (test_kernel_matrix.c) runs the same scenarios on every kernel; this file checks each language's own ways. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "exec_helpers.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/skip.h"
#include "support/stream.h"

/* Where the build puts the kernelspecs it makes (kgate's bash kernel; Deno's, as `deno jupyter --install` wrote it). */
#define KERNELS_DIR KGATE_BINARY_DIR "/kernels/share/jupyter/kernels"

/* From DELETE /code?id= to the end of the interrupted run's stream. */
#define INTERRUPT_END_MS 1000

static ts_gateway_t gateway;

/*
 * This binary checks kgate, not itself: a failed assertion abandons the test's heap, and LeakSanitizer would then
 * report that failure as a crash (as in shared.c, which this binary does not link: it runs its own kgate).
 */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void fini(void)
{
    xh_gateways_stop_all();
}

/* Each test gets its own kgate pointed at the kernels of this build (the system's python3 is found by default). */
static void init(void)
{
    static const char *const args[] = {"--kernel-path", KERNELS_DIR, NULL};
    xh_gateway_start(&gateway, args);
}

TestSuite(languages, .init = init, .fini = fini, .timeout = 180);

static unsigned short port(void)
{
    return gateway.port;
}

/* A kernelspec of the build that a test needs: missing is a failure (deploy/deps.sh installs Deno; cmake writes its spec). */
static void require_kernelspec_file(const char *name)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s/kernel.json", KERNELS_DIR, name);
    cr_assert(access(path, R_OK) == 0, "no %s: deploy/deps.sh installs its kernel, then cmake writes the spec", path);
}

/* GET /code/languages as JSON (asserted to be an array); a new reference. */
static json_t *languages(void)
{
    ts_response_t r;
    int st = ts_http_request(port(), "GET", "/code/languages", NULL, NULL, &r);
    cr_assert_eq(st, 200, "GET /code/languages: HTTP %d (%s) %.600s", st, r.error, r.body);
    cr_assert(json_is_array(r.json), "GET /code/languages is not a JSON array: %.600s", r.body);
    json_t *list = json_incref(r.json);
    ts_response_dispose(&r);
    return list;
}

/* The entry of GET /code/languages whose `key` is `value`, or NULL (borrowed from `list`). */
static json_t *language_entry(json_t *list, const char *key, const char *value)
{
    size_t i;
    json_t *entry;
    json_array_foreach(list, i, entry) if (strcmp(xh_str(entry, key), value) == 0) return entry;
    return NULL;
}

/* POST /code/context {"language": language}; asserts 200 and a UUID id; the context object in *ctx when not NULL. */
static char *new_context(const char *language, json_t **ctx)
{
    ts_response_t r;
    char *id = NULL;
    int st = ts_context_create(port(), NULL, language, &id, &r);
    if (st != 200)
        ts_gateway_dump_log(&gateway, 4096);
    cr_assert_eq(st, 200, "POST /code/context {\"language\":\"%s\"}: HTTP %d (%s) %.600s", language, st, r.error, r.body);
    cr_assert(e2e_is_uuid(id), "the context id is not a UUID; body: %.600s", r.body);
    if (ctx != NULL)
        *ctx = json_incref(r.json);
    ts_response_dispose(&r);
    return id;
}

/* Runs `code` in `ctx` and asserts a well-formed stream (200, init..execution_complete). */
static void run(const char *ctx, const char *code, ts_events_t *evs)
{
    ts_response_t r;
    int st = ts_run_code(port(), NULL, ctx, NULL, code, XH_RUN_MS, evs, &r);
    cr_assert_eq(st, 200, "POST /code `%s`: HTTP %d (%s); body: %.600s", code, st, evs->error, r.body ? r.body : "");
    ts_response_dispose(&r);
    E2E_ASSERT_RUN(evs, ctx, E2E_FRAMING_SSE);
}

static void assert_no_error(const ts_events_t *evs, const char *code)
{
    char sum[E2E_MSG_SIZE];
    cr_assert_eq(ts_events_count(evs, "error"), 0, "`%s` produced an error event; %s", code,
                 ts_events_summary(evs, sum, sizeof(sum)));
}

/* Runs `code`, asserts no error and that stdout is exactly `expected` (and stderr empty). */
static void run_expect_stdout(const char *ctx, const char *code, const char *expected)
{
    ts_events_t evs;
    run(ctx, code, &evs);
    assert_no_error(&evs, code);
    E2E_ASSERT_TEXT(&evs, "stdout", expected);
    E2E_ASSERT_TEXT(&evs, "stderr", "");
    ts_events_dispose(&evs);
}

/* ---- bash --------------------------------------------------------------------------------------------------------- */

Test(languages, bash_keeps_cwd_and_environment_across_runs)
{
    char *id = new_context("bash", NULL);
    run_expect_stdout(id, "cd /tmp", "");
    run_expect_stdout(id, "export X=1", "");
    run_expect_stdout(id, "pwd", "/tmp\n");
    run_expect_stdout(id, "echo $X", "1\n");
    free(id);
}

Test(languages, bash_false_reports_its_exit_status)
{
    char *id = new_context("bash", NULL);
    ts_events_t evs;
    char sum[E2E_MSG_SIZE];
    run(id, "false", &evs);
    cr_assert_eq(ts_events_count(&evs, "error"), 1, "`false`: expected exactly one error event; %s",
                 ts_events_summary(&evs, sum, sizeof(sum)));
    const ts_event_t *ev = xh_error_event(&evs, NULL);
    json_t *err = json_object_get(ev->json, "error");
    cr_assert_str_eq(xh_str(err, "evalue"), "1", "`false`: error.evalue is not the exit status \"1\": %.600s", ev->data);
    cr_assert(json_is_array(json_object_get(err, "traceback")), "error.traceback is not an array: %.600s", ev->data);
    ts_events_dispose(&evs);

    /* A failed command is the command's outcome, not the context's: the next run succeeds. */
    run_expect_stdout(id, "true && echo ok", "ok\n");
    free(id);
}

Test(languages, bash_stderr_arrives_as_stderr)
{
    char *id = new_context("bash", NULL);
    ts_events_t evs;
    run(id, "echo err >&2", &evs);
    assert_no_error(&evs, "echo err >&2");
    E2E_ASSERT_TEXT(&evs, "stderr", "err\n");
    E2E_ASSERT_TEXT(&evs, "stdout", "");
    ts_events_dispose(&evs);
    free(id);
}

/*
 * Runs `code` in `id`, and once the kernel has taken it (execution_count) and 300 ms more, interrupts it: the context
 * (DELETE /code?id=) or, with `stop_the_run`, the run (DELETE /code/executions/<id>); `evs` gets the whole run (within
 * 10 s of the DELETE). Returns when the DELETE was sent (ts_now_ms clock).
 */
static int64_t run_and_interrupt(const char *id, const char *code, int stop_the_run, ts_events_t *evs)
{
    json_t *body = xh_body(id, code);
    int64_t t0 = ts_now_ms();
    ts_stream_t *s = xh_open(port(), body, t0 + XH_HEAD_MS);
    json_decref(body);
    cr_assert_eq(ts_stream_response(s)->status, 200, "POST /code (%s): HTTP %d %.400s", code, ts_stream_response(s)->status,
                 ts_stream_response(s)->body);
    memset(evs, 0, sizeof(*evs));
    /* execution_count means the kernel has taken the cell: the interrupt then reaches running code. */
    xh_wait_event(s, evs, "execution_count", 0, t0 + XH_RUN_MS);
    ts_sleep_ms(300);

    char path[256];
    if (stop_the_run)
        snprintf(path, sizeof(path), "/code/executions/%s", xh_execution_id(evs));
    else
        snprintf(path, sizeof(path), "/code?id=%s", id);
    ts_response_t r;
    int64_t t_delete = ts_now_ms();
    int st = ts_http_request(port(), "DELETE", path, NULL, NULL, &r);
    cr_assert_eq(st, 200, "DELETE %s: HTTP %d (%s) %.400s", path, st, r.error, r.body);
    ts_response_dispose(&r);

    ts_stream_collect(s, t_delete + 10000, 0, evs);
    ts_stream_close(s);
    E2E_ASSERT_RUN(evs, id, E2E_FRAMING_SSE);
    return t_delete;
}

Test(languages, bash_interrupt_ends_sleep_and_keeps_the_context)
{
    char *id = new_context("bash", NULL);
    run_expect_stdout(id, "KEPT=yes", "");

    ts_events_t evs;
    char sum[E2E_MSG_SIZE];
    int64_t t_delete = run_and_interrupt(id, "sleep 30", 0, &evs);
    cr_assert(evs.end_ms - t_delete <= INTERRUPT_END_MS,
              "the interrupted `sleep 30` ended %lld ms after DELETE /code?id=, expected within %d ms; %s",
              (long long)(evs.end_ms - t_delete), INTERRUPT_END_MS, ts_events_summary(&evs, sum, sizeof(sum)));
    /* An interrupted command is reported like any failed one: an error whose evalue is its status (130 = SIGINT). */
    const ts_event_t *ev = xh_error_event(&evs, NULL);
    cr_assert_str_neq(xh_str(json_object_get(ev->json, "error"), "evalue"), "0", "the interrupted run reports status 0: %.600s",
                      ev->data);
    ts_events_dispose(&evs);

    run_expect_stdout(id, "echo alive $KEPT", "alive yes\n");
    free(id);
}

Test(languages, sh_and_shell_resolve_to_bash)
{
    static const char *const aliases[] = {"sh", "shell"};
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++) {
        json_t *ctx = NULL;
        char *id = new_context(aliases[i], &ctx);
        cr_assert_str_eq(xh_str(ctx, "kernel"), "bash", "language \"%s\": the context's kernel is not bash: %.600s", aliases[i],
                         json_dumps(ctx, JSON_COMPACT));
        cr_assert_str_eq(xh_str(ctx, "language"), "bash", "language \"%s\": the context's language is not bash", aliases[i]);
        /* $BASH_VERSION is set only in bash: the kernel really is bash, not /bin/sh. */
        ts_events_t evs;
        run(id, "[ -n \"$BASH_VERSION\" ] && echo bash", &evs);
        assert_no_error(&evs, "BASH_VERSION check");
        E2E_ASSERT_TEXT(&evs, "stdout", "bash\n");
        ts_events_dispose(&evs);
        json_decref(ctx);
        free(id);
    }
}

/* ---- JavaScript and TypeScript (Deno) ----------------------------------------------------------------------------- */

/* The spec exactly as `deno jupyter --install` wrote it: the build adds nothing (no transport: kgate's connection files
 * are TCP, which Deno binds; no interrupt mode: kgate knows Deno's). */
Test(languages, deno_kernelspec_is_the_one_deno_wrote)
{
    require_kernelspec_file("deno");
    json_t *spec = json_load_file(KERNELS_DIR "/deno/kernel.json", 0, NULL);
    cr_assert(json_is_object(spec), "deno/kernel.json is not JSON");
    char *text = json_dumps(spec, JSON_COMPACT | JSON_SORT_KEYS);
    json_t *argv = json_object_get(spec, "argv");
    cr_assert_eq(json_array_size(argv), 5, "%s", text);
    cr_assert_str_eq(json_string_value(json_array_get(argv, 1)), "jupyter", "%s", text);
    cr_assert_str_eq(json_string_value(json_array_get(argv, 2)), "--kernel", "%s", text);
    cr_assert_str_eq(json_string_value(json_array_get(argv, 4)), "{connection_file}", "%s", text);
    cr_assert_null(json_object_get(spec, "metadata"), "the build added metadata to Deno's spec: %s", text);
    cr_assert_null(json_object_get(spec, "interrupt_mode"), "the build added an interrupt_mode to Deno's spec: %s", text);
    free(text);
    json_decref(spec);
}

/* Deno returns a cell's last value as an execute_result: `x + 1` is a `result`, not printed text. */
Test(languages, javascript_runs_on_deno_keeps_state_and_returns_the_last_value)
{
    require_kernelspec_file("deno");
    static const char *const names[] = {"js", "javascript", "deno"};
    for (size_t i = 0; i != sizeof(names) / sizeof(names[0]); ++i) {
        json_t *ctx = NULL;
        char *id = new_context(names[i], &ctx);
        cr_assert_str_eq(xh_str(ctx, "kernel"), "deno", "language \"%s\" did not resolve to the deno kernelspec", names[i]);
        json_decref(ctx);
        if (i == 0) {
            run_expect_stdout(id, "var x = 41", "");
            ts_events_t evs;
            char sum[E2E_MSG_SIZE];
            run(id, "x + 1", &evs);
            assert_no_error(&evs, "x + 1");
            E2E_ASSERT_TEXT(&evs, "stdout", "");
            const ts_event_t *res = e2e_find_result(&evs, "text/plain");
            cr_assert_not_null(res, "`x + 1` gave no result; %s", ts_events_summary(&evs, sum, sizeof(sum)));
            cr_assert(strstr(res->data, "42") != NULL, "`x + 1` is not 42: %s", res->data);
            ts_events_dispose(&evs);
        }
        free(id);
    }
}

/*
 * Deno 2.9.6 acknowledges an interrupt of a cell that awaits and never ends the cell (docs/kernels.md): a run's stop
 * (here DELETE /code/executions/<id>; E2B's client going away, MCP's cancel) then restarts the kernel past
 * --timeout-grace-ms (2 s), saying so, and the context runs again. A busy cell's interrupt is
 * heeded: no restart, the state kept. Before: the awaiting run was still going 10 s after the DELETE, and so for as long
 * as its timeout (24 h on E2B's door), with every later run of the context queued behind it.
 */
Test(languages, deno_a_stop_ends_an_awaiting_cell_by_a_restart_and_keeps_a_busy_cells_state)
{
    require_kernelspec_file("deno");
    char *id = new_context("typescript", NULL);
    ts_events_t evs;
    char sum[E2E_MSG_SIZE];

    run_expect_stdout(id, "var kept = 41", "");
    int64_t t_delete = run_and_interrupt(id, "let n = 0; while (true) { n++ }", 1, &evs);
    cr_assert(evs.end_ms - t_delete <= INTERRUPT_END_MS, "the interrupted busy loop ended %lld ms after the DELETE; %s",
              (long long)(evs.end_ms - t_delete), ts_events_summary(&evs, sum, sizeof(sum)));
    cr_assert_eq(xh_status_count(&evs, "restarting"), 0, "a heeded interrupt restarts nothing; %s",
                 ts_events_summary(&evs, sum, sizeof(sum)));
    ts_events_dispose(&evs);
    run_expect_stdout(id, "console.log(kept + 1)", "42\n");

    t_delete = run_and_interrupt(id, "await new Promise(r => setTimeout(r, 60000))", 1, &evs);
    cr_assert(evs.end_ms != 0 && evs.end_ms - t_delete < 8000, "the awaiting run did not end within 8 s of the DELETE; %s",
              ts_events_summary(&evs, sum, sizeof(sum)));
    xh_error_event(&evs, "KernelRestarted");
    cr_assert_gt(xh_status_count(&evs, "restarting"), 0, "the run hears that the state is lost; %s",
                 ts_events_summary(&evs, sum, sizeof(sum)));
    ts_events_dispose(&evs);
    run_expect_stdout(id, "console.log(typeof kept)", "undefined\n");
    free(id);
}

/* TypeScript: types are stripped, the code runs; a thrown error is an error event and the context goes on. */
Test(languages, typescript_runs_on_deno)
{
    require_kernelspec_file("deno");
    json_t *ctx = NULL;
    char *id = new_context("ts", &ctx);
    cr_assert_str_eq(xh_str(ctx, "kernel"), "deno", "language \"ts\" did not resolve to the deno kernelspec");
    json_decref(ctx);
    run_expect_stdout(id, "let z: number = 2;\nconsole.log(z * 21)", "42\n");

    ts_events_t evs;
    char sum[E2E_MSG_SIZE];
    run(id, "function fail(why: string): never { throw new TypeError(why); }\nfail('no')", &evs);
    cr_assert_eq(ts_events_count(&evs, "error"), 1, "a thrown TypeError gave no error event; %s",
                 ts_events_summary(&evs, sum, sizeof(sum)));
    const ts_event_t *ev = xh_error_event(&evs, "TypeError");
    cr_assert_str_eq(xh_str(json_object_get(ev->json, "error"), "evalue"), "no", "%s", ev->data);
    ts_events_dispose(&evs);

    /* After the failed cell the context still runs TypeScript, with the state from before it. */
    run_expect_stdout(id, "const s: string = `z=${z}`;\nconsole.log(s)", "z=2\n");
    free(id);
}

/* ---- GET /code/languages ------------------------------------------------------------------------------------------- */

static void assert_listed(json_t *list, const char *language, const char *kernel)
{
    json_t *entry = language_entry(list, "language", language);
    char *text = json_dumps(list, JSON_COMPACT);
    cr_assert_not_null(entry, "GET /code/languages does not list language %s: %.2000s", language, text);
    cr_assert_str_eq(xh_str(entry, "kernel"), kernel, "language %s: kernel is not %s: %.2000s", language, kernel, text);
    cr_assert(xh_str(entry, "display_name")[0] != '\0', "language %s has no display_name: %.2000s", language, text);
    free(text);
}

Test(languages, languages_lists_python_and_bash)
{
    json_t *list = languages();
    assert_listed(list, "python", "python3");
    assert_listed(list, "bash", "bash");
    cr_assert_str_eq(xh_str(language_entry(list, "kernel", "bash"), "display_name"), "Bash (kgate)");
    json_decref(list);
}

Test(languages, languages_lists_deno_as_typescript_interrupted_by_message)
{
    require_kernelspec_file("deno");
    json_t *list = languages();
    assert_listed(list, "typescript", "deno");
    /* Deno's spec says no interrupt_mode, and Deno exits on SIGINT: kgate interrupts it over the control channel. */
    cr_assert_str_eq(xh_str(language_entry(list, "kernel", "deno"), "interrupt_mode"), "message");
    json_decref(list);
}

/* ---- R (IRkernel) -------------------------------------------------------------------------------------------------- */

Test(languages, r_one_plus_one)
{
    json_t *list = languages();
    cr_assert_not_null(language_entry(list, "kernel", "ir"),
                       "no `ir` kernelspec: IRkernel is not installed (deploy/deps.sh installs r-cran-irkernel)");
    json_decref(list);

    json_t *ctx = NULL;
    char *id = new_context("R", &ctx);
    cr_assert_str_eq(xh_str(ctx, "kernel"), "ir", "language \"R\" did not resolve to the ir kernelspec");
    json_decref(ctx);
    ts_events_t evs;
    char sum[E2E_MSG_SIZE];
    run(id, "1 + 1", &evs);
    assert_no_error(&evs, "1 + 1");
    /* IRkernel sends the printed value as an execute_result; accept R's print form or the bare value, or stdout. */
    const ts_event_t *res = e2e_find_result(&evs, "text/plain");
    char *out = ts_events_text(&evs, "stdout");
    const char *plain =
        res != NULL ? json_string_value(json_object_get(json_object_get(res->json, "results"), "text/plain")) : NULL;
    int ok =
        (plain != NULL && (strcmp(plain, "[1] 2") == 0 || strcmp(plain, "2") == 0)) || (out != NULL && strcmp(out, "[1] 2\n") == 0);
    cr_assert(ok, "`1 + 1` in R gave neither a text/plain result \"[1] 2\"/\"2\" nor stdout \"[1] 2\\n\"; %s",
              ts_events_summary(&evs, sum, sizeof(sum)));
    free(out);
    ts_events_dispose(&evs);
    free(id);
}
