/* tests/gateway/test_runlog.c: run logs beyond the RAM tail: read back from the file whole, resumed anywhere, trimmed, and failing
 * writes and reads. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "core/errors.h"
#include "runs/internal.h"
#include "engine_test.h"

TestSuite(runlog, .init = engine_setup, .fini = engine_teardown, .timeout = 60);

static const gw_run_limits_t big_limits = {1u << 30, 1u << 20};

/*
 * The store's file I/O, with faults on demand: this binary's pwrite and pread are the ones the
 * store calls. `write_budget` bytes are written before writes fail with `write_errno`; reads fail
 * with `read_errno` while it is set.
 */
static int write_errno, read_errno;
static long long write_budget = -1;
static unsigned read_calls;

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (write_errno != 0 && write_budget >= 0) {
        if ((long long)n > write_budget) {
            errno = write_errno;
            return -1;
        }
        write_budget -= (long long)n;
    }
    return syscall(SYS_pwrite64, fd, buf, n, off);
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    ++read_calls;
    if (read_errno != 0) {
        errno = read_errno;
        return -1;
    }
    return syscall(SYS_pread64, fd, buf, n, off);
}

/* A reader that keeps the bytes it was given, as a writer would have sent them. */
typedef struct st_raw_reader_t {
    gw_run_cursor_t cursor;
    gw_event_t *last;
    char *bytes;
    size_t len, cap;
    size_t max_piece;
    int paused, lost, ended, closed;
    int one_at_a_time; /* raw_pull takes one event (or read-back piece) a call, as a writer with a send in flight does */
} raw_reader_t;

static void raw_close(raw_reader_t *r)
{
    if (r->closed)
        return;
    r->closed = 1;
    r->cursor.super.on_ready = NULL;
    r->cursor.super.ops->close(&r->cursor.super);
}

static void raw_pull(raw_reader_t *r)
{
    gw_event_source_t *source = &r->cursor.super;
    gw_event_t *ev;
    int lost = 0;

    if (r->closed)
        return;
    while ((ev = source->ops->next(source, r->last, &lost)) != NULL) {
        if (r->len + ev->len > r->cap) {
            r->cap = (r->len + ev->len) * 2;
            r->bytes = realloc(r->bytes, r->cap);
        }
        memcpy(r->bytes + r->len, ev->frame, ev->len);
        r->len += ev->len;
        if (ev->len > r->max_piece)
            r->max_piece = ev->len;
        gw_event_addref(ev);
        gw_event_release(r->last);
        r->last = ev;
        if (r->one_at_a_time)
            break;
    }
    if (lost) {
        r->lost = 1;
        raw_close(r);
    } else if (source->ops->is_end(source, r->last)) {
        r->ended = 1;
        raw_close(r);
    }
}

static void raw_on_ready(gw_event_source_t *source)
{
    raw_reader_t *r = source->writer;
    if (!r->paused)
        raw_pull(r);
}

static int raw_open(raw_reader_t *r, gw_run_t *run, uint64_t after_id)
{
    int ret;

    memset(r, 0, sizeof(*r));
    r->closed = 1;
    if ((ret = gw_run_cursor_open(run, &r->cursor, after_id)) != 0)
        return ret;
    r->closed = 0;
    r->cursor.super.on_ready = raw_on_ready;
    r->cursor.super.writer = r;
    raw_pull(r);
    return 0;
}

static void raw_dispose(raw_reader_t *r)
{
    raw_close(r);
    gw_event_release(r->last);
    free(r->bytes);
    memset(r, 0, sizeof(*r));
}

/* What a writer with a send in flight does when events arrive (core/stream.c, pump): asks for what follows the last piece it
 * took, only to learn whether it was cut off. Returns whether it was. */
static int raw_peek(raw_reader_t *r)
{
    int lost = 0;

    r->cursor.super.ops->next(&r->cursor.super, r->last, &lost);
    return lost;
}

