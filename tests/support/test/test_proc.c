/* tests/support/test/test_proc.c: what the benchmarks read of processes in /proc. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/wait.h>
#include <criterion/criterion.h>
#include "support/proc.h"

static atomic_int thread_slept, may_end;

/* Sleeps ten times, says so, and stays alive (a thread's switches count while it lives) until told. */
static void *sleep_ten_times(void *arg)
{
    (void)arg;
    for (int i = 0; i != 10; ++i)
        usleep(1000);
    atomic_store(&thread_slept, 1);
    while (!atomic_load(&may_end))
        usleep(1000);
    return NULL;
}

Test(proc, switches_count_the_sleeps_of_every_thread)
{
    ts_switches_t before = {0}, during = {0};
    pthread_t thread;

    atomic_store(&thread_slept, 0);
    atomic_store(&may_end, 0);
    cr_assert_eq(ts_proc_switches(getpid(), &before), 0);
    cr_assert_eq(pthread_create(&thread, NULL, sleep_ten_times, NULL), 0);
    /* this thread spins instead of sleeping: the voluntary switches counted meanwhile are the other thread's */
    while (!atomic_load(&thread_slept))
        ;
    cr_assert_eq(ts_proc_switches(getpid(), &during), 0);
    atomic_store(&may_end, 1);
    pthread_join(thread, NULL);
    cr_expect_geq(during.voluntary - before.voluntary, 10, "a thread slept 10 times: %llu voluntary switches counted",
                  (unsigned long long)(during.voluntary - before.voluntary));
}

Test(proc, switches_of_no_process_is_an_error)
{
    ts_switches_t acc = {0};

    cr_expect_neq(ts_proc_switches(0x7ffffff0, &acc), 0);
    cr_expect_eq(acc.voluntary + acc.involuntary, 0, "nothing was added");
}

Test(proc, parent_is_the_process_that_forked)
{
    pid_t child = fork();

    cr_assert_geq(child, 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    cr_expect_eq(ts_proc_parent(child), getpid());
    cr_expect_eq(ts_proc_parent(getpid()), getppid());
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    cr_expect_eq(ts_proc_parent(child), -1, "a reaped child has no parent");
}

Test(proc, kib_reads_the_field_named_whole)
{
    char path[64];
    long long rss, hwm;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)getpid());
    rss = ts_proc_kib(path, "VmRSS");
    hwm = ts_proc_kib(path, "VmHWM");
    cr_expect_gt(rss, 0, "VmRSS %lld kB", rss);
    cr_expect_geq(hwm, rss, "the peak is no less than the resident size");
    cr_expect_gt(ts_proc_kib("/proc/meminfo", "MemTotal"), 0);
    cr_expect_eq(ts_proc_kib(path, "VmRS"), -1, "a name is matched whole, not as a prefix");
    cr_expect_eq(ts_proc_kib(path, "NoSuchField"), -1);
    cr_expect_eq(ts_proc_kib("/proc/no-such-file", "VmRSS"), -1);
}
