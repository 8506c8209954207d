/* tests/kernelmgr/test_start_queue.c: the start queue (kernelmgr/src/start_queue.c): against real ipykernel processes, and
 * --max-forking-kernels against the fake template (tests/kernelmgr/fake_template/) and its fake kernels. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include "kmgr_test.h"

static void setup_one_at_a_time(void)
{
    kmgr_config_t config = {.max_starting = 1, .max_start_queue = 4};
    kt_setup_config(&config);
}

TestSuite(start_queue, .init = setup_one_at_a_time, .fini = kt_teardown, .timeout = 90);

/* One start at a time: the second waits, and is launched in the loop pass in which the first became ready, not at the next
 * tick (up to 50 ms later: a burst of forked kernels, ~0.1 s each, lost a quarter of its time so). */
Test(start_queue, a_queued_start_goes_when_the_one_before_is_ready)
{
    kt_states_t st[2] = {0};
    kmgr_kernel_options_t opts = {.spec = kt.python, .on_state = kt_on_state, .data = &st[1]};
    kmgr_kernel_t *first, *second = NULL;
    unsigned launching, queued;

    cr_assert_eq(
        kmgr_kernel_start(kt.mgr, &(kmgr_kernel_options_t){.spec = kt.python, .on_state = kt_on_state, .data = &st[0]}, &first), 0);
    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &second), 0);
    kmgr_manager_count_starting(kt.mgr, &launching, &queued);
    cr_assert(launching == 1 && queued == 1, "one launching, one queued (%u, %u)", launching, queued);
    cr_assert(kt_wait_state(first, KMGR_KERNEL_IDLE, 30000), "the first kernel is ready within 30 s");
    kmgr_manager_count_starting(kt.mgr, &launching, &queued);
    cr_expect(launching == 1 && queued == 0, "the second was launched when the first became ready (%u launching, %u queued)",
              launching, queued);
    cr_assert(kt_wait_state(second, KMGR_KERNEL_IDLE, 30000), "the second kernel is ready within 30 s");
}

/* ---- --max-forking-kernels: starts that fork from a ready template (the fake one, tests/kernelmgr/fake_template/) ---- */

#define FAKE_DIR KGATE_SOURCE_DIR "/tests/kernelmgr/fake_template"
#define MAX_FORKING 3
#define NFORKED 7

/* an ipykernel spec (a template forks it: fake_template/ipykernel_launcher.py on PYTHONPATH), and one no template forks */
static const char *const forkable_argv[] = {"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"};
static const char *const spawned_argv[] = {"/usr/bin/python3", KGATE_SOURCE_DIR "/tests/kernelmgr/fake_kernel.py",
                                           "{connection_file}"};
static kmgr_kernelspec_t *forkable, *spawned_only;

static void setup_forking(void)
{
    kmgr_config_t config = {
        .max_starting = 1, .max_forking = MAX_FORKING, .max_start_queue = 16, .template_script = FAKE_DIR "/fake_template.py"};
    kmgr_start_stats_t s;

    setenv("KGATE_FAKE_TPL", "ok", 1);
    setenv("PYTHONPATH", FAKE_DIR, 1);
    kt_setup_config(&config);
    forkable = kt_fake_spec(forkable_argv, 5);
    spawned_only = kt_fake_spec(spawned_argv, 3);
    cr_assert_eq(kmgr_manager_use_template(kt.mgr, forkable), 0);
    for (int waited = 0; kmgr_manager_start_stats(kt.mgr, &s), s.templates_running != 1; waited += 20) {
        cr_assert(waited < 30000, "the fake template is ready within 30 s");
        poll_loop_run_once(kt.loop, 20);
    }
}

static void teardown_forking(void)
{
    kt_teardown();
    kmgr_kernelspec_destroy(forkable);
    kmgr_kernelspec_destroy(spawned_only);
}

TestSuite(forking, .init = setup_forking, .fini = teardown_forking, .timeout = 120);

/* Started and not ready: launched (it has a connection file: a queued start has none) and still starting. */
static int launched_not_ready(const kmgr_kernel_t *k)
{
    return kmgr_kernel_connection_file(k)[0] != '\0' && kmgr_kernel_state(k) == KMGR_KERNEL_STARTING;
}

typedef struct st_watch_t {
    kmgr_kernel_t **k;
    size_t n;
    unsigned max_launched;   /* the most seen launched and not ready at once, after any loop pass */
    unsigned idle_slot_seen; /* passes after which a start waited while fewer than MAX_FORKING were starting */
} watch_t;

/* After each loop pass: how many are starting, and whether a queued one waits while a place is free. */
static int all_ready_watching(void *arg)
{
    watch_t *w = arg;
    unsigned launched = 0, queued = 0, ready = 0;

    for (size_t i = 0; i != w->n; ++i) {
        launched += launched_not_ready(w->k[i]);
        queued += kmgr_kernel_connection_file(w->k[i])[0] == '\0';
        ready += kmgr_kernel_state(w->k[i]) == KMGR_KERNEL_IDLE;
    }
    if (launched > w->max_launched)
        w->max_launched = launched;
    w->idle_slot_seen += queued != 0 && launched < MAX_FORKING;
    return ready == w->n;
}

/* More forked starts than the bound: MAX_FORKING at once (not max_starting's 1), the others queued in order, each going in the
 * loop pass in which one became ready; every one forked. */
