/* tests/kernelmgr/test_liveness.c: a kernel is dead when its process is; heartbeats inform; automatic restarts; what a
 * kernel that fails at start said; a TCP kernel that lost a port. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "wire/connfile.h"
#include "ksys/errors.h"
#include "kmgr_test.h"

TestSuite(liveness, .init = kt_setup, .fini = kt_teardown, .timeout = 120);

/* Fast heartbeats: a silence shows within a second. */
static void setup_fast_heartbeats(unsigned kill_ms)
{
    kmgr_config_t config = {.heartbeat_interval_ms = 100, .heartbeat_timeout_ms = 600, .heartbeat_kill_ms = kill_ms};
    kt_teardown();
    kt_setup_config(&config);
}

static int saw_silence(void *arg)
{
    return ((kt_states_t *)arg)->silences != 0;
}

Test(liveness, busy_kernel_keeps_answering_heartbeats)
{
    setup_fast_heartbeats(0);
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    /* Pure Python holding the GIL for 2 s: ipykernel's heartbeat is a C-level echo device. */
    cr_assert_eq(kt_execute(k, "import time\nt = time.time()\nwhile time.time() - t < 2: pass", &rec), 0);
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_eq(rec.n_done, 1);
    cr_expect(!kt_states_saw(&st, KMGR_KERNEL_DEAD));
    cr_expect_eq(st.silences, 0, "ipykernel never missed a heartbeat");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/* A kernel that stops answering heartbeats (stopped, as IRkernel is in a long cell) is told as not answering, and lives on:
 * its cell completes once it runs again. */
Test(liveness, a_silent_kernel_is_not_answering_and_not_dead)
{
    setup_fast_heartbeats(0);
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    pid_t pid = kmgr_kernel_pid(k);
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "import time; time.sleep(2); 'done'", &rec), 0);
    poll_loop_run_for(kt.loop, 300);
    cr_assert_eq(kill(pid, SIGSTOP), 0);
    cr_assert(poll_loop_run_until(kt.loop, saw_silence, &st, 3000), "not answering within 3 s of SIGSTOP");
    cr_expect_eq(kmgr_kernel_answering(k), 0);
    /* ten heartbeat timeouts of silence: it used to be killed after one */
    poll_loop_run_for(kt.loop, 2000);
    cr_expect_eq(kmgr_kernel_state(k), KMGR_KERNEL_BUSY);
    cr_expect_eq(kmgr_kernel_answering(k), 0);
    cr_assert_eq(kill(pid, SIGCONT), 0);
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_eq(rec.n_done, 1);
    cr_expect_eq(rec.n_failed, 0);
    cr_expect_str_eq(kt_result_text(&rec), "'done'");
    poll_loop_run_for(kt.loop, 500);
    cr_expect_eq(kmgr_kernel_answering(k), 1);
    cr_expect_eq(st.recoveries, 1, "the owner heard it answer again");
    cr_expect(!kt_states_saw(&st, KMGR_KERNEL_DEAD));
    cr_expect_eq(kmgr_kernel_pid(k), pid);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/* Opt-in (kmgr_config_t.heartbeat_kill_ms): silence kills, as kgate did by default before. */
Test(liveness, heartbeat_kill_is_opt_in)
{
    setup_fast_heartbeats(600);
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    pid_t pid = kmgr_kernel_pid(k);
    kt_rec_t rec;

    kt_rec_init(&rec);
    poll_loop_run_for(kt.loop, 1000);
    cr_assert_eq(kmgr_kernel_state(k), KMGR_KERNEL_IDLE, "healthy kernels keep answering");
    cr_assert_eq(kt_execute(k, "import time; time.sleep(30)", &rec), 0);
    poll_loop_run_for(kt.loop, 300);
    cr_assert_eq(kill(pid, SIGSTOP), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_DEAD, 3000));
    cr_expect_str_eq(kmgr_kernel_exit_reason(k), "stopped answering heartbeats");
    cr_expect_eq(rec.n_failed, 1);
    cr_expect_eq(rec.err, KSYS_EDIED);
    /* It was SIGKILLed (a stopped process dies of SIGKILL too) and gets reaped. */
    cr_expect(kt_wait_no_process(3000));
    cr_expect(!kt_pid_alive(pid));
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

static kmgr_kernel_t *start_restartable(unsigned limit, kt_states_t *st)
{
    kmgr_kernel_options_t opts = {.spec = kt.python, .on_state = kt_on_state, .data = st, .restart_limit = limit};
    kmgr_kernel_t *k = NULL;

    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000), "ready within 30 s: %s", kmgr_kernel_exit_reason(k));
    return k;
}

