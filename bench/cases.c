/* bench/cases.c: the benchmark cases: kgate's HTTP API against a direct ZMQ client of the same kernel. */
#include <glob.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "support/base.h"
#include "support/proc.h"
#include "common.h"
#include "direct_client.h"
#include "kgate_client.h"
#include "cases.h"

#define KERNEL_FILE_WAIT_MS 10000

/* Asked of a python kernel when the runtime dir holds several kernels (a pool): which is yours? */
#define PY_CONNECTION_FILE_CODE "__import__('ipykernel.connect').connect.get_connection_file()"

/* The connection files in the runtime dir; kernelmgr writes one <dir>/connection.json per kernel. */
static size_t list_connection_files(const char *runtime_dir, glob_t *g)
{
    char pattern[PATH_MAX];
    snprintf(pattern, sizeof(pattern), "%s/*/connection.json", runtime_dir);
    if (glob(pattern, 0, NULL, g) != 0) {
        globfree(g);
        memset(g, 0, sizeof(*g));
        return 0;
    }
    return g->gl_pathc;
}

int bench_find_kernel(const bench_case_t *self, bench_env_t *env, const char *context_id, char **path)
{
    glob_t g = {0};
    size_t n = 0;
    for (unsigned waited = 0; (n = list_connection_files(env->kgate->runtime_dir, &g)) == 0; waited += 50) {
        if (waited >= KERNEL_FILE_WAIT_MS) {
            bench_set_detail("no %s/*/connection.json appeared within %u ms", env->kgate->runtime_dir, KERNEL_FILE_WAIT_MS);
            return BENCH_ENOKERNEL;
        }
        ts_sleep_ms(50);
    }
    if (n == 1) {
        *path = wire_strdup(g.gl_pathv[0]);
        globfree(&g);
        return 0;
    }
    globfree(&g);
    if (strcmp(self->language, "python") != 0) {
        bench_set_detail("%zu kernels in %s and no way to tell which is context %s", n, env->kgate->runtime_dir, context_id);
        return BENCH_ENOKERNEL;
    }
    bench_outcome_t o;
    int err = bench_kgate_execute(env->http, env->timeout_ms, context_id, PY_CONNECTION_FILE_CODE, 0, &o);
    if (err == 0) {
        size_t len = o.result_text != NULL ? strlen(o.result_text) : 0;
        if (len >= 2 && (o.result_text[0] == '\'' || o.result_text[0] == '"')) {
            *path = wire_strndup(o.result_text + 1, len - 2);
        } else {
            bench_set_detail("asking the kernel for its connection file gave %s", o.error ? o.error : "no result");
            err = BENCH_ENOKERNEL;
        }
    }
    bench_outcome_dispose(&o);
    return err;
}

/* Checks what a timed execute produced against the case's expectations. */
static int check_outcome(const bench_case_t *self, const char *who, const bench_outcome_t *o)
{
    if (o->error != NULL) {
        bench_set_detail("%s: the code raised %s", who, o->error);
        return BENCH_ERUN;
    }
    if (self->expect_result != NULL && (o->result_text == NULL || strcmp(o->result_text, self->expect_result) != 0)) {
        bench_set_detail("%s: expected result %s, got %s", who, self->expect_result, o->result_text ? o->result_text : "none");
        return BENCH_ERUN;
    }
    if (self->expect_stdout_bytes != 0 && o->stdout_bytes != self->expect_stdout_bytes) {
        bench_set_detail("%s: expected %zu bytes of stdout, got %zu%s", who, self->expect_stdout_bytes, o->stdout_bytes,
                         o->output_truncated ? " (kgate reported output_truncated)" : "");
        return BENCH_ERUN;
    }
    return 0;
}

int bench_alternate(bench_env_t *env, const char *name, size_t warmup, size_t samples, bench_side_fn fn, void *ctx,
                    bench_samples_t out[2], size_t *reconnects)
{
    size_t reconnects0 = env->http->reconnects;

    bench_samples_init(&out[0], samples);
    bench_samples_init(&out[1], samples);
    for (size_t i = 0; i < warmup + samples; ++i) {
        if (*env->interrupted) {
            bench_set_detail("stopped sampling");
            return BENCH_EINTERRUPTED;
        }
        if (i == warmup)
            reconnects0 = env->http->reconnects;
        for (size_t k = 0; k < 2; ++k) {
            int side = (int)(k ^ (i & 1)), err;
            bench_outcome_t o;
            err = fn(ctx, side, i >= warmup, &o);
            if (err == 0 && i >= warmup)
                bench_samples_add(&out[side], o.ms);
            bench_outcome_dispose(&o);
            if (err != 0)
                return err;
        }
        if (env->verbose && i >= warmup && (i - warmup + 1) % 50 == 0)
            fprintf(stderr, "[%s] %zu/%zu samples\n", name, i - warmup + 1, samples);
    }
    *reconnects = env->http->reconnects - reconnects0;
    return 0;
}

