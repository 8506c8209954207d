/* The engine's module-test fixture: the loop, the host, runs and contexts on the fake kernel manager, and a reader. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "engine_test.h"

engine_t eng;

static int64_t wall_clock_step_s;

/* The C library's, through the system call, with the wall clock stepped as the test asked. */
int clock_gettime(clockid_t clock, struct timespec *ts)
{
    if (syscall(SYS_clock_gettime, clock, ts) != 0)
        return -1;
    if (clock == CLOCK_REALTIME)
        ts->tv_sec += wall_clock_step_s;
    return 0;
}

void engine_step_wall_clock(int64_t seconds)
{
    wall_clock_step_s += seconds;
}

void engine_setup(void)
{
    wire_global_init();
    memset(&eng, 0, sizeof(eng));
    eng.loop = h2o_evloop_create();
    gw_config_init(&eng.config);
    eng.config.ping_interval_ms = 600000;
    eng.config.max_contexts = 4;
    eng.config.max_queue = 2;
    eng.config.timeout_grace_ms = 30;
    gw_host_init(&eng.host, eng.loop, &eng.config);
    gw_runs_init(&eng.runs, &eng.host);
    gw_languages_init(&eng.languages);
    eng.kmgr = fake_kmgr_create(eng.loop);
    gw_contexts_init(&eng.contexts, &eng.host, &eng.runs, &eng.languages, eng.kmgr);
    eng.spec.name = "fake";
    eng.spec.language = "python";
    eng.spec.display_name = "Fake";
    eng.spec.interrupt_mode = KMGR_INTERRUPT_MESSAGE;
}

/* The server's shutdown order (contexts and their kernels, then every run), then the loop; returns the misuse count. */
static size_t release_engine(char *what, size_t size)
{
    const char *first;
    size_t misuse;

    gw_contexts_destroy_all(&eng.contexts);
    gw_runs_dispose(&eng.runs);
    gw_languages_dispose(&eng.languages);
    misuse = fake_kmgr_misuse(eng.kmgr, &first);
    snprintf(what, size, "%s", first);
    fake_kmgr_destroy(eng.kmgr);
    gw_host_dispose(&eng.host); /* h2o asserts that no timer (a run's ping) is still linked */
    h2o_evloop_destroy(eng.loop);
    gw_config_dispose(&eng.config);
    eng.finished = 1;
    return misuse;
}

void engine_finish(void)
{
    char what[200];
    size_t misuse = release_engine(what, sizeof(what));

    cr_expect_eq(misuse, 0, "the gateway misused the kernel manager %zu time(s), first: %s", misuse, what);
}

void engine_teardown(void)
{
    char what[200];

    if (!eng.finished)
        release_engine(what, sizeof(what));
}

void engine_reset_host(void)
{
    gw_host_dispose(&eng.host);
    gw_host_init(&eng.host, eng.loop, &eng.config);
}

int engine_run_until(int (*done)(void *arg), void *arg, unsigned timeout_ms, int tick)
{
    int64_t deadline = gw_now_ms() + timeout_ms;

    while (done == NULL || !done(arg)) {
        if (gw_now_ms() >= deadline)
            return done == NULL;
        h2o_evloop_run(eng.loop, 2);
        if (tick)
            gw_contexts_tick(&eng.contexts);
    }
    return 1;
}

void engine_run_for(unsigned ms, int tick)
{
    engine_run_until(NULL, NULL, ms, tick);
}

gw_context_t *engine_ready_context(int is_ephemeral, kmgr_kernel_t **kernel)
{
    gw_context_options_t opts = {.spec = &eng.spec, .is_ephemeral = is_ephemeral};
    gw_context_t *ctx = NULL;
    int ret = gw_context_create(&eng.contexts, &opts, &ctx);

    cr_assert_eq(ret, 0, "gw_context_create: %s", gw_strerror(ret));
    fake_kernel_set_state(ctx->kernel, KMGR_KERNEL_IDLE);
    if (kernel != NULL)
        *kernel = ctx->kernel;
    return ctx;
}

gw_run_t *engine_submit(gw_context_t *ctx, const char *code)
{
    gw_kernel_run_options_t opts = {.code = code, .timeout_ms = 60000, .limits = {1u << 20, 1u << 20}};
    gw_run_t *run = NULL;
    int ret = gw_kernel_run_submit(ctx, &opts, &run);

    cr_assert_eq(ret, 0, "gw_kernel_run_submit: %s", gw_strerror(ret));
    return run;
}

/* --- the reader --- */

/* Parses `id: N\ndata: JSON\n\n` (the standard framing the fixture's config asks for). */
static json_t *parse_frame(const gw_event_t *ev)
{
    char prefix[48];
    int n = eng.config.compat_execd ? 0 : snprintf(prefix, sizeof(prefix), "id: %" PRIu64 "\ndata: ", ev->id);
    json_error_t error;
    json_t *obj;

    cr_assert(ev->len > (size_t)n + 2 && memcmp(ev->frame, prefix, (size_t)n) == 0, "frame %" PRIu64 " is not standard SSE",
              ev->id);
    cr_assert(memcmp(ev->frame + ev->len - 2, "\n\n", 2) == 0, "frame %" PRIu64 " does not end its event", ev->id);
    obj = json_loadb(ev->frame + n, ev->len - (size_t)n - 2, JSON_ALLOW_NUL, &error);
    cr_assert_not_null(obj, "frame %" PRIu64 ": %s", ev->id, error.text);
    json_object_set_new(obj, "_id", json_integer((json_int_t)ev->id));
    return obj;
}

