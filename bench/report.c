/* bench/report.c: what kgate_bench_execute prints: the table of every case with its verdicts, or the same as JSON. */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "report.h"

/* The overhead kgate aims for; reported, never enforced (benchmarks do not fail on timings). */
#define TARGET_OVERHEAD_PCT 5.0

static double target_pct_of(const bench_case_t *c)
{
    return c->max_overhead_pct > 0 ? c->max_overhead_pct : TARGET_OVERHEAD_PCT;
}

static double ratio_of(const bench_result_t *r)
{
    return r->direct.median > 0 ? r->kgate.median / r->direct.median : 0;
}

static int is_throughput_case(const bench_case_t *c)
{
    return c->expect_stdout_bytes != 0;
}

/* MB/s (10^6 bytes) of `bytes` delivered in `ms`. Throughput falls as time rises, so the median
 * time gives the median throughput, and the max time the min throughput. */
static double mb_per_s(size_t bytes, double ms)
{
    return ms > 0 ? (double)bytes / ms / 1000.0 : 0;
}

/* kgate's throughput relative to direct: the inverse of the ratio of median times. */
static double throughput_ratio(const bench_result_t *r)
{
    return r->kgate.median > 0 ? r->direct.median / r->kgate.median : 0;
}

static void print_throughput(const bench_case_t *c, const bench_result_t *r)
{
    size_t b = c->expect_stdout_bytes;
    double tr = throughput_ratio(r);
    printf("throughput (%zu stdout bytes per execute, all verified): kgate %.1f MB/s (min-max %.1f-%.1f), direct %.1f MB/s "
           "(%.1f-%.1f)\n",
           b, mb_per_s(b, r->kgate.median), mb_per_s(b, r->kgate.max), mb_per_s(b, r->kgate.min), mb_per_s(b, r->direct.median),
           mb_per_s(b, r->direct.max), mb_per_s(b, r->direct.min));
    printf("throughput: kgate/direct = %.1f%%  [%s; target >= %.0f%%: %s]\n", tr * 100, c->name, c->min_throughput_ratio * 100,
           tr >= c->min_throughput_ratio ? "met" : "NOT met");
    if (r->kgate_cpu_ms_relaying >= 0 && r->kgate_cpu_ms_listening >= 0)
        printf("kgate CPU per execute: %.0f ms relaying its client's run, %.0f ms during the direct client's run (receiving the "
               "shared kernel's iopub)\n",
               r->kgate_cpu_ms_relaying, r->kgate_cpu_ms_listening);
    if (r->kernel_cpu_ms[0] > 0 && r->kernel_cpu_ms[1] > 0)
        printf("kernel CPU per execute: %.0f ms via kgate, %.0f ms direct\n", r->kernel_cpu_ms[0], r->kernel_cpu_ms[1]);
    if (r->stream_hwm_kb >= 0)
        printf("peak: kgate VmRSS %.1f MiB before, VmHWM %.1f MiB during the executes (+%.1f MiB), VmRSS %.1f MiB after  [%s]\n",
               (double)r->stream_rss_before_kb / 1024, (double)r->stream_hwm_kb / 1024,
               (double)(r->stream_hwm_kb - r->stream_rss_before_kb) / 1024, (double)r->stream_rss_after_kb / 1024, c->name);
    else
        printf("peak: kgate's VmHWM could not be reset (clear_refs)  [%s]\n", c->name);
}

static int is_pool_case(const bench_case_t *c)
{
    return c->pool_size != 0;
}

/* The template and idle cases are told by their runner: their figures are their own, not the concurrency case's. */
static int is_template_case(const bench_case_t *c)
{
    return c->run == bench_run_template;
}

static int is_idle_case(const bench_case_t *c)
{
    return c->run == bench_run_idle;
}

static int is_concurrency_case(const bench_case_t *c)
{
    return c->clients != 0 && !is_pool_case(c) && !is_template_case(c) && !is_idle_case(c);
}

