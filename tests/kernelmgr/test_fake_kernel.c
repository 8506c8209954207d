/* tests/kernelmgr/test_fake_kernel.c: a scripted kernel: forged messages, reply/idle order, shutdown. */
#include <string.h>
#include <criterion/criterion.h>
#include "kmgr/errors.h"
#include "kmgr_test.h"

static kmgr_kernelspec_t *fake;

static void setup(void)
{
    static const char *const argv[] = {"/usr/bin/python3", KGATE_SOURCE_DIR "/tests/kernelmgr/fake_kernel.py", "{connection_file}"};
    kt_setup();
    fake = kt_fake_spec(argv, 3);
}

static void teardown(void)
{
    kt_teardown();
    kmgr_kernelspec_destroy(fake);
}

TestSuite(fake_kernel, .init = setup, .fini = teardown, .timeout = 60);

Test(fake_kernel, forged_messages_are_dropped)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    kt_rec_t rec;

    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "anything", &rec), 0);
    cr_assert(kt_wait_rec(&rec, 10000));
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

    kt_rec_init(&rec);
    cr_assert_eq(kt_execute(k, "idle-first", &rec), 0);
    cr_assert(kt_wait_rec(&rec, 10000));
    cr_expect_eq(rec.n_reply, 1);
    cr_expect_eq(rec.n_done, 1);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel, a_lost_idle_does_not_hang_the_request)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    uint64_t t0;
    kt_rec_t rec;

    kt_rec_init(&rec);
    t0 = kmgr_now_ms();
    cr_assert_eq(kt_execute(k, "idle-lost", &rec), 0);
    cr_assert(kt_wait_rec(&rec, 15000), "a request with its reply but no idle must end");
    cr_expect_eq(rec.n_reply, 1);
    cr_expect_eq(rec.n_done, 1);
    cr_expect_str_eq(rec.out, "genuine\n");
    /* ended by the grace period after the reply (5 s of silence), not at once */
    cr_expect_geq(kmgr_now_ms() - t0, 4500);
    kt_rec_dispose(&rec);
    kmgr_kernel_destroy(k);
}

Test(fake_kernel, shutdown_request_ends_it_politely)
{
    kt_states_t st = {0};
    kmgr_kernel_t *k = kt_start_ready(fake, &st);
    uint64_t t0 = kmgr_now_ms();

    kmgr_kernel_destroy(k);
    cr_assert(kt_wait_no_process(5000));
    /* It exits on shutdown_request, long before the 2 s grace would bring SIGTERM. */
    cr_expect_lt(kmgr_now_ms() - t0, 1500);
}
