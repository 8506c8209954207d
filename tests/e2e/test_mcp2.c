/* tests/e2e/test_mcp2.c: the MCP TypeScript SDK v2 client against kgate's /mcp door in revision 2026-07-28 (docs/mcp.md). */
#include <criterion/criterion.h>

#include "mcp_door.h"

/*
 * The client is @modelcontextprotocol/client's Client (2.x) over its StreamableHTTPClientTransport, pinned to
 * revision 2026-07-28 (no session, no initialize), driven by tests/e2e/mcp2_client/mcp2_client.mjs, which prints one
 * JSON line per step. kgate runs with a token and its own workspace root (tests/e2e/mcp_door.h); after the bounds script
 * this test checks what the SDK cannot see: no context and no kernel process left once the named contexts idled out.
 */

#define RELEASE_MS 30000 /* kernels of ended contexts: shut down within kgate's grace periods */

static const md_client_t client = {
    .who = "MCP 2026-07-28",
    .script = KGATE_SOURCE_DIR "/tests/e2e/mcp2_client/mcp2_client.mjs",
    .modules_env = "KGATE_MCP2_CLIENT_DIR",
    .modules_default = "/usr/local/lib/kgate/mcp2-client", /* where deploy/deps.sh installs the npm lock */
    .package = "@modelcontextprotocol/client",
    .lock = KGATE_SOURCE_DIR "/tests/e2e/mcp2_client/package-lock.json",
    .run_ms = 300000,
    .timeout_ms = "240000",
};
static md_door_t door;

/* This binary checks kgate, not itself (as test_mcp.c: a failed assertion abandons the test's heap). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void fini(void)
{
    md_fini(&door);
}

TestSuite(mcp2, .fini = fini, .timeout = 600);

static void start(const char *const *extra)
{
    md_start(&door, "mcp2", extra);
}

static void run_client(const char *scenario, const char *const *steps)
{
    md_run_client(&door, &client, scenario, NULL, steps);
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
    md_expect_released(&door, RELEASE_MS, "their named contexts ended");
}
