/*
 * tests/e2e/test_kernel_matrix.c: the kernel matrix (docs/API.md 6.1): one list of scenarios, run for every kernel kgate
 * ships or sets up (python, R, Deno's JavaScript and TypeScript, bash) through kgate's HTTP API, each kernel as its
 * installed kernelspec starts it. One table holds the per-language snippets; the scenario functions are the same for all.
 *
 * Five tests per kernel, each with its own kgate: long_cells (a 5 s sleeping cell in a second context while the first
 * runs a 4 s CPU-bound cell), output (20,000 lines, 5 MB), values (a result without ANSI, an HTML display, an error,
 * state kept), interrupt_sigstop (an endless loop interrupted, a 1.5 s SIGSTOP of the kernel survived) and kill_9
 * (reported within 3 s, then the context back by itself). The binary runs two tests at a time (tests/e2e/CMakeLists.txt).
 */
#include <criterion/criterion.h>
#include <signal.h>
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

/* Where the build puts the kernelspecs it makes: kgate's bash kernel, and Deno's as `deno jupyter --install` wrote it. */
#define KERNELS_DIR KGATE_BINARY_DIR "/kernels/share/jupyter/kernels"

/* Bounds of this file's waits (milliseconds). None is a speed figure: each is far above what a working kgate takes. */
#define MX_INTERRUPT_END_MS 5000 /* from DELETE /code?id= to the end of the interrupted run */
#define MX_DEATH_REPORT_MS 3000  /* from kill -9 of the kernel to the run's KernelDied (docs/API.md 6.1) */
#define MX_RESTART_MS 60000      /* from kill -9 to a run that works again in the same context (a kernel start) */
#define MX_STOP_MS 1500          /* how long the kernel stays SIGSTOPped */

#define MX_LINES 20000      /* the lines scenario prints 1..MX_LINES */
#define MX_BIG_LINES 50000  /* the 5 MB scenario: this many lines ... */
#define MX_BIG_LINE_LEN 100 /* ... of this many bytes with the newline: 5,000,000 bytes */

/* One kernel: how to ask for it, and its snippets. NULL: the kernel has no such feature (bash has no expression values
 * and no display), said in the test's log. */
typedef struct st_mx_kernel_t {
    const char *name;        /* names the kernel in messages */
    const char *language;    /* what POST /code/context asks for */
    const char *kernel;      /* the kernelspec it must resolve to */
    const char *set_state;   /* sets `kept` to 42 */
    const char *get_state;   /* prints kept: "42\n" */
    const char *pid;         /* prints the kernel process's pid */
    const char *sleep5;      /* sleeps 5 s, then prints "slept\n" */
    const char *cpu4;        /* keeps the CPU busy for 4 s, then prints "spun\n" */
    const char *lines;       /* prints 1..MX_LINES, one a line */
    const char *big;         /* prints MX_BIG_LINES lines: the number on 8 digits from 0, 91 'x', newline */
    const char *result;      /* a last expression worth 42 */
    const char *result_text; /* its text/plain */
    const char *html;        /* displays text/html "<b>kgate</b>" */
    const char *error;       /* fails, saying `error_text` in the error's evalue */
    const char *error_text;
    const char *endless; /* never ends by itself */
    const char *nap;     /* sleeps 3 s, then prints "woke\n" */
} mx_kernel_t;

static const mx_kernel_t PYTHON = {
    .name = "python",
    .language = "python",
    .kernel = "python3",
    .set_state = "kept = 42",
    .get_state = "print(kept)",
    .pid = "import os; print(os.getpid())",
    .sleep5 = "import time\ntime.sleep(5)\nprint('slept')",
    .cpu4 = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 4:\n    pass\nprint('spun')",
    .lines = "for i in range(1, 20001):\n    print(i)",
    .big = "import sys\nx = 'x' * 91\nfor i in range(50000):\n    sys.stdout.write('%08d%s\\n' % (i, x))",
    .result = "6 * 7",
    .result_text = "42",
    .html = "from IPython.display import HTML, display\ndisplay(HTML('<b>kgate</b>'))",
    .error = "raise ValueError('boom')",
    .error_text = "boom",
    .endless = "while True:\n    pass",
    .nap = "import time\ntime.sleep(3)\nprint('woke')",
};

