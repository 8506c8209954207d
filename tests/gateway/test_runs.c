/* tests/gateway/test_runs.c: the run log: cursors and resumption, trimming and slow readers, output limits, retention, shutdown. */
#include <string.h>
#include <criterion/criterion.h>
#include "core/errors.h"
#include "engine_test.h"

TestSuite(runs, .init = engine_setup, .fini = engine_teardown, .timeout = 20);

static const gw_run_limits_t big_limits = {1u << 20, 1u << 20};

/* A producer that counts what the run asks of it. */
static unsigned cancels, stops;
static char last_input[64];

static void producer_cancel(gw_run_t *run, void *data)
{
    (void)run, (void)data;
    ++cancels;
}

static void producer_stop(gw_run_t *run, void *data)
{
    (void)run, (void)data;
    ++stops;
}

static int producer_input(gw_run_t *run, void *data, const char *value)
{
    (void)run, (void)data;
    snprintf(last_input, sizeof(last_input), "%s", value);
    return 0;
}

static const gw_run_producer_t counting_producer = {producer_cancel, producer_stop, producer_input, NULL};

static json_t *stdout_event(const char *text)
{
    json_t *ev = gw_event_new("stdout");
    json_object_set_new(ev, "text", json_string(text));
    return ev;
}

static const char *text_at(const json_t *events, size_t i)
{
    return json_string_value(json_object_get(json_array_get(events, i), "text"));
}

static uint64_t id_at(const json_t *events, size_t i)
{
    return (uint64_t)json_integer_value(json_object_get(json_array_get(events, i), "_id"));
}

static const char *type_at(const json_t *events, size_t i)
{
    return json_string_value(json_object_get(json_array_get(events, i), "type"));
}

ENGINE_TEST(runs, a_reader_gets_every_event_in_order_then_the_end)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, "my-init", &big_limits);
    test_reader_t r;

    cr_assert_eq(reader_open(&r, run, 0), 0);
    cr_assert_eq(json_array_size(r.events), 2, "a new run says init, then ping");
    cr_expect_str_eq(type_at(r.events, 0), "init");
    cr_expect_str_eq(text_at(r.events, 0), "my-init");
    cr_expect_str_eq(type_at(r.events, 1), "ping");
    gw_run_append(run, stdout_event("a"));
    gw_run_append(run, stdout_event("b"));
    cr_assert_eq(json_array_size(r.events), 4, "appended events reach the reader as they come");
    cr_expect_str_eq(text_at(r.events, 2), "a");
    cr_expect_str_eq(text_at(r.events, 3), "b");
    cr_expect_not(r.ended);
    gw_run_finish(run, 3, "ok");
    cr_assert_eq(json_array_size(r.events), 5);
    cr_expect_str_eq(type_at(r.events, 4), "execution_complete");
    cr_expect_eq(json_integer_value(json_object_get(json_array_get(r.events, 4), "execution_count")), 3);
    for (size_t i = 0; i != 5; ++i)
        cr_expect_eq(id_at(r.events, i), i + 1, "event %zu has id %llu", i, (unsigned long long)id_at(r.events, i));
    cr_expect(r.ended && r.closed, "the reader ends after execution_complete");
    cr_expect_eq(gw_run_num_cursors(run), 0, "a closed cursor is detached");
    gw_run_append(run, stdout_event("late"));
    cr_expect_eq(json_array_size(r.events), 5, "nothing is appended to a finished run");
    reader_dispose(&r);
}

ENGINE_TEST(runs, a_cursor_opened_after_event_n_resumes_at_n_plus_1)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    test_reader_t r;

    for (int i = 0; i != 5; ++i)
        gw_run_append(run, stdout_event("x")); /* ids 3..7 */
    cr_assert_eq(reader_open(&r, run, 4), 0);
    cr_assert_eq(json_array_size(r.events), 3);
    cr_expect_eq(id_at(r.events, 0), 5);
    cr_expect_eq(id_at(r.events, 2), 7);
    gw_run_append(run, stdout_event("y"));
    cr_expect_eq(id_at(r.events, 3), 8);
    cr_expect_str_eq(text_at(r.events, 3), "y");
    reader_dispose(&r);
}

