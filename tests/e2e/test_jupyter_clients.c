/* tests/e2e/test_jupyter_clients.c: real Jupyter clients against kgate's Jupyter Server kernels API (docs/API.md 5.2). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "exec_helpers.h"
#include "jserver.h"
#include "support/base.h"
#include "support/gateway.h"

/*
 * The clients are the ones people use, each driven by a script of tests/e2e/jupyter_clients/ that prints one JSON
 * line per step:
 *   - lab_client.mjs: JupyterLab's @jupyterlab/services (npm, with `ws`), as a notebook front end uses it;
 *   - gateway_mode.py: Jupyter Server 1.23 (Debian's) in gateway mode with kgate as its gateway, driven through
 *     its own REST API and WebSocket.
 * The backend they speak to is kgate, or with KGATE_JCLIENTS_BACKEND=jupyter-server a plain Jupyter Server 1.23:
 * the reference implementation, which shows that the scripts themselves are right.
 */

#define SCRIPTS_DIR KGATE_SOURCE_DIR "/tests/e2e/jupyter_clients"
#define DEFAULT_MODULES_DIR "/usr/local/lib/kgate/jupyter-clients" /* where deploy/deps.sh installs the npm lock */
#define SCRIPT_MS 300000                                           /* one client script, every step (its own timeout is shorter) */
#define SCRIPT_TIMEOUT_S "240"

static ts_gateway_t gateway;

/* This binary checks kgate, not itself (as test_languages.c: a failed assertion abandons the test's heap). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

/* ---- the backend: kgate, or Jupyter Server standing in for it ------------------------------------------------------ */

typedef struct st_backend_t {
    int is_kgate;
    js_server_t js; /* when not kgate */
    unsigned short port;
    char token[64];
} backend_t;

static backend_t backend;
static js_server_t front; /* the gateway-mode Jupyter Server, when a test starts one */

static int want_kgate(void)
{
    const char *b = getenv("KGATE_JCLIENTS_BACKEND");
    if (b == NULL || *b == '\0' || strcmp(b, "kgate") == 0)
        return 1;
    cr_assert_str_eq(b, "jupyter-server", "KGATE_JCLIENTS_BACKEND is `kgate` (the default) or `jupyter-server`, not `%s`", b);
    return 0;
}

static const char *backend_name(void)
{
    return backend.is_kgate ? "kgate" : "jupyter-server";
}

static void backend_start(void)
{
    memset(&backend, 0, sizeof(backend));
    ts_random_hex(backend.token, sizeof(backend.token));
    backend.is_kgate = want_kgate();
    if (backend.is_kgate) {
        const char *args[] = {"--access-token", backend.token, NULL};
        xh_gateway_start(&gateway, args);
        backend.port = gateway.port;
    } else {
        cr_assert_eq(js_server_start(&backend.js, "jclients-backend", backend.token, NULL), 0,
                     "starting the backend Jupyter Server: %s", backend.js.error);
        backend.port = backend.js.port;
    }
}

/* The backend's kernels after a test: none may be left (each script shuts down what it started). */
static void assert_backend_has_no_kernels(void)
{
    char *body = NULL;
    int st = js_get(backend.port, backend.token, "/api/kernels", &body);
    cr_expect(st == 200 && body != NULL && strcmp(body, "[]") == 0,
              "GET /api/kernels on %s after the clients shut their kernels down: HTTP %d %.600s (want 200 [])", backend_name(), st,
              body != NULL ? body : "");
    free(body);
}

static void stop_front(void)
{
    size_t survivors = 0;
    if (front.pid > 0 && js_server_stop(&front, &survivors) != 0)
        cr_log_warn("gateway-mode Jupyter Server: %s", front.error);
    cr_expect_eq(survivors, 0, "%zu process(es) of the gateway-mode Jupyter Server survived it", survivors);
}

static void backend_stop(void)
{
    if (backend.is_kgate) {
        xh_gateway_stop(&gateway);
        return;
    }
    size_t survivors = 0;
    if (backend.js.pid > 0 && js_server_stop(&backend.js, &survivors) != 0)
        cr_log_warn("backend Jupyter Server: %s", backend.js.error);
    cr_expect_eq(survivors, 0, "%zu kernel process(es) of the backend Jupyter Server survived it", survivors);
}

static void init(void)
{
    backend_start();
}

static void fini(void)
{
    stop_front();
    backend_stop();
}

TestSuite(jupyter_clients, .init = init, .fini = fini, .timeout = 600);

/* ---- running a client script and reading its steps ----------------------------------------------------------------- */