static const mx_kernel_t R = {
    .name = "R",
    .language = "R",
    .kernel = "ir",
    .set_state = "kept <- 42",
    .get_state = "cat(kept, '\\n', sep = '')",
    .pid = "cat(Sys.getpid(), '\\n', sep = '')",
    .sleep5 = "Sys.sleep(5)\ncat('slept\\n')",
    .cpu4 = "t <- Sys.time()\nwhile (as.numeric(difftime(Sys.time(), t, units = 'secs')) < 4) {}\ncat('spun\\n')",
    .lines = "writeLines(as.character(1:20000))",
    .big = "writeLines(paste0(sprintf('%08d', 0:49999), strrep('x', 91)))",
    .result = "6 * 7",
    .result_text = "[1] 42",
    .html = "IRdisplay::display_html('<b>kgate</b>')",
    .error = "stop('boom')",
    .error_text = "boom",
    .endless = "repeat {}",
    .nap = "Sys.sleep(3)\ncat('woke\\n')",
};

/* Deno's kernel, asked for as JavaScript: plain JavaScript code. */
static const mx_kernel_t JAVASCRIPT = {
    .name = "javascript (Deno)",
    .language = "javascript",
    .kernel = "deno",
    .set_state = "var kept = 42;",
    .get_state = "console.log(kept)",
    .pid = "console.log(Deno.pid)",
    .sleep5 = "await new Promise((resolve) => setTimeout(resolve, 5000));\nconsole.log('slept')",
    .cpu4 = "const t = Date.now();\nwhile (Date.now() - t < 4000) {}\nconsole.log('spun')",
    .lines = "for (let i = 1; i <= 20000; i++) console.log(i)",
    .big = "const x = 'x'.repeat(91);\nfor (let i = 0; i < 50000; i++) console.log(String(i).padStart(8, '0') + x)",
    .result = "6 * 7",
    .result_text = "42",
    .html = "await Deno.jupyter.display(Deno.jupyter.html`<b>kgate</b>`)",
    .error = "throw new Error('boom')",
    .error_text = "boom",
    .endless = "while (true) {}",
    .nap = "await new Promise((resolve) => setTimeout(resolve, 3000));\nconsole.log('woke')",
};

/* The same kernel asked for as TypeScript: the snippets carry types. */
static const mx_kernel_t TYPESCRIPT = {
    .name = "typescript (Deno)",
    .language = "typescript",
    .kernel = "deno",
    .set_state = "let kept: number = 42;",
    .get_state = "console.log(kept satisfies number)",
    .pid = "const pid: number = Deno.pid;\nconsole.log(pid)",
    .sleep5 = "await new Promise<void>((resolve) => setTimeout(resolve, 5000));\nconsole.log('slept')",
    .cpu4 = "const t: number = Date.now();\nwhile (Date.now() - t < 4000) {}\nconsole.log('spun')",
    .lines = "for (let i: number = 1; i <= 20000; i++) console.log(i)",
    .big = "const x: string = 'x'.repeat(91);\nfor (let i: number = 0; i < 50000; i++) console.log(String(i).padStart(8, '0') + x)",
    .result = "const six: number = 6;\nsix * 7",
    .result_text = "42",
    .html = "const page: string = '<b>kgate</b>';\nawait Deno.jupyter.display({'text/html': page}, {raw: true})",
    .error = "class Boom extends Error {}\nthrow new Boom('boom')",
    .error_text = "boom",
    .endless = "while (true as boolean) {}",
    .nap = "await new Promise<void>((resolve) => setTimeout(resolve, 3000));\nconsole.log('woke')",
};