ENGINE_TEST(runs, a_cursor_past_the_end_waits_for_the_next_event)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    test_reader_t r, after_end;

    cr_assert_eq(reader_open(&r, run, 99), 0);
    cr_expect_eq(json_array_size(r.events), 0);
    cr_expect_not(r.ended || r.lost);
    gw_run_append(run, stdout_event("next"));
    cr_assert_eq(json_array_size(r.events), 1);
    cr_expect_eq(id_at(r.events, 0), 3);
    gw_run_finish(run, -1, "ok");
    cr_expect(r.ended);
    /* resuming after the last event of a finished run: nothing more, the end */
    cr_assert_eq(reader_open(&after_end, run, 99), 0);
    cr_expect_eq(json_array_size(after_end.events), 0);
    cr_expect(after_end.ended);
    reader_dispose(&r);
    reader_dispose(&after_end);
}

ENGINE_TEST(runs, trimmed_events_cannot_be_resumed_from)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    char text[101];
    test_reader_t r;
    json_t *state;
    uint64_t first;

    eng.config.max_run_log_bytes = 1000;
    memset(text, 'x', 100);
    text[100] = '\0';
    for (int i = 0; i != 30; ++i)
        gw_run_append(run, stdout_event(text)); /* ids 3..32, about 150 bytes of frame each */
    state = gw_run_to_json(run);
    first = (uint64_t)json_integer_value(json_object_get(state, "first_retained_event_id"));
    json_decref(state);
    cr_assert(first > 20 && first < 32, "the log keeps its newest ~1000 bytes, it starts at %llu", (unsigned long long)first);
    cr_expect_eq(reader_open(&r, run, 0), GW_EEVENTSGONE, "the start is gone");
    cr_expect_eq(reader_open(&r, run, first - 2), GW_EEVENTSGONE, "event %llu is gone", (unsigned long long)first - 1);
    cr_expect_eq(gw_run_num_cursors(run), 0, "a refused cursor is not attached");
    cr_assert_eq(reader_open(&r, run, first - 1), 0, "resuming right before the first retained event works");
    cr_expect_eq(id_at(r.events, 0), first);
    cr_expect_eq(id_at(r.events, json_array_size(r.events) - 1), 32);
    reader_dispose(&r);
}

/* The frame size of event `id` as appended by append_fixed (a fixed timestamp keeps sizes equal). */
static size_t fixed_frame_len(uint64_t id)
{
    json_t *ev = json_pack("{s:s, s:I, s:s}", "type", "stdout", "timestamp", (json_int_t)1700000000000, "text", "0123456789");
    gw_event_t *frame = gw_event_render(ev, id, 0);
    size_t len = frame->len;

    gw_event_release(frame);
    json_decref(ev);
    return len;
}

static void append_fixed(gw_run_t *run, int n)
{
    while (n-- > 0)
        gw_run_append(run,
                      json_pack("{s:s, s:I, s:s}", "type", "stdout", "timestamp", (json_int_t)1700000000000, "text", "0123456789"));
}

ENGINE_TEST(runs, a_reader_behind_the_trimmed_head_is_lost_and_one_that_keeps_up_is_not)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    test_reader_t keeper, slow;

    /* room for three of these events and a half: init and ping are trimmed by the fourth */
    eng.config.max_run_log_bytes = fixed_frame_len(12) * 7 / 2;
    cr_assert_eq(reader_open(&keeper, run, 0), 0);
    append_fixed(run, 10); /* ids 3..12; the log holds 10..12 */
    cr_assert_eq(reader_open(&slow, run, 11), 0);
    cr_assert_eq(json_array_size(slow.events), 1);
    slow.paused = 1;
    append_fixed(run, 3); /* 13..15: event 12 is trimmed, but the slow reader needs nothing that is gone */
    cr_expect_gt(slow.wakeups, 0, "a paused writer is still told");
    reader_pull(&slow);
    cr_expect_not(slow.lost, "a reader whose next event is retained is not lost");
    cr_expect_eq(id_at(slow.events, json_array_size(slow.events) - 1), 15);
    append_fixed(run, 4); /* 16..19: the log holds 17..19, the slow reader wants 16 */
    reader_pull(&slow);
    cr_expect(slow.lost && slow.closed, "the slow reader is cut off");
    cr_expect_eq(json_array_size(slow.events), 4, "and reads nothing past the hole");
    cr_expect_not(keeper.lost, "the reader that kept up is not");
    cr_assert_eq(json_array_size(keeper.events), 19);
    for (size_t i = 0; i != 19; ++i)
        cr_expect_eq(id_at(keeper.events, i), i + 1);
    cr_expect_eq(gw_run_num_cursors(run), 1, "only the keeper is still attached");
    reader_dispose(&slow);
    reader_dispose(&keeper);
}

