/* tests/kernelmgr/test_template.c: kernelmgr/src/template.c against a fake template (fake_template/fake_template.py) that
 * speaks the protocol and misbehaves on demand: the exchange never holds the loop, each answer reaches its kernel, and every
 * failure of the template spawns the starts waiting on it, with the reason counted (docs/kernels.md, "Kernels forked from a
 * template"). Kernels forked or spawned run tests/kernelmgr/fake_kernel.py (fake_template/ipykernel_launcher.py). */
#include <criterion/criterion.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "support/proc.h"
#include "kmgr_test.h"
#include "manager_private.h"
#include "template.h"

#define FAKE_DIR KGATE_SOURCE_DIR "/tests/kernelmgr/fake_template"

/* an ipykernel spec (so a template may fork it) whose `-m ipykernel_launcher` is the fake's, on PYTHONPATH */
static const char *const spec_argv[] = {"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "{connection_file}"};
static kmgr_kernelspec_t *spec;
static kt_states_t states[8];

static void setup_config(const char *mode, kmgr_config_t config)
{
    config.template_script = FAKE_DIR "/fake_template.py";
    setenv("KGATE_FAKE_TPL", mode, 1);
    setenv("PYTHONPATH", FAKE_DIR, 1);
    memset(states, 0, sizeof(states));
    kt_setup_config(&config);
    spec = kt_fake_spec(spec_argv, 5);
    cr_assert_eq(kmgr_manager_use_template(kt.mgr, spec), 0);
}

static void setup_with(const char *mode, unsigned max_pending)
{
    setup_config(mode, (kmgr_config_t){.template_max_pending = max_pending});
}

static void teardown(void)
{
    kt_teardown();
    kmgr_kernelspec_destroy(spec);
}

static kmgr_start_stats_t stats(void)
{
    kmgr_start_stats_t s;
    kmgr_manager_start_stats(kt.mgr, &s);
    return s;
}

static int template_ready(void *arg)
{
    (void)arg;
    return stats().templates_running == 1;
}

/* The manager with a fake template in `mode` (KGATE_FAKE_TPL, fake_template.py), at most `max_pending` starts waiting on
 * it (0: the default), its template ready. */
static void setup_ready(const char *mode, unsigned max_pending)
{
    setup_with(mode, max_pending);
    cr_assert(poll_loop_run_until(kt.loop, template_ready, NULL, 30000), "the fake template said ready within 30 s");
}

/* setup_ready with `config` (template_script set here). */
static void setup_ready_config(const char *mode, kmgr_config_t config)
{
    setup_config(mode, config);
    cr_assert(poll_loop_run_until(kt.loop, template_ready, NULL, 30000), "the fake template said ready within 30 s");
}

/* The (only) template's process. */
static pid_t template_pid(void)
{
    return KMGR_FROM_MEMBER(kmgr_template_t, link, kt.mgr->templates.next)->pid;
}

static kmgr_kernel_t *start(kt_states_t *st)
{
    kmgr_kernel_options_t opts = {.spec = spec, .on_state = kt_on_state, .data = st};
    kmgr_kernel_t *k = NULL;

    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    return k;
}

static void wait_ready(kmgr_kernel_t *k)
{
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000), "kernel ready within 30 s (state %s, reason '%s')",
              kmgr_kernel_state_name(kmgr_kernel_state(k)), kmgr_kernel_exit_reason(k));
}

/* `n` starts at once (states[i] follows k[i]). */
static void start_n(kmgr_kernel_t **k, int n)
{
    for (int i = 0; i != n; ++i)
        k[i] = start(&states[i]);
}

/* Each of the `n` kernels ready, started by `path` ("forked", "spawned"). */
static void expect_ready_by(kmgr_kernel_t **k, int n, const char *path)
{
    for (int i = 0; i != n; ++i) {
        wait_ready(k[i]);
        cr_expect_str_eq(kmgr_kernel_start_path(k[i]), path, "kernel %d", i);
    }
}