/* Event `i`'s text in these tests: `len` copies of one letter, then its number. */
static json_t *pattern_event(unsigned i, size_t len)
{
    char *text = malloc(len + 16);
    json_t *ev = gw_event_new("stdout");

    memset(text, 'a' + i % 26, len);
    snprintf(text + len, 16, "#%u", i);
    json_object_set_new(ev, "text", json_string(text));
    free(text);
    return ev;
}

/*
 * Splits `bytes` into SSE frames and checks them: ids consecutive from `first_id`, and every
 * stdout event's text as pattern_event made it. Returns the number of frames; *last_type gets the
 * last frame's type (static storage).
 */
static size_t check_stream(const char *bytes, size_t len, uint64_t first_id, const char **last_type)
{
    static char type[32];
    uint64_t want = first_id;
    size_t n = 0, at = 0;

    while (at < len) {
        const char *end = memmem(bytes + at, len - at, "\n\n", 2);
        unsigned long long id;
        int skip = 0;
        json_error_t error;
        json_t *obj;
        cr_assert_not_null(end, "frame %zu is not terminated", n);
        cr_assert_eq(sscanf(bytes + at, "id: %llu\ndata: %n", &id, &skip), 1, "frame %zu has no id: %.40s", n, bytes + at);
        cr_assert_eq(id, want, "frame %zu: id %llu, expected %" PRIu64, n, id, want);
        obj = json_loadb(bytes + at + skip, (size_t)(end - bytes - at - skip), 0, &error);
        cr_assert_not_null(obj, "frame %llu: %s", id, error.text);
        snprintf(type, sizeof(type), "%s", json_string_value(json_object_get(obj, "type")));
        if (strcmp(type, "stdout") == 0) {
            const char *text = json_string_value(json_object_get(obj, "text"));
            const char *hash = strrchr(text, '#');
            unsigned i = (unsigned)atoi(hash + 1);
            for (const char *p = text; p != hash; ++p)
                cr_assert_eq(*p, 'a' + i % 26, "event %llu: byte %zu of its text is wrong", id, (size_t)(p - text));
        }
        json_decref(obj);
        at = (size_t)(end - bytes) + 2;
        ++want;
        ++n;
    }
    *last_type = type;
    return n;
}

ENGINE_TEST(runlog, a_reader_that_keeps_up_with_events_bigger_than_the_tail_is_served_from_ram)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    raw_reader_t keeper;
    const char *type;

    cr_assert_eq(raw_open(&keeper, run, 0), 0);
    read_calls = 0;
    for (unsigned i = 0; i != 8; ++i)
        gw_run_append(run, pattern_event(i, 1u << 20)); /* 4 times the tail each: written through to the file */
    cr_expect_eq(read_calls, 0, "a reader woken for each 1 MiB event read %u of them back from the file", read_calls);
    cr_expect_leq(run->tail_bytes, GW_RUNLOG_TAIL_BYTES + (1u << 20) + 4096, "the tail holds more than the newest event");
    /* as a server's writer does, it reads the last events after the pass that finished the run */
    keeper.paused = 1;
    gw_run_finish(run, 0, "ok");
    raw_pull(&keeper);
    cr_expect(keeper.ended);
    cr_expect_eq(read_calls, 0, "the reader attached at the end read %u events back from the file", read_calls);
    cr_expect_eq(check_stream(keeper.bytes, keeper.len, 1, &type), 11, "init, ping, 8 outputs, execution_complete");
    raw_dispose(&keeper);
    cr_expect(h2o_linklist_is_empty(&run->tail), "a finished run with no reader keeps no event in RAM");
    cr_expect_eq(run->tail_bytes, 0);
}

