/* tests/kernelmgr/test_fake_kernel.c: a scripted kernel: forged messages, reply/idle order, bursts, messages over the cap,
 * shutdown. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ksys/errors.h"
#include "kmgr_test.h"
#include "wire/ids.h"

static kmgr_kernelspec_t *fake;

static const char *const fake_argv[] = {"/usr/bin/python3", KGATE_SOURCE_DIR "/tests/kernelmgr/fake_kernel.py",
                                        "{connection_file}"};

static void setup(void)
{
    kt_setup();
    fake = kt_fake_spec(fake_argv, 3);
}

static void teardown(void)
{
    kt_teardown();
    kmgr_kernelspec_destroy(fake);
}

TestSuite(fake_kernel, .init = setup, .fini = teardown, .timeout = 60);

/* Runs `code` and returns how long it took to end (asserting it did within 15 s). */
static uint64_t run_to_end(kmgr_kernel_t *k, const char *code, kt_rec_t *rec)
{
    uint64_t t0 = ksys_now_ms();

    kt_rec_init(rec);
    cr_assert_eq(kt_execute(k, code, rec), 0);
    cr_assert(kt_wait_rec(rec, 15000), "'%s' did not end", code);
    return ksys_now_ms() - t0;
}

Test(fake_kernel, forged_messages_are_dropped)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    run_to_end(k, "anything", &rec);
    cr_expect_str_eq(rec.out, "genuine\n", "the message signed with another key never reaches the request");
    cr_expect_eq(rec.n_done, 1);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel, idle_before_reply_completes_on_the_reply)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    run_to_end(k, "idle-first", &rec);
    cr_expect_eq(rec.n_reply, 1);
    cr_expect_eq(rec.n_done, 1);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/* "late N GAP": the fake publishes N lines "late i\n", GAP ms apart, after its reply and idle (as Deno 2.9 does). */
static void expect_late_lines(const kt_rec_t *rec, int n)
{
    char want[4096] = "genuine\n";

    for (int i = 0; i != n; ++i)
        snprintf(want + strlen(want), sizeof(want) - strlen(want), "late %d\n", i);
    cr_expect_str_eq(rec->out, want, "every line published after idle reaches the request, in order");
}

Test(fake_kernel, output_after_idle_of_a_kernel_known_to_publish_late_reaches_the_request)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k;
    kt_rec_t rec;

    fake->late_output = 1; /* what metadata.kgate.late_output true, or Deno's kernel, makes of a spec */
    k = kt_start_ready(fake, &st);
    /* 20 lines 20 ms apart: 400 ms of output after idle, each gap well inside the quiet window */
    run_to_end(k, "late 20 20", &rec);
    cr_expect_eq(rec.n_done, 1);
    cr_expect_eq(rec.n_reply, 1);
    expect_late_lines(&rec, 20);
    cr_expect_eq(rec.after_final, 0);
    cr_expect_eq(kmgr_kernel_late_messages(k), 0, "nothing was lost");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/* The manager's totals over every kernel it had (kmgr_manager_lost_output). */
static void expect_lost_output(unsigned long long late, unsigned long long unawaited, const char *why)
{
    kmgr_lost_output_t lost;

    kmgr_manager_lost_output(kt.mgr, &lost);
    cr_expect_eq(lost.late, late, "late: %s", why);
    cr_expect_eq(lost.unawaited, unawaited, "unawaited: %s", why);
}

