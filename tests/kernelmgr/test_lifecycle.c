/* tests/kernelmgr/test_lifecycle.c: destroy, death, restart and start-up failures (test_liveness.c: heartbeats, automatic
 * restarts). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "ksys/rmtree.h"
#include "ksys/util.h"
#include "kmgr_test.h"

TestSuite(lifecycle, .init = kt_setup, .fini = kt_teardown, .timeout = 90);

static char *dirname_of(const char *path)
{
    char *dir = wire_strdup(path);
    *strrchr(dir, '/') = '\0';
    return dir;
}

static int path_exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

Test(lifecycle, destroy_leaves_no_process_and_no_directory)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    pid_t pid = kmgr_kernel_pid(k);
    char *dir = dirname_of(kmgr_kernel_connection_file(k));
    char *rt = wire_strdup(kmgr_manager_runtime_dir(kt.mgr));
    size_t notices = st.n;

    cr_assert(path_exists(dir));
    kmgr_kernel_destroy(k);
    cr_expect_eq(kmgr_manager_num_processes(kt.mgr), 1, "still shutting down in the background");
    cr_assert(kt_wait_no_process(10000));
    cr_expect(!kt_pid_alive(pid));
    /* removed by a thread of its own once reaped (a sandboxed kernel may have filled it) */
    for (uint64_t end = ksys_now_ms() + 5000; ksys_rmtree_in_flight() != 0 && ksys_now_ms() < end;)
        usleep(10 * 1000);
    cr_expect(!path_exists(dir), "kernel dir removed once reaped");
    cr_expect_eq(st.n, notices, "no notice after destroy");
    kmgr_manager_destroy(kt.mgr);
    kt.mgr = NULL;
    cr_expect(!path_exists(rt), "the runtime dir goes with the manager");
    free(dir);
    free(rt);
}

Test(lifecycle, manager_destroy_kills_what_is_left)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    pid_t pid = kmgr_kernel_pid(k);

    kmgr_kernel_destroy(k);
    kmgr_manager_destroy(kt.mgr); /* without waiting for the shutdown sequence */
    kt.mgr = NULL;
    cr_expect(!kt_pid_alive(pid));
}

Test(lifecycle, kill_9_makes_the_kernel_dead_and_fails_requests)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t rec, late;
    uint64_t t0;

    kt_rec_init(&rec);
    kt_rec_init(&late);
    cr_assert_eq(kt_execute(k, "import time; time.sleep(30)", &rec), 0);
    poll_loop_run_for(kt.loop, 300);
    t0 = ksys_now_ms();
    cr_assert_eq(kill(kmgr_kernel_pid(k), SIGKILL), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_DEAD, 2000), "dead within 2 s");
    cr_expect_lt(ksys_now_ms() - t0, 2000);
    cr_expect_not_null(strstr(kmgr_kernel_exit_reason(k), "SIGKILL"), "reason: %s", kmgr_kernel_exit_reason(k));
    cr_expect_eq(rec.n_failed, 1);
    cr_expect_eq(rec.err, KSYS_EDIED);
    cr_expect_eq(rec.n_done, 0);
    cr_expect_eq(st.log[st.n - 1], KMGR_KERNEL_DEAD);
    cr_expect_eq(kmgr_kernel_pid(k), 0);
    cr_expect_eq(kmgr_kernel_execute(k, "1", NULL, kt_on_req, &late, NULL), KSYS_EDIED);
    cr_expect_eq(kmgr_kernel_interrupt(k), KSYS_EDIED);
    poll_loop_run_for(kt.loop, 100);
    cr_expect_eq(late.n_done + late.n_failed, 0);
    kt_rec_dispose(&rec);
    kt_rec_dispose(&late);
    kmgr_kernel_destroy(k);
}

Test(lifecycle, exit_code_is_reported)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "import os; os._exit(3)", &rec), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_DEAD, 5000));
    cr_expect_str_eq(kmgr_kernel_exit_reason(k), "exited with code 3");
    cr_expect_eq(rec.n_failed, 1);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(lifecycle, destroy_from_the_dead_notice)
{
    kt_states_t st = {.destroy_on_dead = 1};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);

    cr_assert_eq(kill(kmgr_kernel_pid(k), SIGKILL), 0);
    cr_assert(kt_wait_no_process(5000));
    poll_loop_run_for(kt.loop, 100);
    cr_expect_eq(st.log[st.n - 1], KMGR_KERNEL_DEAD);
}