/* The template case: its three targets, judged on this run's figures (never enforced). */
static void print_template(const bench_case_t *c, const bench_result_t *r)
{
    printf("template: create to first 1+1 forked %.1f ms against spawned %.1f ms (medians, %.1fx)  [%s; target p50 <= %.0f ms: "
           "%s]\n",
           r->kgate.median, r->direct.median, r->kgate.median > 0 ? r->direct.median / r->kgate.median : 0, c->name,
           c->max_create_ms, r->kgate.median <= c->max_create_ms ? "met" : "NOT met");
    printf("template: %u contexts at once, all at their first 1+1 after %.0f ms forked, %.0f ms spawned (%.1fx)  [target <= %.0f "
           "ms: %s]\n",
           c->clients, r->burst_pool.max, r->burst_cold.max, r->burst_pool.max > 0 ? r->burst_cold.max / r->burst_pool.max : 0,
           c->max_burst_ms, r->burst_pool.n > 0 && r->burst_pool.max <= c->max_burst_ms ? "met" : "NOT met");
    printf("template: idle PSS per context (ten, summed smaps_rollup) %.1f MiB forked (the template's share included), %.1f "
           "MiB spawned (%.1fx)  [target <= %.0f MiB: %s]\n",
           r->pss_per_context_mib[0], r->pss_per_context_mib[1],
           r->pss_per_context_mib[0] > 0 ? r->pss_per_context_mib[1] / r->pss_per_context_mib[0] : 0, c->max_pss_mib,
           r->pss_per_context_mib[0] > 0 && r->pss_per_context_mib[0] <= c->max_pss_mib ? "met" : "NOT met");
}

/* The pool case: its verdict, and what a burst got (the table has its rows). */
static void print_pool(const bench_case_t *c, const bench_result_t *r)
{
    double speedup = r->kgate.median > 0 ? r->direct.median / r->kgate.median : 0;
    printf("pool: create from a warm pool %.3f ms against a cold start %.3f ms (medians, %.0fx)  [%s; target < %.0f ms: %s]\n",
           r->kgate.median, r->direct.median, speedup, c->name, c->max_create_ms,
           r->kgate.median < c->max_create_ms ? "met" : "NOT met");
    printf(
        "pool: %u contexts asked for at once, %u rounds, with a pool of %u: the %u fastest of each median %.1f ms (max %.1f), the "
        "others median %.1f ms (max %.1f); all %u cold: median %.1f ms (max %.1f)\n",
        c->clients, c->rounds, c->pool_size, c->pool_size, r->burst_hit.median, r->burst_hit.max, r->burst_miss.median,
        r->burst_miss.max, c->clients, r->burst_cold.median, r->burst_cold.max);
}

/* The figure the target is judged on: the median of the round pairs (bench_result_t.paired_ratio). */
static double concurrency_ratio(const bench_result_t *r)
{
    return r->paired_ratio;
}

static void print_concurrency(const bench_case_t *c, const bench_result_t *r)
{
    double cr = concurrency_ratio(r);
    printf("concurrency (%u clients on %u kernels, %u rounds of %u ms each way, median round): kgate %.1f executes/s (p99 %.2f "
           "ms), direct %.1f executes/s (p99 %.2f ms)\n",
           r->clients_run, r->clients_run, r->rounds_run, c->round_ms, r->kgate_executes_per_s, r->kgate_p99_ms,
           r->direct_executes_per_s, r->direct_p99_ms);
    printf("concurrency: executes/s per round pair, kgate/direct:");
    for (unsigned i = 0; i != r->rounds_run; ++i)
        printf(" %.0f/%.0f", r->round_executes_per_s[0][i], r->round_executes_per_s[1][i]);
    printf("\n");
    printf("concurrency: CPU ms per execute, kgate rounds: kgate %.3f, kernels %.3f, clients %.3f (sum %.3f); direct rounds: "
           "kgate %.3f, kernels %.3f, clients %.3f (sum %.3f)\n",
           r->cpu_per_execute[0][0], r->cpu_per_execute[0][1], r->cpu_per_execute[0][2],
           r->cpu_per_execute[0][0] + r->cpu_per_execute[0][1] + r->cpu_per_execute[0][2], r->cpu_per_execute[1][0],
           r->cpu_per_execute[1][1], r->cpu_per_execute[1][2],
           r->cpu_per_execute[1][0] + r->cpu_per_execute[1][1] + r->cpu_per_execute[1][2]);
    printf("concurrency: context switches per execute (voluntary + involuntary), kgate rounds: kgate %.1f + %.1f, kernels "
           "%.1f + %.1f; direct rounds: kgate %.1f + %.1f, kernels %.1f + %.1f\n",
           r->switches_per_execute[0][0], r->switches_per_execute[0][1], r->switches_per_execute[0][2],
           r->switches_per_execute[0][3], r->switches_per_execute[1][0], r->switches_per_execute[1][1],
           r->switches_per_execute[1][2], r->switches_per_execute[1][3]);
    printf("concurrency: kgate/direct = %.1f%%, the median of the round pairs (ratio of the median rounds: %.1f%%)  [%s; target >= "
           "%.0f%%: %s]\n",
           cr * 100, r->direct_executes_per_s > 0 ? 100 * r->kgate_executes_per_s / r->direct_executes_per_s : 0, c->name,
           c->min_throughput_ratio * 100, cr >= c->min_throughput_ratio ? "met" : "NOT met");
}

