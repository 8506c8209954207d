/* bench/main.c: kgate_bench_execute: kgate's latency against a direct ZMQ client, in one interleaved run. */
#include <errno.h>
#include <ftw.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "support/gateway.h"
#include "support/http.h"
#include "common.h"
#include "cases.h"

/* The overhead kgate aims for; reported, never enforced (benchmarks do not fail on timings). */
#define TARGET_OVERHEAD_PCT 5.0
#define MAX_EXTRA_ARGS 32

static volatile sig_atomic_t interrupted;
/* --ws-quickack, --mcp-sse-only: said beside the figures they change */
static int ws_quickack;
static int mcp_sse_only;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: kgate_bench_execute [options]\n"
               "  --samples N        timed executes per client (default: per case: execute 300, stream 5, bash 200, jupyter 200,\n"
               "                     mcp 300)\n"
               "  --warmup N         untimed executes per client first (default: per case: execute 20, stream 1, bash 10,\n"
               "                     jupyter 20, mcp 20; concurrency cases: per client and round, 5)\n"
               "  --case NAME        run only this case (repeatable; default: all)\n"
               "  --list             list the cases and exit\n"
               "  --json             print the figures as JSON instead of a table\n"
               "  --kgate PATH       kgate binary (default: ../gateway/kgate beside this binary)\n"
               "  --kgate-arg ARG    extra argument for kgate (repeatable)\n"
               "  --timeout MS       per-request timeout (default 60000)\n"
               "  --ws-quickack      kernel WebSocket clients acknowledge every read at once (TCP_QUICKACK): no\n"
               "                     delayed-ACK stalls with servers that leave Nagle on (Jupyter Server)\n"
               "  --rounds N         rounds of each kind in the cases that run in rounds (default: per case, 3; at most 16)\n"
               "  --upload-mib N     upload-stall: MiB uploaded per upload round (default 1024)\n"
               "  --mcp-sse-only     the mcp case's client accepts only text/event-stream: kgate answers every call\n"
               "                     in an SSE stream whose head goes out at once, instead of JSON at the end\n"
               "  --verbose          progress on stderr\n");
}