ENGINE_TEST(runlog, a_log_beyond_the_tail_reaches_every_reader_whole_and_ram_holds_only_the_tail)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    raw_reader_t keeper, slow, late;
    size_t peak_tail = 0;
    const char *type;

    cr_assert_eq(raw_open(&keeper, run, 0), 0);
    cr_assert_eq(raw_open(&slow, run, 0), 0);
    slow.paused = 1;
    /* 6 MiB: small events, and some larger than a read-back piece (and than the tail) */
    for (unsigned i = 0; i != 600; ++i) {
        gw_run_append(run, pattern_event(i, i % 50 == 7 ? 300000 : 7000 + i));
        if (run->tail_bytes > peak_tail)
            peak_tail = run->tail_bytes;
        if (i == 300)
            raw_pull(&slow); /* halfway, once */
    }
    gw_run_finish(run, 1, "ok");
    cr_expect_leq(peak_tail, GW_RUNLOG_TAIL_BYTES + 320000, "the RAM tail reached %zu bytes", peak_tail);
    /* the readers attached at the end keep the (bounded) tail until they go */
    cr_expect_leq(run->tail_bytes, GW_RUNLOG_TAIL_BYTES + 320000, "a finished run holds %zu bytes in RAM", run->tail_bytes);
    cr_expect_eq(run->log_error, 0, "%s", gw_strerror(run->log_error));

    raw_pull(&slow);
    cr_assert_eq(raw_open(&late, run, 0), 0);
    cr_expect(keeper.ended && slow.ended && late.ended, "every reader reached the end (%d %d %d)", keeper.ended, slow.ended,
              late.ended);
    cr_expect_not(keeper.lost || slow.lost || late.lost);
    cr_assert_eq(check_stream(keeper.bytes, keeper.len, 1, &type), 603, "init, ping, 600 outputs, execution_complete");
    cr_expect_str_eq(type, "execution_complete");
    cr_assert_eq(slow.len, keeper.len);
    cr_assert_eq(late.len, keeper.len);
    cr_expect_eq(memcmp(slow.bytes, keeper.bytes, keeper.len), 0, "the slow reader's bytes differ");
    cr_expect_eq(memcmp(late.bytes, keeper.bytes, keeper.len), 0, "the late reader's bytes differ");
    cr_expect_leq(late.max_piece, GW_RUNLOG_READ_BYTES, "a read back piece of %zu bytes", late.max_piece);
    raw_dispose(&keeper);
    raw_dispose(&slow);
    raw_dispose(&late);
    cr_expect_eq(run->tail_bytes, 0, "a finished run with no reader keeps no event in RAM");
    cr_expect(h2o_linklist_is_empty(&run->tail));
}

ENGINE_TEST(runlog, a_cursor_resumes_right_after_any_event_in_the_file)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    static const uint64_t afters[] = {0, 1, 2, 63, 64, 65, 66, 127, 128, 129, 1000, 2998, 3001, 3002, 3003};
    const char *type;

    for (unsigned i = 0; i != 3000; ++i)
        gw_run_append(run, pattern_event(i, 200 + i % 300)); /* ids 3..3002: most only in the file */
    cr_assert_gt(gw_run_record_off(gw_run_tail_first(run)), run->end_off / 2, "the test needs most of the log in the file");
    for (size_t k = 0; k != sizeof(afters) / sizeof(afters[0]); ++k) {
        raw_reader_t r;
        uint64_t after = afters[k] > 3002 ? 3002 : afters[k];
        cr_assert_eq(raw_open(&r, run, afters[k]), 0);
        cr_expect_eq(check_stream(r.bytes, r.len, after + 1, &type), 3002 - after, "resumed after %" PRIu64, afters[k]);
        cr_expect_not(r.lost || r.ended);
        raw_dispose(&r);
    }
    gw_run_finish(run, 1, "ok");
    for (size_t k = 0; k != sizeof(afters) / sizeof(afters[0]); ++k) {
        raw_reader_t r;
        uint64_t after = afters[k] > 3003 ? 3003 : afters[k];
        cr_assert_eq(raw_open(&r, run, afters[k]), 0);
        cr_expect_eq(check_stream(r.bytes, r.len, after + 1, &type), 3003 - after, "resumed after %" PRIu64 " once finished",
                     afters[k]);
        cr_expect(r.ended);
        raw_dispose(&r);
    }
}