Test(fake_kernel, a_kernel_seen_publishing_after_idle_is_waited_for_from_then_on_and_the_loss_is_counted)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    cr_expect_not(kmgr_kernel_publishes_late(k), "nothing says so of this spec");
    /* The first run ends at reply + idle: its late lines (200 ms apart) come after it ended, and are counted. */
    run_to_end(k, "late 3 200", &rec);
    cr_expect_eq(rec.n_done, 1);
    poll_loop_run_for(kt.loop, 1000);
    cr_expect_eq(kmgr_kernel_late_messages(k), 3, "each message for the ended request is counted, not dropped silently");
    cr_expect(kmgr_kernel_publishes_late(k), "learnt from the late messages");
    kt_rec_dispose(&rec);
    /* From then on its requests wait for late output. */
    run_to_end(k, "late 20 20", &rec);
    cr_expect_eq(rec.n_done, 1);
    expect_late_lines(&rec, 20);
    cr_expect_eq(kmgr_kernel_late_messages(k), 3, "nothing more was lost");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
    poll_loop_run_for(kt.loop, 100); /* the destroyed kernel is freed from the loop */
    expect_lost_output(3, 0, "the operators' total (kgate_kernel_late_messages_total) keeps a freed kernel's count");
}

/* What a late sink was told (kmgr_request_set_late_sink). */
typedef struct st_late_seen_t {
    int answer; /* what the sink returns */
    int calls;
    uint64_t text_bytes;
    char tag[64];
    char types[256];
} late_seen_t;

static int on_late(const char *tag, const char *msg_type, uint64_t text_bytes, void *data)
{
    late_seen_t *seen = data;

    ++seen->calls;
    seen->text_bytes += text_bytes;
    snprintf(seen->tag, sizeof(seen->tag), "%s", tag != NULL ? tag : "(none)");
    snprintf(seen->types + strlen(seen->types), sizeof(seen->types) - strlen(seen->types), "%s ", msg_type);
    return seen->answer;
}

static int late_calls_reach_3(void *arg)
{
    return ((late_seen_t *)arg)->calls >= 3;
}

static int fourth_late_message(void *arg)
{
    return kmgr_kernel_late_messages(arg) >= 4;
}

/* Output for a request that ended (a kernel not yet known to publish late) is told to the request's late sink with the
 * tag its owner gave (a run's id, for the gateway to count the loss on the run), besides being counted as before; a
 * request with nothing late, or whose owner cancelled it, has its sink told nothing. */
Test(fake_kernel, output_for_an_ended_request_is_told_to_its_late_sink_with_its_tag)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    late_seen_t seen = {.answer = 1}, quiet = {.answer = 1}, cancelled = {.answer = 1};
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "late 3 200", &rec), 0);
    kmgr_request_set_late_sink(rec.req, on_late, &seen, "run-1");
    cr_assert(kt_wait_rec(&rec, 15000), "the request did not end");
    cr_expect_eq(seen.calls, 0, "nothing is told while the request is open (its lines come 200 ms after its idle)");
    cr_expect(poll_loop_run_until(kt.loop, late_calls_reach_3, &seen, 15000), "the sink was told %d of the 3 late lines",
              seen.calls);
    cr_expect_str_eq(seen.tag, "run-1", "the tag the owner gave");
    cr_expect_str_eq(seen.types, "stream stream stream ");
    cr_expect_eq(seen.text_bytes, 21, "\"late i\\n\" three times: 7 decoded bytes each (%llu)",
                 (unsigned long long)seen.text_bytes);
    cr_expect_eq(kmgr_kernel_late_messages(k), 3, "counted as without a sink");
    kt_rec_dispose(&rec);

    /* from then on the kernel's requests wait for late output: nothing comes after this one ends */
    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "anything", &rec), 0);
    kmgr_request_set_late_sink(rec.req, on_late, &quiet, "run-2");
    cr_assert(kt_wait_rec(&rec, 15000), "the request did not end");
    kt_rec_dispose(&rec);

    /* a cancelled request's owner hears nothing of it, late output included (its lines are still counted) */
    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "late 2 50 1500", &rec), 0);
    kmgr_request_set_late_sink(rec.req, on_late, &cancelled, "run-3");
    kmgr_request_cancel(rec.req);
    cr_expect(poll_loop_run_until(kt.loop, fourth_late_message, k, 15000), "the stalled line did not come after the request");
    cr_expect_eq(quiet.calls, 0, "a request with nothing late: its sink is told nothing");
    cr_expect_eq(cancelled.calls, 0, "a cancelled request: its sink is told nothing");
    cr_expect_eq(seen.calls, 3, "nothing more for the first one");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/* Late output after a gap longer than the 100 ms quiet window (a loaded machine: matrix::javascript_output lost its tail so):
 * the lines lost once teach the kernel's window, and its next requests get theirs; requests that hear nothing late shrink
 * the window back, so a kernel whose late output stops waits no longer than before. */
