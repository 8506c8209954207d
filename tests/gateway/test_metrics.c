/* tests/gateway/test_metrics.c: /proc/stat and /proc/meminfo parsing, CPU percentages, execd's field names. */
#include <criterion/criterion.h>
#include "metrics/metrics.h"
#include "gw_test.h"

TestSuite(metrics, .init = gw_test_init);

Test(metrics, stat_cpu_line)
{
    static const char stat[] = "cpu  100 5 50 800 20 3 2 1 0 0\ncpu0 50 2 25 400 10 1 1 0 0 0\nintr 1\n";
    gw_cpu_sample_t s;

    cr_assert_eq(gw_metrics_parse_stat(stat, sizeof(stat) - 1, &s), 0);
    cr_assert_eq(s.busy, 100 + 5 + 50 + 3 + 2 + 1);
    cr_assert_eq(s.total, s.busy + 800 + 20);
    cr_assert_eq(gw_metrics_parse_stat("cpu0 1 2 3 4\n", 13, &s), -1, "only the aggregate line counts");
    cr_assert_eq(gw_metrics_parse_stat("cpu  1 2\n", 9, &s), -1, "too few fields");
}

Test(metrics, meminfo_total_and_available)
{
    static const char with_avail[] = "MemTotal:       2048000 kB\nMemFree:   100000 kB\nMemAvailable:   1024000 kB\n";
    static const char old_kernel[] = "MemTotal: 1000 kB\nMemFree: 100 kB\nBuffers: 50 kB\nCached: 250 kB\nSwapCached: 7 kB\n";
    uint64_t total, avail;

    cr_assert_eq(gw_metrics_parse_meminfo(with_avail, sizeof(with_avail) - 1, &total, &avail), 0);
    cr_assert_eq(total, 2048000);
    cr_assert_eq(avail, 1024000);
    cr_assert_eq(gw_metrics_parse_meminfo(old_kernel, sizeof(old_kernel) - 1, &total, &avail), 0);
    cr_assert_eq(avail, 400, "MemFree + Buffers + Cached (not SwapCached): %llu", (unsigned long long)avail);
    cr_assert_eq(gw_metrics_parse_meminfo("MemFree: 1 kB\n", 14, &total, &avail), -1);
}

Test(metrics, cpu_percentage_between_samples)
{
    gw_cpu_sample_t a = {.busy = 100, .total = 1000}, b = {.busy = 150, .total = 1200}, same = a;

    cr_assert_float_eq(gw_metrics_cpu_pct(&a, &b), 25.0, 1e-9);
    cr_assert_float_eq(gw_metrics_cpu_pct(&a, &same), 0.0, 1e-9, "no time passed");
    cr_assert_float_eq(gw_metrics_cpu_pct(&b, &a), 0.0, 1e-9, "a counter going backwards is not negative use");
}

Test(metrics, reading_this_machine_gives_execd_fields)
{
    gw_cpu_sample_t now;
    json_t *m = gw_metrics_read(NULL, &now);

    cr_assert_not_null(m);
    cr_assert(json_integer_value(json_object_get(m, "cpu_count")) >= 1);
    cr_assert(json_is_real(json_object_get(m, "cpu_used_pct")));
    cr_assert(json_real_value(json_object_get(m, "mem_total_mib")) > 0);
    cr_assert(json_real_value(json_object_get(m, "mem_used_mib")) <= json_real_value(json_object_get(m, "mem_total_mib")));
    cr_assert(json_integer_value(json_object_get(m, "timestamp")) > 1600000000000LL);
    cr_assert_neq(now.at_ms, 0);
    json_decref(m);
}