/* kgate's bash kernel: no expression values and no display (result and html are NULL); a failure is its exit status. */
static const mx_kernel_t BASH = {
    .name = "bash",
    .language = "bash",
    .kernel = "bash",
    .set_state = "kept=42",
    .get_state = "echo \"$kept\"",
    .pid = "echo \"$PPID\"", /* the kernel is bash's parent */
    .sleep5 = "sleep 5; echo slept",
    .cpu4 = "t=${EPOCHREALTIME/./}; while (( ${EPOCHREALTIME/./} - t < 4000000 )); do :; done; echo spun",
    .lines = "seq 1 20000",
    .big = "awk 'BEGIN { x = sprintf(\"%91s\", \"\"); gsub(/ /, \"x\", x); for (i = 0; i < 50000; i++) printf \"%08d%s\\n\", i, "
           "x }'",
    .error = "echo boom >&2; (exit 3)",
    .error_text = "3",
    .endless = "while :; do :; done",
    .nap = "sleep 3; echo woke",
};

/* ---- the gateway and its contexts ------------------------------------------------------------------------------------ */

static ts_gateway_t gateway;

/* This binary checks kgate, not itself: a failed assertion abandons the test's heap (as in test_languages.c). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void init(void)
{
    static const char *const args[] = {"--kernel-path", KERNELS_DIR, NULL};
    xh_gateway_start(&gateway, args);
}

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(matrix, .init = init, .fini = fini, .timeout = 240);

/* A failed check names the kernel first. */
#define MX_ASSERT(k, cond, fmt, ...) cr_assert(cond, "[%s] " fmt, (k)->name, ##__VA_ARGS__)

/* The kernelspec a kernel needs: a missing one is a missing package, a failure (deploy/deps.sh installs them all). */
static void require_kernelspec(const mx_kernel_t *k)
{
    char path[1024], sys[1024];
    snprintf(path, sizeof(path), "%s/%s/kernel.json", KERNELS_DIR, k->kernel);
    snprintf(sys, sizeof(sys), "/usr/share/jupyter/kernels/%s/kernel.json", k->kernel);
    MX_ASSERT(k, access(path, R_OK) == 0 || access(sys, R_OK) == 0,
              "no `%s` kernelspec in %s nor /usr/share/jupyter/kernels: deploy/deps.sh installs its package (python3-ipykernel, "
              "r-cran-irkernel, Deno from npm), then cmake writes the build's specs",
              k->kernel, KERNELS_DIR);
}

/* POST /code/context for the kernel; asserts it resolved to the expected kernelspec. Returns the id (free it). */
static char *mx_context(const mx_kernel_t *k)
{
    ts_response_t r;
    char *id = NULL;
    int st = ts_context_create(gateway.port, NULL, k->language, &id, &r);
    if (st != 200)
        ts_gateway_dump_log(&gateway, 4096);
    MX_ASSERT(k, st == 200, "POST /code/context {\"language\":\"%s\"}: HTTP %d (%s) %.800s", k->language, st, r.error,
              r.body != NULL ? r.body : "");
    MX_ASSERT(k, strcmp(xh_str(r.json, "kernel"), k->kernel) == 0, "language %s resolved to kernel `%s`, not `%s`", k->language,
              xh_str(r.json, "kernel"), k->kernel);
    ts_response_dispose(&r);
    return id;
}

/* Runs `code` in `ctx` to its end; asserts a well-formed stream (200, init ... execution_complete). */
static void mx_run(const mx_kernel_t *k, const char *ctx, const char *code, ts_events_t *evs)
{
    ts_response_t r;
    int st = ts_run_code(gateway.port, NULL, ctx, NULL, code, XH_RUN_MS, evs, &r);
    MX_ASSERT(k, st == 200, "POST /code `%.80s`: HTTP %d (%s); body: %.600s", code, st, evs->error, r.body != NULL ? r.body : "");
    ts_response_dispose(&r);
    char msg[E2E_MSG_SIZE];
    MX_ASSERT(k, e2e_check_run(evs, ctx, E2E_FRAMING_SSE, msg, sizeof(msg)), "`%.80s`: %s", code, msg);
}

