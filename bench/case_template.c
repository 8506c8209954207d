/* bench/case_template.c: Python kernels forked from a template (--kernel-template python3) against spawned ones
 * (--kernel-template none), two kgates side by side in one run: create to first `1+1`, a burst of contexts asked for at once,
 * and the idle PSS of ten contexts (docs/kernels.md, Kernels forked from a template). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "wire/alloc.h"
#include "burst.h"
#include "template_probe.h"
#include "cases.h"

#define RUN_MS 120000 /* one create and its first run, in a burst of 50 on 2 cores */
#define SETTLE_MS 500 /* after a sample: the deleted kernel's shutdown is over */
#define MAX_BURST 64
#define PSS_CONTEXTS 10

typedef struct st_template_bench_t {
    const bench_case_t *self;
    bench_env_t *env;
    ts_gateway_t gw[2]; /* [0] templates on, [1] --kernel-template none */
} template_bench_t;

/* POST /code/context then `1+1` in it: the time to the result in *ms, the kernel's pid in *pid (when non-NULL), the id. */
static int create_and_run(unsigned short port, const char *code, char **id, double *ms, char *why, size_t whylen)
{
    ts_events_t evs;
    ts_response_t r;
    double t0 = bench_now_ms();
    int st;

    *id = NULL;
    if ((st = ts_context_create_until(port, NULL, "python", ts_now_ms() + RUN_MS, id, &r)) != 200) {
        snprintf(why, whylen, "POST /code/context: HTTP %d %.150s %.300s", st, r.error, r.body != NULL ? r.body : "");
        ts_response_dispose(&r);
        return st < 0 ? st : BENCH_ESTATUS;
    }
    ts_response_dispose(&r);
    memset(&evs, 0, sizeof(evs));
    if ((st = ts_run_code(port, NULL, *id, NULL, code, RUN_MS, &evs, NULL)) != 200 || !evs.ended) {
        snprintf(why, whylen, "POST /code: HTTP %d, %s", st, evs.ended ? "ended" : "no end");
        ts_events_dispose(&evs);
        return BENCH_ESTATUS;
    }
    *ms = bench_now_ms() - t0;
    ts_events_dispose(&evs);
    return 0;
}

static int sample(void *data, int side, int timed, bench_outcome_t *o)
{
    template_bench_t *tb = data;
    char *id = NULL, why[600];
    int err;
    (void)timed;

    memset(o, 0, sizeof(*o));
    if ((err = create_and_run(tb->gw[side].port, "1+1", &id, &o->ms, why, sizeof(why))) != 0)
        bench_set_detail("%s", why);
    if (tb->env->verbose && err == 0)
        fprintf(stderr, "[%s] %s: create to 1+1 %.1f ms\n", tb->self->name, side == 0 ? "forked" : "spawned", o->ms);
    if (id != NULL)
        ts_context_delete(tb->gw[side].port, NULL, id);
    free(id);
    ts_sleep_ms(SETTLE_MS);
    return err;
}

static int create_one_and_run(void *arg, char **id, double *ms, char *why, size_t whylen)
{
    return create_and_run(*(const unsigned short *)arg, "1+1", id, ms, why, whylen);
}

/* `n` contexts asked for at once, each to its first `1+1`; every latency to `out` (the max is when all were ready). */
static int burst(template_bench_t *tb, int side, unsigned n, bench_samples_t *out)
{
    bench_burst_client_t clients[MAX_BURST];
    int err = 0;

    bench_samples_init(out, n);
    bench_burst(create_one_and_run, &tb->gw[side].port, n, clients);
    for (unsigned i = 0; i != n; ++i) {
        if (clients[i].err != 0 && err == 0) {
            err = clients[i].err;
            bench_set_detail("burst client %u: %s", i, clients[i].why);
        }
        if (clients[i].err == 0)
            bench_samples_add(out, clients[i].ms);
        if (clients[i].id != NULL)
            ts_context_delete(tb->gw[side].port, NULL, clients[i].id);
        free(clients[i].id);
    }
    return err;
}

