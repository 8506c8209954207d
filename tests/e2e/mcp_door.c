/* tests/e2e/mcp_door.c: a private kgate with a token and a workspace root, an MCP SDK client script against it. */
#include "mcp_door.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include "exec_helpers.h"
#include "jserver.h"
#include "support/base.h"
#include "support/proc.h"

#define MAX_EXTRA 11 /* kgate's arguments after the four of md_start */
#define MAX_ARGS 8   /* the script's arguments after md_run_client's fourteen */

static md_door_t door;

int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1; /* mcp_door.h: these binaries check kgate, not themselves */
}

const md_door_t *md_start(const char *label, const char *const *extra)
{
    const char *args[4 + MAX_EXTRA + 1] = {"--access-token", door.token, "--workspace-root", door.workspace};
    size_t n = 4;

    ts_random_hex(door.token, sizeof(door.token));
    snprintf(door.workspace, sizeof(door.workspace), "/tmp/kgate-%s-ws-XXXXXX", label);
    cr_assert_not_null(mkdtemp(door.workspace), "mkdtemp");
    for (size_t i = 0; extra != NULL && extra[i] != NULL; i++) {
        cr_assert_lt(i, MAX_EXTRA, "md_start: more than %d arguments", MAX_EXTRA);
        args[n++] = extra[i];
    }
    args[n] = NULL;
    xh_gateway_start(&door.gw, args);
    return &door;
}

void md_fini(void)
{
    char cmd[300];

    xh_gateways_stop_all();
    if (door.workspace[0] != '\0') {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", door.workspace);
        if (system(cmd) != 0)
            cr_log_warn("cannot remove %s", door.workspace);
    }
}

void md_run_client(const md_client_t *client, const char *scenario, const char *const *args, const char *const *steps)
{
    const char *modules = js_modules_dir(client->modules_env, client->modules_default);
    char url[64], base[64], who[96];
    js_run_t run;

    js_assert_installed(modules, client->package, client->lock);
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/mcp", door.gw.port);
    snprintf(base, sizeof(base), "http://127.0.0.1:%u", door.gw.port);
    const char *argv[14 + MAX_ARGS + 1] = {
        js_node(), client->script, "--url", url,          "--token", door.token,     "--kgate",
        base,      "--modules",    modules, "--scenario", scenario,  "--timeout-ms", client->timeout_ms};
    size_t n = 14;
    for (size_t i = 0; args != NULL && args[i] != NULL; i++) {
        cr_assert_lt(i, MAX_ARGS, "md_run_client: more than %d arguments", MAX_ARGS);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    cr_assert_eq(js_run(argv, NULL, client->run_ms, &run), 0, "cannot run node: %s", run.error);

    snprintf(who, sizeof(who), "%s (%s)", client->who, scenario);
    if (!js_expect_steps(who, &run, steps))
        ts_gateway_dump_log(&door.gw, 8192);
    js_run_dispose(&run);
}

void md_expect_released(int release_ms, const char *after)
{
    ts_proc_t procs[64];
    char *body = NULL;
    int st = js_get(door.gw.port, door.token, "/code/contexts", &body);
    cr_expect(st == 200 && body != NULL && strcmp(body, "[]") == 0, "GET /code/contexts after %s: HTTP %d %.600s", after, st,
              body != NULL ? body : "");
    free(body);
    int64_t deadline = ts_now_ms() + release_ms;
    size_t n;
    while ((n = ts_descendants(door.gw.pid, procs, 64)) != 0 && ts_now_ms() < deadline)
        usleep(100 * 1000);
    cr_expect_eq(n, 0, "%zu kernel process(es) of kgate still alive %d ms after %s", n, release_ms, after);
}