static int is_speedup_case(const bench_case_t *c)
{
    return c->min_speedup > 0;
}

static void print_transport(const bench_case_t *c, const bench_result_t *r)
{
    printf("transport: TCP/ipc median ratio = %.3f (%+.3f ms per execute; %s %.3f ms, %s %.3f ms; p90 %.3f vs %.3f)  [%s]\n",
           r->direct.median > 0 ? r->kgate.median / r->direct.median : 0, r->kgate.median - r->direct.median, c->language,
           r->kgate.median, c->baseline_language, r->direct.median, r->kgate.p90, r->direct.p90, c->name);
}

/* How many times faster the subject (kgate slot) is than the baseline (direct slot), by medians. */
static double speedup_of(const bench_result_t *r)
{
    return r->kgate.median > 0 ? r->direct.median / r->kgate.median : 0;
}

static void print_speedup(const bench_case_t *c, const bench_result_t *r)
{
    double x = speedup_of(r);
    printf("speedup: %s is %.1fx faster than %s by median (%.3f ms vs %.3f ms)  [%s; target >= %.0fx: %s]\n", c->language, x,
           c->baseline_language, r->kgate.median, r->direct.median, c->name, c->min_speedup,
           x >= c->min_speedup ? "met" : "NOT met");
}

static void print_row(const char *name, const char *label, const bench_summary_t *s)
{
    printf("%-19s %-30s %5zu %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, label, s->n, s->median, s->p10, s->p90, s->p99, s->min,
           s->max);
}

/* The Jupyter Server column: kgate's WebSocket against Jupyter Server's, by medians. */
static double peer_speedup_of(const bench_result_t *r)
{
    return r->kgate.median > 0 && r->peer.n > 0 ? r->peer.median / r->kgate.median : 0;
}

static void print_peer(const bench_case_t *c, const bench_result_t *r, const bench_report_opts_t *opts)
{
    double x = peer_speedup_of(r);
    if (r->peer.n == 0) {
        printf("jupyter-server: skipped (%s)\n", r->peer_skipped[0] != '\0' ? r->peer_skipped : "not run");
        return;
    }
    printf("speedup: jupyter-server/kgate median ratio = %.1fx (%.3f ms vs %.3f ms; p99 %.3f vs %.3f; client %s)  [%s; target >= "
           "%.0fx: %s]\n",
           x, r->peer.median, r->kgate.median, r->peer.p99, r->kgate.p99, opts->ws_quickack ? "TCP_QUICKACK" : "delayed ACKs",
           c->name, c->min_peer_speedup, x >= c->min_peer_speedup ? "met" : "NOT met");
}

static double mib(long long kb)
{
    return (double)kb / 1024.0;
}