static void reader_close(test_reader_t *r)
{
    if (r->closed)
        return;
    r->closed = 1;
    r->cursor.super.on_ready = NULL;
    r->cursor.super.ops->close(&r->cursor.super);
}

void reader_pull(test_reader_t *r)
{
    gw_event_source_t *source = &r->cursor.super;
    gw_event_t *ev;
    int lost = 0;

    if (r->closed)
        return;
    while ((ev = source->ops->next(source, r->last, &lost)) != NULL) {
        json_array_append_new(r->events, parse_frame(ev));
        json_array_append_new(r->frames, json_stringn(ev->frame, ev->len));
        gw_event_addref(ev);
        gw_event_release(r->last);
        r->last = ev;
    }
    if (lost) {
        r->lost = 1;
        reader_close(r);
    } else if (source->ops->is_end(source, r->last)) {
        r->ended = 1;
        reader_close(r);
    }
}

static void on_ready(gw_event_source_t *source)
{
    test_reader_t *r = source->writer;

    ++r->wakeups;
    if (!r->paused)
        reader_pull(r);
}

int reader_open(test_reader_t *r, gw_run_t *run, uint64_t after_id)
{
    int ret;

    memset(r, 0, sizeof(*r));
    r->closed = 1;
    if ((ret = gw_run_cursor_open(run, &r->cursor, after_id)) != 0)
        return ret;
    r->closed = 0;
    r->events = json_array();
    r->frames = json_array();
    r->cursor.super.on_ready = on_ready;
    r->cursor.super.writer = r;
    reader_pull(r);
    return 0;
}

void reader_dispose(test_reader_t *r)
{
    reader_close(r);
    gw_event_release(r->last);
    r->last = NULL;
    json_decref(r->events);
    r->events = NULL;
    json_decref(r->frames);
    r->frames = NULL;
}

/* --- what a run's log says --- */

/* The whole log read from its start: its events as JSON, or (`frames`) their SSE frames as strings. */
static json_t *run_read(gw_run_t *run, int frames)
{
    test_reader_t r;
    json_t *out;

    cr_assert_eq(reader_open(&r, run, 0), 0, "the run's first events are gone");
    out = json_incref(frames ? r.frames : r.events);
    reader_dispose(&r);
    return out;
}

json_t *run_events(gw_run_t *run)
{
    return run_read(run, 0);
}

json_t *run_frames(gw_run_t *run)
{
    return run_read(run, 1);
}

static const char *type_of(const json_t *ev)
{
    return json_string_value(json_object_get(ev, "type"));
}

size_t count_type(const json_t *events, const char *type)
{
    size_t i, n = 0;
    json_t *ev;

    json_array_foreach(events, i, ev)
    {
        n += strcmp(type_of(ev), type) == 0;
    }
    return n;
}

json_t *find_type(const json_t *events, const char *type)
{
    size_t i;
    json_t *ev;

    json_array_foreach(events, i, ev)
    {
        if (strcmp(type_of(ev), type) == 0)
            return ev;
    }
    return NULL;
}

json_t *find_status(const json_t *events, const char *text)
{
    size_t i;
    json_t *ev;

    json_array_foreach(events, i, ev)
    {
        const char *t = json_string_value(json_object_get(ev, "text"));
        if (strcmp(type_of(ev), "status") == 0 && t != NULL && strcmp(t, text) == 0)
            return ev;
    }
    return NULL;
}

const char *only_error(const json_t *events)
{
    char *dump = json_dumps(events, JSON_COMPACT);

    cr_assert_eq(count_type(events, "error"), 1, "expected exactly one error event: %s", dump);
    free(dump);
    return json_string_value(json_object_get(json_object_get(find_type(events, "error"), "error"), "ename"));
}

const char *error_evalue(const json_t *events)
{
    only_error(events);
    return json_string_value(json_object_get(json_object_get(find_type(events, "error"), "error"), "evalue"));
}

const char *run_error(gw_run_t *run)
{
    static char ename[64];
    json_t *events = run_events(run);
    const char *name = only_error(events);

    snprintf(ename, sizeof(ename), "%s", name != NULL ? name : "");
    json_decref(events);
    return ename;
}

const char *run_outcome(gw_run_t *run)
{
    static char outcome[32];
    json_t *obj = gw_run_to_json(run);
    const char *s = json_string_value(json_object_get(obj, "outcome"));

    snprintf(outcome, sizeof(outcome), "%s", s != NULL ? s : "");
    json_decref(obj);
    return s != NULL ? outcome : NULL;
}