/* Ten idle contexts: their kernels' PSS summed (plus the template's, which they share, and its spare's), per context, in MiB. */
static int idle_pss(template_bench_t *tb, int side, double *per_context_mib)
{
    char *ids[PSS_CONTEXTS] = {NULL}, why[600];
    int kernels[PSS_CONTEXTS] = {0};
    long long total = 0;
    int err = 0;

    for (int i = 0; i != PSS_CONTEXTS && err == 0; ++i) {
        ts_events_t evs;
        ts_response_t r;
        char *out;
        int st = ts_context_create_until(tb->gw[side].port, NULL, "python", ts_now_ms() + RUN_MS, &ids[i], &r);
        ts_response_dispose(&r);
        if (st != 200) {
            bench_set_detail("PSS: POST /code/context: HTTP %d", st);
            err = BENCH_ESTATUS;
            break;
        }
        memset(&evs, 0, sizeof(evs));
        st = ts_run_code(tb->gw[side].port, NULL, ids[i], NULL, "import os; print(os.getpid())", RUN_MS, &evs, NULL);
        out = ts_events_text(&evs, "stdout");
        ts_events_dispose(&evs);
        if (st != 200 || out == NULL || bench_pss_kib(atoi(out)) < 0) {
            bench_set_detail("PSS: cannot read the kernel's smaps_rollup (HTTP %d)", st);
            err = BENCH_ESTATUS;
        } else {
            kernels[i] = atoi(out);
        }
        free(out);
    }
    (void)why;
    if (err == 0) {
        /* all ten idle, then every PSS read at one moment: a page's share is its size over its mappers at the reading, so
         * a kernel read right after its cell (before the next ones, or the template's next spare) would count more */
        ts_sleep_ms(1000);
        for (int i = 0; i != PSS_CONTEXTS && err == 0; ++i) {
            long long kib = bench_pss_kib(kernels[i]);
            if (kib < 0) {
                bench_set_detail("PSS: kernel %d is gone before its PSS was read", kernels[i]);
                err = BENCH_ESTATUS;
            }
            total += kib;
        }
    }
    if (err == 0) {
        if (side == 0 && bench_template_pid(&tb->gw[0]) > 0)
            total += bench_pss_kib(bench_template_pid(&tb->gw[0])) +
                     bench_spare_pss_kib(bench_template_pid(&tb->gw[0]), kernels, PSS_CONTEXTS);
        *per_context_mib = (double)total / 1024.0 / PSS_CONTEXTS;
    }
    for (int i = 0; i != PSS_CONTEXTS; ++i) {
        if (ids[i] != NULL)
            ts_context_delete(tb->gw[side].port, NULL, ids[i]);
        free(ids[i]);
    }
    return err;
}

int bench_run_template(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    static char burst_forked_label[64], burst_spawned_label[64];
    template_bench_t tb = {.self = self, .env = env};
    const char *args[2][5] = {{"--pool", "none", NULL}, {"--pool", "none", "--kernel-template", "none", NULL}};
    bench_samples_t s[2] = {{0}, {0}}, b[2] = {{0}, {0}};
    size_t samples = env->samples != 0 ? env->samples : self->default_samples;
    size_t warmup = env->warmup != SIZE_MAX ? env->warmup : self->default_warmup;
    unsigned n = env->clients != 0 ? env->clients : self->clients;
    int err = 0, started[2] = {0, 0};

    memset(out, 0, sizeof(*out));
    out->kgate_label = "create to first 1+1, forked";
    out->direct_label = "create to first 1+1, spawned";
    snprintf(burst_forked_label, sizeof(burst_forked_label), "%u at once to 1+1, forked", n);
    snprintf(burst_spawned_label, sizeof(burst_spawned_label), "%u at once to 1+1, spawned", n);
    out->burst_pool_label = burst_forked_label;
    out->burst_cold_label = burst_spawned_label;
    if (n > MAX_BURST) {
        bench_set_detail("at most %d clients in a burst", MAX_BURST);
        return BENCH_EPROTO;
    }
    for (int i = 0; i != 2; ++i) {
        ts_gateway_opts_t opts = {.exe = env->kgate_exe,
                                  .args = args[i],
                                  .label = i == 0 ? "bench-template" : "bench-spawn",
                                  .keep_env = "KGATE_BENCH_KEEP",
                                  .startup_ms = 15000};
        if ((err = ts_gateway_start(&tb.gw[i], &opts)) != 0) {
            bench_set_detail("starting kgate: %s", tb.gw[i].error);
            goto Exit;
        }
        started[i] = 1;
    }
    if ((err = bench_template_wait(&tb.gw[0], env->interrupted)) != 0)
        goto Exit;
    if ((err = bench_alternate(env, self->name, warmup, samples, sample, &tb, s, &out->kgate_reconnects)) != 0)
        goto Exit;
    bench_summarize(&s[0], &out->kgate);
    bench_summarize(&s[1], &out->direct);
    if ((err = idle_pss(&tb, 0, &out->pss_per_context_mib[0])) != 0 || (err = idle_pss(&tb, 1, &out->pss_per_context_mib[1])) != 0)
        goto Exit;
    ts_sleep_ms(3000);
    if (n != 0 && ((err = burst(&tb, 0, n, &b[0])) != 0 || (ts_sleep_ms(5000), err = burst(&tb, 1, n, &b[1])) != 0))
        goto Exit;
    bench_summarize(&b[0], &out->burst_pool);
    bench_summarize(&b[1], &out->burst_cold);

Exit:
    for (int i = 0; i != 2; ++i) {
        if (started[i] && ts_gateway_stop(&tb.gw[i], NULL) != 0)
            fprintf(stderr, "kgate_bench_execute: warning: %s: %s\n", self->name, tb.gw[i].error);
        bench_samples_dispose(&s[i]);
        bench_samples_dispose(&b[i]);
    }
    return err;
}
