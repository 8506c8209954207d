/* bench/case_pool.c: POST /code/context from a warm pool against a cold start, and a burst of contexts asked for at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "support/api.h"
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "wire/alloc.h"
#include "burst.h"
#include "cases.h"

#define POOL_WAIT_MS 180000 /* the pool refilled, one python kernel after the other, on a loaded machine */
#define SETTLE_MS 300       /* after the pool is full: the last kernel's start and the deleted kernels' shutdowns are over */
#define MAX_BURST 64

/* A kgate of the case's own, started with --pool <kernel>=<pool_size>. */
typedef struct st_pool_bench_t {
    const bench_case_t *self;
    bench_env_t *env;
    ts_gateway_t gw;
    char pool_arg[64];
} pool_bench_t;

/* The ready kernels of the case's pool (GET /code/languages), or a negative error. */
static int pool_ready(pool_bench_t *pb)
{
    ts_response_t r;
    int st = ts_http_request(pb->gw.port, "GET", "/code/languages", NULL, NULL, &r), ready = -1;
    json_t *entry;
    size_t i;

    if (st != 200) {
        bench_set_detail("GET /code/languages: HTTP %d %s", st, r.error);
        ts_response_dispose(&r);
        return BENCH_ESTATUS;
    }
    json_array_foreach(r.json, i, entry)
    {
        const char *name = json_string_value(json_object_get(entry, "kernel"));
        if (name != NULL && strcmp(name, pb->self->pool_kernel) == 0)
            ready = (int)json_integer_value(json_object_get(json_object_get(entry, "pool"), "ready"));
    }
    ts_response_dispose(&r);
    if (ready < 0) {
        bench_set_detail("kgate reports no pool of %s (is its kernelspec installed?)", pb->self->pool_kernel);
        return BENCH_ENOKERNEL;
    }
    return ready;
}

/* Waits until the pool is full, then lets the machine settle: every timed create starts from the same state. */
static int wait_pool_full(pool_bench_t *pb)
{
    int64_t deadline = ts_now_ms() + POOL_WAIT_MS;
    int ready;

    while ((ready = pool_ready(pb)) >= 0 && ready < (int)pb->self->pool_size) {
        if (*pb->env->interrupted) {
            bench_set_detail("stopped waiting for the pool");
            return BENCH_EINTERRUPTED;
        }
        if (ts_now_ms() > deadline) {
            bench_set_detail("the pool had %d of %u kernels ready after %d ms", ready, pb->self->pool_size, POOL_WAIT_MS);
            return BENCH_ETIMEDOUT;
        }
        ts_sleep_ms(50);
    }
    if (ready < 0)
        return ready;
    ts_sleep_ms(SETTLE_MS);
    return 0;
}

/* POST /code/context: from the pool (`cold` 0) or with an env, which no pooled kernel has (a cold start); the id in *id. */
static int create(unsigned short port, int cold, char **id, double *ms, char *why, size_t whylen)
{
    json_t *body = json_pack("{s:s}", "language", "python");
    ts_response_t r;
    double t0;
    int st;

    if (cold)
        json_object_set_new(body, "env", json_pack("{s:s}", "KGATE_BENCH", "cold"));
    t0 = bench_now_ms();
    st = ts_post_json(port, "/code/context", NULL, body, &r);
    *ms = bench_now_ms() - t0;
    json_decref(body);
    *id = NULL;
    if (st != 200 || json_string_value(json_object_get(r.json, "id")) == NULL) {
        snprintf(why, whylen, "POST /code/context: HTTP %d %.150s %.300s", st, r.error, r.body != NULL ? r.body : "");
        ts_response_dispose(&r);
        return st < 0 ? st : BENCH_ESTATUS;
    }
    *id = wire_strdup(json_string_value(json_object_get(r.json, "id")));
    ts_response_dispose(&r);
    return 0;
}

static void drop(pool_bench_t *pb, char *id)
{
    if (id != NULL)
        ts_context_delete(pb->gw.port, NULL, id);
    free(id);
}

static int create_one(void *data, int cold, int timed, bench_outcome_t *o)
{
    pool_bench_t *pb = data;
    char *id = NULL, why[600];
    int err;
    (void)timed;

    memset(o, 0, sizeof(*o));
    if ((err = wait_pool_full(pb)) != 0)
        return err;
    if ((err = create(pb->gw.port, cold, &id, &o->ms, why, sizeof(why))) != 0)
        bench_set_detail("%s", why);
    if (pb->env->verbose && err == 0)
        fprintf(stderr, "[%s] %s create: %.3f ms\n", pb->self->name, cold ? "cold" : "pool", o->ms);
    drop(pb, id);
    return err;
}

/* What a burst's clients share: the bench, and whether they ask for cold starts. */
typedef struct st_burst_arg_t {
    pool_bench_t *pb;
    int cold;
} burst_arg_t;

static int create_in_burst(void *arg, char **id, double *ms, char *why, size_t whylen)
{
    burst_arg_t *b = arg;
    return create(b->pb->gw.port, b->cold, id, ms, why, whylen);
}