ENGINE_TEST(runs, output_beyond_the_limit_is_dropped_and_reported_once)
{
    gw_run_limits_t limits = {10, 40};
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &limits);
    json_t *events, *done, *dropped;
    json_t *big = gw_event_new("result"), *small = gw_event_new("result");

    gw_run_append(run, stdout_event("hello"));
    gw_run_append(run, stdout_event("world!!")); /* 5 kept, 2 dropped */
    gw_run_append(run, stdout_event("more"));    /* all dropped */
    json_object_set_new(big, "results", json_pack("{s:s}", "text/plain", "a result much larger than forty bytes, serialised"));
    json_object_set_new(small, "results", json_pack("{s:s}", "text/plain", "42"));
    gw_run_append(run, big);
    gw_run_append(run, small);
    gw_run_finish(run, -1, "ok");
    events = run_events(run);
    cr_expect_eq(count_type(events, "stdout"), 2);
    cr_expect_str_eq(text_at(events, 2), "hello");
    cr_expect_str_eq(text_at(events, 3), "world");
    cr_expect_str_eq(type_at(events, 4), "status", "the first drop is reported right after what was kept");
    cr_expect_str_eq(text_at(events, 4), "output_truncated");
    cr_expect_not_null(find_status(events, "output_truncated"));
    cr_expect_eq(json_array_size(events), 7, "init, ping, hello, world, truncated, the small result, execution_complete");
    cr_expect_eq(count_type(events, "status"), 1, "truncation is reported once");
    cr_expect_eq(count_type(events, "result"), 1);
    done = json_array_get(events, json_array_size(events) - 1);
    dropped = json_object_get(done, "dropped");
    cr_assert_not_null(dropped, "execution_complete reports what was dropped");
    cr_expect_eq(json_integer_value(json_object_get(dropped, "output_bytes")), 6);
    cr_expect_eq(json_integer_value(json_object_get(dropped, "results")), 1);
    json_decref(events);
}

ENGINE_TEST(runs, output_is_never_cut_inside_a_utf8_character)
{
    gw_run_limits_t limits = {2, 1024};
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &limits);
    json_t *events;

    gw_run_append(run, stdout_event("a\xc3\xa9")); /* "aé": 3 bytes, the limit falls inside é */
    events = run_events(run);
    cr_expect_str_eq(text_at(events, 2), "a");
    json_decref(events);
    gw_run_finish(run, -1, "ok");
}

/* A kernel's text token kept as it was encoded (gw_run_append_stream) is cut to the room on its encoded text, whole escapes
 * only, and counted in decoded bytes; a message over the cap cut to its head adds its rest (gw_run_report_cut_message). */
