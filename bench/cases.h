/* bench/cases.h: the benchmark cases, each a function in one table. */
#ifndef BENCH_CASES_H
#define BENCH_CASES_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "support/gateway.h"
#include "support/http.h"
#include "common.h"
#include "stats.h"

/** What every case is given: the running kgate, an HTTP client of it, and the run's settings. */
typedef struct st_bench_env_t {
    ts_gateway_t *kgate;
    /** The kgate binary, for cases that start a kgate of their own with other flags (`pool`). */
    const char *kgate_exe;
    /** One keep-alive connection to kgate; every request on it is bounded by timeout_ms. */
    ts_http_t *http;
    /** Timed samples per client (0: the case's default). */
    size_t samples;
    /** Untimed executions per client before sampling (SIZE_MAX: the case's default). */
    size_t warmup;
    unsigned timeout_ms;
    int verbose;
    /** --ws-quickack: the kernel WebSocket clients acknowledge every read at once (support/ws_client.h). */
    int ws_quickack;
    /** --rounds: rounds of each kind for the cases that run in rounds (0: the case's default). */
    unsigned rounds;
    /** --clients: clients (each on a kernel of its own) of the concurrency cases (0: the case's default). */
    unsigned clients;
    /** --upload-mib: the `upload-stall` case's upload size in MiB (0: the case's default). */
    uint64_t upload_mib;
    /** --mcp-sse-only: the `mcp` case's client accepts only text/event-stream (bench_mcp_t). */
    int mcp_sse_only;
    /** --contexts: the `idle` case's contexts alive at once (0: the case's default). */
    unsigned contexts;
    /** Set by a signal handler: cases stop sampling and return BENCH_EINTERRUPTED. */
    volatile sig_atomic_t *interrupted;
} bench_env_t;