Test(fake_kernel, late_output_after_a_gap_longer_than_the_quiet_window_is_waited_for_once_such_gaps_were_seen)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k;
    kt_rec_t rec;

    fake->late_output = 1;
    k = kt_start_ready(fake, &st);
    cr_expect_eq(kmgr_kernel_late_quiet_ms(k), 100, "a kernel not seen leaving longer gaps: the base window");
    /* 3 lines 250 ms apart after idle: the first request ends 100 ms after idle and loses them, counted */
    run_to_end(k, "late 3 250", &rec);
    poll_loop_run_for(kt.loop, 1200);
    cr_expect_eq(kmgr_kernel_late_messages(k), 3);
    cr_expect_gt(kmgr_kernel_late_quiet_ms(k), 100, "the lost lines' gaps widened the window (%u ms)",
                 kmgr_kernel_late_quiet_ms(k));
    kt_rec_dispose(&rec);
    /* the same output again reaches its request, every line */
    run_to_end(k, "late 3 250", &rec);
    cr_expect_eq(rec.n_done, 1);
    expect_late_lines(&rec, 3);
    cr_expect_eq(rec.after_final, 0);
    cr_expect_eq(kmgr_kernel_late_messages(k), 3, "nothing more was lost");
    kt_rec_dispose(&rec);
    /* requests with nothing late bring the window back to 100 ms */
    for (int i = 0; i != 6; ++i) {
        run_to_end(k, "anything", &rec);
        kt_rec_dispose(&rec);
    }
    cr_expect_eq(kmgr_kernel_late_quiet_ms(k), 100, "back to the base window (%u ms)", kmgr_kernel_late_quiet_ms(k));
    kmgr_kernel_destroy(k);
}

/* A kernel starved in the middle of a long flow of late output (800 ms of lines 20 ms apart, then 300 ms without one): a
 * request that has heard late output for a while waits for half as long again, so the stall does not cut the flow's tail. */
Test(fake_kernel, a_stall_in_a_long_flow_of_late_output_does_not_cut_its_tail)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k;
    kt_rec_t rec;

    fake->late_output = 1;
    k = kt_start_ready(fake, &st);
    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "late 40 20 300", &rec), 0);
    cr_assert(kt_wait_rec(&rec, 15000));
    cr_expect_eq(rec.n_done, 1);
    expect_late_lines(&rec, 40);
    cr_expect_eq(rec.after_final, 0);
    cr_expect_eq(kmgr_kernel_late_messages(k), 0, "nothing was lost");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/* What a relay (kmgr_kernel_set_tap) hears of a kernel: every message's type and parent, [type, parent] in order. */
static void record_tap(kmgr_kernel_t *kernel, wire_channel_t channel, const wire_msg_t *msg, const wire_frame_t *parts,
                       size_t nparts, void *data)
{
    (void)kernel, (void)channel, (void)parts, (void)nparts;
    if (msg != NULL)
        json_array_append_new(data, json_pack("[s, s]", wire_msg_type(msg), wire_msg_parent_id(msg)));
}

/* How many messages the relay heard that are a flush's: its marker, or a status or a reply whose parent is neither
 * requests' (nor a kernel_info_request's: kernelmgr's own handshake may still be answered). */