/* Asserts the run had no error event. */
static void mx_no_error(const mx_kernel_t *k, const ts_events_t *evs, const char *code)
{
    char sum[E2E_MSG_SIZE];
    MX_ASSERT(k, ts_events_count(evs, "error") == 0, "`%.80s` gave an error event; %s", code,
              ts_events_summary(evs, sum, sizeof(sum)));
}

/* Asserts the run of `code` in `evs` had no error event and printed exactly `expected` on stdout. */
static void mx_expect_run_stdout(const mx_kernel_t *k, const ts_events_t *evs, const char *code, const char *expected)
{
    char sum[E2E_MSG_SIZE];
    mx_no_error(k, evs, code);
    char *out = ts_events_text(evs, "stdout");
    MX_ASSERT(k, out != NULL && strcmp(out, expected) == 0, "`%.80s`: stdout %.200s, expected %.200s; %s", code,
              out != NULL ? out : "(none)", expected, ts_events_summary(evs, sum, sizeof(sum)));
    free(out);
}

/* Runs `code` and asserts no error and stdout exactly `expected`. */
static void mx_expect_stdout(const mx_kernel_t *k, const char *ctx, const char *code, const char *expected)
{
    ts_events_t evs;
    mx_run(k, ctx, code, &evs);
    mx_expect_run_stdout(k, &evs, code, expected);
    ts_events_dispose(&evs);
}

/* Runs `code` and asserts no error; returns its stdout (free it; NULL: it printed nothing). */
static char *mx_stdout(const mx_kernel_t *k, const char *ctx, const char *code)
{
    ts_events_t evs;
    mx_run(k, ctx, code, &evs);
    mx_no_error(k, &evs, code);
    char *out = ts_events_text(&evs, "stdout");
    ts_events_dispose(&evs);
    return out;
}

/* Sets the context's state (`kept`), which the scenarios then expect to outlive them. */
static void mx_set_state(const mx_kernel_t *k, const char *ctx)
{
    free(mx_stdout(k, ctx, k->set_state));
}

/* The kernel process's pid, as the kernel says it. */
static pid_t mx_kernel_pid(const mx_kernel_t *k, const char *ctx)
{
    char *out = mx_stdout(k, ctx, k->pid);
    pid_t pid = out != NULL ? (pid_t)atoi(out) : 0;
    MX_ASSERT(k, pid > 1, "the kernel did not print its pid: '%s'", out != NULL ? out : "(none)");
    free(out);
    return pid;
}

/* Opens a run of `code` in `ctx` and waits until the kernel has taken it (execution_count). */
static ts_stream_t *mx_open_taken(const mx_kernel_t *k, const char *ctx, const char *code, ts_events_t *evs)
{
    json_t *body = xh_body(ctx, code);
    int64_t t0 = ts_now_ms();
    ts_stream_t *s = xh_open(gateway.port, body, t0 + XH_HEAD_MS);
    json_decref(body);
    MX_ASSERT(k, ts_stream_response(s)->status == 200, "POST /code `%.80s`: HTTP %d %.400s", code, ts_stream_response(s)->status,
              ts_stream_response(s)->body != NULL ? ts_stream_response(s)->body : "");
    *evs = (ts_events_t){0};
    xh_wait_event(s, evs, "execution_count", 0, t0 + XH_RUN_MS);
    return s;
}

/* The rest of the run on `s` (mx_open_taken) into `evs` until `deadline`; closes `s` and asserts a well-formed stream (`what`
 * names the run). */
static void mx_collect(const mx_kernel_t *k, ts_stream_t *s, const char *ctx, int64_t deadline, ts_events_t *evs, const char *what)
{
    char msg[E2E_MSG_SIZE];
    ts_stream_collect(s, deadline, 0, evs);
    ts_stream_close(s);
    MX_ASSERT(k, e2e_check_run(evs, ctx, E2E_FRAMING_SSE, msg, sizeof(msg)), "%s: %s", what, msg);
}

