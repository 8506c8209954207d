/* tests/e2e/test_mcp.c: the official MCP TypeScript SDK client against kgate's /mcp door (docs/API.md 5.3). */
#include <criterion/criterion.h>
#include <stdio.h>

#include "mcp_door.h"

/*
 * The client is @modelcontextprotocol/sdk's Client over its StreamableHTTPClientTransport, driven by
 * tests/e2e/mcp_client/mcp_client.mjs, which prints one JSON line per step. kgate runs with a token and its own
 * workspace root (tests/e2e/mcp_door.h); after the script this test checks what the SDK cannot see: no context and no
 * kernel process left.
 */

#define ABANDON_SESSIONS "3" /* --mcp-max-sessions of sdk_client_abandoned */
#define RELEASE_MS 30000     /* kernels of ended sessions: shut down within kgate's grace periods */

static const md_client_t client = {
    .who = "MCP",
    .script = KGATE_SOURCE_DIR "/tests/e2e/mcp_client/mcp_client.mjs",
    .modules_env = "KGATE_MCP_CLIENT_DIR",
    .modules_default = "/usr/local/lib/kgate/mcp-client", /* where deploy/deps.sh installs the npm lock */
    .package = "@modelcontextprotocol/sdk",
    .lock = KGATE_SOURCE_DIR "/tests/e2e/mcp_client/package-lock.json",
    .run_ms = 480000,
    .timeout_ms = "420000",
};
static md_door_t door;

/* This binary checks kgate, not itself (as test_jupyter_clients.c: a failed assertion abandons the test's heap). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void fini(void)
{
    md_fini(&door);
}

TestSuite(mcp, .fini = fini, .timeout = 600);

static void start(const char *const *extra)
{
    md_start(&door, "mcp", extra);
}

/* Runs the script's `scenario`, expects every step in `steps` (NULL-terminated) to report ok and the script to exit 0. */
static void run_client(const char *scenario, const char *const *steps)
{
    char pid[16];

    snprintf(pid, sizeof(pid), "%d", (int)door.gw.pid);
    const char *args[] = {"--kgate-pid", pid, "--max-sessions", ABANDON_SESSIONS, NULL};
    md_run_client(&door, &client, scenario, args, steps);
}

/* No context and, by RELEASE_MS, no kernel process of kgate's left. */
static void assert_released(void)
{
    md_expect_released(&door, RELEASE_MS, "their MCP sessions ended");
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