ENGINE_TEST(runlog, trimming_in_the_file_bounds_the_log_and_its_blocks)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    raw_reader_t r, lost;
    json_t *state;
    uint64_t first;
    const char *type;

    eng.config.max_run_log_bytes = 1u << 20;
    cr_assert_eq(raw_open(&lost, run, 0), 0);
    lost.paused = 1;
    for (unsigned i = 0; i != 800; ++i)
        gw_run_append(run, pattern_event(i, 10000)); /* 8 MB */
    cr_expect_leq(run->log_bytes, 1u << 20);
    cr_expect_leq(run->file.blocks.size, (1u << 20) / GW_RUNSTORE_BLOCK + 2, "the run holds %zu blocks", run->file.blocks.size);
    cr_expect_leq(eng.runs.store.num_blocks, (1u << 20) / GW_RUNSTORE_BLOCK + 4,
                  "the file grew to %u blocks (freed ones are reused)", eng.runs.store.num_blocks);
    raw_pull(&lost);
    cr_expect(lost.lost, "a reader behind the trimmed head is cut off");
    state = gw_run_to_json(run);
    first = (uint64_t)json_integer_value(json_object_get(state, "first_retained_event_id"));
    json_decref(state);
    cr_assert_gt(first, 650);
    cr_expect_eq(raw_open(&r, run, first - 2), GW_EEVENTSGONE);
    cr_assert_eq(raw_open(&r, run, first - 1), 0);
    cr_expect_eq(check_stream(r.bytes, r.len, first, &type), 802 - first + 1);
    raw_dispose(&r);
    raw_dispose(&lost);
}

ENGINE_TEST(runlog, a_failed_write_ends_the_output_with_an_error_event_and_loses_nothing_silently)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    raw_reader_t keeper, late;
    size_t peak_tail = 0, n;
    const char *type;
    json_t *state, *events, *err, *complete;

    cr_assert_eq(raw_open(&keeper, run, 0), 0);
    write_errno = ENOSPC;
    write_budget = 1 << 20; /* the disk is full after 1 MiB */
    for (unsigned i = 0; i != 400; ++i) {
        gw_run_append(run, pattern_event(i, 10000));
        if (run->tail_bytes > peak_tail)
            peak_tail = run->tail_bytes;
    }
    cr_expect_eq(run->log_error, -ENOSPC);
    cr_expect_leq(peak_tail, 2 * GW_RUNLOG_TAIL_BYTES, "after the failure the tail still stays bounded (%zu bytes)", peak_tail);
    gw_run_finish(run, 1, "ok");
    write_errno = 0;

    /* the reader that kept up and one from the start read the same: everything up to the error, then the end */
    cr_assert_eq(raw_open(&late, run, 0), 0);
    cr_expect(keeper.ended && late.ended);
    n = check_stream(keeper.bytes, keeper.len, 1, &type);
    cr_expect_str_eq(type, "execution_complete");
    cr_assert_eq(late.len, keeper.len);
    cr_expect_eq(memcmp(late.bytes, keeper.bytes, keeper.len), 0);
    events = run_events(run);
    cr_assert_eq(json_array_size(events), n);
    cr_expect_str_eq(only_error(events), "RunLogError");
    cr_expect(strstr(error_evalue(events), "No space left on device") != NULL, "%s", error_evalue(events));
    err = find_type(events, "error");
    complete = find_type(events, "execution_complete");
    cr_expect_lt(json_integer_value(json_object_get(err, "_id")), json_integer_value(json_object_get(complete, "_id")));
    state = gw_run_to_json(run);
    cr_expect_str_eq(json_string_value(json_object_get(state, "outcome")), "error");
    cr_expect_gt(json_integer_value(json_object_get(json_object_get(state, "dropped"), "output_bytes")), 0,
                 "what was dropped is counted");
    cr_expect_gt(json_integer_value(json_object_get(json_object_get(complete, "dropped"), "output_bytes")), 0,
                 "and said in execution_complete");
    /* nothing appended before the failure is missing: outputs 0..k all arrive, in order (check_stream checked the ids) */
    cr_expect_gt(count_type(events, "stdout"), 100);
    json_decref(state);
    json_decref(events);
    raw_dispose(&keeper);
    raw_dispose(&late);
}

