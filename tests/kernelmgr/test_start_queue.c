/* tests/kernelmgr/test_start_queue.c: the start queue (kernelmgr/src/start_queue.c): against real ipykernel processes, and
 * --max-forking-kernels against the fake template (tests/kernelmgr/fake_template/) and its fake kernels. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ksys/errors.h"
#include "kmgr_test.h"
#include "manager_private.h"
#include "template.h"

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

/* The manager with `config` (its template_script set here) and the fake template in `mode` (KGATE_FAKE_TPL), ready. */
static void setup_mode_config(const char *mode, kmgr_config_t config)
{
    kmgr_start_stats_t s;

    config.template_script = FAKE_DIR "/fake_template.py";
    setenv("KGATE_FAKE_TPL", mode, 1);
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

/* `max_pending`: the template's request queue (kmgr_config_t.template_max_pending; 0: the default) */
static void setup_mode_pending(const char *mode, unsigned max_pending)
{
    setup_mode_config(
        mode,
        (kmgr_config_t){.max_starting = 1, .max_forking = MAX_FORKING, .max_start_queue = 16, .template_max_pending = max_pending});
}

static void setup_mode(const char *mode)
{
    setup_mode_pending(mode, 0);
}

static void setup_forking(void)
{
    setup_mode("ok");
}

static void teardown_forking(void)
{
    kt_teardown();
    kmgr_kernelspec_destroy(forkable);
    kmgr_kernelspec_destroy(spawned_only);
}

TestSuite(forking, .init = setup_forking, .fini = teardown_forking, .timeout = 120);

/* A start of `spec` reporting to `st`, asserted accepted (queued or launched). */
static kmgr_kernel_t *start_of(kmgr_kernelspec_t *spec, kt_states_t *st)
{
    kmgr_kernel_t *k = NULL;
    cr_assert_eq(kmgr_kernel_start(kt.mgr, &(kmgr_kernel_options_t){.spec = spec, .on_state = kt_on_state, .data = st}, &k), 0);
    return k;
}

/* `n` starts of the forkable spec in order, start i in k[i] reporting to st[i]. */
static void start_forkable(kmgr_kernel_t **k, kt_states_t *st, size_t n)
{
    for (size_t i = 0; i != n; ++i)
        k[i] = start_of(forkable, &st[i]);
}

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

    start_forkable(k, st, NFORKED);
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

    f1 = start_of(forkable, &st[0]);
    sp = start_of(spawned_only, &st[1]);
    f2 = start_of(forkable, &st[2]);
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
    sp2 = start_of(spawned_only, &st[3]);
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

/* ---- a template whose request queue is full: a start it would refuse is spawned, so it obeys max_starting ---- */

static void setup_full_template_queue(void)
{
    setup_mode_pending("ok", 2);
}

TestSuite(forking_queue_full, .init = setup_full_template_queue, .fini = teardown_forking, .timeout = 120);

/* Two forks fill the template's queue (2): a third start, which max_forking (3) would let go, would be refused by the template
 * and spawned, a second kernel launching beyond max_starting (1); it waits instead, and forks once there is room. */
Test(forking_queue_full, a_start_the_full_template_would_refuse_waits_for_max_starting_instead_of_spawning)
{
    kt_states_t st[3] = {0};
    kmgr_kernel_t *k[3];
    unsigned launching, queued;
    kmgr_start_stats_t s;

    start_forkable(k, st, 3);
    cr_expect(launched_not_ready(k[0]) && launched_not_ready(k[1]), "the first two starts went to the template");
    cr_expect_str_eq(kmgr_kernel_connection_file(k[2]), "", "the third waits: its template's queue is full, max_starting is 1");
    kmgr_manager_count_starting(kt.mgr, &launching, &queued);
    cr_expect(launching == 2 && queued == 1, "2 launching, 1 queued (%u, %u)", launching, queued);
    for (int i = 0; i != 3; ++i)
        cr_assert(kt_wait_state(k[i], KMGR_KERNEL_IDLE, 30000), "start %d ready within 30 s", i);
    for (int i = 0; i != 3; ++i)
        cr_expect_str_eq(kmgr_kernel_start_path(k[i]), "forked", "start %d forked", i);
    kmgr_manager_start_stats(kt.mgr, &s);
    cr_expect_eq(s.fallback[KMGR_FALLBACK_QUEUE_FULL], 0, "no start was refused for a full queue");
    for (int i = 0; i != 3; ++i)
        kmgr_kernel_destroy(k[i]);
}

/* ---- a template that dies with starts waiting on it: they are spawned through the start queue, max_starting at a time ---- */

#define FALLBACK_MAX_STARTING 2
#define NFALLBACK 6

/* A template that never answers (the fake's "silent"), so that every start forking waits on it until it is killed. */
static void setup_silent_template(void)
{
    setup_mode_config("silent",
                      (kmgr_config_t){.max_starting = FALLBACK_MAX_STARTING, .max_forking = NFALLBACK, .max_start_queue = 16});
}

TestSuite(template_fallback, .init = setup_silent_template, .fini = teardown_forking, .timeout = 120);

static pid_t the_template_pid(void)
{
    return KMGR_FROM_MEMBER(kmgr_template_t, link, kt.mgr->templates.next)->pid;
}

typedef struct st_fallback_watch_t {
    kmgr_kernel_t **k;
    size_t n;
    unsigned pass;
    unsigned spawned_at[NFALLBACK]; /* the loop pass after which kernel i first had a process (0: never) */
    unsigned max_launched;          /* the most seen with a process and not ready at once, after any loop pass */
} fallback_watch_t;

/* After each loop pass: how many have a process and are not ready, when each got its process; done when none is starting. */
static int all_settled_watching(void *arg)
{
    fallback_watch_t *w = arg;
    unsigned launched = 0, settled = 0;

    ++w->pass;
    for (size_t i = 0; i != w->n; ++i) {
        kmgr_kernel_state_t state = kmgr_kernel_state(w->k[i]);
        if (kmgr_kernel_pid(w->k[i]) != 0 && w->spawned_at[i] == 0)
            w->spawned_at[i] = w->pass;
        launched += kmgr_kernel_pid(w->k[i]) != 0 && state == KMGR_KERNEL_STARTING;
        settled += state == KMGR_KERNEL_IDLE || state == KMGR_KERNEL_DEAD;
    }
    if (launched > w->max_launched)
        w->max_launched = launched;
    return settled == w->n;
}

/* Six starts wait on their template's answers (max_forking 6) when it is killed: each is spawned after all, but at most
 * max_starting (2) at a time, in the order of the starts, not six full interpreters at once; each ends ready, spawned, counted
 * as a fallback for the template's death. */
Test(template_fallback, starts_that_lose_their_template_are_spawned_max_starting_at_a_time_in_order)
{
    kt_states_t st[NFALLBACK] = {0};
    kmgr_kernel_t *k[NFALLBACK];
    fallback_watch_t w = {.k = k, .n = NFALLBACK};
    unsigned launching, queued;
    kmgr_start_stats_t s;

    start_forkable(k, st, NFALLBACK);
    poll_loop_run_for(kt.loop, 100);
    kmgr_manager_count_starting(kt.mgr, &launching, &queued);
    cr_assert(launching == NFALLBACK && queued == 0, "every start waits on the template (%u launching, %u queued)", launching,
              queued);
    for (int i = 0; i != NFALLBACK; ++i)
        cr_assert_eq(kmgr_kernel_pid(k[i]), 0, "start %d: the silent template has not answered", i);
    cr_assert_eq(kill(the_template_pid(), SIGKILL), 0);
    cr_assert(poll_loop_run_until(kt.loop, all_settled_watching, &w, 60000), "every start settled within 60 s");
    cr_expect_leq(w.max_launched, FALLBACK_MAX_STARTING, "never more than %d spawned and not ready at once (saw %u)",
                  FALLBACK_MAX_STARTING, w.max_launched);
    for (int i = 0; i != NFALLBACK; ++i) {
        cr_expect_eq(kmgr_kernel_state(k[i]), KMGR_KERNEL_IDLE, "start %d ready (%s)", i, kmgr_kernel_exit_reason(k[i]));
        cr_expect_str_eq(kmgr_kernel_start_path(k[i]), "spawned", "start %d spawned", i);
        if (i != 0)
            cr_expect_leq(w.spawned_at[i - 1], w.spawned_at[i], "start %d spawned no later than start %d (passes %u, %u)", i - 1, i,
                          w.spawned_at[i - 1], w.spawned_at[i]);
    }
    kmgr_manager_start_stats(kt.mgr, &s);
    cr_expect_eq(s.fallback[KMGR_FALLBACK_DIED], NFALLBACK, "each counted as a fallback for the template's death (%llu)",
                 (unsigned long long)s.fallback[KMGR_FALLBACK_DIED]);
    cr_expect_eq(s.forked, 0);
    for (int i = 0; i != NFALLBACK; ++i)
        kmgr_kernel_destroy(k[i]);
}

/* A start deleted while it waits in the queue for its fallback spawn is never spawned, and its place goes to the next. */
Test(template_fallback, a_start_deleted_while_its_fallback_waits_is_never_spawned)
{
    kt_states_t st[NFALLBACK] = {0};
    kmgr_kernel_t *k[NFALLBACK];
    kmgr_start_stats_t s;

    start_forkable(k, st, NFALLBACK);
    poll_loop_run_for(kt.loop, 100);
    cr_assert_eq(kill(the_template_pid(), SIGKILL), 0);
    for (int waited = 0; kmgr_kernel_pid(k[0]) == 0; waited += 5) {
        cr_assert(waited < 30000, "the first start spawned within 30 s");
        poll_loop_run_once(kt.loop, 5);
    }
    cr_assert_eq(kmgr_kernel_pid(k[NFALLBACK - 1]), 0, "the last start waits for its spawn");
    kmgr_kernel_destroy(k[NFALLBACK - 1]);
    for (int i = 0; i != NFALLBACK - 1; ++i)
        cr_assert(kt_wait_state(k[i], KMGR_KERNEL_IDLE, 30000), "start %d ready (%s)", i, kmgr_kernel_exit_reason(k[i]));
    poll_loop_run_for(kt.loop, 200);
    kmgr_manager_start_stats(kt.mgr, &s);
    cr_expect_eq(s.fallback[KMGR_FALLBACK_DIED], NFALLBACK - 1, "the deleted start was not spawned (%llu spawned)",
                 (unsigned long long)s.fallback[KMGR_FALLBACK_DIED]);
    cr_expect_eq(kmgr_manager_num_processes(kt.mgr), NFALLBACK - 1, "kgate holds the live kernels' processes alone");
    for (int i = 0; i != NFALLBACK - 1; ++i)
        kmgr_kernel_destroy(k[i]);
}

/* ---- a kernel still starting, interrupted or destroyed (the fake template answers two requests at once: batch:2) ---- */

static void setup_batch(void)
{
    setup_mode("batch:2");
}

TestSuite(starting, .init = setup_batch, .fini = teardown_forking, .timeout = 120);

/* Neither dead nor restarted, nor ever told so: it started as if nothing had happened. */
static void expect_no_death(kmgr_kernel_t *k, const kt_states_t *st)
{
    cr_expect(!kt_states_saw(st, KMGR_KERNEL_DEAD), "no DEAD notice");
    cr_expect_str_eq(kmgr_kernel_last_death(k), "", "no death recorded");
    cr_expect_eq(kmgr_kernel_auto_restarts(k, NULL, NULL), 0, "no restart counted");
}

/* Interrupted while its template's answer is awaited, while queued, and while started and not ready (a SIGINT then would kill
 * the fake kernel, as it kills a Python kernel before ipykernel's handler is installed): 0, and each becomes ready. */
Test(starting, an_interrupt_of_a_kernel_not_ready_is_a_no_op_not_a_death)
{
    kt_states_t st[3] = {0};
    kmgr_kernel_t *f1, *f2, *sp;

    f1 = start_of(forkable, &st[0]); /* held by the template until a second request comes */
    poll_loop_run_for(kt.loop, 100);
    cr_expect_eq(kmgr_kernel_pid(f1), 0, "its template has not answered");
    cr_expect_eq(kmgr_kernel_interrupt(f1), 0, "an interrupt while the fork is awaited is no failure");
    f2 = start_of(forkable, &st[1]);     /* max_forking 3: it goes, and the template answers both */
    sp = start_of(spawned_only, &st[2]); /* max_starting 1: queued */
    cr_expect_str_eq(kmgr_kernel_connection_file(sp), "", "queued");
    cr_expect_eq(kmgr_kernel_interrupt(sp), 0, "an interrupt of a queued start is no failure");
    /* each interrupted as soon as its process exists, before it is ready */
    kmgr_kernel_t *each[3] = {f1, f2, sp};
    for (int i = 0; i != 3; ++i) {
        for (int waited = 0; kmgr_kernel_pid(each[i]) == 0; waited += 2) {
            cr_assert(waited < 30000, "kernel %d has its process within 30 s", i);
            poll_loop_run_once(kt.loop, 2);
        }
        if (kmgr_kernel_state(each[i]) == KMGR_KERNEL_STARTING)
            cr_expect_eq(kmgr_kernel_interrupt(each[i]), 0, "an interrupt of kernel %d, not ready, is no failure", i);
    }
    cr_expect_eq(kmgr_kernel_state(sp), KMGR_KERNEL_STARTING, "the spawned one was interrupted before it was ready");
    for (int i = 0; i != 3; ++i) {
        cr_assert(kt_wait_state(each[i], KMGR_KERNEL_IDLE, 30000), "kernel %d ready (%s)", i, kmgr_kernel_exit_reason(each[i]));
        expect_no_death(each[i], &st[i]);
    }
    cr_expect_str_eq(kmgr_kernel_start_path(f1), "forked");
    cr_expect_str_eq(kmgr_kernel_start_path(f2), "forked");
    for (int i = 0; i != 3; ++i)
        kmgr_kernel_destroy(each[i]);
}

/* The children of process `pid` (its main thread's), at most `max`; their count. */
static size_t children_of(pid_t pid, pid_t *out, size_t max)
{
    char path[96];
    FILE *fp;
    size_t n = 0;
    int child;

    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    if ((fp = fopen(path, "r")) == NULL)
        return 0;
    while (n < max && fscanf(fp, "%d", &child) == 1)
        out[n++] = (pid_t)child;
    fclose(fp);
    return n;
}

/* Destroyed (a context deleted) while its template's answer is awaited: the kernel forked for it is killed when the answer
 * comes, never spawned; the start behind it goes. */
Test(starting, a_kernel_destroyed_before_its_fork_answer_leaves_no_process)
{
    kt_states_t st[2] = {0};
    pid_t tpl = KMGR_FROM_MEMBER(kmgr_template_t, link, kt.mgr->templates.next)->pid, kids[8];
    kmgr_kernel_t *gone = start_of(forkable, &st[0]), *next;
    kmgr_start_stats_t s;
    size_t n;

    poll_loop_run_for(kt.loop, 100);
    cr_assert_eq(kmgr_kernel_pid(gone), 0, "its template has not answered");
    kmgr_kernel_destroy(gone);
    next = start_of(forkable, &st[1]); /* the template answers both now */
    cr_assert(kt_wait_state(next, KMGR_KERNEL_IDLE, 30000));
    /* the template's children: the spare kernels it forked, the one given up killed and reaped */
    for (int waited = 0;; waited += 20) {
        n = children_of(tpl, kids, 8);
        if (n == 1 || waited >= 10000)
            break;
        poll_loop_run_once(kt.loop, 20);
    }
    cr_expect_eq(n, 1, "one forked kernel left under the template (%zu)", n);
    cr_expect_eq(kids[0], kmgr_kernel_pid(next), "the one left is the live kernel's");
    kmgr_manager_start_stats(kt.mgr, &s);
    cr_expect_eq(s.spawned, 0, "nothing spawned for a kernel given up");
    cr_expect_eq(kmgr_manager_num_processes(kt.mgr), 1, "kgate holds one process, the live kernel's");
    kmgr_kernel_destroy(next);
}

/* ---- (branch fixes) a fork request the template cannot be sent ("setup": over KMGR_TPL_MAX_FRAME, an rlimit it does not
 * know) is a spawned start: it obeys max_starting as the other fallbacks do ---- */

/* An environment that makes a fork request over the template's 1 MiB frame (12 variables of 100 KB: each under the kernel's
 * 128 KiB bound on one exec string, so the spawn after all works). */
static json_t *env_over_the_frame(void)
{
    static char value[100 * 1000 + 1];
    json_t *env = json_object();
    char name[16];

    memset(value, 'v', sizeof(value) - 1);
    for (int i = 0; i != 12; ++i) {
        snprintf(name, sizeof(name), "KGATE_BIG_%d", i);
        json_object_set_new(env, name, json_string(value));
    }
    return env;
}

/* Six starts whose requests the template cannot be sent (max_forking 6, max_starting 2): each is spawned, at most 2 at a time
 * and in start order, not six full interpreters at once (before: all six spawned at once, "setup" fallbacks past
 * max_starting); each ends ready, counted as a "setup" fallback. */
Test(template_fallback, starts_whose_request_cannot_be_sent_are_spawned_max_starting_at_a_time_in_order)
{
    kt_states_t st[NFALLBACK] = {0};
    kmgr_kernel_t *k[NFALLBACK];
    fallback_watch_t w = {.k = k, .n = NFALLBACK};
    json_t *env = env_over_the_frame();
    unsigned launching, queued;
    kmgr_start_stats_t s;

    for (int i = 0; i != NFALLBACK; ++i)
        cr_assert_eq(
            kmgr_kernel_start(
                kt.mgr, &(kmgr_kernel_options_t){.spec = forkable, .env = env, .on_state = kt_on_state, .data = &st[i]}, &k[i]),
            0);
    json_decref(env);
    kmgr_manager_count_starting(kt.mgr, &launching, &queued);
    cr_expect(launching <= FALLBACK_MAX_STARTING, "%u spawned at once (max_starting %d), %u waiting", launching,
              FALLBACK_MAX_STARTING, queued);
    cr_assert(poll_loop_run_until(kt.loop, all_settled_watching, &w, 60000), "every start settled within 60 s");
    cr_expect_leq(w.max_launched, FALLBACK_MAX_STARTING, "never more than %d spawned and not ready at once (saw %u)",
                  FALLBACK_MAX_STARTING, w.max_launched);
    for (int i = 0; i != NFALLBACK; ++i) {
        cr_expect_eq(kmgr_kernel_state(k[i]), KMGR_KERNEL_IDLE, "start %d ready (%s)", i, kmgr_kernel_exit_reason(k[i]));
        cr_expect_str_eq(kmgr_kernel_start_path(k[i]), "spawned", "start %d spawned", i);
        if (i != 0)
            cr_expect_leq(w.spawned_at[i - 1], w.spawned_at[i], "start %d spawned no later than start %d (passes %u, %u)", i - 1, i,
                          w.spawned_at[i - 1], w.spawned_at[i]);
    }
    kmgr_manager_start_stats(kt.mgr, &s);
    cr_expect_eq(s.fallback[KMGR_FALLBACK_SETUP], NFALLBACK, "each counted as a setup fallback (%llu)",
                 (unsigned long long)s.fallback[KMGR_FALLBACK_SETUP]);
    for (int i = 0; i != NFALLBACK; ++i)
        kmgr_kernel_destroy(k[i]);
}

/* ---- (branch fixes) max_start_queue holds with starts waiting on a template that fails: a start that forks takes a place in
 * the queue it may come back to ---- */

#define BOUND_QUEUE 3
#define BOUND_STARTS 7

static void setup_silent_small_queue(void)
{
    setup_mode_config("silent", (kmgr_config_t){.max_starting = 1, .max_forking = 4, .max_start_queue = BOUND_QUEUE});
}

TestSuite(start_queue_bound, .init = setup_silent_small_queue, .fini = teardown_forking, .timeout = 120);

typedef struct st_bound_watch_t {
    kmgr_kernel_t **k;
    size_t n;
    unsigned max_queued; /* the most starts seen waiting in the queue after any loop pass */
} bound_watch_t;

static int all_ready_counting_the_queue(void *arg)
{
    bound_watch_t *w = arg;
    unsigned launching, queued, ready = 0;

    kmgr_manager_count_starting(kt.mgr, &launching, &queued);
    if (queued > w->max_queued)
        w->max_queued = queued;
    for (size_t i = 0; i != w->n; ++i)
        ready += kmgr_kernel_state(w->k[i]) == KMGR_KERNEL_IDLE;
    return ready == w->n;
}

/* Seven starts on a template that never answers (max_forking 4, max_starting 1, a queue of 3), then the template killed: the
 * starts that wait on it come back to the queue. Never more than 3 wait in it (before: 4 came back on top of 3 queued, 7),
 * because the starts beyond the places were refused at once (KSYS_ESTARTQUEUE); none accepted is dropped: each ends ready. */
Test(start_queue_bound, starts_that_come_back_from_a_dead_template_never_overfill_the_queue)
{
    kt_states_t st[BOUND_STARTS] = {0};
    kmgr_kernel_t *k[BOUND_STARTS];
    bound_watch_t w = {.k = k};
    int ret;

    for (int i = 0; i != BOUND_STARTS; ++i) {
        ret =
            kmgr_kernel_start(kt.mgr, &(kmgr_kernel_options_t){.spec = forkable, .on_state = kt_on_state, .data = &st[i]}, &k[w.n]);
        cr_assert(ret == 0 || ret == KSYS_ESTARTQUEUE, "start %d: %d", i, ret);
        w.n += ret == 0;
    }
    cr_expect_eq(w.n, BOUND_QUEUE, "as many starts accepted as the queue has places (%zu)", w.n);
    poll_loop_run_for(kt.loop, 100);
    cr_assert_eq(kill(the_template_pid(), SIGKILL), 0);
    cr_assert(poll_loop_run_until(kt.loop, all_ready_counting_the_queue, &w, 60000), "every start accepted is ready within 60 s");
    cr_expect_leq(w.max_queued, BOUND_QUEUE, "at most %d starts waited in the queue (saw %u)", BOUND_QUEUE, w.max_queued);
    for (size_t i = 0; i != w.n; ++i)
        cr_expect_str_eq(kmgr_kernel_start_path(k[i]), "spawned", "start %zu spawned", i);
    for (size_t i = 0; i != w.n; ++i)
        kmgr_kernel_destroy(k[i]);
}
