/* tests/gateway/test_prometheus.c: the figures' registry (core/stats.h) and its text exposition 0.0.4 (metrics/prometheus.h). */
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "metrics/prometheus.h"
#include "gw_test.h"

TestSuite(prometheus, .init = gw_test_init);

static char *render(gw_stats_t *stats)
{
    size_t len;
    char *text = gw_prom_render(stats, &len);
    cr_assert_eq(strlen(text), len);
    return text;
}

static void assert_has(const char *text, const char *line)
{
    cr_assert_not_null(strstr(text, line), "missing:\n%s\nin:\n%s", line, text);
}

Test(prometheus, counter_family_help_and_type_once)
{
    gw_stats_t stats;
    gw_stats_init(&stats);
    gw_stats_series_t *ok = gw_stats_counter(&stats, "kgate_runs_total", "Runs, by outcome", "outcome", "ok");
    gw_stats_series_t *error = gw_stats_counter(&stats, "kgate_runs_total", "ignored", "outcome", "error");

    cr_assert_eq(gw_stats_counter(&stats, "kgate_runs_total", NULL, "outcome", "ok"), ok, "registration is idempotent");
    gw_stats_inc(ok, 3);
    gw_stats_inc(error, 1);
    char *text = render(&stats);
    cr_assert_str_eq(text, "# HELP kgate_runs_total Runs, by outcome\n"
                           "# TYPE kgate_runs_total counter\n"
                           "kgate_runs_total{outcome=\"ok\"} 3\n"
                           "kgate_runs_total{outcome=\"error\"} 1\n");
    free(text);
    gw_stats_dispose(&stats);
}

Test(prometheus, histogram_buckets_are_cumulative_with_inf_sum_count)
{
    static const double bounds[] = {0.1, 1, 10};
    gw_stats_t stats;
    gw_stats_init(&stats);
    gw_stats_series_t *h = gw_stats_histogram(&stats, "kgate_run_duration_seconds", "Runs", NULL, NULL, bounds, 3);

    gw_stats_observe(h, 0.05);
    gw_stats_observe(h, 0.1); /* on a bound: counts in it (le) */
    gw_stats_observe(h, 5);
    gw_stats_observe(h, 100); /* above every bound: +Inf only */
    char *text = render(&stats);
    cr_assert_str_eq(text, "# HELP kgate_run_duration_seconds Runs\n"
                           "# TYPE kgate_run_duration_seconds histogram\n"
                           "kgate_run_duration_seconds_bucket{le=\"0.1\"} 2\n"
                           "kgate_run_duration_seconds_bucket{le=\"1\"} 2\n"
                           "kgate_run_duration_seconds_bucket{le=\"10\"} 3\n"
                           "kgate_run_duration_seconds_bucket{le=\"+Inf\"} 4\n"
                           "kgate_run_duration_seconds_sum 105.15\n"
                           "kgate_run_duration_seconds_count 4\n");
    free(text);
    gw_stats_dispose(&stats);
}

Test(prometheus, labelled_histogram_puts_le_after_its_label)
{
    static const double bounds[] = {1};
    gw_stats_t stats;
    gw_stats_init(&stats);
    gw_stats_observe(gw_stats_histogram(&stats, "h_seconds", "h", "door", "mcp", bounds, 1), 2);
    char *text = render(&stats);
    assert_has(text, "h_seconds_bucket{door=\"mcp\",le=\"1\"} 0\n");
    assert_has(text, "h_seconds_bucket{door=\"mcp\",le=\"+Inf\"} 1\n");
    assert_has(text, "h_seconds_sum{door=\"mcp\"} 2\n");
    assert_has(text, "h_seconds_count{door=\"mcp\"} 1\n");
    free(text);
    gw_stats_dispose(&stats);
}

Test(prometheus, escapes_help_and_label_values)
{
    gw_stats_t stats;
    gw_stats_init(&stats);
    gw_stats_set(gw_stats_gauge(&stats, "g", "a \\ back\nslash \"quoted\"", "kernel", "py\"3\\\n"), 1.5);
    char *text = render(&stats);
    /* help: backslash and newline escaped, quotes as they are; label values: quotes too */
    assert_has(text, "# HELP g a \\\\ back\\nslash \"quoted\"\n");
    assert_has(text, "g{kernel=\"py\\\"3\\\\\\n\"} 1.5\n");
    free(text);
    gw_stats_dispose(&stats);
}

static double read_seven(void *arg)
{
    return *(double *)arg;
}

static void sample_two(void *arg, gw_stats_emit_t *emit)
{
    (void)arg;
    gw_stats_emit(emit, "python3", 2);
    gw_stats_emit(emit, "bash", 0);
}

Test(prometheus, gauges_read_and_sampled_at_render)
{
    double seven = 7;
    gw_stats_t stats;
    gw_stats_init(&stats);
    gw_stats_gauge_fn(&stats, "kgate_run_queue", "queue", NULL, NULL, read_seven, &seven);
    gw_stats_gauge_sampled(&stats, "kgate_contexts", "contexts", "kernel", sample_two, NULL);
    seven = 8; /* read when rendered, not when registered */
    char *text = render(&stats);
    cr_assert_str_eq(text, "# HELP kgate_run_queue queue\n"
                           "# TYPE kgate_run_queue gauge\n"
                           "kgate_run_queue 8\n"
                           "# HELP kgate_contexts contexts\n"
                           "# TYPE kgate_contexts gauge\n"
                           "kgate_contexts{kernel=\"python3\"} 2\n"
                           "kgate_contexts{kernel=\"bash\"} 0\n");
    free(text);
    gw_stats_dispose(&stats);
}

Test(prometheus, numbers_in_the_formats_spelling)
{
    gw_stats_t stats;
    gw_stats_init(&stats);
    gw_stats_set(gw_stats_gauge(&stats, "a", "", "k", "inf"), INFINITY);
    gw_stats_set(gw_stats_gauge(&stats, "a", "", "k", "ninf"), -INFINITY);
    gw_stats_set(gw_stats_gauge(&stats, "a", "", "k", "nan"), NAN);
    gw_stats_set(gw_stats_gauge(&stats, "a", "", "k", "big"), 1e20);
    gw_stats_set(gw_stats_gauge(&stats, "a", "", "k", "neg"), -3);
    char *text = render(&stats);
    assert_has(text, "a{k=\"inf\"} +Inf\n");
    assert_has(text, "a{k=\"ninf\"} -Inf\n");
    assert_has(text, "a{k=\"nan\"} NaN\n");
    assert_has(text, "a{k=\"big\"} 1e+20\n");
    assert_has(text, "a{k=\"neg\"} -3\n");
    free(text);
    gw_stats_dispose(&stats);
}

Test(prometheus, empty_registry_renders_nothing)
{
    gw_stats_t stats;
    gw_stats_init(&stats);
    char *text = render(&stats);
    cr_assert_str_eq(text, "");
    free(text);
    gw_stats_dispose(&stats);
}

Test(prometheus, a_name_against_the_format_is_a_bug_that_stops, .signal = SIGABRT)
{
    gw_stats_t stats;
    gw_stats_init(&stats);
    gw_stats_counter(&stats, "kgate-runs", "dash is not allowed", NULL, NULL);
}

Test(prometheus, a_family_registered_again_with_another_type_stops, .signal = SIGABRT)
{
    gw_stats_t stats;
    gw_stats_init(&stats);
    gw_stats_counter(&stats, "x_total", "", NULL, NULL);
    gw_stats_gauge(&stats, "x_total", "", NULL, NULL);
}
