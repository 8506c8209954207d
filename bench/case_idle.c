/* bench/case_idle.c: many idle Python contexts alive at once (issue 26: 500 on a 24 GiB machine), on a kgate of its own
 * with its kernels forked from the template: `/healthz` and `1+1` with one context, then with all of them idle, in the same
 * run; their memory; and every kernel gone when kgate is stopped (docs/kernels.md, Kernels forked from a template). Run by
 * name only (`--case idle`): it holds gigabytes for minutes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "wire/alloc.h"
#include "burst.h"
#include "cases.h"
#include "template_probe.h"

#define RUN_MS 120000  /* one create, or one cell, with hundreds of kernels on 2 cores */
#define CREATORS 4     /* clients creating contexts at once */
#define PROBES 20      /* /healthz and `1+1` samples in each phase */
#define SETTLE_MS 5000 /* after the last create: every kernel idle */

typedef struct st_idle_bench_t {
    const bench_case_t *self;
    bench_env_t *env;
    ts_gateway_t gw;
    char **ids; /* [contexts], owned */
    int *pids;  /* their kernels' pids */
    unsigned created;
} idle_bench_t;

static int create_one(void *arg, char **id, double *ms, char *why, size_t whylen)
{
    ts_response_t r;
    double t0 = bench_now_ms();
    int st = ts_context_create_until(*(const unsigned short *)arg, NULL, "python", ts_now_ms() + RUN_MS, id, &r);

    if (st != 200)
        snprintf(why, whylen, "POST /code/context: HTTP %d %.150s %.300s", st, r.error, r.body != NULL ? r.body : "");
    ts_response_dispose(&r);
    *ms = bench_now_ms() - t0;
    return st == 200 ? 0 : st < 0 ? st : BENCH_ESTATUS;
}

/* `code` in context `id`: its stdout (owned, may be NULL) in *out when non-NULL, its time in *ms. */
static int run_in(idle_bench_t *ib, const char *id, const char *code, char **out, double *ms)
{
    ts_events_t evs;
    double t0 = bench_now_ms();
    int st, ended;

    memset(&evs, 0, sizeof(evs));
    st = ts_run_code(ib->gw.port, NULL, id, NULL, code, RUN_MS, &evs, NULL);
    *ms = bench_now_ms() - t0;
    if (out != NULL)
        *out = ts_events_text(&evs, "stdout");
    ended = evs.ended;
    ts_events_dispose(&evs);
    if (st != 200 || !ended) {
        bench_set_detail("POST /code in context %s: HTTP %d, %s", id, st, ended ? "ended" : "no end");
        return st < 0 ? st : BENCH_ESTATUS;
    }
    return 0;
}

/* PROBES of `GET /healthz` (a connection each) and of `1+1` in the first context, alternating. */
static int probe(idle_bench_t *ib, bench_samples_t *healthz, bench_samples_t *cell)
{
    bench_samples_init(healthz, PROBES);
    bench_samples_init(cell, PROBES);
    for (unsigned i = 0; i != PROBES && !*ib->env->interrupted; ++i) {
        ts_response_t r;
        double t0 = bench_now_ms(), ms;
        int st = ts_http_request_until(ib->gw.port, "GET", "/healthz", NULL, NULL, ts_now_ms() + RUN_MS, &r), err;

        ts_response_dispose(&r);
        if (st != 200) {
            bench_set_detail("GET /healthz: HTTP %d", st);
            return BENCH_ESTATUS;
        }
        bench_samples_add(healthz, bench_now_ms() - t0);
        if ((err = run_in(ib, ib->ids[0], "1+1", NULL, &ms)) != 0)
            return err;
        bench_samples_add(cell, ms);
        ts_sleep_ms(50);
    }
    return *ib->env->interrupted ? BENCH_EINTERRUPTED : 0;
}

/* Creates contexts CREATORS at a time until `want` exist; stops at the first failure (the detail says which). */
static int create_all(idle_bench_t *ib, unsigned want)
{
    bench_burst_client_t clients[CREATORS];
    int err = 0;

    while (ib->created < want && err == 0 && !*ib->env->interrupted) {
        unsigned n = want - ib->created < CREATORS ? want - ib->created : CREATORS;
        bench_burst(create_one, &ib->gw.port, n, clients);
        for (unsigned i = 0; i != n; ++i) {
            if (clients[i].err != 0 && err == 0) {
                err = clients[i].err;
                bench_set_detail("context %u: %s", ib->created + 1, clients[i].why);
            }
            if (clients[i].id != NULL)
                ib->ids[ib->created++] = clients[i].id;
        }
        if (ib->env->verbose && ib->created % 50 < n)
            fprintf(stderr, "[%s] %u contexts\n", ib->self->name, ib->created);
    }
    return err != 0 ? err : *ib->env->interrupted ? BENCH_EINTERRUPTED : 0;
}