/* Runs `code`, asserting no error and a result with `mime`; returns that result's `mime` text (it lives in `evs`: dispose
 * them after) and the result event in `*res`. */
static const char *mx_result(const mx_kernel_t *k, const char *ctx, const char *code, const char *mime, ts_events_t *evs,
                             const ts_event_t **res)
{
    char sum[E2E_MSG_SIZE];
    mx_run(k, ctx, code, evs);
    mx_no_error(k, evs, code);
    *res = e2e_find_result(evs, mime);
    MX_ASSERT(k, *res != NULL, "`%.80s` gave no result with %s; %s", code, mime, ts_events_summary(evs, sum, sizeof(sum)));
    return json_string_value(json_object_get(json_object_get((*res)->json, "results"), mime));
}

/* ---- scenarios ---------------------------------------------------------------------------------------------------- */

/* 20,000 lines, all of them, in order. */
static void scenario_lines(const mx_kernel_t *k, const char *ctx)
{
    size_t cap = (size_t)MX_LINES * 6 + 1, n = 0;
    char *expected = malloc(cap);
    for (int i = 1; i <= MX_LINES; i++)
        n += (size_t)snprintf(expected + n, cap - n, "%d\n", i);

    ts_events_t evs;
    char sum[E2E_MSG_SIZE];
    mx_run(k, ctx, k->lines, &evs);
    mx_no_error(k, &evs, k->lines);
    char *out = ts_events_text(&evs, "stdout");
    size_t got = out != NULL ? strlen(out) : 0, lines = 0, at = 0;
    for (size_t i = 0; i < got; i++)
        lines += out[i] == '\n';
    while (at < got && at < n && out[at] == expected[at])
        at++;
    MX_ASSERT(
        k, got == n && at == n,
        "%d lines: stdout has %zu bytes (%zu lines), expected %zu; first difference at byte %zu (%.40s); status events: %zu; %s",
        MX_LINES, got, lines, n, at, out != NULL && at < got ? out + at : "(end)", ts_events_count(&evs, "status"),
        ts_events_summary(&evs, sum, 2048));
    free(out);
    free(expected);
    ts_events_dispose(&evs);
}

/* 5,000,000 bytes of stdout, exact. */
static void scenario_big(const mx_kernel_t *k, const char *ctx)
{
    size_t n = (size_t)MX_BIG_LINES * MX_BIG_LINE_LEN;
    char *expected = malloc(n + 1), num[16];
    for (int i = 0; i < MX_BIG_LINES; i++) {
        char *line = expected + (size_t)i * MX_BIG_LINE_LEN;
        snprintf(num, sizeof(num), "%08d", i);
        memcpy(line, num, 8);
        memset(line + 8, 'x', MX_BIG_LINE_LEN - 9);
        line[MX_BIG_LINE_LEN - 1] = '\n';
    }
    expected[n] = '\0';

    ts_events_t evs;
    ts_response_t r;
    char sum[E2E_MSG_SIZE];
    int st = ts_run_code(gateway.port, NULL, ctx, NULL, k->big, XH_BIG_RUN_MS, &evs, &r);
    MX_ASSERT(k, st == 200, "5 MB: HTTP %d (%s)", st, evs.error);
    ts_response_dispose(&r);
    mx_no_error(k, &evs, k->big);
    char *out = ts_events_text(&evs, "stdout");
    size_t got = out != NULL ? strlen(out) : 0, at = 0;
    while (at < got && at < n && out[at] == expected[at])
        at++;
    MX_ASSERT(k, got == n && at == n,
              "5 MB: stdout has %zu bytes (%zu whole lines), expected %zu; first difference at byte %zu (line %zu); "
              "status events: %zu; last events: %s",
              got, got / MX_BIG_LINE_LEN, n, at, at / MX_BIG_LINE_LEN, ts_events_count(&evs, "status"),
              ts_events_summary(&evs, sum, 2048));
    free(out);
    free(expected);
    ts_events_dispose(&evs);
}

