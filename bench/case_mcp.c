/* bench/case_mcp.c: `1+1` as an MCP tools/call run_code against POST /code of the same, alternately, on one kgate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/api.h"
#include "support/base.h"
#include "support/proc.h"
#include "cases.h"
#include "kgate_client.h"
#include "mcp_client.h"

#define RSS_PERIOD_MS 50

enum { SIDE_MCP, SIDE_CODE };

typedef struct st_mcp_case_t {
    const bench_case_t *self;
    bench_env_t *env;
    bench_mcp_t mcp;
    char *ctx; /* the /code side's context; the MCP side's is its session's own, made by its first call */
    /* kgate's CPU time during each side's timed calls, how many were measured, and MCP reconnects then */
    double cpu_ms[2];
    size_t cpu_n[2];
    size_t mcp_reconnects;
} mcp_case_t;

static int execute_one(void *data, int side, int timed, bench_outcome_t *o)
{
    mcp_case_t *c = data;
    const bench_case_t *self = c->self;
    bench_env_t *env = c->env;
    size_t reconnects = c->mcp.http.reconnects;
    double cpu0 = (double)ts_proc_cpu_ms(env->kgate->pid), cpu1;
    int err = side == SIDE_MCP ? bench_mcp_run_code(&c->mcp, self->code, self->language, o)
                               : bench_kgate_execute(env->http, env->timeout_ms, c->ctx, self->code, 0, o);
    const char *who = side == SIDE_MCP ? "MCP run_code" : "POST /code";

    cpu1 = (double)ts_proc_cpu_ms(env->kgate->pid);
    if (err != 0)
        return err;
    if ((err = bench_expect_result(who, self->expect_result, o)) != 0)
        return err;
    if (timed) {
        c->mcp_reconnects += c->mcp.http.reconnects - reconnects;
        if (cpu0 >= 0 && cpu1 >= 0) {
            c->cpu_ms[side] += cpu1 - cpu0;
            ++c->cpu_n[side];
        }
    }
    return 0;
}

/* --verbose: which kernels the two sides run on (both should be the same python3 spec). */
static void show_contexts(bench_env_t *env)
{
    ts_response_t resp;
    int st = ts_http_request_until(env->kgate->port, "GET", "/code/contexts", NULL, NULL, ts_now_ms() + env->timeout_ms, &resp);
    fprintf(stderr, "[mcp] GET /code/contexts: %d %.1000s\n", st, resp.body != NULL ? resp.body : "");
    ts_response_dispose(&resp);
}

int bench_run_mcp(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    mcp_case_t c = {.self = self, .env = env};
    bench_samples_t s[2] = {{0}, {0}};
    ts_rss_sampler_t rss = {0};
    int sampling;
    size_t samples = env->samples != 0 ? env->samples : self->default_samples;
    size_t warmup = env->warmup != SIZE_MAX ? env->warmup : self->default_warmup;
    int err;

    memset(out, 0, sizeof(*out));
    out->kgate_label = self->mcp_stateless ? "MCP 2026-07-28 run_code"
                       : env->mcp_sse_only ? "MCP run_code, SSE only"
                                           : "MCP tools/call run_code";
    out->direct_label = "POST /code (SSE)";
    out->kgate_cpu_ms_relaying = out->kgate_cpu_ms_listening = -1;
    out->kgate_rss_start_kb = ts_proc_rss_kb(env->kgate->pid);
    out->kgate_rss_peak_kb = out->peer_rss_start_kb = out->peer_rss_peak_kb = -1;
    sampling = ts_rss_sampler_start(&rss, env->kgate->pid, RSS_PERIOD_MS) == 0;

    if ((err = bench_mcp_open(&c.mcp, env->kgate->port, env->timeout_ms, env->mcp_sse_only, self->mcp_stateless)) != 0)
        goto Exit;
    if ((err = bench_kgate_create_context(env->http, env->timeout_ms, self->language, &c.ctx)) != 0)
        goto Exit;
    if (env->verbose)
        fprintf(stderr, "[%s] MCP session %s, /code context %s\n", self->name,
                c.mcp.stateless ? "(none: the named context " BENCH_MCP_CONTEXT ")" : c.mcp.session_id, c.ctx);
    /* the warm-up's first MCP call starts the session's kernel (answered in SSE if it takes over a second) */
    if ((err = bench_alternate(env, self->name, warmup, samples, execute_one, &c, s, &out->kgate_reconnects)) != 0)
        goto Exit;
    if (env->verbose) {
        fprintf(stderr, "[%s] MCP answers (warm-up included): %zu in JSON, %zu in SSE\n", self->name, c.mcp.json_answers,
                c.mcp.sse_answers);
        show_contexts(env);
    }
    out->kgate_reconnects += c.mcp_reconnects;
    bench_summarize(&s[SIDE_MCP], &out->kgate);
    bench_summarize(&s[SIDE_CODE], &out->direct);
    if (c.cpu_n[SIDE_MCP] > 0 && c.cpu_n[SIDE_CODE] > 0) {
        out->kgate_cpu_ms_relaying = c.cpu_ms[SIDE_MCP] / (double)c.cpu_n[SIDE_MCP];
        out->kgate_cpu_ms_listening = c.cpu_ms[SIDE_CODE] / (double)c.cpu_n[SIDE_CODE];
    }

Exit:
    if (sampling)
        out->kgate_rss_peak_kb = ts_rss_sampler_stop(&rss);
    bench_mcp_close(&c.mcp);
    bench_kgate_drop_context(env->http, env->timeout_ms, c.ctx);
    bench_samples_dispose(&s[0]);
    bench_samples_dispose(&s[1]);
    free(c.ctx);
    return err;
}