/* The execute pair's state: kgate's client and a direct client of the same kernel. */
typedef struct st_execute_pair_t {
    const bench_case_t *self;
    bench_env_t *env;
    bench_direct_t direct;
    char *ctx;
    /* kgate's CPU time during the timed executes of each client, and how many were measured */
    double cpu_ms[2];
    size_t cpu_n[2];
    /* the kernels' (kgate's descendants when the pair began) CPU time during them */
    ts_proc_t kernels[16];
    size_t nkernels;
    double kernel_cpu_ms[2];
} execute_pair_t;

static double kernels_cpu_ms(const execute_pair_t *pair)
{
    double ms = 0;
    for (size_t i = 0; i != pair->nkernels; ++i) {
        int64_t v = ts_proc_cpu_ms(pair->kernels[i].pid);
        if (v > 0)
            ms += (double)v;
    }
    return ms;
}

static int execute_one(void *data, int use_direct, int timed, bench_outcome_t *o)
{
    execute_pair_t *pair = data;
    const bench_case_t *self = pair->self;
    bench_env_t *env = pair->env;
    double cpu0 = (double)ts_proc_cpu_ms(env->kgate->pid), cpu1, kcpu0 = kernels_cpu_ms(pair);
    int err = use_direct ? bench_direct_execute(&pair->direct, self->code, o)
                         : bench_kgate_execute(env->http, env->timeout_ms, pair->ctx, self->code, self->output_limit, o);

    if (err == 0)
        err = check_outcome(self, use_direct ? "direct" : "kgate", o);
    cpu1 = (double)ts_proc_cpu_ms(env->kgate->pid);
    if (err == 0 && timed && cpu0 >= 0 && cpu1 >= 0) {
        pair->cpu_ms[use_direct] += cpu1 - cpu0;
        pair->kernel_cpu_ms[use_direct] += kernels_cpu_ms(pair) - kcpu0;
        ++pair->cpu_n[use_direct];
    }
    if (err == 0 && env->verbose && self->expect_stdout_bytes != 0)
        fprintf(stderr, "[%s] %s %s: %.3f ms, %zu stdout bytes in %zu stream messages/events, kgate CPU %.0f ms\n", self->name,
                timed ? "sample" : "warm-up", use_direct ? "direct" : "kgate", o->ms, o->stdout_bytes, o->stream_messages,
                cpu1 - cpu0);
    return err;
}

/*
 * The shared runner: one fresh context, kgate's client and a direct client of the same kernel,
 * executing the same code alternately (bench_alternate).
 */