static void destroy_n(kmgr_kernel_t **k, int n)
{
    for (int i = 0; i != n; ++i)
        kmgr_kernel_destroy(k[i]);
}

/* The pid the fake's forked child wrote beside the kernel's connection file, or 0. */
static pid_t forked_pid_of(const kmgr_kernel_t *k)
{
    char *conn = wire_strdup(kmgr_kernel_connection_file(k)), path[4200];
    FILE *fp;
    int pid = 0;

    snprintf(path, sizeof(path), "%s/fake-pid", dirname(conn));
    free(conn);
    if ((fp = fopen(path, "r")) != NULL) {
        if (fscanf(fp, "%d", &pid) != 1)
            pid = 0;
        fclose(fp);
    }
    return (pid_t)pid;
}

static int restarted_and_ready(void *arg)
{
    kmgr_start_stats_t s = stats();
    return s.template_restarts >= *(unsigned long long *)arg && s.templates_running == 1;
}

/* The template, stopped for what it did, is started again and ready. */
static void expect_template_started_again(void)
{
    unsigned long long one = 1;
    cr_expect(poll_loop_run_until(kt.loop, restarted_and_ready, &one, 30000), "the template is started again");
}

/* The start fell back to a spawn for `reason`: spawned by kgate (its child), ready, counted once. */
static void expect_fallback(kmgr_kernel_t *k, kmgr_fallback_t reason)
{
    wait_ready(k);
    cr_expect_str_eq(kmgr_kernel_start_path(k), "spawned");
    cr_expect_eq(ts_proc_parent(kmgr_kernel_pid(k)), getpid(), "a spawned kernel is kgate's child");
    cr_expect_eq(stats().fallback[reason], 1, "one fallback counted as %s", kmgr_fallback_name(reason));
    cr_expect_eq(stats().forked, 0);
}

/* A template in `mode` misbehaves at the first fork it is asked for: the start is spawned for `reason`, the template stopped
 * and started again. */
static void expect_spawned_and_template_replaced(const char *mode, kmgr_fallback_t reason)
{
    setup_ready(mode, 0);
    kmgr_kernel_t *k = start(&states[0]);
    expect_fallback(k, reason);
    expect_template_started_again();
    kmgr_kernel_destroy(k);
}

TestSuite(template, .fini = teardown, .timeout = 120);

Test(template, a_fork_is_answered_through_the_loop_and_its_kernel_told_its_wait_status)
{
    setup_ready("ok", 0);
    kmgr_kernel_t *k = start(&states[0]);
    /* the request is on its way, the loop free: no process yet, no path */
    cr_expect_eq(kmgr_kernel_pid(k), 0, "kmgr_kernel_start returned before the template answered");
    cr_expect_str_eq(kmgr_kernel_start_path(k), "");
    wait_ready(k);
    cr_expect_str_eq(kmgr_kernel_start_path(k), "forked");
    cr_expect_eq(ts_proc_parent(kmgr_kernel_pid(k)), template_pid(), "the kernel's parent is the template");
    cr_expect_eq(forked_pid_of(k), kmgr_kernel_pid(k));
    cr_expect_eq(stats().forked, 1);
    /* "exited": the template reaps it and tells the wait status, read as for a spawned kernel */
    cr_assert_eq(kill(kmgr_kernel_pid(k), SIGKILL), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_DEAD, 10000));
    cr_expect(strstr(kmgr_kernel_exit_reason(k), "killed by signal 9") != NULL, "the template's wait status: '%s'",
              kmgr_kernel_exit_reason(k));
    kmgr_kernel_destroy(k);
}

Test(template, a_failed_fork_is_spawned_and_the_template_kept)
{
    setup_ready("fail", 0);
    pid_t tpl = template_pid();
    kmgr_kernel_t *k = start(&states[0]);
    expect_fallback(k, KMGR_FALLBACK_FAILED);
    cr_expect_eq(template_pid(), tpl, "a template that answers is not stopped");
    cr_expect_eq(stats().template_restarts, 0);
    kmgr_kernel_destroy(k);
}

