/* tests/kernelmgr/test_start_queue.c: the start queue (kernelmgr/src/start_queue.c) against real ipykernel processes. */
#include <criterion/criterion.h>
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