static int flush_messages_heard(json_t *tapped, const char *a, const char *b)
{
    size_t i;
    json_t *m, *info = json_array();
    int n = 0;

    json_array_foreach(tapped, i, m) if (strcmp(json_string_value(json_array_get(m, 0)), "kernel_info_reply") == 0)
        json_array_append(info, json_array_get(m, 1));
    json_array_foreach(tapped, i, m)
    {
        const char *type = json_string_value(json_array_get(m, 0)), *parent = json_string_value(json_array_get(m, 1));
        int info_parent = 0;
        size_t j;
        json_t *p;
        json_array_foreach(info, j, p) info_parent |= strcmp(json_string_value(p), parent) == 0;
        if (strcmp(type, "kgate_late_flush") == 0 ||
            ((strcmp(type, "status") == 0 || strcmp(type, "execute_reply") == 0 || strcmp(type, "execute_input") == 0) &&
             strcmp(parent, a) != 0 && strcmp(parent, b) != 0 && !info_parent))
            ++n;
    }
    json_decref(info);
    return n;
}

/* Deno's late output on a loaded machine ("deno N GAP": the fake's drainer publishes the cell's lines after its reply and
 * idle, GAP ms apart, each tagged with the request it handles when it publishes it, as Deno 2.9 does): 4 lines 300 ms apart,
 * gaps longer than the 100 ms window a kernel starts with, and than any seen before. The flush's marker tells their end: the
 * request gets them all, and the next request none of them. Before the flush the first request lost them (counted) and the
 * next one got the rest as its own output; a relay never hears the flush. */
Test(fake_kernel, deno_late_output_under_load_reaches_its_request_whole_and_never_the_next_one)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k;
    kt_rec_t rec, next;
    json_t *tapped = json_array();
    char a[WIRE_UUID_STRLEN + 1], b[WIRE_UUID_STRLEN + 1];

    fake->late_output = 1;
    fake->late_flush = 1; /* what Deno's kernelspec makes of a spec */
    k = kt_start_ready(fake, &st);
    poll_loop_run_for(kt.loop, 500); /* the answers to the start's kernel_info_requests (resent while starting) arrive */
    kmgr_kernel_set_tap(k, record_tap, tapped);
    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "deno 4 300", &rec), 0);
    snprintf(a, sizeof(a), "%s", kmgr_request_msg_id(rec.req));
    cr_assert(kt_wait_rec(&rec, 15000), "the request did not end");
    cr_expect_eq(rec.n_done, 1);
    expect_late_lines(&rec, 4);
    cr_expect_eq(rec.after_final, 0);
    kt_rec_init(&next);
    cr_assert_eq(kt_execute(k, "anything", &next), 0);
    snprintf(b, sizeof(b), "%s", kmgr_request_msg_id(next.req));
    cr_assert(kt_wait_rec(&next, 15000), "the next request did not end");
    cr_expect_str_eq(next.out, "genuine\n", "the next request gets its own output only");
    poll_loop_run_for(kt.loop, 700);
    cr_expect_eq(kmgr_kernel_late_messages(k), 0, "nothing came for a request that had ended");
    int heard = flush_messages_heard(tapped, a, b);
    char *dump = heard != 0 ? json_dumps(tapped, 0) : NULL;
    cr_expect_eq(heard, 0, "the relay heard %d message(s) of a flush: %s", heard, dump != NULL ? dump : "");
    free(dump);
    kmgr_kernel_set_tap(k, NULL, NULL);
    json_decref(tapped);
    kt_rec_dispose(&next);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/* A flush that fails (an interrupt landed in it: an error reply, no marker will come) leaves the request to the quiet
 * window instead of the flush's 5 s of silence: it ends soon, with the late lines that came within the window; and the
 * kernel's next request is flushed again (it would otherwise wait for the failed flush's marker forever). */