static void print_rss(const bench_case_t *c, const bench_result_t *r)
{
    if (r->kgate_rss_peak_kb < 0) {
        printf("rss: kgate's VmRSS could not be read  [%s]\n", c->name);
        return;
    }
    printf("rss: kgate VmRSS %.1f MiB at the start, peak %.1f MiB while the case ran (sampled every 50 ms)  [%s; target < %.0f "
           "MiB: "
           "%s]\n",
           mib(r->kgate_rss_start_kb), mib(r->kgate_rss_peak_kb), c->name, mib(c->max_rss_kb),
           r->kgate_rss_peak_kb < c->max_rss_kb ? "met" : "NOT met");
    if (r->peer_rss_peak_kb >= 0)
        printf("rss: jupyter-server VmRSS %.1f MiB with its kernel started, peak %.1f MiB (its kernel not included)\n",
               mib(r->peer_rss_start_kb), mib(r->peer_rss_peak_kb));
}

static int is_upload_case(const bench_case_t *c)
{
    return c->upload_mib != 0;
}

static double p99_ratio(const bench_result_t *r)
{
    return r->direct.p99 > 0 ? r->kgate.p99 / r->direct.p99 : 0;
}

static void print_upload(const bench_case_t *c, const bench_result_t *r)
{
    const bench_summary_t *d = &r->kgate, *b = &r->direct, *s = &r->upload_sending, *p = &r->upload_processing;
    printf("upload-stall: 1+1 during the uploads p50 %.2f, p90 %.2f, p99 %.2f, max %.2f ms; baseline rounds p50 %.2f, p90 %.2f, "
           "p99 %.2f, max %.2f ms; p99 ratio %.2fx  [%s; target p99 < %.0f ms: %s]\n",
           d->median, d->p90, d->p99, d->max, b->median, b->p90, b->p99, b->max, p99_ratio(r), c->name, c->max_p99_ms,
           d->p99 < c->max_p99_ms ? "met" : "NOT met");
    printf("upload: %llu MiB per upload, %u uploads: %.2f s median (min-max %.2f-%.2f), %.1f MB/s; %.2f s sending, %.2f s more "
           "until "
           "its 200; kgate CPU %.2f s per upload\n",
           (unsigned long long)(r->upload_bytes >> 20), r->uploads, r->upload_ms / 1000, r->upload_min_ms / 1000,
           r->upload_max_ms / 1000, mb_per_s((size_t)r->upload_bytes, r->upload_ms), r->upload_send_ms / 1000,
           (r->upload_ms - r->upload_send_ms) / 1000, r->upload_cpu_ms / 1000);
    printf("upload: executes started while sending: n %zu, p50 %.2f, p99 %.2f, max %.2f ms; after (kgate parsing and copying): "
           "n %zu, p50 %.2f, p99 %.2f, max %.2f ms\n",
           s->n, s->median, s->p99, s->max, p->n, p->median, p->p99, p->max);
    if (r->kgate_rss_peak_kb >= 0)
        printf("rss: kgate VmRSS %.1f MiB at the start, peak %.1f MiB during the uploads (sampled every 50 ms)\n",
               mib(r->kgate_rss_start_kb), mib(r->kgate_rss_peak_kb));
}

/* The idle case: how many, their memory, the latencies among them against one context, and kgate's stop. */
static void print_idle(const bench_case_t *c, const bench_result_t *r)
{
    unsigned n = r->idle_contexts_created;
    printf("idle: %u of %u Python contexts created in %.1f s (%u at a time); their kernels, the template and its spare %.0f MiB "
           "PSS together, %.1f MiB per context; MemAvailable down %.0f MiB; kgate's VmRSS %.1f MiB\n",
           n, r->idle_contexts_asked, r->idle_create_s, r->idle_creators, r->idle_pss_total_mib,
           n > 0 ? r->idle_pss_total_mib / n : 0, r->idle_mem_used_mib, mib(r->kgate_rss_peak_kb));
    printf("idle: 1+1 with %u idle contexts %.1f ms (p90 %.1f, max %.1f) against %.1f ms with one (medians, %.2fx)  [%s; target "
           "< %.0f ms: %s]\n",
           n, r->kgate.median, r->kgate.p90, r->kgate.max, r->direct.median,
           r->direct.median > 0 ? r->kgate.median / r->direct.median : 0, c->name, c->max_idle_cell_ms,
           n == r->idle_contexts_asked && r->kgate.median < c->max_idle_cell_ms ? "met" : "NOT met");
    printf("idle: /healthz with %u idle contexts %.2f ms (p90 %.2f, max %.2f) against %.2f ms with one (medians)\n", n,
           r->burst_pool.median, r->burst_pool.p90, r->burst_pool.max, r->burst_cold.median);
    printf("idle: kgate stopped in %.1f s (SIGTERM); %zu of its descendants outlived it\n", r->idle_stop_s, r->idle_survivors);
}