/* The last expression's value is a `result` whose text/plain carries no ANSI escape. */
static void scenario_result(const mx_kernel_t *k, const char *ctx)
{
    if (k->result == NULL) {
        cr_log_info("[%s] result: not a feature of this kernel (no expression values)", k->name);
        return;
    }
    ts_events_t evs;
    const ts_event_t *res;
    char sum[E2E_MSG_SIZE];
    const char *plain = mx_result(k, ctx, k->result, "text/plain", &evs, &res);
    MX_ASSERT(k, plain != NULL && strchr(plain, '\033') == NULL, "the result carries ANSI escapes: %s", res->data);
    MX_ASSERT(k, strcmp(plain, k->result_text) == 0, "the result's text/plain is \"%s\", expected \"%s\"", plain, k->result_text);
    MX_ASSERT(k, ts_events_count(&evs, "execution_count") == 1, "the run reported no execution_count; %s",
              ts_events_summary(&evs, sum, sizeof(sum)));
    ts_events_dispose(&evs);
}

/* An HTML display arrives as a result with text/html, as the kernel sent it. */
static void scenario_html(const mx_kernel_t *k, const char *ctx)
{
    if (k->html == NULL) {
        cr_log_info("[%s] html: not a feature of this kernel (no display)", k->name);
        return;
    }
    ts_events_t evs;
    const ts_event_t *res;
    const char *html = mx_result(k, ctx, k->html, "text/html", &evs, &res);
    MX_ASSERT(k, html != NULL && strcmp(html, "<b>kgate</b>") == 0, "text/html is %s", res->data);
    ts_events_dispose(&evs);
}

/* A failing cell gives one error event saying why, without ANSI; the context goes on. */
static void scenario_error(const mx_kernel_t *k, const char *ctx)
{
    ts_events_t evs;
    char sum[E2E_MSG_SIZE];
    mx_run(k, ctx, k->error, &evs);
    MX_ASSERT(k, ts_events_count(&evs, "error") == 1, "`%s`: expected one error event; %s", k->error,
              ts_events_summary(&evs, sum, sizeof(sum)));
    const ts_event_t *ev = xh_error_event(&evs, NULL);
    json_t *err = json_object_get(ev->json, "error");
    MX_ASSERT(k, strstr(xh_str(err, "evalue"), k->error_text) != NULL, "the error's evalue does not say \"%s\": %s", k->error_text,
              ev->data);
    MX_ASSERT(k, strstr(ev->data, "\\u001b") == NULL && strstr(ev->data, "\\u001B") == NULL, "the error carries ANSI escapes: %s",
              ev->data);
    ts_events_dispose(&evs);
}

/* A 5 s sleeping cell (in a second context) and a 4 s CPU-bound cell, side by side, complete; both contexts stay alive, the
 * first with its state. */
static void scenario_long_cells(const mx_kernel_t *k)
{
    require_kernelspec(k);
    char *ctx = mx_context(k), *sleeper = mx_context(k);
    ts_events_t sev;

    mx_set_state(k, ctx);
    ts_stream_t *s = mx_open_taken(k, sleeper, k->sleep5, &sev);
    int64_t t_sleep = ts_now_ms();
    mx_expect_stdout(k, ctx, k->cpu4, "spun\n");
    mx_expect_stdout(k, ctx, k->get_state, "42\n");

    mx_collect(k, s, sleeper, t_sleep + XH_RUN_MS, &sev, "the 5 s sleep");
    mx_expect_run_stdout(k, &sev, k->sleep5, "slept\n");
    ts_events_dispose(&sev);
    mx_kernel_pid(k, sleeper); /* still answering */
    free(sleeper);
    free(ctx);
}

/* 20,000 lines, then 5 MB, whole and in order; the next run prints its own line and nothing of theirs (Deno tags output it
 * still publishes after a cell's idle with the request it handles then: the next run got 1.2 MB of the 5 MB at load 8). */