Test(fake_kernel, a_failed_flush_leaves_the_request_to_the_quiet_window)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k;
    kt_rec_t rec;

    fake->late_output = 1;
    fake->late_flush = 1;
    k = kt_start_ready(fake, &st);
    uint64_t took = run_to_end(k, "deno 3 30 fail-flush", &rec);
    cr_expect_eq(rec.n_done, 1);
    expect_late_lines(&rec, 3);
    cr_expect_lt(took, 4000, "it ended %llu ms after it was sent: the failed flush was waited for", (unsigned long long)took);
    kt_rec_dispose(&rec);
    /* the next request gets a flush of its own: its lines 300 ms apart, longer than the window, all reach it */
    run_to_end(k, "deno 4 300", &rec);
    expect_late_lines(&rec, 4);
    kt_rec_dispose(&rec);
    poll_loop_run_for(kt.loop, 500);
    cr_expect_eq(kmgr_kernel_late_messages(k), 0, "nothing came for a request that had ended");
    kmgr_kernel_destroy(k);
}

Test(fake_kernel, ipykernel_order_ends_at_reply_and_idle_with_no_wait_for_late_output)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    run_to_end(k, "anything", &rec);
    cr_expect_eq(rec.n_done, 1);
    cr_assert_neq(rec.idle_at, 0);
    /* DONE comes with the idle (the reply came first), not after a quiet window (100 ms) or a tick (50 ms) */
    cr_expect_lt(rec.done_at - rec.idle_at, 40, "ended %llu ms after idle", (unsigned long long)(rec.done_at - rec.idle_at));
    cr_expect_not(kmgr_kernel_publishes_late(k));
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel, a_lost_idle_does_not_hang_the_request)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    uint64_t took;
    kt_rec_t rec;

    took = run_to_end(k, "idle-lost", &rec); /* a request with its reply but no idle must end */
    cr_expect_eq(rec.n_reply, 1);
    cr_expect_eq(rec.n_done, 1);
    cr_expect_str_eq(rec.out, "genuine\n");
    /* ended by the grace period after the reply (5 s of silence), not at once */
    cr_expect_geq(took, 4500);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel, a_lost_reply_does_not_hang_the_request_once_the_kernel_is_idle)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    uint64_t took;
    kt_rec_t rec;

    /* a request with its idle but no reply must end: not at its timeout (600 s by default), the kernel idle */
    took = run_to_end(k, "reply-lost", &rec);
    cr_expect_eq(rec.n_reply, 0);
    cr_expect_eq(rec.n_done, 1);
    cr_expect_str_eq(rec.out, "genuine\n");
    /* ended by the grace period after the idle (1.5 s of silence), not at once */
    cr_expect_geq(took, 1400);
    cr_expect_lt(took, 5000);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/*
 * Destroyed, it is sent shutdown_request and exits of it before the grace period brings SIGTERM (then SIGKILL): the fake
 * writes each way it is told to end to a file (fake_kernel.py's ENDED_FILE), which must say the request and nothing else.
 * How, not how fast: under load the polite exit may take most of the grace.
 */