static int run_execute_pair(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    execute_pair_t pair = {.self = self, .env = env};
    bench_samples_t s[2] = {{0}, {0}};
    char *conn_file = NULL;
    size_t samples = env->samples != 0 ? env->samples : self->default_samples;
    size_t warmup = env->warmup != SIZE_MAX ? env->warmup : self->default_warmup;
    int err;

    memset(out, 0, sizeof(*out));
    out->kgate_label = "kgate HTTP POST /code (SSE)";
    out->direct_label = "direct ZMQ, same kernel";
    if ((err = bench_kgate_create_context(env->http, env->timeout_ms, self->language, &pair.ctx)) != 0)
        goto Exit;
    if ((err = bench_find_kernel(self, env, pair.ctx, &conn_file)) != 0)
        goto Exit;
    if (env->verbose)
        fprintf(stderr, "[%s] context %s, kernel %s\n", self->name, pair.ctx, conn_file);
    if ((err = bench_direct_open(&pair.direct, conn_file, env->timeout_ms)) != 0)
        goto Exit;
    if ((err = bench_direct_wait_ready(&pair.direct)) != 0)
        goto Exit;
    pair.nkernels = ts_descendants(env->kgate->pid, pair.kernels, sizeof(pair.kernels) / sizeof(pair.kernels[0]));
    /* a throughput case's peak memory (VmHWM, not a sampled RSS: a big message lives between two samples) beside RSS after */
    out->stream_rss_before_kb = bench_proc_status_kb(env->kgate->pid, "VmRSS");
    int hwm = self->expect_stdout_bytes != 0 && bench_reset_hwm(env->kgate->pid) == 0;
    if ((err = bench_alternate(env, self->name, warmup, samples, execute_one, &pair, s, &out->kgate_reconnects)) != 0)
        goto Exit;
    out->stream_hwm_kb = hwm ? bench_proc_status_kb(env->kgate->pid, "VmHWM") : -1;
    usleep(1500 * 1000);
    out->stream_rss_after_kb = bench_proc_status_kb(env->kgate->pid, "VmRSS");
    bench_summarize(&s[0], &out->kgate);
    bench_summarize(&s[1], &out->direct);
    out->kgate_cpu_ms_relaying = pair.cpu_n[0] > 0 ? pair.cpu_ms[0] / (double)pair.cpu_n[0] : -1;
    out->kgate_cpu_ms_listening = pair.cpu_n[1] > 0 ? pair.cpu_ms[1] / (double)pair.cpu_n[1] : -1;
    out->kernel_cpu_ms[0] = pair.cpu_n[0] > 0 ? pair.kernel_cpu_ms[0] / (double)pair.cpu_n[0] : -1;
    out->kernel_cpu_ms[1] = pair.cpu_n[1] > 0 ? pair.kernel_cpu_ms[1] / (double)pair.cpu_n[1] : -1;

Exit:
    bench_direct_close(&pair.direct);
    bench_kgate_drop_context(env->http, env->timeout_ms, pair.ctx);
    bench_samples_dispose(&s[0]);
    bench_samples_dispose(&s[1]);
    free(conn_file);
    free(pair.ctx);
    return err;
}

/* The run most cases time: `1+1` in a python context, whose execute_result must be 2. */
#define ONE_PLUS_ONE .language = "python", .code = "1+1", .expect_result = "2"

/* Samples of a case timing one short run a request: enough for a stable median of a few milliseconds. */
#define SHORT_RUN_SAMPLES .default_samples = 300, .default_warmup = 20

/*
 * The MCP door (docs/API.md 5.3, docs/mcp.md) against execd's POST /code on one kgate, in both revisions: the same engine
 * run of `1+1` in an MCP context and in a /code context of the same kernelspec; what differs is the front door (JSON-RPC
 * in, a tool result rendered from the run's events, JSON out). The revision is the only difference between the cases.
 */
#define MCP_CASE                                                                                                                   \
    .run = bench_run_mcp, ONE_PLUS_ONE, SHORT_RUN_SAMPLES, .max_rss_kb = 32 * 1024, .via_mcp = 1, .max_overhead_pct = 10

/* Issue 26's cases: a kgate of their own whose Python kernels are forked from its template; the runner (bench/case_template.c,
 * bench/case_idle.c) creates its python contexts there and times `1+1` in them. */
#define FORKED_PYTHON_CASE(runner) .run = runner, .language = "python", .code = "1+1"