/* kill -9 of a ready kernel: the request in flight fails (state lost), the kernel comes back on its own, fresh. */
Test(liveness, a_kernel_that_dies_on_its_own_is_restarted)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = start_restartable(2, &st);
    pid_t old = kmgr_kernel_pid(k);
    unsigned in_a_row = 0, limit = 0;
    kt_rec_t set, rec, after;
    uint64_t t0;

    kt_rec_init(&set);
    kt_rec_init(&rec);
    kt_rec_init(&after);
    cr_assert_eq(kt_execute(k, "x = 42", &set), 0);
    cr_assert(kt_wait_rec(&set, 10000));
    cr_assert_eq(kt_execute(k, "import time; time.sleep(30)", &rec), 0);
    poll_loop_run_for(kt.loop, 300);
    t0 = ksys_now_ms();
    cr_assert_eq(kill(old, SIGKILL), 0);
    cr_assert(kt_wait_rec(&rec, 3000), "the request in flight is told within 3 s");
    cr_expect_lt(ksys_now_ms() - t0, 3000);
    cr_expect_eq(rec.n_failed, 1);
    cr_expect_eq(rec.err, KSYS_EDIED);
    cr_expect(kt_states_saw(&st, KMGR_KERNEL_RESTARTING));
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000));
    cr_expect(!kt_states_saw(&st, KMGR_KERNEL_DEAD), "never DEAD on the way");
    cr_expect_neq(kmgr_kernel_pid(k), old);
    cr_expect_eq(kmgr_kernel_auto_restarts(k, &in_a_row, &limit), 1);
    cr_expect_eq(in_a_row, 1);
    cr_expect_eq(limit, 2);
    cr_expect_not_null(strstr(kmgr_kernel_last_death(k), "SIGKILL"), "last death: %s", kmgr_kernel_last_death(k));
    cr_expect_str_eq(kmgr_kernel_exit_reason(k), "");
    cr_assert_eq(kt_execute(k, "x", &after), 0);
    cr_assert(kt_wait_rec(&after, 10000));
    cr_expect_str_eq(json_string_value(json_object_get(kt_iopub(&after, "error"), "ename")), "NameError", "fresh state");
    kt_rec_dispose(&set);
    kt_rec_dispose(&rec);
    kt_rec_dispose(&after);
    kmgr_kernel_destroy(k);
}

/* Deaths in a row beyond the limit leave the kernel DEAD, saying why; an explicit restart starts a new row. */
Test(liveness, the_restart_limit_leaves_it_dead)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = start_restartable(2, &st);
    unsigned in_a_row = 0;

    for (int i = 0; i != 2; ++i) {
        cr_assert_eq(kill(kmgr_kernel_pid(k), SIGKILL), 0);
        cr_assert(kt_wait_state(k, KMGR_KERNEL_RESTARTING, 3000), "restart %d", i + 1);
        cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000), "back after restart %d", i + 1);
    }
    cr_assert_eq(kill(kmgr_kernel_pid(k), SIGKILL), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_DEAD, 3000));
    cr_expect_not_null(strstr(kmgr_kernel_exit_reason(k), "SIGKILL"), "reason: %s", kmgr_kernel_exit_reason(k));
    cr_expect_not_null(strstr(kmgr_kernel_exit_reason(k), "died again after 2 automatic restarts in a row (the restart limit)"),
                       "reason: %s", kmgr_kernel_exit_reason(k));
    poll_loop_run_for(kt.loop, 500);
    cr_expect_eq(kmgr_kernel_state(k), KMGR_KERNEL_DEAD, "stays dead");
    cr_expect_eq(kmgr_kernel_auto_restarts(k, NULL, NULL), 2);
    cr_assert_eq(kmgr_kernel_restart(k), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000));
    kmgr_kernel_auto_restarts(k, &in_a_row, NULL);
    cr_expect_eq(in_a_row, 0);
    cr_expect_str_eq(kmgr_kernel_last_death(k), "");
    kmgr_kernel_destroy(k);
}

/* A kernel that stayed up restart_stable_ms after its restart starts a new row: the limit is for deaths in a row. */
Test(liveness, a_stable_kernel_starts_a_new_row)
{
    kt_teardown();
    kmgr_config_t config = {.restart_stable_ms = 1};
    kt_setup_config(&config);
    kt_states_t st = {0};
    kmgr_kernel_t *k = start_restartable(1, &st);

    for (int i = 0; i != 2; ++i) {
        poll_loop_run_for(kt.loop, 50);
        cr_assert_eq(kill(kmgr_kernel_pid(k), SIGKILL), 0);
        cr_assert(kt_wait_state(k, KMGR_KERNEL_RESTARTING, 3000), "restart %d", i + 1);
        cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000));
    }
    cr_expect_eq(kmgr_kernel_auto_restarts(k, NULL, NULL), 2);
    kmgr_kernel_destroy(k);
}

/* A kernel that never became ready is not restarted, whatever its limit: the caller hears why at once. */
Test(liveness, a_kernel_that_fails_at_start_is_not_restarted_and_says_why)
{
    static const char *const argv[] = {"/bin/sh", "-c",
                                       "echo 'starting up'; printf 'error: \\033[31mno such module\\033[0m\\n' >&2; exit 3"};
    kmgr_kernelspec_t *spec = kt_fake_spec(argv, 3);
    kt_states_t st = {0};
    kmgr_kernel_options_t opts = {.spec = spec, .on_state = kt_on_state, .data = &st, .restart_limit = 5};
    kmgr_kernel_t *k;

    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_DEAD, 5000));
    cr_expect_str_eq(kmgr_kernel_exit_reason(k), "exited with code 3; its last output:\nstarting up\nerror: no such module");
    cr_expect_eq(kmgr_kernel_auto_restarts(k, NULL, NULL), 0);
    cr_expect_eq(st.n, 1);
    kmgr_kernel_destroy(k);
    kt_teardown();
    kmgr_kernelspec_destroy(spec);
}