ENGINE_TEST(runlog, a_failed_read_gives_the_reader_an_error_event_then_the_end)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    raw_reader_t r;

    for (unsigned i = 0; i != 100; ++i)
        gw_run_append(run, pattern_event(i, 10000));
    gw_run_finish(run, 1, "ok");
    read_errno = EIO;
    cr_assert_eq(raw_open(&r, run, 50), 0, "the cursor opens: its reader is told why it cannot read");
    read_errno = 0;
    cr_expect(r.ended, "the stream ends");
    cr_expect_not(r.lost);
    cr_assert(r.len > 0);
    cr_expect_eq(strncmp(r.bytes, "data: {", 7), 0, "an event without an id (a resume starts from the last real one): %.*s",
                 (int)r.len, r.bytes);
    cr_expect(memmem(r.bytes, r.len, "RunLogError", 11) != NULL, "%.*s", (int)r.len, r.bytes);
    cr_expect(memmem(r.bytes, r.len, "Input/output error", 18) != NULL, "%.*s", (int)r.len, r.bytes);
    raw_dispose(&r);

    /* in the middle of a live run's stream: what was read stays whole, then the error, then the end */
    run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    cr_assert_eq(raw_open(&r, run, 0), 0);
    r.paused = 1;
    for (unsigned i = 0; i != 100; ++i)
        gw_run_append(run, pattern_event(i, 10000));
    read_errno = EIO;
    raw_pull(&r);
    read_errno = 0;
    cr_expect(r.ended && !r.lost);
    cr_assert_gt(r.len, 2);
    const char *last = r.bytes;
    for (const char *p = r.bytes; (p = memmem(p, r.len - (size_t)(p - r.bytes), "\n\n", 2)) != NULL && p + 2 < r.bytes + r.len;
         p += 2)
        last = p + 2;
    cr_expect_eq(strncmp(last, "data: {", 7), 0, "the last frame: %.60s", last);
    cr_expect(memmem(last, r.len - (size_t)(last - r.bytes), "RunLogError", 11) != NULL);
    cr_expect_eq(strncmp(r.bytes, "id: 1\n", 6), 0, "what came before is as it was");
    raw_dispose(&r);
    gw_run_finish(run, 1, "ok");
}

ENGINE_TEST(runlog, small_finished_runs_share_blocks_and_the_file_empties_when_they_go)
{
    enum { RUNS = 40 };
    gw_run_t *runs[RUNS];
    const char *type;

    for (unsigned k = 0; k != RUNS; ++k) {
        runs[k] = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
        for (unsigned i = 0; i != 1 + k % 5; ++i)
            gw_run_append(runs[k], pattern_event(i, 100 + k));
        gw_run_finish(runs[k], 1, "ok");
        cr_assert_eq(runs[k]->tail_bytes, 0, "run %u is in the file", k);
    }
    cr_expect_leq(eng.runs.store.num_blocks, 2, "%d small runs take %u blocks", RUNS, eng.runs.store.num_blocks);
    /* a large one next to them has blocks of its own */
    gw_run_t *large = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    for (unsigned i = 0; i != 100; ++i)
        gw_run_append(large, pattern_event(i, 10000));
    gw_run_finish(large, 1, "ok");
    for (unsigned k = 0; k != RUNS; ++k) {
        raw_reader_t r;
        cr_assert_eq(raw_open(&r, runs[k], 0), 0);
        cr_expect_eq(check_stream(r.bytes, r.len, 1, &type), 2 + 1 + k % 5 + 1, "run %u", k);
        cr_expect_str_eq(type, "execution_complete");
        cr_expect(r.ended);
        raw_dispose(&r);
    }
    char first_id[64];
    snprintf(first_id, sizeof(first_id), "%s", gw_run_id(runs[0]));
    eng.config.run_retention_ms = 0;
    engine_run_for(5, 0);
    gw_runs_collect(&eng.runs);
    cr_expect_null(gw_run_find(&eng.runs, first_id), "collected");
    cr_expect_eq(eng.runs.store.num_blocks, 0, "no run holds a block: the file is empty");
}