Test(fake_kernel, shutdown_request_ends_it_politely)
{
    char ended[] = "/tmp/kgate-fake-ended-XXXXXX", told[64] = "";
    int fd = mkstemp(ended);
    cr_assert_geq(fd, 0, "mkstemp");
    const char *argv[] = {fake_argv[0], fake_argv[1], fake_argv[2], ended};
    kmgr_kernelspec_t *spec = kt_fake_spec(argv, 4);
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(spec, &st);

    kmgr_kernel_destroy(k);
    cr_assert(kt_wait_no_process(10000), "the kernel is gone within the grace periods");
    ssize_t n = read(fd, told, sizeof(told) - 1);
    told[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(ended);
    kmgr_kernelspec_destroy(spec);
    cr_expect_str_eq(told, "shutdown_request\n", "told to end by [%s]: shutdown_request alone, no signal before it was gone", told);
}

/* Heartbeats far apart: a ping wakes the loop and would hide a drain that stops early. */
static void setup_quiet(void)
{
    kmgr_config_t config = {.heartbeat_interval_ms = 600000, .heartbeat_timeout_ms = 600000};
    kt_setup_config(&config);
    fake = kt_fake_spec(fake_argv, 3);
}

TestSuite(fake_kernel_quiet, .init = setup_quiet, .fini = teardown, .timeout = 60);

Test(fake_kernel_quiet, a_burst_larger_than_one_drain_arrives_whole)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    /* 8 x 512 KiB, four drains' worth, sent 500 ms after the request. The loop runs until the
     * request's own follow-up drains are over, then stands still while the burst arrives: it is
     * woken by the fd once, and the rest of a capped drain must be fetched without another signal
     * (none comes: nothing more is sent). */
    cr_assert_eq(kt_execute(k, "burst 8 524288 500", &rec), 0);
    poll_loop_run_for(kt.loop, 250);
    usleep(1000 * 1000);
    cr_assert(kt_wait_rec(&rec, 15000));
    cr_expect_eq(rec.n_done, 1);
    cr_expect_eq(rec.out_bytes, 8 * 524288 + strlen("genuine\n"), "every byte of the burst reached the request");
    cr_expect_eq(kmgr_kernel_unawaited_messages(k), 0, "big messages of a request are never passed over");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel, a_message_with_many_buffers_arrives_whole)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    /* 40 buffers: more frames than a received message holds before it grows onto the heap */
    run_to_end(k, "buffers 40", &rec);
    cr_assert_not_null(kt_iopub(&rec, "display_data"));
    cr_assert_eq(json_array_size(rec.buffers), 40);
    for (size_t i = 0; i != 40; ++i) {
        json_t *b = json_array_get(rec.buffers, i);
        cr_expect_eq(json_string_length(b), i + 1, "buffer %zu has its own length", i);
        cr_expect_eq(json_string_value(b)[i], 'A' + (int)(i % 26), "buffer %zu has its own bytes", i);
    }
    cr_expect_str_eq(rec.out, "genuine\n");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel, a_message_with_too_many_frames_is_dropped_and_the_rest_flows)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    /* 1100 buffers exceed KMGR_MAX_FRAMES: that message goes, the stream and idle after it do not */
    run_to_end(k, "buffers 1100", &rec);
    cr_expect_null(kt_iopub(&rec, "display_data"));
    cr_expect_str_eq(rec.out, "genuine\n");
    cr_expect_eq(rec.n_done, 1);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

static int passed_over_one(void *kernel)
{
    return kmgr_kernel_unawaited_messages(kernel) == 1;
}

typedef struct st_states_until_t {
    const kt_states_t *st;
    size_t n;
} states_until_t;

static int states_reached(void *arg)
{
    states_until_t *until = arg;
    return until->st->n >= until->n;
}

Test(fake_kernel, big_output_nobody_awaits_is_passed_over_while_status_still_counts)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;
    size_t seen;

    run_to_end(k, "afterwards 200000", &rec);
    cr_expect_eq(kmgr_kernel_unawaited_messages(k), 0);
    seen = st.n;
    /* 500 ms later: 200 KB of output for the finished run, then busy and idle without a parent */
    cr_assert(poll_loop_run_until(kt.loop, passed_over_one, k, 10000), "the late output was passed over unread");
    states_until_t until = {&st, seen + 2};
    cr_assert(poll_loop_run_until(kt.loop, states_reached, &until, 10000), "the small status messages were still read");
    cr_expect_eq(st.log[seen], KMGR_KERNEL_BUSY);
    cr_expect_eq(st.log[seen + 1], KMGR_KERNEL_IDLE);
    cr_expect_eq(rec.after_final, 0, "nothing reached the finished request");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
    poll_loop_run_for(kt.loop, 100); /* the destroyed kernel is freed from the loop */
    expect_lost_output(0, 1, "the operators' total (kgate_kernel_unawaited_messages_total) keeps a freed kernel's count");
}

/* ---- messages over the cap (kmgr_config_t.max_message_bytes) ---- */

#define SMALL_CAP ((size_t)1 << 20)

static void setup_capped(void)
{
    kmgr_config_t config = {.max_message_bytes = SMALL_CAP};
    kt_setup_config(&config);
    fake = kt_fake_spec(fake_argv, 3);
}