/** What a case measured: two clients of the same thing, sampled alternately. */
typedef struct st_bench_result_t {
    const char *kgate_label;
    const char *direct_label;
    bench_summary_t kgate;
    bench_summary_t direct;
    /** HTTP connections kgate's client had to reopen during the case (each costs a handshake). */
    size_t kgate_reconnects;
    /**
     * kgate's own CPU time (user + system, ms) per timed execute, averaged: while it relayed its
     * client's runs, and while the direct client ran (kgate then still verifies and decodes every
     * iopub message of the shared kernel before dropping it by parent). The `mcp` case: per MCP
     * call, and per POST /code. -1 when unknown (no /proc).
     */
    double kgate_cpu_ms_relaying;
    double kgate_cpu_ms_listening;
    /** The execute pairs: the kernels' CPU time (ms) per timed execute through kgate [0] and direct [1]; -1 unknown. */
    double kernel_cpu_ms[2];
    /** Concurrency cases: executes per second of all clients together, the median over rounds. */
    double kgate_executes_per_s;
    double direct_executes_per_s;
    /**
     * Concurrency cases: the clients and rounds run, each round's executes/s (kgate [0], direct [1]),
     * and the median over the rounds of kgate's round against the direct round run beside it: a
     * slow spell of the machine (other tenants) then weighs on both sides of a pair alike.
     */
    unsigned clients_run, rounds_run;
    double round_executes_per_s[2][16];
    double paired_ratio;
    /** Concurrency cases: the 99th percentile of every execute's latency (ms). */
    double kgate_p99_ms;
    double direct_p99_ms;
    /**
     * Concurrency cases: CPU time (ms) per execute, warm-ups included, in kgate's rounds [0] and
     * the direct rounds [1], of kgate [.][0], its kernels [.][1] and the bench's clients [.][2]:
     * where the machine's cores went on each side.
     */
    double cpu_per_execute[2][3];
    /**
     * Concurrency cases: context switches per execute, warm-ups included, in kgate's rounds [0] and
     * the direct rounds [1]: kgate's voluntary [.][0] (it waited: one per wake-up) and involuntary
     * [.][1] (preempted), the kernels' voluntary [.][2] and involuntary [.][3].
     */
    double switches_per_execute[2][4];
    /** The `jupyter` case: a third client, Jupyter Server's WebSocket on a kernel it manages (n 0 when not run). */
    const char *peer_label;
    bench_summary_t peer;
    /** Why the peer was not run ("" when it was, or when the case has none). */
    char peer_skipped[256];
    /** Cases with `max_rss_kb`: kgate's VmRSS (KiB) when the case started and its peak while it ran (-1: unknown). */
    long long kgate_rss_start_kb;
    long long kgate_rss_peak_kb;
    /** Throughput cases: kgate's VmRSS (KiB) before the executes, its VmHWM during them (reset first; -1: could not be),
     * and its VmRSS after (the heap trimmed by the tick: one second later), in the same run. */
    long long stream_rss_before_kb, stream_hwm_kb, stream_rss_after_kb;
    /** The same of the peer server (its kernels not included), when it ran. */
    long long peer_rss_start_kb;
    long long peer_rss_peak_kb;
    /*
     * The `upload-stall` case (`kgate` slot: executes during the uploads, `direct` slot: baseline
     * rounds; kgate_rss_peak_kb: the peak during the uploads): the uploaded file's bytes, the
     * uploads' wall time from the first byte sent to the 200 (median, min, max over rounds, ms), the
     * median part of it spent sending, kgate's CPU per upload (median, ms; -1 unknown), and the
     * executes split by when they started: while the body was being sent, or after it (kgate
     * parsing the multipart body and copying the file).
     */
    uint64_t upload_bytes;
    unsigned uploads;
    double upload_ms, upload_min_ms, upload_max_ms, upload_send_ms, upload_cpu_ms;
    bench_summary_t upload_sending;
    bench_summary_t upload_processing;
    /** The `pool` case: the create latency of every client of its bursts, from a pool and all cold (n 0 when not run). */
    const char *burst_pool_label;
    const char *burst_cold_label;
    bench_summary_t burst_pool;
    bench_summary_t burst_cold;
    /** The same bursts from the pool, split: the pool_size fastest clients of each (the pool's), and the others. */
    const char *burst_hit_label;
    const char *burst_miss_label;
    bench_summary_t burst_hit;
    bench_summary_t burst_miss;
    /** The `template` case: the idle PSS per context (MiB; ten contexts summed, the template's share included), forked [0]
     * and spawned [1]. */
    double pss_per_context_mib[2];
    /** The `idle` case (`kgate` slot: `1+1` with every context idle, `direct`: with one; burst_pool and burst_cold:
     * `/healthz` likewise): the contexts asked for and created, by how many clients at once, the creates' wall time, the PSS of
     * their kernels, the template and its spare summed, what MemAvailable fell by (MiB; -1 unknown), kgate's VmRSS then
     * (kgate_rss_peak_kb), the time kgate's stop took and how many of its descendants outlived it. */
    unsigned idle_contexts_asked, idle_contexts_created, idle_creators;
    double idle_create_s, idle_pss_total_mib, idle_mem_used_mib, idle_stop_s;
    size_t idle_survivors;
} bench_result_t;

typedef struct st_bench_case_t bench_case_t;

/** Runs one case; returns 0 with `out` filled, or a negative bench error (detail set). */
typedef int (*bench_case_fn)(const bench_case_t *self, bench_env_t *env, bench_result_t *out);