static void scenario_output(const mx_kernel_t *k)
{
    require_kernelspec(k);
    char *ctx = mx_context(k);
    mx_set_state(k, ctx);
    scenario_lines(k, ctx);
    scenario_big(k, ctx);
    mx_expect_stdout(k, ctx, k->get_state, "42\n");
    free(ctx);
}

/* A result, an HTML display and an error, in a context whose state outlives them. */
static void scenario_values(const mx_kernel_t *k)
{
    require_kernelspec(k);
    char *ctx = mx_context(k);
    mx_set_state(k, ctx);
    scenario_result(k, ctx);
    scenario_html(k, ctx);
    scenario_error(k, ctx);
    mx_expect_stdout(k, ctx, k->get_state, "42\n");
    free(ctx);
}

/* Interrupt of an endless loop: the run ends with an error (not the kernel's death) and the state stays. */
static void scenario_interrupt(const mx_kernel_t *k, const char *ctx)
{
    ts_events_t evs;
    char sum[E2E_MSG_SIZE], path[256];
    ts_stream_t *s = mx_open_taken(k, ctx, k->endless, &evs);
    ts_sleep_ms(300);
    snprintf(path, sizeof(path), "/code?id=%s", ctx);
    ts_response_t r;
    int64_t t_delete = ts_now_ms();
    int st = ts_http_request(gateway.port, "DELETE", path, NULL, NULL, &r);
    MX_ASSERT(k, st == 200, "DELETE %s: HTTP %d (%s) %.400s", path, st, r.error, r.body != NULL ? r.body : "");
    ts_response_dispose(&r);
    mx_collect(k, s, ctx, t_delete + XH_RUN_MS, &evs, "the interrupted run");
    MX_ASSERT(k, evs.end_ms - t_delete <= MX_INTERRUPT_END_MS,
              "the interrupted loop ended %lld ms after DELETE, expected within %d; %s", (long long)(evs.end_ms - t_delete),
              MX_INTERRUPT_END_MS, ts_events_summary(&evs, sum, sizeof(sum)));
    const ts_event_t *ev = xh_error_event(&evs, NULL);
    MX_ASSERT(k, strcmp(xh_str(json_object_get(ev->json, "error"), "ename"), "KernelDied") != 0,
              "the interrupt killed the kernel: %s", ev->data);
    ts_events_dispose(&evs);
    mx_expect_stdout(k, ctx, k->get_state, "42\n");
}

/* The kernel SIGSTOPped for 1.5 s in the middle of a cell: the cell completes and the state stays. */
static void scenario_sigstop(const mx_kernel_t *k, const char *ctx, pid_t pid)
{
    ts_events_t evs;
    ts_stream_t *s = mx_open_taken(k, ctx, k->nap, &evs);
    MX_ASSERT(k, kill(pid, SIGSTOP) == 0, "SIGSTOP %d failed", (int)pid);
    ts_sleep_ms(MX_STOP_MS);
    MX_ASSERT(k, kill(pid, SIGCONT) == 0, "SIGCONT %d failed", (int)pid);
    mx_collect(k, s, ctx, ts_now_ms() + XH_RUN_MS, &evs, "the cell across SIGSTOP");
    mx_expect_run_stdout(k, &evs, k->nap, "woke\n");
    ts_events_dispose(&evs);
    mx_expect_stdout(k, ctx, k->get_state, "42\n");
    MX_ASSERT(k, mx_kernel_pid(k, ctx) == pid, "the kernel changed across SIGSTOP: it was restarted");
}

