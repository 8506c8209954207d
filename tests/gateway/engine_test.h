/* tests/gateway/engine_test.h: the engine's module-test fixture (a loop, runs, contexts on the fake kernel manager) and a reader.
 */
#ifndef KGATE_TESTS_ENGINE_TEST_H
#define KGATE_TESTS_ENGINE_TEST_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>
#include <jansson.h>
#include "core/config.h"
#include "core/host.h"
#include "runs/run.h"
#include "code/context.h"
#include "code/kernel_run.h"
#include "fake_kmgr.h"

/** One test's engine. Criterion runs each test in its own process: one global is enough. */
typedef struct st_engine_t {
    h2o_loop_t *loop;
    gw_config_t config; /* fields read at use time may be changed by a test at any point */
    gw_host_t host;
    gw_runs_t runs;
    gw_languages_t languages;
    gw_contexts_t contexts;
    kmgr_manager_t *kmgr; /* the fake */
    kmgr_kernelspec_t spec;
    int finished; /* engine_finish ran */
} engine_t;
extern engine_t eng;

/** Suite .init: the engine with small bounds (see engine_test.c) and pings rare enough never to show up unasked. */
void engine_setup(void);
/**
 * The end of every test body (ENGINE_TEST): contexts deleted and runs ended as at server shutdown,
 * everything released, then fails the test if the gateway misused the kernel manager (called a
 * destroyed kernel or a request that had ended).
 */
void engine_finish(void);
/** Suite .fini: releases everything unless engine_finish did (a body that stopped on an assertion). */
void engine_teardown(void);

/**
 * A Criterion test of the engine: its body, then engine_finish inside the test. Criterion 2.4
 * counts neither a failed expectation nor a crash in a suite's .fini against the test, so whatever
 * must hold after the body is checked here instead.
 */
#define ENGINE_TEST(suite, name)                                                                                                   \
    static void suite##_##name##_body(void);                                                                                       \
    Test(suite, name)                                                                                                              \
    {                                                                                                                              \
        suite##_##name##_body();                                                                                                   \
        engine_finish();                                                                                                           \
    }                                                                                                                              \
    static void suite##_##name##_body(void)
/** Re-creates the host with config.ping_interval_ms (before any run exists). */
void engine_reset_host(void);

/**
 * Steps the machine's wall clock (CLOCK_REALTIME, what gw_unix_ms reads) by `seconds`, as NTP or an
 * administrator may; the monotonic clock does not move. engine_test.c defines clock_gettime for
 * the whole binary to do it: every other clock reads as it should.
 */
void engine_step_wall_clock(int64_t seconds);

/**
 * Runs the loop until `done(arg)` is true or `timeout_ms` passed; returns whether it became true.
 * With `tick`, each turn also runs the server tick's engine part (gw_contexts_tick).
 */
int engine_run_until(int (*done)(void *arg), void *arg, unsigned timeout_ms, int tick);
/** Runs the loop for `ms` milliseconds (with the tick when `tick`). */
void engine_run_for(unsigned ms, int tick);

/** A context on a fake kernel that is already ready (its kernel: `*kernel`, may be NULL). */
gw_context_t *engine_ready_context(int is_ephemeral, kmgr_kernel_t **kernel);
/** Submits `code` with the options tests use (timeout 60 s, no stdin, large limits); asserts success. */
gw_run_t *engine_submit(gw_context_t *ctx, const char *code);

/**
 * A reader of a run: a cursor handed to this minimal writer, which keeps the core/stream.h
 * contract (on_ready set before the loop runs, a reference on the last event, close called once).
 * It pulls whatever is there whenever it is told, unless paused.
 */
typedef struct st_test_reader_t {
    gw_run_cursor_t cursor;
    gw_event_t *last; /* a reference, as a writer holds on what it sent last */
    json_t *events;   /* what it read, parsed, each with "_id" (either framing: config.compat_execd) */
    json_t *frames;   /* what it read, each frame's bytes as they are (a string) */
    int paused;
    int lost, ended, closed;
    unsigned wakeups;
} test_reader_t;

/** Opens the reader's cursor after `after_id` (gw_run_cursor_open's result) and reads what is there. */
int reader_open(test_reader_t *r, gw_run_t *run, uint64_t after_id);
/** Reads every event there is (also when paused); on loss or end, closes its source. */
void reader_pull(test_reader_t *r);
/** Closes the source if still open and releases what the reader holds. */
void reader_dispose(test_reader_t *r);

/** Every event of `run` a new reader from the start would read now (a new array). */
json_t *run_events(gw_run_t *run);
/** The frames of every event of `run`, as run_events reads them: each one's bytes as a string (a new array). */
json_t *run_frames(gw_run_t *run);
/** Events of `events` whose type is `type`. */
size_t count_type(const json_t *events, const char *type);
/** The first event of `type` (borrowed), or NULL. */
json_t *find_type(const json_t *events, const char *type);
/** The first `status` event with `text` (borrowed), or NULL. */
json_t *find_status(const json_t *events, const char *text);
/** The ename of the only error event of `events`; fails the test unless there is exactly one. */
const char *only_error(const json_t *events);
/** The evalue of the only error event of `events`; fails the test unless there is exactly one. */
const char *error_evalue(const json_t *events);
/** The ename of the only error event of `run` (a static buffer); fails the test unless there is exactly one. */
const char *run_error(gw_run_t *run);
/** The run's outcome ("ok", "error", ...; NULL while unfinished); the string is static. */
const char *run_outcome(gw_run_t *run);

#endif