Test(template, a_frame_of_no_known_kind_stops_the_template_and_the_start_is_spawned)
{
    expect_spawned_and_template_replaced("garbage", KMGR_FALLBACK_PROTOCOL);
}

Test(template, a_frame_over_the_bound_stops_the_template_and_the_start_is_spawned)
{
    expect_spawned_and_template_replaced("overbound", KMGR_FALLBACK_PROTOCOL);
}

Test(template, a_template_that_never_answers_times_out_and_the_start_is_spawned)
{
    setup_ready("silent", 0);
    kmgr_kernel_t *k = start(&states[0]);
    poll_loop_run_for(kt.loop, KMGR_TPL_FORK_TIMEOUT_MS / 2);
    cr_expect_eq(kmgr_kernel_pid(k), 0, "still waiting for the answer before the timeout");
    expect_fallback(k, KMGR_FALLBACK_TIMEOUT);
    expect_template_started_again();
    kmgr_kernel_destroy(k);
}

Test(template, a_template_dying_mid_exchange_has_every_pending_start_spawned)
{
    kmgr_kernel_t *k[3];

    setup_ready("die", 0);
    start_n(k, 3);
    expect_ready_by(k, 3, "spawned");
    cr_expect_eq(stats().fallback[KMGR_FALLBACK_DIED], 3, "each pending start spawned, as died");
    expect_template_started_again();
    destroy_n(k, 3);
}

Test(template, a_template_that_keeps_dying_before_ready_is_started_again_with_a_backoff)
{
    setup_with("die_at_start", 0);
    /* dies at once each time: started again after 1 s, then 2 s (KMGR_TPL_MAX_BACKOFF_MS caps the doubling) */
    poll_loop_run_for(kt.loop, 2500);
    kmgr_start_stats_t s = stats();
    cr_expect(s.template_restarts >= 1 && s.template_restarts <= 2, "%llu restarts in 2.5 s: 1 or 2 with the backoff",
              s.template_restarts);
    cr_expect_eq(s.templates_running, 0);
    kmgr_kernel_t *k = start(&states[0]);
    cr_expect_neq(kmgr_kernel_pid(k), 0, "no template ready: spawned at once");
    expect_fallback(k, KMGR_FALLBACK_UNAVAILABLE);
    kmgr_kernel_destroy(k);
}

Test(template, concurrent_forks_answered_out_of_order_reach_their_own_kernels)
{
    kmgr_kernel_t *k[4];

    setup_ready("batch:4", 0);
    start_n(k, 4);
    expect_ready_by(k, 4, "forked");
    for (int i = 0; i != 4; ++i) {
        cr_expect_neq(forked_pid_of(k[i]), 0);
        cr_expect_eq(kmgr_kernel_pid(k[i]), forked_pid_of(k[i]), "kernel %d got the process forked for its own request", i);
    }
    cr_expect_eq(stats().forked, 4);
    destroy_n(k, 4);
}

Test(template, a_start_beyond_the_pending_bound_is_spawned_at_once)
{
    kmgr_kernel_t *k[3];

    setup_ready("batch:2", 2);
    start_n(k, 3);
    cr_expect_eq(kmgr_kernel_pid(k[0]), 0);
    cr_expect_eq(kmgr_kernel_pid(k[1]), 0);
    cr_expect_neq(kmgr_kernel_pid(k[2]), 0, "the third start is over the bound of 2: spawned, not queued");
    cr_expect_eq(stats().fallback[KMGR_FALLBACK_QUEUE_FULL], 1);
    expect_ready_by(k, 2, "forked");
    expect_ready_by(k + 2, 1, "spawned");
    destroy_n(k, 3);
}