TestSuite(fake_kernel_capped, .init = setup_capped, .fini = teardown, .timeout = 60);

/* After a message over the cap, the next request runs as usual: its output, its reply, its end. */
static void expect_next_request_works(kmgr_kernel_t *k)
{
    kt_rec_t rec;
    uint64_t took = run_to_end(k, "anything", &rec);

    cr_expect_str_eq(rec.out, "genuine\n", "the iopub connection carries output again");
    cr_expect_eq(rec.n_reply, 1, "the shell connection carries replies again");
    cr_expect_eq(rec.n_done, 1);
    cr_expect_eq(rec.n_dropped, 0);
    /* not the 5 s grace for a lost status idle */
    cr_expect_lt(took, 4000, "the next request took %llu ms", (unsigned long long)took);
    cr_expect(kt_wait_state(k, KMGR_KERNEL_IDLE, 5000), "the kernel is idle again (state %s)",
              kmgr_kernel_state_name(kmgr_kernel_state(k)));
    kt_rec_dispose(&rec);
}

/* A signed stream message over the cap comes cut to the head of its text, the cap's worth, with the exact count of the rest. */
Test(fake_kernel_capped, an_oversized_stream_message_delivers_its_head_and_counts_the_rest)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;
    uint64_t took;

    took = run_to_end(k, "oversized 2000000", &rec);
    cr_expect_eq(rec.n_dropped, 0, "nothing that tracks the request was lost");
    cr_expect_eq(rec.n_cut, 1);
    /* the head: the cap less room for the message's other frames (kmgr_overcap_head_max) */
    cr_expect_eq(rec.out_bytes, strlen("genuine\n") + SMALL_CAP - 64 * 1024, "the head is the cap's worth of its text");
    cr_expect_eq(rec.text_dropped, 2000000 - (SMALL_CAP - 64 * 1024), "the rest is counted exactly");
    cr_expect(strncmp(rec.out, "genuine\nooo", 11) == 0, "%.20s", rec.out);
    cr_expect_eq(rec.n_done, 1, "it ends as done, not failed");
    cr_expect_eq(rec.n_reply, 1);
    /* the connection goes on: its status idle ends it, not the 5 s grace */
    cr_expect_lt(took, 4000, "the request took %llu ms to end", (unsigned long long)took);
    cr_expect_eq(kmgr_kernel_oversized_messages(k), 1);
    kt_rec_dispose(&rec);
    expect_next_request_works(k);
    cr_expect_eq(kmgr_kernel_oversized_messages(k), 1);
    kmgr_kernel_destroy(k);
}

/* A request that keeps 1000 bytes of text (kmgr_request_set_text_room: a run's output budget left) gets a head of 1000 bytes,
 * not the cap's: the memory of a message over the cap follows what its reader keeps; the count of the rest stays exact. */
Test(fake_kernel_capped, an_oversized_stream_message_keeps_no_more_head_than_its_request_keeps)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "oversized 2000000", &rec), 0);
    kmgr_request_set_text_room(rec.req, 1000);
    cr_assert(kt_wait_rec(&rec, 15000));
    cr_expect_eq(rec.n_cut, 1);
    cr_expect_eq(rec.out_bytes, strlen("genuine\n") + 1000, "a head of %zu bytes for a request that keeps 1000",
                 rec.out_bytes - strlen("genuine\n"));
    cr_expect_eq(rec.text_dropped, 2000000 - 1000, "the rest is counted exactly");
    cr_expect_eq(rec.n_done, 1);
    kt_rec_dispose(&rec);
    expect_next_request_works(k);
    kmgr_kernel_destroy(k);
}

/* Multi-byte characters and escapes, another member before the name: the head ends on a character, the count is of decoded
 * bytes (3 per "\u00e9\n", which the kernel encodes in 4). */