const bench_case_t bench_cases[] = {
    {
        .name = "execute",
        .description = "trivial `1+1` in python: request to completion",
        .run = run_execute_pair,
        ONE_PLUS_ONE,
        SHORT_RUN_SAMPLES,
    },
    {
        /* 50 writes of 1 MB, each flushed: ipykernel's flush() waits until its IO thread has sent
         * the message, so this is a real stream of 50 stream messages of 1 MB, produced far faster
         * than 500,000 print-sized writes (where the kernel's own per-write cost dominates and the
         * relay is hardly exercised), and without leaving all 50 MB to one message near kgate's
         * 64 MiB frame bound. */
        .name = "stream",
        .description = "50 MB of stdout in python (50 flushed writes of 1 MB): throughput to completion",
        .run = run_execute_pair,
        .language = "python",
        .code = "import sys\n"
                "chunk = 'x' * 999999 + '\\n'\n"
                "for _ in range(50):\n"
                "    sys.stdout.write(chunk)\n"
                "    sys.stdout.flush()\n",
        .expect_stdout_bytes = 50000000,
        .output_limit = (size_t)128 << 20,
        .min_throughput_ratio = 0.95,
        .default_samples = 5,
        .default_warmup = 1,
    },
    {
        /* kgate's own bash kernel (C, one bash per context) against Debian's python3-metakernel
         * BashKernel (ipykernel plus pexpect on a pty), whose kernelspec the bench generates. The
         * pty turns the baseline's newline into CRLF: "hi\r\n" is 4 bytes, the native "hi\n" 3. */
        .name = "bash",
        .description = "`echo hi` in kgate's bash kernel against a metakernel bash kernel, both via POST /code",
        .run = bench_run_kernel_pair,
        .language = "bash",
        .code = "echo hi",
        .subject_stdout_bytes = 3,
        .baseline_language = "metakernel_bash",
        .baseline_missing = "python3-metakernel was not importable when cmake configured bench/ "
                            "(deploy/deps.sh --with-bench installs it; then re-run cmake)",
        .baseline_stdout_bytes = 4,
        .min_speedup = 10,
        .default_samples = 200,
        .default_warmup = 10,
    },
    {
        /* The same ipykernel on a TCP and on an ipc connection file (bench/kernels/python3-tcp, python3-ipc), through
         * kgate's API execute by execute: what kmgr_kernelspec_transport's choice of ipc for ipykernel is worth. */
        .name = "transport",
        .description = "`1+1` in python over a TCP and over an ipc connection file, both via POST /code",
        .run = bench_run_kernel_pair,
        .language = "python3-tcp",
        .code = "1+1",
        .baseline_language = "python3-ipc",
        .baseline_missing = "bench/kernels/python3-ipc is copied beside the benchmark by cmake",
        .transport_pair = 1,
        SHORT_RUN_SAMPLES,
    },
    {
        /* kgate's bash kernel likewise (its kernelspec says ipc: bench/kernels/bash-tcp, bash-ipc are generated by cmake). */
        .name = "transport-bash",
        .description = "`echo hi` in kgate's bash kernel over a TCP and over an ipc connection file, both via POST /code",
        .run = bench_run_kernel_pair,
        .language = "bash-tcp",
        .code = "echo hi",
        .subject_stdout_bytes = 3,
        .baseline_language = "bash-ipc",
        .baseline_missing = "bench/kernels/bash-ipc is generated beside the benchmark by cmake",
        .baseline_stdout_bytes = 3,
        .transport_pair = 1,
        SHORT_RUN_SAMPLES,
    },
    {
        /* 8 clients on 8 kernels (PLATFORM.md's reference load): kgate must keep up with all of them
         * at once, not just one; rounds of each side alternate so the machine's drift hits both (six
         * short rounds rather than three long ones: on a shared machine the kernels' own CPU time per
         * execute wanders by several percent from one round to the next, and the median of more
         * rounds holds better). */
        .name = "concurrency",
        .description = "8 clients on 8 python kernels running `1+1` in a loop: executes/s, through kgate and directly",
        .run = bench_run_concurrency,
        ONE_PLUS_ONE,
        .min_throughput_ratio = 0.95,
        .clients = 8,
        .round_ms = 3000,
        .rounds = 6,
        .default_warmup = 5,
    },
    {
        /* Jupyter's kernel WebSocket (docs/API.md 5.2): JupyterLab's path to a kernel. The same C client speaks
         * v1 to kgate and to Debian's Jupyter Server (a kernel of the same python3 spec that server
         * manages); the direct client shares kgate's kernel, as in `execute`. */
        .name = "jupyter",
        .description = "`1+1` over kgate's kernel WebSocket (v1), direct ZMQ and Jupyter Server 1.23's WebSocket, rotated",
        .run = bench_run_jupyter,
        ONE_PLUS_ONE,
        .default_samples = 200,
        .default_warmup = 20,
        .via_jupyter_ws = 1,
        .min_peer_speedup = 8,
        .max_rss_kb = 32 * 1024,
    },
    {
        /* `concurrency` through the kernel WebSocket: 8 sockets on 8 kernels of the Jupyter API */
        .name = "jupyter-concurrency",
        .description = "8 kernel WebSockets on 8 python kernels running `1+1` in a loop: executes/s, through kgate and directly",
        .run = bench_run_concurrency,
        ONE_PLUS_ONE,
        .min_throughput_ratio = 0.95,
        .clients = 8,
        .round_ms = 3000,
        .rounds = 6,
        .default_warmup = 5,
        .via_jupyter_ws = 1,
        .max_rss_kb = 32 * 1024,
    },
    {
        /* issue 14: a 1 GiB upload must not stall other clients (p99 under 50 ms). The body is
         * generated as it is sent; each upload goes into kgate's workspace and is deleted after
         * its round. */
        .name = "upload-stall",
        .description = "`1+1` in a loop while another connection uploads 1 GiB to POST /files/upload: latency against "
                       "rounds without the upload",
        .run = bench_run_upload_stall,
        ONE_PLUS_ONE,
        .rounds = 3,
        .default_warmup = 5,
        .upload_mib = 1024,
        .max_p99_ms = 50,
    },
    {
        /* Revision BENCH_MCP_VERSION (bench/mcp_client.h): a session (initialize, then Mcp-Session-Id), run in the session's own
           python context. */
        .name = "mcp",
        .description = "`1+1` as an MCP tools/call run_code (Streamable HTTP) against POST /code, alternately",
        MCP_CASE,
    },
    {
        /* Revision 2026-07-28: no session, every call carrying its _meta envelope and its Mcp-* headers (checked
         * against the body), run in the named context `bench` (which outlives the case: the revision has no DELETE;
         * it idles out with --mcp-context-idle-ms or ends with the bench's kgate). */
        .name = "mcp2026",
        .description = "`1+1` as an MCP 2026-07-28 tools/call run_code in a named context against POST /code, alternately",
        MCP_CASE,
        .mcp_stateless = 1,
    },
    {
        /* The E2B door (docs/e2b.md) against execd's POST /code on one kgate, in one context: the same engine run of
         * `1+1`; what differs is the front door (NDJSON lines translated from the run's events, against SSE). */
        .name = "e2b",
        .description = "`1+1` through E2B's POST /execute (NDJSON) against POST /code (SSE), alternately, one context",
        .run = bench_run_e2b,
        ONE_PLUS_ONE,
        SHORT_RUN_SAMPLES,
        .via_mcp = 1,
        .max_overhead_pct = 10,
    },
    {
        /* issue 13: what the sandbox costs a run. A second kgate with --sandbox bwrap (skipped where bwrap cannot
         * make namespaces), its context against one of the bench's own kgate, same kernelspec, alternately. */
        .name = "sandbox",
        .description = "`1+1` in a context of a kgate started with --sandbox bwrap against a plain context, alternately",
        .run = bench_run_sandbox,
        ONE_PLUS_ONE,
        .default_samples = 200,
        .default_warmup = 20,
    },
    {
        /* issue 13's warm pool: a context ready at once instead of a ~550 ms python start, and what a
         * burst twice the pool's size gets (the pool serves half, the rest start cold) */
        .name = "pool",
        .description = "POST /code/context from a warm python3 pool against a cold start; 8 at once with a pool of 4",
        .run = bench_run_pool,
        .language = "python",
        .code = "",
        .pool_kernel = "python3",
        .pool_size = 4,
        .max_create_ms = 10,
        .clients = 8,
        .rounds = 3,
        .default_samples = 10,
        .default_warmup = 1,
    },
    {
        /* issue 26: Python kernels forked from a template against spawned ones; the 500-context check is run by hand */
        .name = "template",
        .description = "create to first 1+1 forked from a template against spawned; 50 at once; idle PSS of ten contexts",
        FORKED_PYTHON_CASE(bench_run_template),
        .template_case = 1,
        .max_create_ms = 100,
        .max_burst_ms = 5000,
        .max_pss_mib = 20,
        .clients = 50,
        .default_samples = 5,
        .default_warmup = 1,
    },
    {
        /* issue 26: 500 idle Python contexts alive at once on a 24 GiB machine, /healthz answering, `1+1` under 20 ms */
        .name = "idle",
        .description = "N idle forked Python contexts at once (--contexts, default 500): 1+1 and /healthz with one and with "
                       "all; their PSS; by name only",
        FORKED_PYTHON_CASE(bench_run_idle),
        .idle_contexts = 500,
        .max_idle_cell_ms = 20,
        .by_name_only = 1,
    },
};

const size_t bench_num_cases = sizeof(bench_cases) / sizeof(bench_cases[0]);

const bench_case_t *bench_case_find(const char *name)
{
    for (size_t i = 0; i < bench_num_cases; ++i)
        if (strcmp(bench_cases[i].name, name) == 0)
            return &bench_cases[i];
    return NULL;
}
