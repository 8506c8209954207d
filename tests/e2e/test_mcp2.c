/* tests/e2e/test_mcp2.c: the MCP TypeScript SDK v2 client against kgate's /mcp door in revision 2026-07-28 (docs/mcp.md). */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_helpers.h"
#include "jserver.h"
#include "support/base.h"
#include "support/gateway.h"
#include "support/proc.h"

/*
 * The client is @modelcontextprotocol/client's Client (2.x) over its StreamableHTTPClientTransport, pinned to
 * revision 2026-07-28 (no session, no initialize), driven by tests/e2e/mcp2_client/mcp2_client.mjs, which prints one
 * JSON line per step. kgate runs with a token and its own workspace root; after the bounds script this test checks
 * what the SDK cannot see: no context and no kernel process left once the named contexts idled out.
 */

#define SCRIPT KGATE_SOURCE_DIR "/tests/e2e/mcp2_client/mcp2_client.mjs"
#define DEFAULT_MODULES_DIR "/usr/local/lib/kgate/mcp2-client" /* where deploy/deps.sh installs the npm lock */
#define SCRIPT_MS 300000
#define SCRIPT_TIMEOUT_S "240"
#define RELEASE_MS 30000 /* kernels of ended contexts: shut down within kgate's grace periods */

static ts_gateway_t gateway;
static char token[64];
static char workspace[256];

/* This binary checks kgate, not itself (as test_mcp.c: a failed assertion abandons the test's heap). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static const char *modules_dir(void)
{
    const char *d = getenv("KGATE_MCP2_CLIENT_DIR");
    return d != NULL && *d != '\0' ? d : DEFAULT_MODULES_DIR;
}

static void start(const char *const *extra)
{
    const char *args[16] = {"--access-token", token, "--workspace-root", workspace};
    size_t n = 4;

    ts_random_hex(token, sizeof(token));
    snprintf(workspace, sizeof(workspace), "/tmp/kgate-mcp2-ws-XXXXXX");
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

TestSuite(mcp2, .fini = fini, .timeout = 600);

/* Runs the script's `scenario`, asserts every step in `steps` (NULL-terminated) reported ok and that it exited 0. */
static void run_client(const char *scenario, const char *const *steps)
{
    char package[1024], url[64], base[64];
    js_run_t run;

    snprintf(package, sizeof(package), "%s/node_modules/@modelcontextprotocol/client/package.json", modules_dir());
    cr_assert(access(package, R_OK) == 0,
              "@modelcontextprotocol/client is not installed in %s: deploy/deps.sh installs it (npm ci of %s)", modules_dir(),
              KGATE_SOURCE_DIR "/tests/e2e/mcp2_client/package-lock.json");
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", gateway.port);
    snprintf(base, sizeof(base), "http://127.0.0.1:%u", gateway.port);
    const char *argv[] = {"node", SCRIPT,      "--url",       url,          "--token", token,          "--kgate",
                          base,   "--modules", modules_dir(), "--scenario", scenario,  "--timeout-ms", SCRIPT_TIMEOUT_S "000",
                          NULL};
    cr_assert_eq(js_run(argv, NULL, SCRIPT_MS, &run), 0, "cannot run node: %s", run.error);

    char who[96];
    snprintf(who, sizeof(who), "MCP 2026-07-28 (%s)", scenario);
    if (!js_expect_steps(who, &run, steps))
        ts_gateway_dump_log(&gateway, 8192);
    js_run_dispose(&run);
}

/* No context and, by RELEASE_MS, no kernel process of kgate's left. */
static void assert_released(void)
{
    ts_proc_t procs[64];
    char *body = NULL;
    int st = js_get(gateway.port, token, "/code/contexts", &body);
    cr_expect(st == 200 && body != NULL && strcmp(body, "[]") == 0,
              "GET /code/contexts after the named contexts idled out: HTTP %d %.600s", st, body != NULL ? body : "");
    free(body);
    int64_t deadline = ts_now_ms() + RELEASE_MS;
    size_t n;
    while ((n = ts_descendants(gateway.pid, procs, 64)) != 0 && ts_now_ms() < deadline)
        usleep(100 * 1000);
    cr_expect_eq(n, 0, "%zu kernel process(es) of kgate still alive %d ms after their named contexts ended", n, RELEASE_MS);
}

/*
 * server/discover and the pinned revision, tools with their `context`, run_code state across calls (and clients) in a
 * named context and not in another, errors as isError, bash, the editor, a cancellation (the client closing the
 * response) that interrupts the run and keeps the state, interrupt and list_contexts of a named context, version negotiation,
 * header/body mismatches refused.
 */
Test(mcp2, sdk_client)
{
    const char *steps[] = {"discover", "list_tools",   "state",       "error",           "bash", "editor",
                           "cancel",   "kernel_tools", "negotiation", "header_mismatch", "done", NULL};
    start(NULL);
    run_client("main", steps);
}

/*
 * The bounds: beyond --mcp-max-named-contexts the least recently used idle context ends, or, when every one runs a call, the
 * call naming a new one is an isError result; idle ones end with their kernels.
 */
Test(mcp2, sdk_client_bounds)
{
    const char *extra[] = {"--mcp-max-named-contexts", "2", "--mcp-context-idle-ms", "10000", NULL};
    const char *steps[] = {"max_named", "busy_refused", "idle_expiry", "done", NULL};
    start(extra);
    run_client("bounds", steps);
    assert_released();
}