/** One entry of the table. The fields after `run` parameterise the shared execute runner. */
struct st_bench_case_t {
    const char *name;
    const char *description;
    bench_case_fn run;
    /** Language of the context to create (POST /code/context). */
    const char *language;
    /** Code executed by both clients. */
    const char *code;
    /** text/plain result both clients must see (checked on every execute), or NULL. */
    const char *expect_result;
    /**
     * stdout bytes both clients must receive on every execute (0: not checked). When set, the
     * figures are also reported as stdout throughput (these bytes per execute), against
     * `min_throughput_ratio` instead of the latency overhead target.
     */
    size_t expect_stdout_bytes;
    /** `output_limit` sent with kgate's POST /code, so that nothing is truncated (0: kgate's default). */
    size_t output_limit;
    /** Throughput target for kgate relative to direct (e.g. 0.95); used when expect_stdout_bytes is set. */
    double min_throughput_ratio;
    size_t default_samples;
    size_t default_warmup;
    /*
     * Cases run by bench_run_kernel_pair compare two kernelspecs of one language, both through
     * kgate's API: `language` (the subject, reported in the `kgate` slot of bench_result_t) and
     * `baseline_language` (reported in the `direct` slot). Both are kernelspec names.
     */
    const char *baseline_language;
    /** Why the baseline's kernelspec may be missing and how to get it (the case is then skipped). */
    const char *baseline_missing;
    /** stdout bytes the subject and the baseline must produce on every execute (not expect_stdout_bytes,
     *  which makes a throughput case). */
    size_t subject_stdout_bytes;
    size_t baseline_stdout_bytes;
    /** Target: baseline median / subject median at least this (reported, never enforced). */
    double min_speedup;
    /**
     * A kernel pair that differ only in their connection file's transport (metadata.kgate.transport): the subject on TCP,
     * the baseline on ipc. Reported as the TCP/ipc median ratio, with no target: a measurement behind kgate's choice of
     * transport (kmgr_kernelspec_transport, docs/liveness.md).
     */
    int transport_pair;
    /*
     * Cases run by bench_run_concurrency: `clients` clients on as many kernels (one context each),
     * every client executing `code` in a loop, through kgate and directly in alternating rounds of
     * `round_ms` (`rounds` of each). Target: kgate's executes/s at least `min_throughput_ratio` of
     * direct's.
     */
    unsigned clients;
    unsigned round_ms;
    unsigned rounds;
    /*
     * Jupyter cases: kgate's side is a C client of its kernel WebSocket (`/api/kernels/{id}/channels`,
     * v1 framing) on kernels started with POST /api/kernels, instead of POST /code over SSE; the
     * `jupyter` case adds Jupyter Server's WebSocket as a third client, which kgate should beat by
     * `min_peer_speedup` (medians). `max_rss_kb`: kgate's VmRSS is sampled during the case and its
     * peak compared with this (0: not sampled). Targets are reported, never enforced.
     */
    int via_jupyter_ws;
    double min_peer_speedup;
    long long max_rss_kb;
    /*
     * The `upload-stall` case: `code` in a loop on one context, in rounds (`rounds` of each kind)
     * alone and while another connection uploads `upload_mib` MiB to POST /files/upload. Target:
     * the p99 during the uploads under `max_p99_ms` (reported, never enforced).
     */
    uint64_t upload_mib;
    double max_p99_ms;
    /*
     * The `mcp` case (bench_run_mcp): `code` in `language` as an MCP tools/call run_code (the `kgate`
     * slot) against POST /code (the `direct` slot), both through kgate, alternately; the `e2b` case
     * likewise with E2B's POST /execute in the `kgate` slot. Target: the MCP
     * median within `max_overhead_pct` of the /code one (0: the default latency target, 5%).
     */
    int via_mcp;
    double max_overhead_pct;
    /* `mcp` case: the 2026-07-28 revision (no session; _meta, Mcp-Method/Mcp-Name, a named context) instead of 2025-11-25 */
    int mcp_stateless;
    /*
     * The `pool` case (bench_run_pool): a kgate of its own with `--pool pool_kernel=pool_size`;
     * POST /code/context from the full pool against a cold start, alternately (target: the pool's
     * median under `max_create_ms`), then `rounds` bursts of `clients` creates at once from the full
     * pool, and as many of cold starts.
     */
    const char *pool_kernel;
    unsigned pool_size;
    double max_create_ms;
    /*
     * The `template` case (bench_run_template): two kgates of its own, templates on and --kernel-template none; create to
     * first `1+1` (target: the forked median under max_create_ms), `clients` contexts at once (target: all within
     * max_burst_ms), the idle PSS of ten contexts (target: max_pss_mib each). Never enforced.
     */
    double max_burst_ms;
    double max_pss_mib;
    /*
     * The `idle` case (bench_run_idle): a kgate of its own with templates on; `idle_contexts` Python contexts alive at once
     * (--contexts), `1+1` and `/healthz` with one and with all of them idle (target: `1+1` median under max_idle_cell_ms).
     */
    unsigned idle_contexts;
    double max_idle_cell_ms;
    /** Run only when named with --case (it holds gigabytes for minutes). */
    int by_name_only;
};