/* The tail is bounded: the last KMGR_OUTPUT_TAIL_LINES lines, valid UTF-8 however the bytes were cut. */
Test(liveness, the_output_tail_is_bounded)
{
    static const char *const argv[] = {
        "/bin/sh", "-c", "i=0; while [ $i -lt 500 ]; do printf 'line %d \\377 \\303\\251\\n' $i; i=$((i+1)); done >&2; exit 1"};
    kmgr_kernelspec_t *spec = kt_fake_spec(argv, 3);
    kmgr_kernel_options_t opts = {.spec = spec};
    kmgr_kernel_t *k;
    const char *reason, *tail;
    size_t lines = 0;

    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_DEAD, 5000));
    reason = kmgr_kernel_exit_reason(k);
    cr_assert_not_null(tail = strstr(reason, "its last output:\n"), "reason: %s", reason);
    tail += strlen("its last output:\n");
    for (const char *p = tail; *p != '\0'; ++p)
        lines += *p == '\n';
    cr_expect_eq(lines + 1, KMGR_OUTPUT_TAIL_LINES, "tail: %s", tail);
    cr_expect_eq(strncmp(tail, "line 490 \xef\xbf\xbd \xc3\xa9\n", 15), 0, "tail: %s", tail);
    cr_expect_not_null(strstr(tail, "line 499 \xef\xbf\xbd \xc3\xa9"), "tail: %s", tail);
    cr_expect_lt(strlen(reason), KMGR_REASON_MAX);
    kmgr_kernel_destroy(k);
    kt_teardown();
    kmgr_kernelspec_destroy(spec);
}

/* A TCP kernel that found a port taken exits; it is started again on new ports, and requests queued meanwhile run. */
Test(liveness, a_tcp_kernel_that_lost_a_port_is_started_again)
{
    char script[2048], marker[512];
    kmgr_kernelspec_t *spec;
    kt_states_t st = {0};
    kmgr_kernel_options_t opts = {.on_state = kt_on_state, .data = &st};
    wire_connection_t conn;
    kmgr_kernel_t *k;
    kt_rec_t rec;

    snprintf(marker, sizeof(marker), "%s/lost-a-port", kmgr_manager_runtime_dir(kt.mgr));
    /* the first start says what zmq says when a port is taken; the second is ipykernel */
    snprintf(script, sizeof(script),
             "if [ -e '%s' ]; then exec /usr/bin/python3 -m ipykernel_launcher -f \"$1\"; fi; touch '%s'; "
             "echo 'zmq.error.ZMQError: Address already in use (addr=tcp://127.0.0.1:1)' >&2; exit 1",
             marker, marker);
    const char *argv[] = {"/bin/sh", "-c", script, "sh", "{connection_file}"};
    spec = kt_fake_spec(argv, 5);
    opts.spec = spec;
    kt_rec_init(&rec);
    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    cr_assert_eq(kt_execute(k, "6*7", &rec), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000), "ready: %s", kmgr_kernel_exit_reason(k));
    cr_expect_eq(access(marker, F_OK), 0, "the first start ran");
    cr_expect(!kt_states_saw(&st, KMGR_KERNEL_DEAD));
    cr_assert_eq(wire_connection_read(kmgr_kernel_connection_file(k), &conn), 0);
    cr_expect_str_eq(conn.transport, "tcp");
    wire_connection_dispose(&conn);
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_str_eq(kt_result_text(&rec), "42");
    kt_rec_dispose(&rec);
    unlink(marker);
    kmgr_kernel_destroy(k);
    kt_teardown();
    kmgr_kernelspec_destroy(spec);
}

/* Kernels get NO_COLOR=1 (plain text for API callers) unless their context's env says otherwise. */
Test(liveness, no_color_unless_the_env_says_otherwise)
{
    const char *code = "import os; print(repr(os.environ.get('NO_COLOR')))";
    json_t *envs[2] = {NULL, json_pack("{s:s}", "NO_COLOR", "")};
    const char *want[2] = {"'1'\n", "''\n"};

    for (int i = 0; i != 2; ++i) {
        kmgr_kernel_options_t opts = {.spec = kt.python, .env = envs[i]};
        kmgr_kernel_t *k;
        kt_rec_t rec;
        kt_rec_init(&rec);
        cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
        cr_assert_eq(kt_execute(k, code, &rec), 0);
        cr_assert(kt_wait_rec(&rec, 30000));
        cr_expect_str_eq(rec.out, want[i]);
        kt_rec_dispose(&rec);
        kmgr_kernel_destroy(k);
    }
    json_decref(envs[1]);
}