Test(fake_kernel_capped, an_oversized_stream_message_is_cut_between_characters_and_counted_decoded)
{
    enum { N = 700000 };
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    run_to_end(k, "oversized-mixed 700000", &rec);
    cr_expect_eq(rec.n_dropped, 0);
    cr_expect_eq(rec.n_cut, 1);
    cr_expect_gt(rec.err_bytes, SMALL_CAP / 2, "a head of %zu bytes", rec.err_bytes);
    cr_expect_leq(rec.err_bytes, SMALL_CAP);
    cr_expect_eq(rec.err_bytes + rec.text_dropped, (uint64_t)N * 3, "head %zu + dropped %llu", rec.err_bytes,
                 (unsigned long long)rec.text_dropped);
    cr_expect(strncmp(rec.err_text, "\xc3\xa9\n\xc3\xa9\n", 6) == 0);
    cr_expect_eq(rec.n_done, 1);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/* Signed with another key: nothing of it is delivered, and it is dropped as a small forged message is (not the kernel's: no
 * request is told of a loss, and the kernel's count of messages over the cap does not move). */
Test(fake_kernel_capped, a_forged_oversized_stream_message_delivers_nothing)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    run_to_end(k, "oversized-forged 2000000", &rec);
    cr_expect_eq(rec.n_cut, 0);
    cr_expect_eq(rec.n_dropped, 0, "a forged message is not one of the kernel's that was lost");
    cr_expect_str_eq(rec.out, "genuine\n");
    cr_expect_eq(rec.out_bytes, strlen("genuine\n"));
    cr_expect_eq(rec.n_done, 1);
    cr_expect_eq(kmgr_kernel_oversized_messages(k), 0);
    kt_rec_dispose(&rec);
    expect_next_request_works(k);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel_capped, an_oversized_reply_is_reported_and_the_next_request_completes)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;
    uint64_t took;

    took = run_to_end(k, "oversized-reply 2000000", &rec);
    cr_expect_eq(rec.n_dropped, 1);
    cr_expect_eq(rec.n_done, 1, "it ends as done once the kernel answered a later probe");
    cr_expect_eq(rec.n_reply, 0, "the reply was the dropped message");
    cr_expect_str_eq(rec.out, "genuine\n", "iopub was not affected");
    cr_expect_lt(took, 4000, "the request took %llu ms to end", (unsigned long long)took);
    cr_expect_eq(kmgr_kernel_oversized_messages(k), 1);
    kt_rec_dispose(&rec);
    expect_next_request_works(k);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel_capped, a_message_just_under_the_cap_arrives_whole)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    /* the content frame holds the text plus some 30 bytes of JSON */
    run_to_end(k, "burst 1 1000000 0", &rec);
    cr_expect_eq(rec.n_dropped, 0);
    cr_expect_eq(rec.out_bytes, 1000000 + strlen("genuine\n"));
    cr_expect_eq(kmgr_kernel_oversized_messages(k), 0);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel_capped, a_kernel_that_goes_away_is_not_taken_for_an_oversized_message)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "burst 1 10 3000", &rec), 0);
    poll_loop_run_for(kt.loop, 300);
    /* every connection drops with it, and kgate retries them: that is no message over the cap */
    kill(kmgr_kernel_pid(k), SIGKILL);
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_eq(rec.n_failed, 1);
    cr_expect_eq(rec.err, KSYS_EDIED);
    cr_expect_eq(rec.n_dropped, 0);
    cr_expect_eq(kmgr_kernel_oversized_messages(k), 0);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel_capped, an_oversized_input_request_is_answered_with_an_empty_line)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    /* the kernel would wait for an answer to the prompt it sent forever */
    run_to_end(k, "oversized-input 2000000", &rec);
    cr_expect_eq(rec.n_dropped, 1);
    cr_expect_eq(rec.n_input, 0);
    cr_expect_eq(rec.n_done, 1);
    cr_expect_str_eq(rec.out, "genuine\ngot []\n");
    kt_rec_dispose(&rec);
    expect_next_request_works(k);
    kmgr_kernel_destroy(k);
}
