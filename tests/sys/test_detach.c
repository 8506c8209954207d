/* tests/sys/test_detach.c: detached threads for blocking work (ksys/detach.h), and their bound. */
#include <errno.h>
#include <stdint.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ksys/detach.h"
#include "wire/alloc.h"

TestSuite(detach, .init = wire_global_init);

static int gate[2], done[2];

/* Waits until the test opens the gate, then says it is done. */
static void wait_at_gate(void *arg)
{
    char c;

    (void)arg;
    if (read(gate[0], &c, 1) == 1 && write(done[1], "d", 1) != 1)
        return;
}

/* A client that removes many big files at once does not get a thread each: past eight, the caller does the work. */
Test(detach, at_most_eight_threads_run_and_then_the_caller_works_itself)
{
    char c;

    cr_assert_eq(pipe(gate), 0);
    cr_assert_eq(pipe(done), 0);
    for (int i = 0; i != 8; ++i)
        cr_assert_eq(ksys_detach(wait_at_gate, NULL), 0, "thread %d was refused", i);
    cr_expect_eq(ksys_detach(wait_at_gate, NULL), EAGAIN, "a ninth thread started");

    cr_assert_eq(write(gate[1], "g", 1), 1); /* one ends */
    cr_assert_eq(read(done[0], &c, 1), 1);
    int ret = EAGAIN;
    for (int i = 0; i != 200 && ret == EAGAIN; ++i)
        if ((ret = ksys_detach(wait_at_gate, NULL)) == EAGAIN)
            usleep(5000); /* its count drops just after it said done */
    cr_expect_eq(ret, 0, "no thread could start after one ended");
    for (int i = 0; i != 8; ++i) {
        cr_assert_eq(write(gate[1], "g", 1), 1);
        cr_assert_eq(read(done[0], &c, 1), 1);
    }
}

/* ksys_close_detached closes the descriptor, with a thread or without. */
Test(detach, a_descriptor_given_to_gw_close_detached_is_closed)
{
    int fds[2];
    char c;

    cr_assert_eq(pipe(fds), 0);
    ksys_close_detached(fds[1]);
    cr_expect_eq(read(fds[0], &c, 1), 0, "the write end stayed open"); /* blocks until it is closed */
    close(fds[0]);
    ksys_close_detached(-1); /* ignored */
}
