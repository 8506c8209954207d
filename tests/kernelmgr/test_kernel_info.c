/* tests/kernelmgr/test_kernel_info.c: the kernel_info_requests of a start (kernelmgr/src/kernel.c), against a kernel slow to
 * start (tests/kernelmgr/slow_kernel.py), which counts those it reads. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ksys/util.h"
#include "kmgr_test.h"

#define SLOW_KERNEL KGATE_SOURCE_DIR "/tests/kernelmgr/slow_kernel.py"
#define RETRY_MS 250 /* kmgr_config_t.kernel_info_retry_ms's default */

TestSuite(kernel_info, .init = kt_setup, .fini = kt_teardown, .timeout = 60);

/* Starts a slow kernel (`delay_ms` before it reads, `mode`) and waits until it is ready; its start-to-ready time in `*took_ms`
 * and the kernel_info_requests it read in `*count` (after a pause: those still queued when it became ready are read too). */
static void start_slow(const char *delay_ms, const char *mode, uint64_t *took_ms, int *count)
{
    const char *const argv[] = {"/usr/bin/python3", SLOW_KERNEL, "{connection_file}", delay_ms, mode};
    kmgr_kernelspec_t *spec = kt_fake_spec(argv, 5);
    kt_states_t st = {0};
    kmgr_kernel_t *k;
    char path[4096], *slash;
    uint64_t t0 = ksys_now_ms();
    FILE *fp;

    cr_assert_eq(kmgr_kernel_start(kt.mgr, &(kmgr_kernel_options_t){.spec = spec, .on_state = kt_on_state, .data = &st}, &k), 0);
    cr_assert(kt_wait_state(k, KMGR_KERNEL_IDLE, 30000), "ready within 30 s (%s)", kmgr_kernel_exit_reason(k));
    *took_ms = ksys_now_ms() - t0;
    poll_loop_run_for(kt.loop, 500);
    snprintf(path, sizeof(path), "%s", kmgr_kernel_connection_file(k));
    cr_assert_not_null(slash = strrchr(path, '/'), "%s", path);
    snprintf(slash, sizeof(path) - (size_t)(slash - path), "/kernel-info-count");
    cr_assert_not_null(fp = fopen(path, "r"), "%s: the kernel counted nothing", path);
    cr_assert_eq(fscanf(fp, "%d", count), 1);
    fclose(fp);
    kmgr_kernel_destroy(k);
    kt_wait_no_process(10000);
    kmgr_kernelspec_destroy(spec);
}

/* The kernel_info_requests a start sends in `ms` while the shell has not answered: at 0, then after 250, 500, 1000 ms, then
 * every 2 s (the backoff: a request already sent waits in the kernel's socket, so a resend is only insurance). */
static int sends_within(uint64_t ms)
{
    int n = 0;
    uint64_t at = 0, gap = RETRY_MS;

    for (; at <= ms; at += gap, gap = gap * 2 > 8 * RETRY_MS ? 8 * RETRY_MS : gap * 2)
        ++n;
    return n;
}

/* A kernel that reads nothing for 2 s after binding its ports (as ipykernel importing IPython under load) is sent few
 * kernel_info_requests: at most one more than the backoff's sends in its start time (about 4 in 2.5 s). Each queued
 * request is answered once the kernel runs (its busy, reply, idle: CPU the burst of starts has not got): before, one every
 * 250 ms, 11 or more for the same kernel. */
Test(kernel_info, a_slow_kernel_is_sent_few_kernel_info_requests)
{
    uint64_t took;
    int count;

    start_slow("2000", "answer", &took, &count);
    cr_log_info("a kernel ready after %llu ms read %d kernel_info_requests", (unsigned long long)took, count);
    fprintf(stderr, "kernel_info: a kernel ready after %llu ms read %d kernel_info_requests\n", (unsigned long long)took, count);
    cr_expect_leq(count, sends_within(took) + 1, "%d kernel_info_requests for a start of %llu ms (at most %d)", count,
                  (unsigned long long)took, sends_within(took) + 1);
}

/* A kernel that loses the first kernel_info_request (it reads it and never answers) still becomes ready: a later one is
 * answered. */
Test(kernel_info, a_kernel_whose_first_kernel_info_was_lost_still_becomes_ready)
{
    uint64_t took;
    int count;

    start_slow("0", "drop-first", &took, &count);
    cr_expect_geq(count, 2, "the first was dropped, a later one answered (%d read)", count);
}