/**
 * One execute by one side of a pair (0: kgate or the subject kernel, 1: the baseline), checked.
 * `timed` is 0 during the warm-up. Returns 0 or an error; the outcome is the sampler's to dispose.
 */
typedef int (*bench_side_fn)(void *ctx, int side, int timed, bench_outcome_t *o);

/**
 * The interleaved sampler every pair case uses: `warmup` + `samples` rounds, each running both
 * sides, the order flipping every round so neither always follows the other (a kernel just woken,
 * caches just warmed). Timed outcomes' durations go to `out[side]` (initialised here; the caller
 * disposes them), and `*reconnects` counts kgate HTTP reconnects during timed rounds. Returns 0,
 * the first error, or BENCH_EINTERRUPTED.
 */
int bench_alternate(bench_env_t *env, const char *name, size_t warmup, size_t samples, bench_side_fn fn, void *ctx,
                    bench_samples_t out[2], size_t *reconnects);

/** Finds the connection file of `context_id`'s kernel in kgate's runtime dir; stores a new string in `*path`. */
int bench_find_kernel(const bench_case_t *self, bench_env_t *env, const char *context_id, char **path);

/** Runner of the concurrency cases (case_concurrency.c). */
int bench_run_concurrency(const bench_case_t *self, bench_env_t *env, bench_result_t *out);

/** Runner of the `jupyter` case (case_jupyter.c): kgate's WebSocket, direct ZMQ and Jupyter Server's WebSocket, rotated. */
int bench_run_jupyter(const bench_case_t *self, bench_env_t *env, bench_result_t *out);

/** Runner of the `upload-stall` case (case_upload.c). */
int bench_run_upload_stall(const bench_case_t *self, bench_env_t *env, bench_result_t *out);
/** Runner of the `mcp` case (case_mcp.c): MCP run_code against POST /code, alternately; kgate's RSS sampled. */
int bench_run_mcp(const bench_case_t *self, bench_env_t *env, bench_result_t *out);
/** Runner of the `e2b` case (case_e2b.c): POST /execute against POST /code, alternately, in one context. */
int bench_run_e2b(const bench_case_t *self, bench_env_t *env, bench_result_t *out);
/** Runner of the `sandbox` case (case_sandbox.c): `code` in a context of a kgate with --sandbox bwrap against a plain one,
 * alternately. */
int bench_run_sandbox(const bench_case_t *self, bench_env_t *env, bench_result_t *out);
/** Runner of the `template` case (case_template.c): forked against spawned Python kernels, one run, side by side. */
int bench_run_template(const bench_case_t *self, bench_env_t *env, bench_result_t *out);
/** Runner of the `idle` case (case_idle.c): hundreds of idle forked Python contexts, `1+1` and /healthz among them. */
int bench_run_idle(const bench_case_t *self, bench_env_t *env, bench_result_t *out);
/** Runner of the `pool` case (case_pool.c): context creation from a warm pool against cold starts, one by one and in bursts. */
int bench_run_pool(const bench_case_t *self, bench_env_t *env, bench_result_t *out);

/** Runner of the kernel-against-kernel cases (case_kernels.c); BENCH_ESKIPPED when the baseline is not installed. */
int bench_run_kernel_pair(const bench_case_t *self, bench_env_t *env, bench_result_t *out);

extern const bench_case_t bench_cases[];
extern const size_t bench_num_cases;

/** The case named `name`, or NULL. */
const bench_case_t *bench_case_find(const char *name);

#endif