static char *default_kgate_path(void)
{
    char self[PATH_MAX], out[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return wire_strdup("gateway/kgate");
    self[n] = '\0';
    snprintf(out, sizeof(out), "%s/../gateway/kgate", dirname(self));
    return wire_strdup(out);
}

/* Kernelspecs the bench itself provides (bench/kernels, copied beside this binary by cmake): baselines to compare with. */
static char *bench_kernels_dir(void)
{
    char self[PATH_MAX], out[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return wire_strdup("bench/kernels");
    self[n] = '\0';
    snprintf(out, sizeof(out), "%s/kernels", dirname(self));
    return wire_strdup(out);
}

static int has_arg(char *const *args, size_t n, const char *name)
{
    for (size_t i = 0; i != n; ++i)
        if (strcmp(args[i], name) == 0 || (strncmp(args[i], name, strlen(name)) == 0 && args[i][strlen(name)] == '='))
            return 1;
    return 0;
}

/* A new dir $TMPDIR/kgate-bench-ws-XXXXXX in `out`; 0, or -1 with errno set (and the template in `out`). */
static int make_workspace(char *out, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, size, "%s/kgate-bench-ws-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    return mkdtemp(out) != NULL ? 0 : -1;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Removes the workspace and what is left in it, unless KGATE_BENCH_KEEP says to keep the temp dirs. */
static void remove_workspace(const char *dir)
{
    const char *keep = getenv("KGATE_BENCH_KEEP");
    if (keep != NULL && keep[0] != '\0' && strcmp(keep, "0") != 0) {
        fprintf(stderr, "kgate_bench_execute: kept the workspace %s\n", dir);
        return;
    }
    nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* The latency target of a case: its own, or the default. */
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
}

static int is_pool_case(const bench_case_t *c)
{
    return c->pool_size != 0;
}

static int is_concurrency_case(const bench_case_t *c)
{
    return c->clients != 0 && !is_pool_case(c);
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

static double concurrency_ratio(const bench_result_t *r)
{
    return r->direct_executes_per_s > 0 ? r->kgate_executes_per_s / r->direct_executes_per_s : 0;
}

static void print_concurrency(const bench_case_t *c, const bench_result_t *r)
{
    double cr = concurrency_ratio(r);
    printf("concurrency (%u clients on %u kernels, %u rounds of %u ms each way, median round): kgate %.1f executes/s (p99 %.2f "
           "ms), "
           "direct %.1f executes/s (p99 %.2f ms)\n",
           c->clients, c->clients, c->rounds, c->round_ms, r->kgate_executes_per_s, r->kgate_p99_ms, r->direct_executes_per_s,
           r->direct_p99_ms);
    printf("concurrency: kgate/direct = %.1f%%  [%s; target >= %.0f%%: %s]\n", cr * 100, c->name, c->min_throughput_ratio * 100,
           cr >= c->min_throughput_ratio ? "met" : "NOT met");
}

static int is_speedup_case(const bench_case_t *c)
{
    return c->min_speedup > 0;
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

static void print_peer(const bench_case_t *c, const bench_result_t *r)
{
    double x = peer_speedup_of(r);
    if (r->peer.n == 0) {
        printf("jupyter-server: skipped (%s)\n", r->peer_skipped[0] != '\0' ? r->peer_skipped : "not run");
        return;
    }
    printf("speedup: jupyter-server/kgate median ratio = %.1fx (%.3f ms vs %.3f ms; p99 %.3f vs %.3f; client %s)  [%s; target >= "
           "%.0fx: %s]\n",
           x, r->peer.median, r->kgate.median, r->peer.p99, r->kgate.p99, ws_quickack ? "TCP_QUICKACK" : "delayed ACKs", c->name,
           c->min_peer_speedup, x >= c->min_peer_speedup ? "met" : "NOT met");
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

static void print_table(const bench_case_t **cases, const bench_result_t *results, size_t n, uint16_t port)
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
        if (is_speedup_case(cases[i])) {
            print_speedup(cases[i], r);
        } else if (is_upload_case(cases[i])) {
            print_upload(cases[i], r);
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
            printf("overhead: MCP run_code / POST /code median ratio = %.2f (%+.1f%%)  [%s: %+.3f ms per call; p90 %.3f vs %.3f, "
                   "p99 %.3f vs %.3f; target < %.0f%%: %s]\n",
                   ratio, pct, cases[i]->name, r->kgate.median - r->direct.median, r->kgate.p90, r->direct.p90, r->kgate.p99,
                   r->direct.p99, target_pct_of(cases[i]), pct < target_pct_of(cases[i]) ? "met" : "NOT met");
            if (r->kgate_cpu_ms_relaying >= 0)
                printf("kgate CPU per call: %.2f ms per MCP run_code, %.2f ms per POST /code (/proc ticks averaged over the "
                       "timed calls)\n",
                       r->kgate_cpu_ms_relaying, r->kgate_cpu_ms_listening);
        } else {
            printf("overhead: kgate/direct median ratio = %.2f (%+.1f%%)  [%s: %+.3f ms per execute; target < %.0f%%: %s]\n", ratio,
                   pct, cases[i]->name, r->kgate.median - r->direct.median, target_pct_of(cases[i]),
                   pct < target_pct_of(cases[i]) ? "met" : "NOT met");
        }
        if (cases[i]->min_peer_speedup > 0)
            print_peer(cases[i], r);
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

static void print_json(const bench_case_t **cases, const bench_result_t *results, size_t n)
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
        }
        if (is_concurrency_case(cases[i])) {
            json_t *c = json_array_get(arr, json_array_size(arr) - 1);
            json_object_set_new(c, "target_pct", json_null());
            json_object_set_new(c, "within_target", json_boolean(concurrency_ratio(r) >= cases[i]->min_throughput_ratio));
            json_object_set_new(c, "concurrency",
                                json_pack("{sisisfsfsfsfsfsf}", "clients", (int)cases[i]->clients, "round_ms",
                                          (int)cases[i]->round_ms, "kgate_executes_per_s", r->kgate_executes_per_s,
                                          "direct_executes_per_s", r->direct_executes_per_s, "kgate_p99_ms", r->kgate_p99_ms,
                                          "direct_p99_ms", r->direct_p99_ms, "ratio", concurrency_ratio(r), "target_ratio",
                                          cases[i]->min_throughput_ratio));
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
            json_object_set_new(c, "mcp_sse_only", json_boolean(mcp_sse_only));
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
    json_t *doc = json_pack("{sssbso}", "benchmark", "kgate_bench_execute", "ws_quickack", ws_quickack, "cases", arr);
    char *s = json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(6));
    printf("%s\n", s);
    free(s);
    json_decref(doc);
}

int main(int argc, char **argv)
{
    enum {
        OPT_SAMPLES = 256,
        OPT_WARMUP,
        OPT_CASE,
        OPT_LIST,
        OPT_JSON,
        OPT_KGATE,
        OPT_KGATE_ARG,
        OPT_TIMEOUT,
        OPT_VERBOSE,
        OPT_WS_QUICKACK,
        OPT_ROUNDS,
        OPT_UPLOAD_MIB,
        OPT_MCP_SSE_ONLY
    };
    static const struct option longopts[] = {
        {"samples", required_argument, NULL, OPT_SAMPLES},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"case", required_argument, NULL, OPT_CASE},
        {"list", no_argument, NULL, OPT_LIST},
        {"json", no_argument, NULL, OPT_JSON},
        {"kgate", required_argument, NULL, OPT_KGATE},
        {"kgate-arg", required_argument, NULL, OPT_KGATE_ARG},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"ws-quickack", no_argument, NULL, OPT_WS_QUICKACK},
        {"rounds", required_argument, NULL, OPT_ROUNDS},
        {"upload-mib", required_argument, NULL, OPT_UPLOAD_MIB},
        {"mcp-sse-only", no_argument, NULL, OPT_MCP_SSE_ONLY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const bench_case_t *selected[64];
    char *kernels_dir = NULL;
    bench_result_t results[64];
    char *extra_args[MAX_EXTRA_ARGS + 5] = {NULL};
    const bench_case_t *ran[64];
    size_t nselected = 0, nextra = 0, nresults = 0;
    size_t samples = 0, warmup = SIZE_MAX;
    unsigned rounds = 0;
    uint64_t upload_mib = 0;
    char workspace[PATH_MAX] = "";
    unsigned timeout_ms = 60000;
    int json_out = 0, verbose = 0, opt, exit_code = 1, err = 0;
    char *kgate_path = NULL;

    wire_global_init();
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case OPT_ROUNDS:
        case OPT_UPLOAD_MIB: {
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end != '\0' || v == 0 || v > (opt == OPT_ROUNDS ? 16 : 1u << 20)) {
                fprintf(stderr, "kgate_bench_execute: bad number: %s\n", optarg);
                exit_code = 2;
                goto Exit;
            }
            if (opt == OPT_ROUNDS)
                rounds = (unsigned)v;
            else
                upload_mib = v;
            break;
        }
        case OPT_SAMPLES:
        case OPT_WARMUP:
        case OPT_TIMEOUT: {
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end != '\0' || (opt != OPT_WARMUP && v == 0) || v > 1000000) {
                fprintf(stderr, "kgate_bench_execute: bad number: %s\n", optarg);
                exit_code = 2;
                goto Exit;
            }
            if (opt == OPT_SAMPLES)
                samples = v;
            else if (opt == OPT_WARMUP)
                warmup = v;
            else
                timeout_ms = (unsigned)v;
            break;
        }
        case OPT_CASE: {
            const bench_case_t *c = bench_case_find(optarg);
            if (c == NULL) {
                fprintf(stderr, "kgate_bench_execute: no case named %s (try --list)\n", optarg);
                exit_code = 2;
                goto Exit;
            }
            if (nselected < sizeof(selected) / sizeof(selected[0]))
                selected[nselected++] = c;
            break;
        }
        case OPT_LIST:
            for (size_t i = 0; i < bench_num_cases; ++i)
                printf("%-12s %s\n", bench_cases[i].name, bench_cases[i].description);
            exit_code = 0;
            goto Exit;
        case OPT_JSON:
            json_out = 1;
            break;
        case OPT_KGATE:
            free(kgate_path);
            kgate_path = wire_strdup(optarg);
            break;
        case OPT_KGATE_ARG:
            if (nextra == MAX_EXTRA_ARGS) {
                fprintf(stderr, "kgate_bench_execute: at most %d --kgate-arg\n", MAX_EXTRA_ARGS);
                exit_code = 2;
                goto Exit;
            }
            extra_args[nextra++] = optarg;
            break;
        case OPT_VERBOSE:
            verbose = 1;
            break;
        case OPT_WS_QUICKACK:
            ws_quickack = 1;
            break;
        case OPT_MCP_SSE_ONLY:
            mcp_sse_only = 1;
            break;
        case 'h':
            usage(stdout);
            exit_code = 0;
            goto Exit;
        default:
            usage(stderr);
            exit_code = 2;
            goto Exit;
        }
    }
    if (optind != argc) {
        usage(stderr);
        exit_code = 2;
        goto Exit;
    }
    if (nselected == 0)
        for (size_t i = 0; i < bench_num_cases && i < sizeof(selected) / sizeof(selected[0]); ++i)
            selected[nselected++] = &bench_cases[i];
    if (kgate_path == NULL)
        kgate_path = default_kgate_path();
    /* After the caller's --kgate-arg: a --kernel-path given there wins (the first directory holding a name does). */
    kernels_dir = bench_kernels_dir();
    extra_args[nextra++] = "--kernel-path";
    extra_args[nextra++] = kernels_dir;
    /* Files the cases write (upload-stall) go to a workspace of the bench's own, never kgate's cwd. */
    if (!has_arg(extra_args, nextra, "--workspace-root")) {
        if (make_workspace(workspace, sizeof(workspace)) != 0) {
            fprintf(stderr, "kgate_bench_execute: cannot create a workspace dir in %s: %s\n", workspace, strerror(errno));
            goto Exit;
        }
        extra_args[nextra++] = "--workspace-root";
        extra_args[nextra++] = workspace;
    }

    /* No SA_RESTART: a signal ends the sampling loop, and kgate is still stopped on the way out. */
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    ts_gateway_t kgate;
    ts_http_t http;
    ts_gateway_opts_t opts = {.exe = kgate_path,
                              .args = (const char *const *)extra_args,
                              .label = "bench",
                              .keep_env = "KGATE_BENCH_KEEP",
                              .startup_ms = 15000};
    if ((err = ts_gateway_start(&kgate, &opts)) != 0) {
        fprintf(stderr, "kgate_bench_execute: %s: %s\n", bench_strerror(err), kgate.error);
        goto Exit;
    }
    if (verbose)
        fprintf(stderr, "kgate pid %d on 127.0.0.1:%u, runtime dir %s\n", (int)kgate.pid, kgate.port, kgate.runtime_dir);
    ts_http_init(&http, kgate.port, 1);
    bench_env_t env = {.kgate = &kgate,
                       .kgate_exe = kgate_path,
                       .http = &http,
                       .samples = samples,
                       .warmup = warmup,
                       .timeout_ms = timeout_ms,
                       .verbose = verbose,
                       .ws_quickack = ws_quickack,
                       .rounds = rounds,
                       .upload_mib = upload_mib,
                       .mcp_sse_only = mcp_sse_only,
                       .interrupted = &interrupted};
    for (size_t i = 0; i < nselected; ++i) {
        if (verbose)
            fprintf(stderr, "[%s] %s\n", selected[i]->name, selected[i]->description);
        if ((err = selected[i]->run(selected[i], &env, &results[nresults])) == BENCH_ESKIPPED) {
            fprintf(stderr, "kgate_bench_execute: case %s skipped: %s\n", selected[i]->name, bench_detail());
            err = 0;
            continue;
        }
        if (err != 0) {
            fprintf(stderr, "kgate_bench_execute: case %s: %s: %s\n", selected[i]->name, bench_strerror(err), bench_detail());
            break;
        }
        ran[nresults++] = selected[i];
    }
    ts_http_dispose(&http);
    if (ts_gateway_stop(&kgate, NULL) != 0)
        fprintf(stderr, "kgate_bench_execute: warning: %s\n", kgate.error);
    if (verbose)
        fprintf(stderr, "kgate stopped (wait status %d)\n", kgate.exit_status);
    if (nresults > 0) {
        if (json_out)
            print_json(ran, results, nresults);
        else
            print_table(ran, results, nresults, kgate.port);
    }
    exit_code = err == BENCH_EINTERRUPTED ? 130 : err != 0 ? 1 : 0;

Exit:
    if (workspace[0] != '\0')
        remove_workspace(workspace);
    free(kernels_dir);
    free(kgate_path);
    return exit_code;
}