void bench_print_table(const bench_case_t **cases, const bench_result_t *results, size_t n, uint16_t port,
                       const bench_report_opts_t *opts)
{
    printf("kgate latency benchmark (kgate on 127.0.0.1:%u); clients alternate execute by execute, after a warm-up\n", port);
    printf("%-19s %-30s %5s %9s %9s %9s %9s %9s %9s\n", "case", "client", "n", "median ms", "p10", "p90", "p99", "min", "max");
    for (size_t i = 0; i < n; ++i) {
        print_row(cases[i]->name, results[i].kgate_label, &results[i].kgate);
        print_row(cases[i]->name, results[i].direct_label, &results[i].direct);
        if (results[i].peer.n > 0)
            print_row(cases[i]->name, results[i].peer_label, &results[i].peer);
        if (results[i].burst_pool.n > 0)
            print_row(cases[i]->name, results[i].burst_pool_label, &results[i].burst_pool);
        if (results[i].burst_hit.n > 0)
            print_row(cases[i]->name, results[i].burst_hit_label, &results[i].burst_hit);
        if (results[i].burst_miss.n > 0)
            print_row(cases[i]->name, results[i].burst_miss_label, &results[i].burst_miss);
        if (results[i].burst_cold.n > 0)
            print_row(cases[i]->name, results[i].burst_cold_label, &results[i].burst_cold);
    }
    printf("\n");
    for (size_t i = 0; i < n; ++i) {
        const bench_result_t *r = &results[i];
        double ratio = ratio_of(r), pct = (ratio - 1) * 100;
        if (cases[i]->transport_pair) {
            print_transport(cases[i], r);
        } else if (is_speedup_case(cases[i])) {
            print_speedup(cases[i], r);
        } else if (is_upload_case(cases[i])) {
            print_upload(cases[i], r);
        } else if (is_template_case(cases[i])) {
            print_template(cases[i], r);
        } else if (is_idle_case(cases[i])) {
            print_idle(cases[i], r);
        } else if (is_pool_case(cases[i])) {
            print_pool(cases[i], r);
        } else if (is_concurrency_case(cases[i])) {
            printf("overhead: kgate/direct median latency ratio = %.2f (%+.1f%%)  [%s, under load]\n", ratio, pct, cases[i]->name);
            print_concurrency(cases[i], r);
        } else if (is_throughput_case(cases[i])) {
            printf("overhead: kgate/direct median ratio = %.2f (%+.1f%%)  [%s: %+.3f ms per execute]\n", ratio, pct, cases[i]->name,
                   r->kgate.median - r->direct.median);
            print_throughput(cases[i], r);
        } else if (cases[i]->via_mcp) {
            printf("overhead: %s / %s median ratio = %.2f (%+.1f%%)  [%s: %+.3f ms per call; p90 %.3f vs %.3f, "
                   "p99 %.3f vs %.3f; target < %.0f%%: %s]\n",
                   r->kgate_label, r->direct_label, ratio, pct, cases[i]->name, r->kgate.median - r->direct.median, r->kgate.p90,
                   r->direct.p90, r->kgate.p99, r->direct.p99, target_pct_of(cases[i]),
                   pct < target_pct_of(cases[i]) ? "met" : "NOT met");
            if (r->kgate_cpu_ms_relaying >= 0)
                printf("kgate CPU per call: %.2f ms per %s, %.2f ms per %s (/proc ticks averaged over the timed calls)\n",
                       r->kgate_cpu_ms_relaying, r->kgate_label, r->kgate_cpu_ms_listening, r->direct_label);
        } else {
            printf("overhead: kgate/direct median ratio = %.2f (%+.1f%%)  [%s: %+.3f ms per execute; target < %.0f%%: %s]\n", ratio,
                   pct, cases[i]->name, r->kgate.median - r->direct.median, target_pct_of(cases[i]),
                   pct < target_pct_of(cases[i]) ? "met" : "NOT met");
            if (r->kgate_cpu_ms_relaying >= 0 && r->kernel_cpu_ms[0] > 0) /* measured by the execute pairs only */
                printf("CPU per execute (/proc ticks averaged over the timed executes): kgate %.3f ms relaying, %.3f ms while "
                       "the direct client ran; the kernel %.3f ms via kgate, %.3f ms direct\n",
                       r->kgate_cpu_ms_relaying, r->kgate_cpu_ms_listening, r->kernel_cpu_ms[0], r->kernel_cpu_ms[1]);
        }
        if (cases[i]->min_peer_speedup > 0)
            print_peer(cases[i], r, opts);
        if (cases[i]->max_rss_kb != 0)
            print_rss(cases[i], r);
        if (r->kgate_reconnects > 0)
            printf("note: %s: kgate's HTTP connection was reopened %zu times while sampling (each adds a TCP handshake)\n",
                   cases[i]->name, r->kgate_reconnects);
    }
}