Test(lifecycle, restart_gives_a_fresh_namespace)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    pid_t old = kmgr_kernel_pid(k);
    char *old_file = wire_strdup(kmgr_kernel_connection_file(k));
    kt_rec_t a, pending, b;

    kt_rec_init(&a);
    kt_rec_init(&pending);
    kt_rec_init(&b);
    cr_assert_eq(kt_execute(k, "x = 42", &a), 0);
    cr_assert(kt_wait_rec(&a, 10000));
    cr_assert_eq(kt_execute(k, "import time; time.sleep(30)", &pending), 0);
    poll_loop_run_for(kt.loop, 200);
    cr_assert_eq(kmgr_kernel_restart(k), 0);
    cr_expect_eq(kmgr_kernel_state(k), KMGR_KERNEL_RESTARTING);
    cr_expect_eq(pending.n_failed, 0, "FAILED is delivered from the loop, not from restart");
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000));
    cr_expect_eq(pending.n_failed, 1);
    cr_expect_eq(pending.err, KSYS_ESHUTDOWN);
    cr_expect(kt_states_saw(&st, KMGR_KERNEL_RESTARTING));
    cr_expect_neq(kmgr_kernel_pid(k), old);
    cr_expect_str_neq(kmgr_kernel_connection_file(k), old_file);
    cr_assert_eq(kt_execute(k, "x", &b), 0);
    cr_assert(kt_wait_rec(&b, 10000));
    cr_expect_str_eq(json_string_value(json_object_get(kt_iopub(&b, "error"), "ename")), "NameError");
    cr_expect_eq(kmgr_manager_num_processes(kt.mgr), 1 + (size_t)kt_pid_alive(old));
    kt_rec_dispose(&a);
    kt_rec_dispose(&pending);
    kt_rec_dispose(&b);
    free(old_file);
    kmgr_kernel_destroy(k);
    cr_expect(kt_wait_no_process(10000));
    cr_expect(!kt_pid_alive(old));
}

Test(lifecycle, restart_a_dead_kernel)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kill(kmgr_kernel_pid(k), SIGKILL), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_DEAD, 2000));
    cr_assert_eq(kmgr_kernel_restart(k), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000));
    cr_expect_str_eq(kmgr_kernel_exit_reason(k), "");
    cr_assert_eq(kt_execute(k, "6*7", &rec), 0);
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_str_eq(kt_result_text(&rec), "42");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/* Entries of the runtime dir besides the manager's own record (kgate-<token>.instance). */
static size_t runtime_entries(void)
{
    char cmd[600];
    FILE *fp;
    size_t n = 0;
    char line[512];

    snprintf(cmd, sizeof(cmd), "ls -A '%s' | grep -v '^kgate-[0-9a-f]*[.]instance$'", kmgr_manager_runtime_dir(kt.mgr));
    cr_assert_not_null(fp = popen(cmd, "r"));
    while (fgets(line, sizeof(line), fp) != NULL)
        ++n;
    pclose(fp);
    return n;
}

Test(lifecycle, nonexistent_program_is_espawn)
{
    static const char *const abs_argv[] = {"/nonexistent/kgate-no-such-kernel", "-f", "{connection_file}"};
    static const char *const rel_argv[] = {"kgate-no-such-kernel-program", "-f", "{connection_file}"};
    kmgr_kernelspec_t *s1 = kt_fake_spec(abs_argv, 3), *s2 = kt_fake_spec(rel_argv, 3);
    kmgr_kernel_options_t opts = {.spec = s1};
    kmgr_kernel_t *k = NULL;

    cr_expect_eq(kmgr_kernel_start(kt.mgr, &opts, &k), KSYS_ESPAWN);
    cr_expect_null(k);
    opts.spec = s2;
    cr_expect_eq(kmgr_kernel_start(kt.mgr, &opts, &k), KSYS_ESPAWN);
    cr_expect_null(k);
    cr_expect_eq(runtime_entries(), 0, "nothing left behind");
    cr_expect_eq(kmgr_manager_num_processes(kt.mgr), 0);
    kmgr_kernelspec_destroy(s1);
    kmgr_kernelspec_destroy(s2);
}

Test(lifecycle, bad_cwd_is_espawn)
{
    kmgr_kernel_options_t opts = {.spec = kt.python, .cwd = "/nonexistent/kgate-dir"};
    kmgr_kernel_t *k = NULL;

    cr_expect_eq(kmgr_kernel_start(kt.mgr, &opts, &k), KSYS_ESPAWN);
    cr_expect_eq(runtime_entries(), 0);
}