ENGINE_TEST(runlog, a_small_run_whose_file_write_fails_keeps_its_events_in_ram)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    raw_reader_t r;
    json_t *state;
    const char *type;

    for (unsigned i = 0; i != 3; ++i)
        gw_run_append(run, pattern_event(i, 100));
    write_errno = EIO;
    write_budget = 0;
    gw_run_finish(run, 1, "ok");
    write_errno = 0;
    cr_expect_eq(run->log_error, -EIO);
    cr_expect_gt(run->tail_bytes, 0, "the events stay in RAM");
    cr_assert_eq(raw_open(&r, run, 0), 0);
    cr_expect_eq(check_stream(r.bytes, r.len, 1, &type), 6, "nothing is lost");
    cr_expect_str_eq(type, "execution_complete");
    cr_expect(r.ended);
    raw_dispose(&r);
    state = gw_run_to_json(run);
    cr_expect_str_eq(json_string_value(json_object_get(state, "outcome")), "ok", "nothing was dropped");
    json_decref(state);
}

/* The events of a finished run read from its start: each frame's JSON, in order (`n` set); ids consecutive from 1. */
static json_t **read_all(gw_run_t *run, size_t *n)
{
    raw_reader_t r;
    json_t **events = NULL;
    size_t at = 0;

    cr_assert_eq(raw_open(&r, run, 0), 0, "the run cannot be read from its start: its first events were pushed out of its log");
    cr_assert(r.ended, "the run's stream did not end");
    for (*n = 0; at < r.len; ++*n) {
        unsigned long long id;
        int skip = 0;
        const char *end = memmem(r.bytes + at, r.len - at, "\n\n", 2);
        cr_assert_not_null(end);
        cr_assert_eq(sscanf(r.bytes + at, "id: %llu\ndata: %n", &id, &skip), 1);
        cr_assert_eq(id, *n + 1, "event %zu has id %llu", *n + 1, id);
        events = realloc(events, (*n + 1) * sizeof(*events));
        cr_assert_not_null(events[*n] = json_loadb(r.bytes + at + skip, (size_t)(end - r.bytes - at - skip), 0, NULL));
        at = (size_t)(end - r.bytes) + 2;
    }
    raw_dispose(&r);
    return events;
}

static void free_all(json_t **events, size_t n)
{
    for (size_t i = 0; i != n; ++i)
        json_decref(events[i]);
    free(events);
}

/*
 * One event near --max-run-log-bytes: it used to push every older event out of the log (init included), then be pushed out
 * itself by the events that end the run, so the run could not be read from its start (410 EVENTS_GONE) nor its output seen.
 * Now its text is cut to what one event of the log holds (the bound less 64 KiB for the run's last events), the cut is
 * counted in dropped.output_bytes and said by an output_truncated status with log_limit, and the whole run stays readable.
 */