/* kill -9 of the kernel in the middle of a cell: KernelDied within 3 s, then the context works again by itself. */
static void scenario_kill(const mx_kernel_t *k, const char *ctx, pid_t pid)
{
    ts_events_t evs;
    char sum[E2E_MSG_SIZE];
    ts_stream_t *s = mx_open_taken(k, ctx, k->endless, &evs);
    int64_t t_kill = ts_now_ms();
    MX_ASSERT(k, kill(pid, SIGKILL) == 0, "kill -9 %d failed", (int)pid);
    mx_collect(k, s, ctx, t_kill + XH_RUN_MS, &evs, "the run whose kernel was killed");
    const ts_event_t *ev = xh_error_event(&evs, "KernelDied");
    MX_ASSERT(k, ev->recv_ms - t_kill <= MX_DEATH_REPORT_MS, "KernelDied arrived %lld ms after kill -9, expected within %d ms",
              (long long)(ev->recv_ms - t_kill), MX_DEATH_REPORT_MS);
    ts_events_dispose(&evs);

    /* Restarted automatically: the same context runs code again, on a new kernel, without anyone asking. */
    int64_t deadline = t_kill + MX_RESTART_MS;
    int st = 0;
    char last[1024] = "";
    for (;;) {
        ts_response_t r;
        evs = (ts_events_t){0};
        st = ts_run_code(gateway.port, NULL, ctx, NULL, k->pid, XH_RUN_MS, &evs, &r);
        snprintf(last, sizeof(last), "HTTP %d %.300s %s", st, r.body != NULL ? r.body : "", ts_events_summary(&evs, sum, 600));
        ts_response_dispose(&r);
        char *out = ts_events_text(&evs, "stdout");
        pid_t now = out != NULL ? (pid_t)atoi(out) : 0;
        free(out);
        int ok = st == 200 && ts_events_count(&evs, "error") == 0 && now > 1;
        ts_events_dispose(&evs);
        if (ok) {
            MX_ASSERT(k, now != pid, "the context answers with the killed kernel's pid %d", (int)pid);
            break;
        }
        MX_ASSERT(k, ts_now_ms() < deadline,
                  "the context did not come back by itself within %d ms of kill -9 (no automatic restart); last try: %s",
                  MX_RESTART_MS, last);
        ts_sleep_ms(250);
    }
}

/* Interrupt, then SIGSTOP, in one context that keeps its state and its kernel. */
static void scenario_interrupt_sigstop(const mx_kernel_t *k)
{
    require_kernelspec(k);
    char *ctx = mx_context(k);
    mx_set_state(k, ctx);
    pid_t pid = mx_kernel_pid(k, ctx);
    scenario_interrupt(k, ctx);
    scenario_sigstop(k, ctx, pid);
    free(ctx);
}

static void scenario_kill_9(const mx_kernel_t *k)
{
    require_kernelspec(k);
    char *ctx = mx_context(k);
    scenario_kill(k, ctx, mx_kernel_pid(k, ctx));
    free(ctx);
}

/* ---- the matrix ----------------------------------------------------------------------------------------------------- */

/* One test per kernel and group of scenarios: each its own kgate and contexts, so that one group's failure says nothing
 * of another's, and two run side by side. */
#define MX_TESTS(id, kernel)                                                                                                       \
    Test(matrix, id##_long_cells)                                                                                                  \
    {                                                                                                                              \
        scenario_long_cells(&(kernel));                                                                                            \
    }                                                                                                                              \
    Test(matrix, id##_output)                                                                                                      \
    {                                                                                                                              \
        scenario_output(&(kernel));                                                                                                \
    }                                                                                                                              \
    Test(matrix, id##_values)                                                                                                      \
    {                                                                                                                              \
        scenario_values(&(kernel));                                                                                                \
    }                                                                                                                              \
    Test(matrix, id##_interrupt_sigstop)                                                                                           \
    {                                                                                                                              \
        scenario_interrupt_sigstop(&(kernel));                                                                                     \
    }                                                                                                                              \
    Test(matrix, id##_kill_9)                                                                                                      \
    {                                                                                                                              \
        scenario_kill_9(&(kernel));                                                                                                \
    }

MX_TESTS(python, PYTHON)
MX_TESTS(r, R)
MX_TESTS(javascript, JAVASCRIPT)
MX_TESTS(typescript, TYPESCRIPT)
MX_TESTS(bash, BASH)