ENGINE_TEST(runs, a_raw_text_is_cut_between_characters_and_a_cut_message_counts_its_rest)
{
    static const char token[] = "\"ab\\u00e9cd\""; /* "abécd": 6 bytes decoded */
    gw_run_limits_t limits = {4, 1024};
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &limits);
    json_t *events, *cut = NULL, *dropped;

    gw_run_append_stream(run, 0, token, strlen(token), 6, NULL);
    gw_run_report_cut_message(run, 1000);
    gw_run_finish(run, -1, "ok");
    events = run_events(run);
    cr_expect_str_eq(text_at(events, 2), "ab\xc3\xa9", "the room's 4 bytes, the escape whole");
    cr_expect_eq(count_type(events, "stdout"), 1);
    for (size_t i = 0; i != json_array_size(events); ++i)
        if (json_object_get(json_array_get(events, i), "message_limit") != NULL)
            cut = json_array_get(events, i);
    cr_assert_not_null(cut, "no output_truncated status names the message cap");
    cr_expect_eq(json_integer_value(json_object_get(cut, "dropped_bytes")), 1000);
    cr_expect_not_null(strstr(json_string_value(json_object_get(cut, "reason")), "1000 bytes"));
    dropped = json_object_get(find_type(events, "execution_complete"), "dropped");
    cr_expect_eq(json_integer_value(json_object_get(dropped, "output_bytes")), 2 + 1000, "the cut's 2 and the message's 1000");
    cr_expect_eq(json_integer_value(json_object_get(dropped, "messages")), 0);
    json_decref(events);
}

ENGINE_TEST(runs, a_run_without_drops_reports_none)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    json_t *events;

    gw_run_append(run, stdout_event("fine"));
    gw_run_finish(run, -1, "ok");
    events = run_events(run);
    cr_expect_null(json_object_get(find_type(events, "execution_complete"), "dropped"));
    cr_expect_null(find_status(events, "output_truncated"));
    json_decref(events);
}

ENGINE_TEST(runs, finished_runs_stay_readable_until_their_retention_passes)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    char id[64];

    snprintf(id, sizeof(id), "%s", gw_run_id(run));
    eng.config.run_retention_ms = 200;
    gw_runs_collect(&eng.runs);
    cr_expect_eq(gw_run_find(&eng.runs, id), run, "a live run is never collected");
    gw_run_finish(run, -1, "ok");
    gw_runs_collect(&eng.runs);
    cr_expect_eq(gw_run_find(&eng.runs, id), run, "a finished run is retained");
    cr_expect_str_eq(run_outcome(run), "ok");
    engine_run_for(250, 0);
    gw_runs_collect(&eng.runs);
    cr_expect_null(gw_run_find(&eng.runs, id), "and collected after run_retention_ms");
}

/* A finished run with about 2 KB of output. */
static gw_run_t *finished_run(char id[64])
{
    char text[2001];
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);

    memset(text, 'y', 2000);
    text[2000] = '\0';
    gw_run_append(run, stdout_event(text));
    gw_run_finish(run, -1, "ok");
    snprintf(id, 64, "%s", gw_run_id(run));
    return run;
}

ENGINE_TEST(runs, the_retained_bytes_budget_evicts_the_oldest_first)
{
    char a[64], b[64], c[64];

    finished_run(a);
    finished_run(b);
    finished_run(c);
    eng.config.max_retained_bytes = 5000; /* each run holds 2000..2500 bytes of frames */
    gw_runs_collect(&eng.runs);
    cr_expect_null(gw_run_find(&eng.runs, a), "the oldest goes");
    cr_expect_not_null(gw_run_find(&eng.runs, b));
    cr_expect_not_null(gw_run_find(&eng.runs, c));
}

/* A finished run with a short log that keeps the records of `n` tool calls (code mode), handed after its end as its producer
 * hands them. */
static gw_run_t *finished_run_with_calls(char id[64], size_t n)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    gw_run_call_record_t *records = calloc(n, sizeof(*records));

    gw_run_append(run, stdout_event("short"));
    gw_run_finish(run, -1, "ok");
    for (size_t i = 0; i != n; ++i)
        snprintf(records[i].id, sizeof(records[i].id), "call-%zu", i);
    gw_run_keep_call_records(run, records, n);
    snprintf(id, 64, "%s", gw_run_id(run));
    return run;
}

/* Two finished runs of a few hundred bytes of log that each keep 1000 tool calls' records (38 KB in RAM): they count toward
 * --max-retained-bytes (50 KB here), so the older goes; before, only their logs counted and both stayed for their retention
 * time, whatever their records held. */