/* Runs a client, asserts that every step in `steps` (NULL-terminated) reported ok, in any order, and that it exited 0. */
static void run_client(const char *what, const char *const *argv, const char *const *steps)
{
    js_run_t run;
    int rc = js_run(argv, NULL, SCRIPT_MS, &run);
    cr_assert_eq(rc, 0, "%s: cannot run %s: %s", what, argv[0], run.error);

    json_t *seen = json_object();
    char *save = NULL;
    char *copy = strdup(run.out);
    for (char *line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        json_t *j = json_loads(line, 0, NULL);
        const char *step = json_string_value(json_object_get(j, "step"));
        if (step != NULL)
            json_object_set(seen, step, j);
        json_decref(j);
    }
    free(copy);

    int exited_ok = !run.timed_out && WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0;
    int all = 1;
    for (size_t i = 0; steps[i] != NULL; i++) {
        json_t *s = json_object_get(seen, steps[i]);
        if (!json_is_true(json_object_get(s, "ok")))
            all = 0;
    }
    size_t errlen = strlen(run.err);
    if (!exited_ok || !all) {
        if (backend.is_kgate)
            ts_gateway_dump_log(&gateway, 8192);
        else
            js_server_dump_log(&backend.js, 8192);
        if (front.pid > 0)
            js_server_dump_log(&front, 8192);
    }
    /* Each failed step on its own; those that never ran (a script stops after a failed start) in one line. */
    char missing[512] = "";
    for (size_t i = 0; steps[i] != NULL; i++) {
        json_t *s = json_object_get(seen, steps[i]);
        if (s == NULL) {
            size_t n = strlen(missing);
            snprintf(missing + n, sizeof(missing) - n, "%s%s", n > 0 ? ", " : "", steps[i]);
            continue;
        }
        const char *detail = json_string_value(json_object_get(s, "detail"));
        cr_expect(json_is_true(json_object_get(s, "ok")), "%s against %s: step `%s` failed: %s", what, backend_name(), steps[i],
                  detail != NULL ? detail : "");
    }
    cr_expect(missing[0] == '\0', "%s against %s: steps never reported: %s", what, backend_name(), missing);
    cr_expect(exited_ok, "%s against %s: %s (wait status %#x)\n--- stdout ---\n%s--- stderr (last 6000 bytes) ---\n%s", what,
              backend_name(), run.timed_out ? "killed at its deadline" : "exited with an error", run.status, run.out,
              run.err + (errlen > 6000 ? errlen - 6000 : 0));
    if (exited_ok && all)
        cr_log_info("%s against %s:\n%s", what, backend_name(), run.out);
    json_decref(seen);
    js_run_dispose(&run);
}

/* ---- the clients --------------------------------------------------------------------------------------------------- */

static const char *modules_dir(void)
{
    return js_modules_dir("KGATE_JCLIENTS_DIR", DEFAULT_MODULES_DIR);
}

/* JupyterLab's client library: kernels, executes of every output kind, interrupt, stdin, reconnect, restart, sessions. */
Test(jupyter_clients, jupyterlab_services)
{
    js_assert_installed(modules_dir(), "@jupyterlab/services", SCRIPTS_DIR "/package-lock.json");
    char base_url[64];
    snprintf(base_url, sizeof(base_url), "http://127.0.0.1:%u/", backend.port);
    const char *argv[] = {
        js_node(),      SCRIPTS_DIR "/lab_client.mjs", "--base-url", base_url, "--token", backend.token, "--modules", modules_dir(),
        "--timeout-ms", SCRIPT_TIMEOUT_S "000",        NULL};
    const char *steps[] = {"api",   "kernelspecs", "start",   "stream",   "execute_result", "display_data", "error", "interrupt",
                           "stdin", "reconnect",   "restart", "sessions", "shutdown",       "done",         NULL};
    run_client("@jupyterlab/services (lab_client.mjs)", argv, steps);
    assert_backend_has_no_kernels();
}

/* Jupyter Server in gateway mode, its gateway the backend: its own API starts, runs, interrupts, restarts, deletes kernels
 * that live in the backend. */
Test(jupyter_clients, jupyter_server_gateway_mode)
{
    char gateway_url[128], auth[128], front_token[64];
    snprintf(gateway_url, sizeof(gateway_url), "--gateway-url=http://127.0.0.1:%u", backend.port);
    snprintf(auth, sizeof(auth), "--GatewayClient.auth_token=%s", backend.token);
    ts_random_hex(front_token, sizeof(front_token));
    const char *args[] = {gateway_url, auth, NULL};
    cr_assert_eq(js_server_start(&front, "jclients-front", front_token, args), 0, "starting Jupyter Server in gateway mode: %s",
                 front.error);

    char url[64], backend_url[64];
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/", front.port);
    snprintf(backend_url, sizeof(backend_url), "http://127.0.0.1:%u/", backend.port);
    const char *argv[] = {JS_PYTHON,
                          SCRIPTS_DIR "/gateway_mode.py",
                          "--url",
                          url,
                          "--token",
                          front_token,
                          "--backend-url",
                          backend_url,
                          "--backend-token",
                          backend.token,
                          "--timeout",
                          SCRIPT_TIMEOUT_S,
                          NULL};
    const char *steps[] = {"api", "start", "connect", "execute", "interrupt", "restart", "shutdown", "done", NULL};
    run_client("Jupyter Server gateway mode (gateway_mode.py)", argv, steps);
    stop_front();
    assert_backend_has_no_kernels();
}