ENGINE_TEST(runlog, one_event_near_the_log_bound_is_cut_to_fit_with_the_run_s_end_and_stays_readable)
{
    const size_t limit = 1u << 20, text_len = limit - 100;
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    size_t n, text = 0;
    json_t **events, *complete, *status = NULL;

    eng.config.max_run_log_bytes = limit;
    gw_run_append(run, pattern_event(7, text_len));
    cr_expect_leq(gw_run_text_room(run), limit - GW_RUNLOG_END_RESERVE, "a producer is told more room than one event holds");
    gw_run_finish(run, 1, "ok");
    events = read_all(run, &n);
    cr_assert_eq(n, 5, "init, ping, the cut stdout, its status, execution_complete: %zu events", n);
    cr_expect_str_eq(json_string_value(json_object_get(events[0], "type")), "init");
    for (size_t i = 0; i != n; ++i) {
        const char *type = json_string_value(json_object_get(events[i], "type"));
        if (strcmp(type, "stdout") == 0)
            text = json_string_length(json_object_get(events[i], "text"));
        else if (strcmp(type, "status") == 0)
            status = events[i];
    }
    cr_expect_gt(text, limit - 2 * GW_RUNLOG_END_RESERVE, "the text was cut to %zu bytes", text);
    cr_expect_leq(text, limit - GW_RUNLOG_END_RESERVE);
    cr_assert_not_null(status, "no marker says the text was cut");
    cr_expect_str_eq(json_string_value(json_object_get(status, "text")), "output_truncated");
    cr_expect_eq(json_integer_value(json_object_get(status, "log_limit")), (json_int_t)limit);
    complete = events[n - 1];
    cr_expect_str_eq(json_string_value(json_object_get(complete, "type")), "execution_complete");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(complete, "dropped"), "output_bytes")),
                 (json_int_t)(text_len + 2 - text), "the dropped bytes are not counted exactly");
    free_all(events, n);
}

/*
 * A reader that keeps pace with the kernel, in the middle of the biggest event a log holds. The event was read back from the
 * file piece by piece, and for each piece the reader took, the kernel printed as much again. When one event could take the
 * log's bound less 64 KiB, the next 64 KiB of output dropped it, and the reader, in the middle of it, was cut off: with the
 * defaults, an SSE client reading a 64 MiB print at full speed lost its connection about one run in four. At half the
 * bound, it reads to the end.
 */
ENGINE_TEST(runlog, a_reader_at_the_kernel_s_pace_reads_the_biggest_event_to_its_end)
{
    const size_t limit = 1u << 20, chunk = GW_RUNLOG_READ_BYTES - 512;
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    raw_reader_t r;
    unsigned printed = 0;

    eng.config.max_run_log_bytes = limit;
    cr_assert_eq(raw_open(&r, run, 0), 0);
    r.paused = r.one_at_a_time = 1;
    gw_run_append(run, pattern_event(1, limit)); /* cut to what one event holds */
    gw_run_append(run, pattern_event(2, 100));   /* the big one leaves RAM: read back from the file */
    /* init, ping, then the big event (id 3) a piece at a time: for each piece, the kernel prints a piece's worth */
    for (;;) {
        size_t before = r.len;
        raw_pull(&r);
        if (r.lost || r.len == before || r.last->id > 3 || printed == 64)
            break;
        if (r.last->id == 3) {
            gw_run_append(run, pattern_event(3 + printed++, chunk));
            if (raw_peek(&r)) /* woken while its send is in flight, as a writer is */
                r.lost = 1;
        }
    }
    cr_assert_not(r.lost, "a reader at the kernel's pace was cut off in the middle of an event, after %u prints", printed);
    cr_assert_gt(printed, 4, "the big event was not read back in pieces (%u prints)", printed);
    r.one_at_a_time = 0;
    gw_run_finish(run, 1, "ok");
    raw_pull(&r);
    cr_expect(r.ended, "the reader did not reach the run's end");
    /* every frame whole, in order: the cut stdout (its text all one letter), its status, the small one, the prints, the end */
    size_t n = 0, at = 0, last = 0;
    while (at < r.len) {
        const char *end = memmem(r.bytes + at, r.len - at, "\n\n", 2);
        unsigned long long id;
        int skip = 0;
        cr_assert_not_null(end, "frame %zu is not terminated", n);
        cr_assert_eq(sscanf(r.bytes + at, "id: %llu\ndata: %n", &id, &skip), 1);
        cr_assert_eq(id, n + 1, "frame %zu has id %llu", n, id);
        if (id == 3) {
            json_t *obj = json_loadb(r.bytes + at + skip, (size_t)(end - r.bytes - at - skip), 0, NULL);
            const char *text = json_string_value(json_object_get(obj, "text"));
            cr_assert_not_null(text, "the big event is not whole JSON");
            cr_expect_gt(strlen(text), limit - 2 * GW_RUNLOG_END_RESERVE);
            cr_expect_eq(strspn(text, "b"), strlen(text), "the big event's text is not what was printed");
            json_decref(obj);
        }
        last = at;
        at = (size_t)(end - r.bytes) + 2;
        ++n;
    }
    cr_expect_eq(n, 6 + printed, "init, ping, the cut stdout, its status, the small one, %u prints, execution_complete: %zu",
                 printed, n);
    cr_expect_not_null(memmem(r.bytes + last, r.len - last, "\"execution_complete\"", 20), "the last frame is not the end");
    raw_dispose(&r);
}

