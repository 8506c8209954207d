/* tests/e2e/mcp_door.h: a private kgate with a token and its own workspace root, driven by an MCP SDK client script. */
#ifndef KGATE_E2E_MCP_DOOR_H
#define KGATE_E2E_MCP_DOOR_H

#include "support/gateway.h"

/*
 * test_mcp.c (the SDK 1.x client, sessions) and test_mcp2.c (the 2.x client, revision 2026-07-28) run the same way:
 * kgate with --access-token and --workspace-root, a node script from tests/e2e/<client>/ that prints one step a line
 * (tests/e2e/steps.mjs), then what the SDK cannot see: no context and no kernel process left. Criterion asserts inside.
 */

/** One client script and the npm lock deploy/deps.sh installs for it. */
typedef struct st_md_client_t {
    const char *who;             /* names the client in messages: "MCP", "MCP 2026-07-28" */
    const char *script;          /* the .mjs */
    const char *modules_env;     /* the variable naming where its lock is installed */
    const char *modules_default; /* where deploy/deps.sh installs it by default */
    const char *package;         /* the SDK package that must be installed there */
    const char *lock;            /* its package-lock.json (named when the package is missing) */
    int run_ms;                  /* node is killed after this long */
    const char *timeout_ms;      /* the script's own --timeout-ms (shorter: it reports which step hung) */
} md_client_t;

/** The private kgate of a test, its token and its workspace root. */
typedef struct st_md_door_t {
    ts_gateway_t gw;
    char token[64];
    char workspace[256];
} md_door_t;

/**
 * Starts kgate (xh_gateway_start) with a new random token, --workspace-root in a new temp dir named after `label`,
 * and `extra` (NULL-terminated, may be NULL; at most 11) appended.
 */
void md_start(md_door_t *door, const char *label, const char *const *extra);

/** For a suite's fini: stops every private kgate still running and removes the workspace root. */
void md_fini(md_door_t *door);

/**
 * Runs `client` with --url <kgate>/mcp, --token, --kgate <base URL>, --modules, --scenario `scenario`, --timeout-ms and
 * `args` (NULL-terminated, may be NULL; at most 8), and expects every step in `steps` (NULL-terminated) to have
 * reported ok and the script to have exited 0; dumps kgate's log otherwise.
 */
void md_run_client(const md_door_t *door, const md_client_t *client, const char *scenario, const char *const *args,
                   const char *const *steps);

/**
 * Expects GET /code/contexts to be [] and, within `release_ms`, no kernel process of kgate's left (its descendants);
 * `after` ends the messages' "... after ..." (what should have released them).
 */
void md_expect_released(const md_door_t *door, int release_ms, const char *after);

#endif