Test(template, a_request_bigger_than_the_socket_buffer_is_written_as_the_socket_takes_it)
{
    size_t big = 600 * 1024;
    char *value = wire_malloc(big + 1);
    json_t *env;
    kmgr_kernel_t *k = NULL;

    setup_ready("ok", 0);
    memset(value, 'x', big);
    value[big] = '\0';
    env = json_pack("{s:s}", "KGATE_BIG", value);
    free(value);
    kmgr_kernel_options_t opts = {.spec = spec, .env = env, .on_state = kt_on_state, .data = &states[0]};
    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    json_decref(env);
    wait_ready(k);
    cr_expect_str_eq(kmgr_kernel_start_path(k), "forked", "the request went out whole, in pieces");
    kmgr_kernel_destroy(k);
}

Test(template, a_start_given_up_before_the_answer_is_never_spawned)
{
    setup_ready("silent", 0);
    kmgr_kernel_t *k = start(&states[0]);
    kmgr_kernel_kill(k);
    /* the template times out, its pending start is not spawned for nobody */
    poll_loop_run_for(kt.loop, KMGR_TPL_FORK_TIMEOUT_MS + 500);
    kmgr_start_stats_t s = stats();
    cr_expect_eq(s.spawned + s.forked + s.fallback[KMGR_FALLBACK_TIMEOUT], 0, "nothing started for a kernel given up");
    cr_expect_eq(kmgr_manager_num_processes(kt.mgr), 0);
}

Test(template, a_template_found_dead_by_the_write_of_a_request_has_the_start_spawned)
{
    kmgr_kernel_t *k[2];

    setup_ready("die", 0);
    k[0] = start(&states[0]);
    /* the loop does not run: the template dies of the first request unseen, and the second is written to a closed socket */
    usleep(1500 * 1000);
    k[1] = start(&states[1]);
    expect_ready_by(k, 2, "spawned");
    cr_expect_eq(stats().fallback[KMGR_FALLBACK_DIED], 2);
    destroy_n(k, 2);
}

/* ---- a restart of a forked kernel whose new fork the template refuses or never answers: with a start queue
 * (max_starting), the relaunch's fallback is due a spawn and the queue's next pass spawns it, not held back ---- */

/* The forked kernel `k` (ready) restarted on a template now in `mode` ("fail_after:1", "silent_after:1"): it comes back
 * spawned, the same handle runs code, the fallback counted for `reason`, and a start behind it still gets its turn. */
static void expect_restart_spawned(const char *mode, kmgr_fallback_t reason)
{
    setup_ready_config(mode, (kmgr_config_t){.max_starting = 1, .max_forking = 2, .max_start_queue = 4});
    kmgr_kernel_t *k = start(&states[0]);
    kt_rec_t rec;

    wait_ready(k);
    cr_assert_str_eq(kmgr_kernel_start_path(k), "forked");
    pid_t old = kmgr_kernel_pid(k);
    cr_assert_eq(kmgr_kernel_restart(k), 0);
    wait_ready(k);
    cr_expect_str_eq(kmgr_kernel_start_path(k), "spawned", "the restart fell back to a spawn");
    cr_expect_neq(kmgr_kernel_pid(k), old);
    cr_expect_eq(ts_proc_parent(kmgr_kernel_pid(k)), getpid(), "a spawned kernel is kgate's child");
    cr_expect_eq(stats().fallback[reason], 1, "the restart's fallback counted as %s", kmgr_fallback_name(reason));
    cr_expect_eq(stats().forked, 1, "only the first start was forked");
    /* the kernel behind the caller's context keeps working: it runs code on the same handle */
    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "1+1", &rec), 0);
    cr_assert(kt_wait_rec(&rec, 10000), "the restarted kernel answers");
    cr_expect_eq(rec.n_failed, 0);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

TestSuite(template_restart, .fini = teardown, .timeout = 120);

Test(template_restart, a_restart_whose_fork_is_refused_comes_back_spawned_and_keeps_working)
{
    expect_restart_spawned("fail_after:1", KMGR_FALLBACK_FAILED);
}

Test(template_restart, a_restart_whose_fork_is_never_answered_comes_back_spawned_and_keeps_working)
{
    expect_restart_spawned("silent_after:1", KMGR_FALLBACK_TIMEOUT);
}