static int cmp_ms(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * `rounds` bursts of self->clients creates at once, each after the pool is full; every latency goes
 * to `out`, and, when `split` is given, the pool_size fastest of each burst to split[0] (those the
 * pool served) and the others to split[1].
 */
static int run_bursts(pool_bench_t *pb, int cold, unsigned rounds, bench_samples_t *out, bench_samples_t *split)
{
    double ms[MAX_BURST];
    unsigned n = pb->self->clients;
    bench_burst_client_t clients[MAX_BURST];
    burst_arg_t arg = {.pb = pb, .cold = cold};
    int err = 0;

    bench_samples_init(out, (size_t)n * rounds);
    if (split != NULL) {
        bench_samples_init(&split[0], (size_t)n * rounds);
        bench_samples_init(&split[1], (size_t)n * rounds);
    }
    for (unsigned round = 0; round != rounds && err == 0; ++round) {
        if ((err = wait_pool_full(pb)) != 0)
            break;
        bench_burst(create_in_burst, &arg, n, clients);
        for (unsigned i = 0; i != n; ++i)
            ms[i] = clients[i].ms;
        qsort(ms, n, sizeof(ms[0]), cmp_ms);
        for (unsigned i = 0; split != NULL && i != n; ++i)
            bench_samples_add(&split[i < pb->self->pool_size ? 0 : 1], ms[i]);
        for (unsigned i = 0; i != n; ++i) {
            if (clients[i].err != 0 && err == 0) {
                err = clients[i].err;
                bench_set_detail("burst %u, client %u: %s", round, i, clients[i].why);
            }
            if (clients[i].err == 0)
                bench_samples_add(out, clients[i].ms);
            if (pb->env->verbose)
                fprintf(stderr, "[%s] burst %u (%s) client %u: %.1f ms\n", pb->self->name, round, cold ? "cold" : "pool", i,
                        clients[i].ms);
            drop(pb, clients[i].id);
        }
    }
    return err;
}

int bench_run_pool(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    static char burst_pool_label[64], burst_hit_label[64], burst_miss_label[64], burst_cold_label[64];
    pool_bench_t pb = {.self = self, .env = env};
    const char *args[] = {"--pool", pb.pool_arg, NULL};
    ts_gateway_opts_t opts = {
        .exe = env->kgate_exe, .args = args, .label = "bench-pool", .keep_env = "KGATE_BENCH_KEEP", .startup_ms = 15000};
    bench_samples_t s[2] = {{0}, {0}}, burst[2] = {{0}, {0}}, split[2] = {{0}, {0}};
    size_t samples = env->samples != 0 ? env->samples : self->default_samples;
    size_t warmup = env->warmup != SIZE_MAX ? env->warmup : self->default_warmup;
    int err, started = 0;

    memset(out, 0, sizeof(*out));
    out->kgate_label = "POST /code/context, pool warm";
    out->direct_label = "POST /code/context, cold start";
    snprintf(burst_pool_label, sizeof(burst_pool_label), "%u at once, pool of %u", self->clients, self->pool_size);
    snprintf(burst_cold_label, sizeof(burst_cold_label), "%u at once, cold starts", self->clients);
    snprintf(burst_hit_label, sizeof(burst_hit_label), "  the %u fastest of each", self->pool_size);
    snprintf(burst_miss_label, sizeof(burst_miss_label), "  the other %u of each", self->clients - self->pool_size);
    out->burst_pool_label = burst_pool_label;
    out->burst_hit_label = burst_hit_label;
    out->burst_miss_label = burst_miss_label;
    out->burst_cold_label = burst_cold_label;
    snprintf(pb.pool_arg, sizeof(pb.pool_arg), "%s=%u", self->pool_kernel, self->pool_size);
    if (self->clients > MAX_BURST) {
        bench_set_detail("at most %d clients in a burst", MAX_BURST);
        return BENCH_EPROTO;
    }
    if ((err = ts_gateway_start(&pb.gw, &opts)) != 0) {
        bench_set_detail("starting kgate %s: %s", pb.pool_arg, pb.gw.error);
        goto Exit;
    }
    started = 1;
    if (env->verbose)
        fprintf(stderr, "[%s] kgate --pool %s: pid %d on 127.0.0.1:%u\n", self->name, pb.pool_arg, (int)pb.gw.pid, pb.gw.port);
    if ((err = bench_alternate(env, self->name, warmup, samples, create_one, &pb, s, &out->kgate_reconnects)) != 0)
        goto Exit;
    bench_summarize(&s[0], &out->kgate);
    bench_summarize(&s[1], &out->direct);
    if ((err = run_bursts(&pb, 0, self->rounds, &burst[0], split)) != 0)
        goto Exit;
    if ((err = run_bursts(&pb, 1, self->rounds, &burst[1], NULL)) != 0)
        goto Exit;
    bench_summarize(&burst[0], &out->burst_pool);
    bench_summarize(&split[0], &out->burst_hit);
    bench_summarize(&split[1], &out->burst_miss);
    bench_summarize(&burst[1], &out->burst_cold);

Exit:
    if (started && ts_gateway_stop(&pb.gw, NULL) != 0)
        fprintf(stderr, "kgate_bench_execute: warning: %s: %s\n", self->name, pb.gw.error);
    for (int i = 0; i != 2; ++i) {
        bench_samples_dispose(&s[i]);
        bench_samples_dispose(&burst[i]);
        bench_samples_dispose(&split[i]);
    }
    return err;
}