Test(forking, forked_starts_are_bounded_by_max_forking_and_a_queued_one_goes_when_one_is_ready)
{
    kt_states_t st[NFORKED] = {0};
    kmgr_kernel_t *k[NFORKED];
    watch_t w = {.k = k, .n = NFORKED};
    unsigned launching, queued;
    kmgr_start_stats_t s;

    for (int i = 0; i != NFORKED; ++i)
        cr_assert_eq(
            kmgr_kernel_start(kt.mgr, &(kmgr_kernel_options_t){.spec = forkable, .on_state = kt_on_state, .data = &st[i]}, &k[i]),
            0);
    for (int i = 0; i != NFORKED; ++i)
        cr_expect_eq(launched_not_ready(k[i]), i < MAX_FORKING, "start %d: %s", i, i < MAX_FORKING ? "launched" : "queued");
    kmgr_manager_count_starting(kt.mgr, &launching, &queued);
    cr_expect(launching == MAX_FORKING && queued == NFORKED - MAX_FORKING, "%d launching and %d queued (%u, %u)", MAX_FORKING,
              NFORKED - MAX_FORKING, launching, queued);
    cr_assert(poll_loop_run_until(kt.loop, all_ready_watching, &w, 60000), "every kernel ready within 60 s");
    cr_expect_eq(w.max_launched, MAX_FORKING, "never more than %d started and not ready at once (saw %u)", MAX_FORKING,
                 w.max_launched);
    cr_expect_eq(w.idle_slot_seen, 0,
                 "a queued start went in the pass in which a kernel became ready (%u passes left a place "
                 "free while a start waited)",
                 w.idle_slot_seen);
    for (int i = 0; i != NFORKED; ++i)
        cr_expect_str_eq(kmgr_kernel_start_path(k[i]), "forked", "start %d forked", i);
    kmgr_manager_start_stats(kt.mgr, &s);
    cr_expect_eq(s.forked, NFORKED);
    for (int i = 0; i != NFORKED; ++i)
        kmgr_kernel_destroy(k[i]);
}

/* A start that will be spawned waits for max_starting (1) whatever max_forking allows, and a forked start behind it waits its
 * turn (the order of the starts is kept). */
Test(forking, a_spawned_start_obeys_max_starting_while_forked_ones_are_starting)
{
    kt_states_t st[4] = {0};
    kmgr_kernel_t *f1, *sp, *f2, *sp2;
    unsigned launching, queued;
    int f1_ready_first = 0;

    cr_assert_eq(
        kmgr_kernel_start(kt.mgr, &(kmgr_kernel_options_t){.spec = forkable, .on_state = kt_on_state, .data = &st[0]}, &f1), 0);
    cr_assert_eq(
        kmgr_kernel_start(kt.mgr, &(kmgr_kernel_options_t){.spec = spawned_only, .on_state = kt_on_state, .data = &st[1]}, &sp), 0);
    cr_assert_eq(
        kmgr_kernel_start(kt.mgr, &(kmgr_kernel_options_t){.spec = forkable, .on_state = kt_on_state, .data = &st[2]}, &f2), 0);
    cr_expect(launched_not_ready(f1), "the forked start went");
    cr_expect_str_eq(kmgr_kernel_connection_file(sp), "", "the spawned start waits: one kernel is starting (max_starting 1)");
    cr_expect_str_eq(kmgr_kernel_connection_file(f2), "", "the forked start behind it waits its turn");
    kmgr_manager_count_starting(kt.mgr, &launching, &queued);
    cr_expect(launching == 1 && queued == 2, "1 launching, 2 queued (%u, %u)", launching, queued);
    /* the spawned start is launched only once the first kernel is ready */
    for (int waited = 0; kmgr_kernel_connection_file(sp)[0] == '\0'; waited += 10) {
        cr_assert(waited < 30000, "the spawned start went within 30 s");
        poll_loop_run_once(kt.loop, 10);
    }
    f1_ready_first = kmgr_kernel_state(f1) == KMGR_KERNEL_IDLE;
    cr_expect(f1_ready_first, "the spawned start went once the forked one before it was ready");
    /* a second spawned start waits while the first is starting, though fewer than max_forking are */
    cr_assert_eq(
        kmgr_kernel_start(kt.mgr, &(kmgr_kernel_options_t){.spec = spawned_only, .on_state = kt_on_state, .data = &st[3]}, &sp2),
        0);
    if (launched_not_ready(sp))
        cr_expect_str_eq(kmgr_kernel_connection_file(sp2), "", "a spawned start waits while another is starting");
    cr_assert(kt_wait_state(sp, KMGR_KERNEL_IDLE, 30000));
    cr_assert(kt_wait_state(f2, KMGR_KERNEL_IDLE, 30000));
    cr_assert(kt_wait_state(sp2, KMGR_KERNEL_IDLE, 30000));
    cr_expect_str_eq(kmgr_kernel_start_path(f1), "forked");
    cr_expect_str_eq(kmgr_kernel_start_path(sp), "spawned");
    cr_expect_str_eq(kmgr_kernel_start_path(f2), "forked");
    kmgr_kernel_destroy(f1);
    kmgr_kernel_destroy(sp);
    kmgr_kernel_destroy(f2);
    kmgr_kernel_destroy(sp2);
}
