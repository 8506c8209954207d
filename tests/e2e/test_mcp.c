/* tests/e2e/test_mcp.c: the official MCP TypeScript SDK client against kgate's /mcp door (docs/API.md 5.3). */
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
#include "support/proc.h"

/*
 * The client is @modelcontextprotocol/sdk's Client over its StreamableHTTPClientTransport, driven by
 * tests/e2e/mcp_client/mcp_client.mjs, which prints one JSON line per step. kgate runs with a token and its own
 * workspace root; after the script this test checks what the SDK cannot see: no context and no kernel process left.
 */

#define SCRIPT KGATE_SOURCE_DIR "/tests/e2e/mcp_client/mcp_client.mjs"
#define DEFAULT_MODULES_DIR "/usr/local/lib/kgate/mcp-client" /* where deploy/deps.sh installs the npm lock */
#define SCRIPT_MS 480000
#define SCRIPT_TIMEOUT_S "420"
#define ABANDON_SESSIONS "3" /* --mcp-max-sessions of sdk_client_abandoned */
#define RELEASE_MS 30000     /* kernels of ended sessions: shut down within kgate's grace periods */

static ts_gateway_t gateway;
static char token[64];
static char workspace[256];

/* This binary checks kgate, not itself (as test_jupyter_clients.c: a failed assertion abandons the test's heap). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static const char *modules_dir(void)
{
    const char *d = getenv("KGATE_MCP_CLIENT_DIR");
    return d != NULL && *d != '\0' ? d : DEFAULT_MODULES_DIR;
}

static void start(const char *const *extra)
{
    const char *args[16] = {"--access-token", token, "--workspace-root", workspace};
    size_t n = 4;

    ts_random_hex(token, sizeof(token));
    snprintf(workspace, sizeof(workspace), "/tmp/kgate-mcp-ws-XXXXXX");
    cr_assert_not_null(mkdtemp(workspace), "mkdtemp");
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 15; i++)
        args[n++] = extra[i];
    args[n] = NULL;
    xh_gateway_start(&gateway, args);
}

static void fini(void)
{
    char cmd[300];

    xh_gateways_stop_all();
    if (workspace[0] != '\0') {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", workspace);
        if (system(cmd) != 0)
            cr_log_warn("cannot remove %s", workspace);
    }
}

TestSuite(mcp, .fini = fini, .timeout = 600);

/* Runs the script's `scenario`, asserts every step in `steps` (NULL-terminated) reported ok and that it exited 0. */
static void run_client(const char *scenario, const char *const *steps)
{
    char package[1024], url[64], base[64], pid[16];
    js_run_t run;

    snprintf(package, sizeof(package), "%s/node_modules/@modelcontextprotocol/sdk/package.json", modules_dir());
    cr_assert(access(package, R_OK) == 0,
              "@modelcontextprotocol/sdk is not installed in %s: deploy/deps.sh installs it (npm ci of %s)", modules_dir(),
              KGATE_SOURCE_DIR "/tests/e2e/mcp_client/package-lock.json");
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", gateway.port);
    snprintf(base, sizeof(base), "http://127.0.0.1:%u", gateway.port);
    snprintf(pid, sizeof(pid), "%d", (int)gateway.pid);
    const char *argv[] = {"node",
                          SCRIPT,
                          "--url",
                          url,
                          "--token",
                          token,
                          "--kgate",
                          base,
                          "--modules",
                          modules_dir(),
                          "--scenario",
                          scenario,
                          "--timeout-ms",
                          SCRIPT_TIMEOUT_S "000",
                          "--kgate-pid",
                          pid,
                          "--max-sessions",
                          ABANDON_SESSIONS,
                          NULL};
    cr_assert_eq(js_run(argv, NULL, SCRIPT_MS, &run), 0, "cannot run node: %s", run.error);

    char who[96];
    snprintf(who, sizeof(who), "MCP (%s)", scenario);
    if (!js_expect_steps(who, &run, steps))
        ts_gateway_dump_log(&gateway, 8192);
    js_run_dispose(&run);
}

/* kgate's live descendants: its kernels and their children (its watchdog is none of them: support/proc.h). */
static size_t kgate_children(void)
{
    ts_proc_t procs[64];
    return ts_descendants(gateway.pid, procs, 64);
}

/* No context and, by RELEASE_MS, no kernel process of kgate's left. */
static void assert_released(void)
{
    char *body = NULL;
    int st = js_get(gateway.port, token, "/code/contexts", &body);
    cr_expect(st == 200 && body != NULL && strcmp(body, "[]") == 0, "GET /code/contexts after the sessions ended: HTTP %d %.600s",
              st, body != NULL ? body : "");
    free(body);
    int64_t deadline = ts_now_ms() + RELEASE_MS;
    size_t n;
    while ((n = kgate_children()) != 0 && ts_now_ms() < deadline)
        usleep(100 * 1000);
    cr_expect_eq(n, 0, "%zu kernel process(es) of kgate still alive %d ms after their MCP sessions ended", n, RELEASE_MS);
}

/* Every tool, state within a session and not across two, images, errors, timeouts, progress, cancellation, session end. */
Test(mcp, sdk_client)
{
    const char *steps[] = {"initialize", "list_tools", "list_languages", "state", "isolation", "image",       "error", "timeout",
                           "progress",   "cancel",     "cancel_storm",   "bash",  "editor",    "session_end", "done",  NULL};
    start(NULL);
    run_client("main", steps);
    assert_released();
}

/*
 * The bounds: beyond --mcp-max-sessions, an idle session is evicted (404 after) and a busy one is not (429 with
 * Retry-After); a session that only said hello idles out after --mcp-session-fresh-idle-ms, one used after
 * --mcp-session-idle-ms, with its kernel.
 */
Test(mcp, sdk_client_bounds)
{
    const char *extra[] = {"--mcp-max-sessions", "1", "--mcp-session-idle-ms", "6000", "--mcp-session-fresh-idle-ms", "1000", NULL};
    const char *steps[] = {"refused_busy", "evicted_idle", "fresh_idle", "idle_expiry", "done", NULL};
    start(extra);
    run_client("bounds", steps);
    assert_released();
}

/*
 * Issue 25: 100 clients open a session each, run a cell and leave without DELETE (the MCP Inspector CLI's way): every
 * one is served, and at each step kgate's kernels (its descendants, by process session) are no more than
 * those of the --mcp-max-sessions newest sessions; those are still open, the one before them gets 404 naming its eviction.
 */
Test(mcp, sdk_client_abandoned)
{
    const char *extra[] = {"--mcp-max-sessions", ABANDON_SESSIONS, "--pool", "none", NULL};
    const char *steps[] = {"hundred_abandoned", "evicted_and_kept", "done", NULL};
    start(extra);
    run_client("abandon", steps);
}

/* Issue 25's tools: interrupt, restart, list_contexts, timeout_ms over --max-timeout-ms (capped, said), a cancellation
 * seen through list_contexts, their errors as isError, a matplotlib figure as an image block. */
Test(mcp, sdk_client_tools)
{
    const char *extra[] = {"--max-timeout-ms", "8000", "--default-timeout-ms", "8000", NULL};
    const char *steps[] = {
        "new_tools_listed", "list_contexts", "interrupt", "cancel_keeps_state", "restart", "errors", "timeout_capped",
        "matplotlib",       "done",          NULL};
    start(extra);
    run_client("tools", steps);
}
