/* tests/e2e/exec_helpers.h: helpers for the executions e2e tests (runs, limits, lifecycle); Criterion asserts inside. */
#ifndef KGATE_E2E_EXEC_HELPERS_H
#define KGATE_E2E_EXEC_HELPERS_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "checks.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/stream.h"

/* Bounds of the waits in these tests (milliseconds). */
#define XH_RUN_MS 60000      /* a short run, from POST to the end of its stream */
#define XH_HEAD_MS 30000     /* the response head of a stream (sent with init, at once) */
#define XH_BIG_RUN_MS 180000 /* a run printing tens or hundreds of megabytes, under ASan on 2 cores */

/**
 * Starts a private kgate with `args` (NULL-terminated, may be NULL) and an ASAN_OPTIONS that keeps
 * freed memory out of quarantine (so that RSS reflects what kgate holds; harmless without ASan).
 * Asserts that it started. Stop it with xh_gateway_stop.
 */
void xh_gateway_start(ts_gateway_t *gw, const char *const *args);

/** Stops every private kgate of this test still running (for a suite's fini: a failed assertion skips the test's own stop). */
void xh_gateways_stop_all(void);

/** Stops a private kgate by PID, asserting a clean exit and no surviving kernel (dumps its log otherwise). */
void xh_gateway_stop(ts_gateway_t *gw);

/** POST /code/context {"language":"python"} (plus `cwd`/`env` when not NULL); asserts 200; returns the id (free it). */
char *xh_context_new(unsigned short port, const char *cwd, json_t *env);

/** {"context":{"id":ctx_id},"code":code} (no context when ctx_id is NULL); add fields with json_object_set_new. */
json_t *xh_body(const char *ctx_id, const char *code);

/** POST /code with `body` (borrowed); asserts that a response head arrived; returns the stream. */
ts_stream_t *xh_open(unsigned short port, json_t *body, int64_t deadline_ms);

/** POST /code with `body` and collects the stream until `deadline_ms`; asserts HTTP 200. */
void xh_run(unsigned short port, json_t *body, int64_t deadline_ms, ts_events_t *out);

/** Shorthand: runs `code` in `ctx_id` (no other option), asserts a complete stream without error events. */
void xh_run_ok(unsigned short port, const char *ctx_id, const char *code, ts_events_t *out);

/** Reads events until one of `type` is present at or after `from` (asserts it arrives by `deadline_ms`); returns its index. */
size_t xh_wait_event(ts_stream_t *s, ts_events_t *evs, const char *type, size_t from, int64_t deadline_ms);

/** The `execution_id` of the init event (asserted present); points into evs. */
const char *xh_execution_id(const ts_events_t *evs);

/** The first `error` event (asserted present, with `ename` equal to `ename` when not NULL). */
const ts_event_t *xh_error_event(const ts_events_t *evs, const char *ename);

/** Number of `status` events whose text is `text`. */
size_t xh_status_count(const ts_events_t *evs, const char *text);

/** GET /code/executions/{id}; asserts 200 with a JSON object; returns a new reference. */
json_t *xh_execution(unsigned short port, const char *exec_id);

/** Polls GET /code/executions/{id} (every 20 ms) until its state is `state`; asserts it happens by `deadline_ms`. */
json_t *xh_execution_wait_state(unsigned short port, const char *exec_id, const char *state, int64_t deadline_ms);

/** GET /code/contexts/{id}; returns the status, and the body as JSON in *out (may be NULL; a new reference). */
int xh_context_get(unsigned short port, const char *ctx_id, json_t **out);

/** GET /code/contexts/{id}; asserts 200 with a JSON body; returns it (a new reference). */
json_t *xh_context(unsigned short port, const char *ctx_id);

/**
 * Polls GET /code/contexts/{id} every 50 ms until its `status` is `status` (a kernel killed, restarted, dead); asserts
 * that happens within `ms`; returns the context object (a new reference).
 */
json_t *xh_context_wait_status(unsigned short port, const char *ctx_id, const char *status, unsigned ms);

/** Runs `code` in `ctx_id` (xh_run_ok) and returns what it printed on stdout (free it; asserted not NULL). */
char *xh_run_stdout(unsigned short port, const char *ctx_id, const char *code);

/**
 * The value of `series` (its whole name, labels included: `kgate_x{a="b"}`) in GET /kgate/metrics of a gateway without a
 * token; -1 when it is not there. Asserts the scrape answers 200.
 */
double xh_metric(unsigned short port, const char *series);

/** A string field of a JSON object, or "" (never NULL). */
const char *xh_str(json_t *obj, const char *key);

/** An integer field, or -1 when absent or not an integer. */
long long xh_int(json_t *obj, const char *key);

/** kgate's (or any process's) resident set size in bytes from /proc/<pid>/status, or -1. */
long long xh_rss_bytes(pid_t pid);

/** 1 while `pid` exists and is not a zombie. */
int xh_pid_alive(pid_t pid);

/** Waits until `pid` is gone (or a zombie); returns 1 if it went by `deadline_ms`. */
int xh_pid_wait_gone(pid_t pid, int64_t deadline_ms);

/** 1 when bwrap can create the namespaces kgate's sandboxes ask for (user, pid, ipc, uts, net) on this host. */
int xh_bwrap_works(void);

/**
 * Fails the test when bwrap is not installed (deploy/deps.sh installs bubblewrap); skips it where bwrap cannot create its
 * namespaces (an unprivileged container), the only skip a sandbox test takes, its note saying `consequence`.
 */
void xh_require_bwrap(const char *consequence);

/** Runs the formatted command with system() and asserts that it exited 0. */
void xh_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/**
 * Makes `dir` afresh with a FIFO <dir>/go and an executable <dir>/<name> (its path into `path`) that runs `real` with its
 * own arguments (`real` NULL: runs its arguments as the command), except that a process started while <dir>/hold exists
 * appends its pid as a line to <dir>/held and waits, before it runs anything, for a line on <dir>/go. The wait is a shell
 * builtin reading a FIFO: the held process has no child. A test holds a start at a known point with it (hold, start,
 * watch <dir>/held), then releases it (remove hold, write one line per held process to go: open go O_RDWR to never block).
 */
void xh_holding_wrapper(const char *dir, const char *name, const char *real, char *path, size_t size);

/** How many processes xh_holding_wrapper's wrapper in `dir` has held so far (the lines of <dir>/held). */
size_t xh_held_count(const char *dir);

#endif
