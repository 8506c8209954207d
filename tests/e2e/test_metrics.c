/* tests/e2e/test_metrics.c: execd's GET /metrics and GET /metrics/watch on the real kgate. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "checks.h"
#include "shared.h"
#include "support/base.h"
#include "support/events.h"
#include "support/http.h"
#include "support/stream.h"

TestSuite(metrics, .timeout = 60);

/* execd's fields, with values a machine can have. */
static void assert_sane(json_t *m, const char *what)
{
    double total = json_number_value(json_object_get(m, "mem_total_mib")),
           used = json_number_value(json_object_get(m, "mem_used_mib")),
           cpu = json_number_value(json_object_get(m, "cpu_used_pct"));

    cr_assert(json_is_object(m), "%s: not a JSON object", what);
    cr_assert_geq(json_number_value(json_object_get(m, "cpu_count")), 1, "%s: cpu_count", what);
    cr_assert(cpu >= 0 && cpu <= 100, "%s: cpu_used_pct %f", what, cpu);
    cr_assert(total > 0 && used > 0 && used <= total, "%s: memory %f of %f MiB", what, used, total);
    cr_assert_gt(json_integer_value(json_object_get(m, "timestamp")), 1600000000000LL, "%s: timestamp in Unix ms", what);
}

Test(metrics, one_reading)
{
    ts_response_t r;

    ts_http_request(e2e_shared()->port, "GET", "/metrics", NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    assert_sane(r.json, "GET /metrics");
    ts_response_dispose(&r);
}

Test(metrics, watch_sends_a_line_per_second)
{
    char err[256] = "";
    ts_stream_t *s = ts_stream_open(e2e_shared()->port, "GET", "/metrics/watch", NULL, NULL, ts_now_ms() + 5000, err);
    ts_events_t evs = {0};
    int64_t deadline = ts_now_ms() + 2500;

    cr_assert_not_null(s, "GET /metrics/watch: %s", err);
    cr_assert_eq(ts_stream_response(s)->status, 200);
    while (ts_stream_next(s, deadline, &evs) > 0)
        ;
    ts_stream_close(s);
    cr_assert_geq(evs.n, 2, "%zu lines in 2.5 s", evs.n);
    cr_assert_leq(evs.n, 4, "%zu lines in 2.5 s: one per second", evs.n);
    for (size_t i = 0; i != evs.n; ++i)
        assert_sane(evs.v[i].json, "a watch line");
    ts_events_dispose(&evs);
}