/* A reader that stops in the middle of that event keeps it only up to twice the log's bound, then is cut off: a stuck reader
 * never makes the log grow without bound. */
ENGINE_TEST(runlog, a_reader_stuck_in_the_middle_of_an_event_holds_it_up_to_twice_the_bound)
{
    const size_t limit = 1u << 20, chunk = GW_RUNLOG_READ_BYTES - 512;
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    raw_reader_t r;
    size_t peak = 0;
    int lost = 0;

    eng.config.max_run_log_bytes = limit;
    cr_assert_eq(raw_open(&r, run, 0), 0);
    r.paused = r.one_at_a_time = 1;
    gw_run_append(run, pattern_event(1, limit));
    gw_run_append(run, pattern_event(2, 100));
    while (r.last == NULL || r.last->id < 3)
        raw_pull(&r); /* init, ping, then the first piece of the big event: its send never ends */
    for (unsigned i = 0; i != 40 && !lost; ++i) {
        gw_run_append(run, pattern_event(3 + i, chunk)); /* 2.5 MB in all */
        if (run->log_bytes > peak)
            peak = run->log_bytes;
        lost = raw_peek(&r);
    }
    cr_expect(lost, "a reader stuck in an event was never cut off");
    cr_expect_leq(peak, 2 * limit + chunk + 512, "the log held %zu bytes for a stuck reader (bound %zu)", peak, limit);
    cr_expect_gt(peak, limit + limit / 2, "the log did not keep the event its reader was in the middle of (%zu)", peak);
    cr_expect_leq(run->log_bytes, limit, "the log is back under its bound once the event is dropped: %zu", run->log_bytes);
    raw_dispose(&r);
}

/* The same through the raw path (a kernel's stream token appended without decoding): its escaped text is what the log holds,
 * so a text of 600 KB decoded, 1.2 MB escaped, is cut by what it takes escaped. */
ENGINE_TEST(runlog, an_escaped_stream_token_near_the_log_bound_is_cut_by_its_escaped_size)
{
    const size_t limit = 1u << 20, units = 600000;
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    char *token = malloc(2 * units + 2);
    size_t n, text = 0;
    json_t **events;

    eng.config.max_run_log_bytes = limit;
    token[0] = token[2 * units + 1] = '"';
    for (size_t i = 0; i != units; ++i)
        memcpy(token + 1 + 2 * i, "\\n", 2);
    gw_run_append_stream(run, 0, token, 2 * units + 2, units, NULL);
    free(token);
    gw_run_finish(run, 1, "ok");
    events = read_all(run, &n);
    cr_assert_eq(n, 5, "init, ping, the cut stdout, its status, execution_complete: %zu events", n);
    cr_expect_str_eq(json_string_value(json_object_get(events[0], "type")), "init");
    cr_expect_str_eq(json_string_value(json_object_get(events[2], "type")), "stdout");
    text = json_string_length(json_object_get(events[2], "text"));
    cr_expect_leq(2 * text, limit - GW_RUNLOG_END_RESERVE, "%zu bytes of text (escaped twice that) in one event", text);
    cr_expect_gt(2 * text, limit - 2 * GW_RUNLOG_END_RESERVE, "the text was cut to %zu bytes", text);
    cr_expect_eq(json_integer_value(json_object_get(events[3], "log_limit")), (json_int_t)limit);
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(events[4], "dropped"), "output_bytes")),
                 (json_int_t)(units - text));
    free_all(events, n);
}