/* Every context's kernel pid (a cell in each: every one of them answers), then their PSS with the template's and its
 * spare's, in KiB. */
static int sum_pss(idle_bench_t *ib, long long *total_kib)
{
    int err, tpl;
    double ms;

    *total_kib = 0;
    for (unsigned i = 0; i != ib->created; ++i) {
        char *out = NULL;
        if ((err = run_in(ib, ib->ids[i], "import os; print(os.getpid())", &out, &ms)) == 0 && (out == NULL || atoi(out) <= 0)) {
            bench_set_detail("context %s printed no pid", ib->ids[i]);
            err = BENCH_ERUN;
        }
        ib->pids[i] = out != NULL ? atoi(out) : 0;
        free(out);
        if (err != 0)
            return err;
    }
    ts_sleep_ms(SETTLE_MS);
    for (unsigned i = 0; i != ib->created; ++i)
        *total_kib += bench_pss_kib(ib->pids[i]) > 0 ? bench_pss_kib(ib->pids[i]) : 0;
    if ((tpl = bench_template_pid(&ib->gw)) > 0)
        *total_kib += bench_pss_kib(tpl) + bench_spare_pss_kib(tpl, ib->pids, ib->created);
    return 0;
}

int bench_run_idle(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    static char with_many[2][64];
    idle_bench_t ib = {.self = self, .env = env};
    unsigned want = env->contexts != 0 ? env->contexts : self->idle_contexts;
    bench_samples_t one[2] = {{0}, {0}}, many[2] = {{0}, {0}};
    char max_contexts[32];
    const char *args[] = {"--pool", "none", "--max-contexts", max_contexts, NULL};
    ts_gateway_opts_t opts = {
        .exe = env->kgate_exe, .args = args, .label = "bench-idle", .keep_env = "KGATE_BENCH_KEEP", .startup_ms = 15000};
    long long avail_before, pss_kib = 0;
    double t0;
    int err, stop_err;

    memset(out, 0, sizeof(*out));
    snprintf(with_many[0], sizeof(with_many[0]), "1+1 with %u idle contexts", want);
    snprintf(with_many[1], sizeof(with_many[1]), "/healthz with %u idle contexts", want);
    out->kgate_label = with_many[0];
    out->direct_label = "1+1 with one context";
    out->burst_pool_label = with_many[1];
    out->burst_cold_label = "/healthz with one context";
    out->idle_contexts_asked = want;
    out->idle_creators = CREATORS;
    snprintf(max_contexts, sizeof(max_contexts), "%u", want + 8);
    ib.ids = wire_calloc(want, sizeof(*ib.ids));
    ib.pids = wire_calloc(want, sizeof(*ib.pids));
    if ((err = ts_gateway_start(&ib.gw, &opts)) != 0) {
        bench_set_detail("starting kgate: %s", ib.gw.error);
        goto Exit;
    }
    if ((err = bench_template_wait(&ib.gw, env->interrupted)) != 0)
        goto Stop;
    avail_before = bench_proc_kib("/proc/meminfo", "MemAvailable");
    if ((err = create_all(&ib, 1)) != 0 || (err = probe(&ib, &one[1], &one[0])) != 0)
        goto Stop;
    t0 = bench_now_ms();
    err = create_all(&ib, want);
    out->idle_create_s = (bench_now_ms() - t0) / 1000.0;
    out->idle_contexts_created = ib.created;
    if (err != 0 || (err = sum_pss(&ib, &pss_kib)) != 0 || (err = probe(&ib, &many[1], &many[0])) != 0)
        goto Stop;
    out->idle_pss_total_mib = (double)pss_kib / 1024.0;
    out->idle_mem_used_mib =
        avail_before > 0 ? (double)(avail_before - bench_proc_kib("/proc/meminfo", "MemAvailable")) / 1024.0 : -1;
    out->kgate_rss_peak_kb = bench_proc_status_kb((int)ib.gw.pid, "VmRSS");
    bench_summarize(&many[0], &out->kgate);
    bench_summarize(&one[0], &out->direct);
    bench_summarize(&many[1], &out->burst_pool);
    bench_summarize(&one[1], &out->burst_cold);

Stop:
    /* kgate's SIGTERM ends every kernel (docs/liveness.md): the stop counts kgate's descendants still alive after it */
    t0 = bench_now_ms();
    stop_err = ts_gateway_stop(&ib.gw, &out->idle_survivors);
    out->idle_stop_s = (bench_now_ms() - t0) / 1000.0;
    if (stop_err != 0)
        fprintf(stderr, "kgate_bench_execute: warning: %s: %s\n", self->name, ib.gw.error);
Exit:
    for (int i = 0; i != 2; ++i) {
        bench_samples_dispose(&one[i]);
        bench_samples_dispose(&many[i]);
    }
    for (unsigned i = 0; i != ib.created; ++i)
        free(ib.ids[i]);
    free(ib.ids);
    free(ib.pids);
    return err;
}
