/* tests/support/test/test_proc.c: what the benchmarks read of processes in /proc. */
#include <pthread.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "support/proc.h"

static void *sleep_ten_times(void *arg)
{
    (void)arg;
    for (int i = 0; i != 10; ++i)
        usleep(1000);
    return NULL;
}

Test(proc, switches_count_every_sleep_of_every_thread)
{
    ts_switches_t before = {0}, during = {0}, after = {0};
    pthread_t thread;

    cr_assert_eq(ts_proc_switches(getpid(), &before), 0);
    sleep_ten_times(NULL);
    cr_assert_eq(pthread_create(&thread, NULL, sleep_ten_times, NULL), 0);
    /* a thread's switches count while it lives: read them before it ends */
    usleep(2000);
    cr_assert_eq(ts_proc_switches(getpid(), &during), 0);
    pthread_join(thread, NULL);
    cr_assert_eq(ts_proc_switches(getpid(), &after), 0);
    cr_expect_geq(during.voluntary - before.voluntary, 10, "the main thread slept 10 times: %llu switches",
                  (unsigned long long)(during.voluntary - before.voluntary));
    cr_expect_geq(after.voluntary - before.voluntary, 10);
}

Test(proc, switches_of_no_process_is_an_error)
{
    ts_switches_t acc = {0};

    cr_expect_neq(ts_proc_switches(0x7ffffff0, &acc), 0);
    cr_expect_eq(acc.voluntary + acc.involuntary, 0, "nothing was added");
}