Test(lifecycle, program_that_exits_is_dead_with_reason)
{
    static const char *const argv[] = {"/bin/sh", "-c", "echo '{connection_file}' >&2; exit 7"};
    kmgr_kernelspec_t *spec = kt_fake_spec(argv, 3);
    kt_states_t st = {0};
    kmgr_kernel_options_t opts = {.spec = spec, .on_state = kt_on_state, .data = &st};
    kmgr_kernel_t *k;
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    cr_assert_eq(kt_execute(k, "1", &rec), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_DEAD, 5000));
    /* what it said on its way out is in the reason (liveness.c) */
    cr_expect_eq(strncmp(kmgr_kernel_exit_reason(k), "exited with code 7; its last output:\n/", 38), 0, "reason: %s",
                 kmgr_kernel_exit_reason(k));
    cr_expect_eq(st.n, 1);
    cr_expect_eq(st.log[0], KMGR_KERNEL_DEAD);
    cr_expect_eq(rec.n_failed, 1);
    cr_expect_eq(rec.err, KSYS_EDIED);
    kmgr_kernel_destroy(k);
    kt_teardown();
    kt_rec_dispose(&rec);
    kmgr_kernelspec_destroy(spec);
}

Test(lifecycle, startup_timeout_is_dead_and_killed)
{
    kt_teardown();
    kmgr_config_t config = {.startup_timeout_ms = 700};
    kt_setup_config(&config);
    static const char *const argv[] = {"/bin/sleep", "30"};
    kmgr_kernelspec_t *spec = kt_fake_spec(argv, 2);
    kt_states_t st = {0};
    kmgr_kernel_options_t opts = {.spec = spec, .on_state = kt_on_state, .data = &st};
    kmgr_kernel_t *k;
    pid_t pid;

    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    pid = kmgr_kernel_pid(k);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_DEAD, 3000));
    cr_expect_str_eq(kmgr_kernel_exit_reason(k), "did not become ready within 700 ms");
    cr_expect(kt_wait_no_process(3000));
    cr_expect(!kt_pid_alive(pid));
    kmgr_kernel_destroy(k);
    kt_teardown();
    kmgr_kernelspec_destroy(spec);
}

static int kt_states_saw_dead(void *arg)
{
    return kt_states_saw(arg, KMGR_KERNEL_DEAD);
}

Test(lifecycle, restart_from_the_dead_notice)
{
    kt_states_t st = {.restart_on_dead = 1};
    kmgr_kernel_t *k = kt_start_ready(NULL, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kill(kmgr_kernel_pid(k), SIGKILL), 0);
    cr_assert(poll_loop_run_until(kt.loop, kt_states_saw_dead, &st, 5000));
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000));
    cr_assert_eq(kt_execute(k, "'back'", &rec), 0);
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_str_eq(kt_result_text(&rec), "'back'");
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

/* The process's state letter from /proc/<pid>/stat ('Z': dead, not reaped yet), or 0 when it is gone. */
static char proc_state(pid_t pid)
{
    char path[64], buf[512], *close;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    close = strrchr(buf, ')');
    return close != NULL && close[1] == ' ' ? close[2] : 0;
}

/*
 * kmgr_kernel_kill does not wait for the kernel: a process that ignores shutdown_request and SIGTERM is dead at once,
 * without the manager's loop running (kmgr_kernel_destroy would send it SIGKILL only after two grace periods of ticks).
 */
Test(lifecycle, kill_does_not_wait_for_the_kernel)
{
    static const char *const argv[] = {"/bin/sh", "-c", "trap '' TERM; exec sleep 1000"};
    kmgr_kernelspec_t *spec = kt_fake_spec(argv, 3);
    kmgr_kernel_options_t opts = {.spec = spec};
    kmgr_kernel_t *k;
    pid_t pid;
    char state = 'S';

    cr_assert_eq(kmgr_kernel_start(kt.mgr, &opts, &k), 0);
    pid = kmgr_kernel_pid(k);
    cr_assert_gt(pid, 0);
    kmgr_kernel_kill(k);
    for (int i = 0; i != 500 && (state = proc_state(pid)) != 'Z' && state != 0; ++i)
        usleep(10 * 1000);
    cr_expect(state == 'Z' || state == 0, "the killed kernel's process is still alive (state %c) 5 s later", state);
    cr_assert(kt_wait_no_process(10000));
    kmgr_kernelspec_destroy(spec);
}
