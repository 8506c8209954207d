/* tests/e2e/jserver.h: a Jupyter Server 1.23 of the test's own (Debian's), and client scripts run to completion. */
#ifndef KGATE_E2E_JSERVER_H
#define KGATE_E2E_JSERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "support/jserver.h"

#define JS_PYTHON TS_JSERVER_PYTHON
#define JS_STARTUP_MS 60000    /* until GET /api answers 200 (a Python server starting on a loaded 2-core machine) */
#define JS_STOP_GRACE_MS 10000 /* SIGTERM to exit, before SIGKILL */

/** A Jupyter Server process on 127.0.0.1, started and stopped by PID by the test. */
typedef struct st_js_server_t {
    pid_t pid; /* 0 once stopped */
    unsigned short port;
    char token[64];
    char tmpdir[256];   /* config, data, runtime, IPython and root dirs, and the log: nothing of the machine's own leaks in */
    char log_path[300]; /* the server's stdout and stderr */
    char error[512];    /* why the last call failed */
} js_server_t;

/**
 * Starts Jupyter Server (ts_jserver_spawn: `/usr/bin/python3 -m jupyter_server --ip=127.0.0.1 --port=<free>
 * --ServerApp.token=<token>`, its HOME, Jupyter and IPython dirs and its root dir in a new temp dir, none of the
 * machine's configuration), `args` (NULL-terminated, may be NULL) appended, and waits until GET /api answers 200.
 * `label` names the temp dir. It never moves to another port by itself (port_retries=0): when its port was
 * taken meanwhile it is started again on another (three attempts). Returns 0, or -1 with js->error set and the
 * log's tail on stderr (nothing left running).
 */
int js_server_start(js_server_t *js, const char *label, const char *token, const char *const *args);

/**
 * Shuts down every kernel the server reports (DELETE /api/kernels/{id}), then SIGTERM, SIGKILL after
 * JS_STOP_GRACE_MS, and kills whatever of its descendants (recorded before the signal) still lives; `*survivors`
 * (may be NULL) is how many there were. Removes the temp dir unless KGATE_E2E_KEEP is set. 0 when it exited by
 * itself, -1 otherwise (js->error says why). Idempotent.
 */
int js_server_stop(js_server_t *js, size_t *survivors);

/** Writes the last `max` bytes of the server's log to stderr, framed. */
void js_server_dump_log(const js_server_t *js, size_t max);

/** GET `path` with `Authorization: token <token>` from 127.0.0.1:`port`: the status, the body in `*body` (free it; may be NULL). */
int js_get(unsigned short port, const char *token, const char *path, char **body);

/** What a client script printed, and how it ended. */
typedef struct st_js_run_t {
    int status;      /* wait status; -1 if it could not be started */
    int timed_out;   /* killed at the deadline */
    char *out;       /* stdout, NUL-terminated (free) */
    char *err;       /* stderr, NUL-terminated (free) */
    char error[256]; /* why it could not be started */
} js_run_t;

/**
 * Runs `argv` (argv[0] looked up in PATH) in its own process group with stdin from /dev/null and `env` ("K=V",
 * NULL-terminated, may be NULL) added to the environment; SIGKILLs the group at `timeout_ms`. Fills `run`
 * (release with js_run_dispose). Returns 0 when it ran (whatever its exit status), -1 when it could not start.
 */
int js_run(const char *const *argv, const char *const *env, int timeout_ms, js_run_t *run);

void js_run_dispose(js_run_t *run);

/**
 * Expects (cr_expect) that the client script `run` exited 0 before its deadline and that every step named in `steps`
 * (NULL-terminated) printed a line `{"step": name, "ok": true, ...}`; a failed step's `detail` goes in the message.
 * `client` names the script in messages; on success its output is logged. Returns 1 when all held, else 0 (the
 * caller dumps its server's log then).
 */
int js_expect_steps(const char *client, const js_run_t *run, const char *const *steps);

/**
 * The Node.js that runs the client scripts: $KGATE_NODE_DIR/bin/node (default /usr/local/lib/kgate/node),
 * the one deploy/deps.sh installs from tests/e2e/node's lock, never the machine's `node` (Debian 12's is too old for
 * E2B's SDK). Asserts (cr_assert) that it is there. Put it as argv[0] of js_run.
 */
const char *js_node(void);

/** Where deploy/deps.sh installed a client script's npm lock: $`env` when set and not empty, else `dflt`. */
const char *js_modules_dir(const char *env, const char *dflt);

/**
 * Asserts (cr_assert) that the npm package `package` is installed in `modules_dir`/node_modules: the message names
 * `lock`, the package-lock.json deploy/deps.sh runs `npm ci` on (a missing client is a failure, never a skip).
 */
void js_assert_installed(const char *modules_dir, const char *package, const char *lock);

#endif