static json_t *summary_json(const char *label, const bench_summary_t *s)
{
    return json_pack("{sssIsfsfsfsfsfsfsf}", "label", label, "n", (json_int_t)s->n, "median_ms", s->median, "p10_ms", s->p10,
                     "p90_ms", s->p90, "p99_ms", s->p99, "min_ms", s->min, "max_ms", s->max, "mean_ms", s->mean);
}

void bench_print_json(const bench_case_t **cases, const bench_result_t *results, size_t n, const bench_report_opts_t *opts)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < n; ++i) {
        const bench_result_t *r = &results[i];
        double ratio = ratio_of(r), pct = (ratio - 1) * 100;
        json_array_append_new(
            arr, json_pack("{sssssssssoso sfsfsfsfsbsI}", "name", cases[i]->name, "description", cases[i]->description, "language",
                           cases[i]->language, "code", cases[i]->code, "kgate", summary_json(r->kgate_label, &r->kgate), "direct",
                           summary_json(r->direct_label, &r->direct), "ratio", ratio, "overhead_pct", pct, "overhead_ms",
                           r->kgate.median - r->direct.median, "target_pct", target_pct_of(cases[i]), "within_target",
                           pct < target_pct_of(cases[i]), "kgate_reconnects", (json_int_t)r->kgate_reconnects));
        if (is_throughput_case(cases[i])) {
            json_t *c = json_array_get(arr, json_array_size(arr) - 1);
            size_t b = cases[i]->expect_stdout_bytes;
            double tr = throughput_ratio(r);
            /* For a throughput case the latency target does not apply: its verdict is the throughput's. */
            json_object_set_new(c, "target_pct", json_null());
            json_object_set_new(c, "within_target", json_boolean(tr >= cases[i]->min_throughput_ratio));
            json_object_set_new(c, "throughput",
                                json_pack("{sIs{sfsfsf}s{sfsfsf}sfsfsfsf}", "stdout_bytes", (json_int_t)b, "kgate", "median_mb_s",
                                          mb_per_s(b, r->kgate.median), "min_mb_s", mb_per_s(b, r->kgate.max), "max_mb_s",
                                          mb_per_s(b, r->kgate.min), "direct", "median_mb_s", mb_per_s(b, r->direct.median),
                                          "min_mb_s", mb_per_s(b, r->direct.max), "max_mb_s", mb_per_s(b, r->direct.min), "ratio",
                                          tr, "target_ratio", cases[i]->min_throughput_ratio, "kgate_cpu_ms_relaying",
                                          r->kgate_cpu_ms_relaying, "kgate_cpu_ms_listening", r->kgate_cpu_ms_listening));
            json_object_set_new(c, "peak",
                                json_pack("{sIsIsI}", "kgate_rss_before_kb", (json_int_t)r->stream_rss_before_kb, "kgate_hwm_kb",
                                          (json_int_t)r->stream_hwm_kb, "kgate_rss_after_kb", (json_int_t)r->stream_rss_after_kb));
        }
        if (is_concurrency_case(cases[i])) {
            json_t *c = json_array_get(arr, json_array_size(arr) - 1);
            json_object_set_new(c, "target_pct", json_null());
            json_object_set_new(c, "within_target", json_boolean(concurrency_ratio(r) >= cases[i]->min_throughput_ratio));
            json_object_set_new(c, "concurrency",
                                json_pack("{sisisisfsfsfsfsfsf}", "clients", (int)r->clients_run, "rounds", (int)r->rounds_run,
                                          "round_ms", (int)cases[i]->round_ms, "kgate_executes_per_s", r->kgate_executes_per_s,
                                          "direct_executes_per_s", r->direct_executes_per_s, "kgate_p99_ms", r->kgate_p99_ms,
                                          "direct_p99_ms", r->direct_p99_ms, "ratio", concurrency_ratio(r), "target_ratio",
                                          cases[i]->min_throughput_ratio));
            json_t *rounds = json_array();
            for (unsigned k = 0; k != r->rounds_run; ++k)
                json_array_append_new(
                    rounds, json_pack("{sfsf}", "kgate", r->round_executes_per_s[0][k], "direct", r->round_executes_per_s[1][k]));
            json_object_set_new(json_object_get(c, "concurrency"), "round_pairs", rounds);
            json_t *sw = json_object();
            for (int side = 0; side != 2; ++side)
                json_object_set_new(sw, side == 0 ? "kgate_rounds" : "direct_rounds",
                                    json_pack("{sfsfsfsf}", "kgate_voluntary", r->switches_per_execute[side][0],
                                              "kgate_involuntary", r->switches_per_execute[side][1], "kernels_voluntary",
                                              r->switches_per_execute[side][2], "kernels_involuntary",
                                              r->switches_per_execute[side][3]));
            json_object_set_new(c, "switches_per_execute", sw);
            json_object_set_new(c, "cpu_ms_per_execute",
                                json_pack("{s{sfsfsf}s{sfsfsf}}", "kgate_rounds", "kgate", r->cpu_per_execute[0][0], "kernels",
                                          r->cpu_per_execute[0][1], "clients", r->cpu_per_execute[0][2], "direct_rounds", "kgate",
                                          r->cpu_per_execute[1][0], "kernels", r->cpu_per_execute[1][1], "clients",
                                          r->cpu_per_execute[1][2]));
        }
        if (cases[i]->min_peer_speedup > 0) {
            json_t *c = json_array_get(arr, json_array_size(arr) - 1);
            json_object_set_new(c, "peer", r->peer.n > 0 ? summary_json(r->peer_label, &r->peer) : json_null());
            json_object_set_new(c, "peer_skipped", r->peer.n > 0 ? json_null() : json_string(r->peer_skipped));
            json_object_set_new(c, "peer_speedup", r->peer.n > 0 ? json_real(peer_speedup_of(r)) : json_null());
            json_object_set_new(c, "target_peer_speedup", json_real(cases[i]->min_peer_speedup));
        }
        if (cases[i]->max_rss_kb != 0) {
            json_t *c = json_array_get(arr, json_array_size(arr) - 1);
            json_object_set_new(c, "rss",
                                json_pack("{sIsIsIsIsI}", "kgate_start_kb", (json_int_t)r->kgate_rss_start_kb, "kgate_peak_kb",
                                          (json_int_t)r->kgate_rss_peak_kb, "target_kb", (json_int_t)cases[i]->max_rss_kb,
                                          "peer_start_kb", (json_int_t)r->peer_rss_start_kb, "peer_peak_kb",
                                          (json_int_t)r->peer_rss_peak_kb));
        }
        if (is_upload_case(cases[i])) {
            json_t *c = json_array_get(arr, json_array_size(arr) - 1);
            json_object_set_new(c, "target_pct", json_null());
            json_object_set_new(c, "within_target", json_boolean(r->kgate.p99 < cases[i]->max_p99_ms));
            json_object_set_new(
                c, "upload",
                json_pack("{sIsisfsfsfsfsfsfsosososfsIsI}", "bytes", (json_int_t)r->upload_bytes, "uploads", (int)r->uploads,
                          "median_ms", r->upload_ms, "min_ms", r->upload_min_ms, "max_ms", r->upload_max_ms, "send_ms",
                          r->upload_send_ms, "mb_s", mb_per_s((size_t)r->upload_bytes, r->upload_ms), "kgate_cpu_ms",
                          r->upload_cpu_ms, "sending", summary_json("started while sending", &r->upload_sending), "processing",
                          summary_json("started after sending", &r->upload_processing), "target_p99_ms",
                          json_real(cases[i]->max_p99_ms), "p99_ratio", p99_ratio(r), "kgate_rss_start_kb",
                          (json_int_t)r->kgate_rss_start_kb, "kgate_rss_peak_kb", (json_int_t)r->kgate_rss_peak_kb));
        }
        if (cases[i]->via_mcp) {
            json_t *c = json_array_get(arr, json_array_size(arr) - 1);
            json_object_set_new(c, "mcp_sse_only", json_boolean(opts->mcp_sse_only));
            json_object_set_new(c, "kgate_cpu_ms_per_call",
                                json_pack("{sfsf}", "mcp", r->kgate_cpu_ms_relaying, "code", r->kgate_cpu_ms_listening));
        }
        if (is_pool_case(cases[i])) {
            json_t *c = json_array_get(arr, json_array_size(arr) - 1);
            /* creation, not execution: the overhead target does not apply, the pool's does */
            json_object_set_new(c, "target_pct", json_null());
            json_object_set_new(c, "within_target", json_boolean(r->kgate.median < cases[i]->max_create_ms));
            json_object_set_new(c, "pool",
                                json_pack("{sssisisfsoso}", "kernel", cases[i]->pool_kernel, "size", (int)cases[i]->pool_size,
                                          "burst_clients", (int)cases[i]->clients, "target_create_ms", cases[i]->max_create_ms,
                                          "burst_pool", summary_json(r->burst_pool_label, &r->burst_pool), "burst_cold",
                                          summary_json(r->burst_cold_label, &r->burst_cold)));
            json_object_set_new(json_object_get(c, "pool"), "burst_pool_fastest", summary_json(r->burst_hit_label, &r->burst_hit));
            json_object_set_new(json_object_get(c, "pool"), "burst_pool_others", summary_json(r->burst_miss_label, &r->burst_miss));
        }
        if (cases[i]->transport_pair) {
            json_t *c = json_array_get(arr, json_array_size(arr) - 1);
            /* one kernel on two transports: a measurement, no target */
            json_object_set_new(c, "target_pct", json_null());
            json_object_set_new(c, "within_target", json_null());
            json_object_set_new(c, "baseline_language", json_string(cases[i]->baseline_language));
            json_object_set_new(c, "tcp_ipc_ratio", json_real(r->direct.median > 0 ? r->kgate.median / r->direct.median : 0));
        }
        if (is_speedup_case(cases[i])) {
            json_t *c = json_array_get(arr, json_array_size(arr) - 1);
            /* Two kernels through kgate: the overhead target does not apply, the speedup's does. */
            json_object_set_new(c, "target_pct", json_null());
            json_object_set_new(c, "within_target", json_boolean(speedup_of(r) >= cases[i]->min_speedup));
            json_object_set_new(c, "baseline_language", json_string(cases[i]->baseline_language));
            json_object_set_new(c, "speedup", json_real(speedup_of(r)));
            json_object_set_new(c, "target_speedup", json_real(cases[i]->min_speedup));
        }
    }
    json_t *doc = json_pack("{sssbso}", "benchmark", "kgate_bench_execute", "ws_quickack", opts->ws_quickack, "cases", arr);
    char *s = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    printf("%s\n", s);
    free(s);
    json_decref(doc);
}