ENGINE_TEST(runs, kept_tool_call_records_count_toward_the_retained_bytes_budget)
{
    char a[64], b[64];

    finished_run_with_calls(a, 1000);
    finished_run_with_calls(b, 1000);
    eng.config.max_retained_bytes = 50000;
    gw_runs_collect(&eng.runs);
    cr_expect_null(gw_run_find(&eng.runs, a), "the older run, over the budget with its records, goes");
    cr_expect_not_null(gw_run_find(&eng.runs, b), "the younger fits and stays");
    cr_expect_lt(eng.runs.retained_bytes, 50000, "what is left is within the budget (%zu)", eng.runs.retained_bytes);
    cr_expect_gt(eng.runs.retained_bytes, 1000 * sizeof(gw_run_call_record_t), "the records left are counted (%zu)",
                 eng.runs.retained_bytes);
}

ENGINE_TEST(runs, a_run_with_a_reader_is_never_collected)
{
    char a[64], b[64];
    gw_run_t *run = finished_run(a);
    gw_run_cursor_t cursor;

    finished_run(b);
    cr_assert_eq(gw_run_cursor_open(run, &cursor, 0), 0);
    eng.config.run_retention_ms = 0;
    eng.config.max_retained_bytes = 0;
    gw_runs_collect(&eng.runs);
    cr_expect_not_null(gw_run_find(&eng.runs, a), "a run being read is kept whatever the bounds");
    cr_expect_null(gw_run_find(&eng.runs, b), "younger runs are still collected");
    cursor.super.ops->close(&cursor.super);
    gw_runs_collect(&eng.runs);
    cr_expect_null(gw_run_find(&eng.runs, a), "once its reader is gone, it goes");
}

ENGINE_TEST(runs, shutdown_ends_live_runs_with_server_shutdown)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    gw_run_t *done = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    test_reader_t r;

    gw_run_set_producer(run, &counting_producer, NULL);
    gw_run_finish(done, -1, "ok");
    cr_assert_eq(reader_open(&r, run, 0), 0);
    gw_runs_shutdown(&eng.runs);
    cr_expect_eq(cancels, 1, "the producer is told to stop calling back");
    cr_expect_str_eq(only_error(r.events), "ServerShutdown");
    cr_expect_str_eq(type_at(r.events, json_array_size(r.events) - 1), "execution_complete");
    cr_expect(r.ended, "the reader's response ends");
    cr_expect_str_eq(run_outcome(run), "cancelled");
    cr_expect_str_eq(run_outcome(done), "ok", "a finished run is left as it was");
    gw_run_stop(run);
    cr_expect_eq(stops, 0, "the producer is detached");
    cr_expect_eq(gw_run_input(run, "x"), GW_ENOINPUT);
    reader_dispose(&r);
}

ENGINE_TEST(runs, stop_and_input_reach_the_producer_until_the_run_finishes)
{
    gw_run_t *run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);

    gw_run_set_producer(run, &counting_producer, NULL);
    gw_run_stop(run);
    cr_expect_eq(stops, 1);
    cr_expect_eq(gw_run_input(run, "answer"), 0);
    cr_expect_str_eq(last_input, "answer");
    gw_run_finish(run, -1, "ok");
    gw_run_stop(run);
    cr_expect_eq(stops, 1);
    cr_expect_eq(cancels, 0, "finishing is not cancelling");
}

static int has_pings(void *arg)
{
    test_reader_t *r = arg;
    return count_type(r->events, "ping") >= 3;
}

ENGINE_TEST(runs, pings_keep_a_live_run_talking_until_it_finishes)
{
    gw_run_t *run;
    test_reader_t r;
    json_t *events;
    size_t pings;

    eng.config.ping_interval_ms = 10;
    engine_reset_host();
    run = gw_run_create(&eng.runs, NULL, NULL, &big_limits);
    cr_assert_eq(reader_open(&r, run, 0), 0);
    cr_expect(engine_run_until(has_pings, &r, 5000, 0), "pings every ping_interval_ms");
    gw_run_finish(run, -1, "ok");
    pings = count_type(r.events, "ping");
    engine_run_for(40, 0);
    events = run_events(run);
    cr_expect_eq(count_type(events, "ping"), pings, "no ping after the end");
    json_decref(events);
    reader_dispose(&r);
}
