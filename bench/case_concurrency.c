/* bench/case_concurrency.c: N clients on N kernels, through kgate and directly, in alternating rounds. */
#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <stdlib.h>
#include <string.h>
#include "support/base.h"
#include "support/http.h"
#include "support/proc.h"
#include "wire/alloc.h"
#include "cases.h"
#include "direct_client.h"
#include "jupyter_ws.h"
#include "kgate_client.h"

#define RSS_PERIOD_MS 50

/* One client: its kgate connection, its direct client of the same kernel, and what it measured. */
typedef struct st_client_t {
    const bench_case_t *self;
    bench_env_t *env;
    pthread_t thread;
    char *ctx;
    ts_http_t http;
    bench_jws_t jws; /* via_jupyter_ws: open during kgate's rounds only */
    bench_direct_t direct;
    int direct_open;
    int side;            /* this round: 0 kgate, 1 direct */
    int64_t deadline_ms; /* this round's end */
    size_t warmup;       /* untimed executes at the start of this round */
    bench_samples_t *samples;
    size_t executes;     /* timed executes this round */
    size_t all_executes; /* and with the warm-up: what the round's CPU time was spent on */
    int err;
} client_t;

/*
 * CPU time (ms) spent so far by each party of a round: kgate, its kernels, and this process (the
 * clients); and the context switches of kgate's and the kernels' threads (the clients' threads
 * come and go with each round: not counted).
 */
typedef struct st_cpu_snapshot_t {
    double kgate, kernels, clients;
    /* voluntary, involuntary: doubles, so that a thread that exits within a round (its count gone from
     * the second snapshot) makes a round's difference smaller, never wrap around */
    double kgate_switches[2], kernel_switches[2];
} cpu_snapshot_t;

/* This process's own CPU time in ms (every client thread, and the direct clients' ZMQ I/O threads). */
static double self_cpu_ms(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000.0 +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000.0;
}

/* A snapshot of every party's CPU time; the kernels are kgate's descendants (its watchdog left out). */
static void cpu_snapshot(pid_t kgate, cpu_snapshot_t *out)
{
    ts_proc_t kids[64];
    size_t n = ts_descendants(kgate, kids, 64);

    memset(out, 0, sizeof(*out));
    out->kgate = (double)ts_proc_cpu_ms(kgate);
    ts_switches_t sw = {0};
    ts_proc_switches(kgate, &sw);
    out->kgate_switches[0] = (double)sw.voluntary;
    out->kgate_switches[1] = (double)sw.involuntary;
    sw = (ts_switches_t){0};
    for (size_t i = 0; i != n; ++i) {
        int64_t ms = ts_proc_cpu_ms(kids[i].pid);
        if (ms > 0)
            out->kernels += (double)ms;
        ts_proc_switches(kids[i].pid, &sw);
    }
    out->kernel_switches[0] = (double)sw.voluntary;
    out->kernel_switches[1] = (double)sw.involuntary;
    out->clients = self_cpu_ms();
}

static int execute(client_t *c, bench_outcome_t *o)
{
    int err = c->side == 1              ? bench_direct_execute(&c->direct, c->self->code, o)
              : c->self->via_jupyter_ws ? bench_jws_execute(&c->jws, c->self->code, o)
                                        : bench_kgate_execute(&c->http, c->env->timeout_ms, c->ctx, c->self->code, 0, o);
    if (err == 0 && (o->error != NULL || o->result_text == NULL || strcmp(o->result_text, c->self->expect_result) != 0))
        err = BENCH_ERUN;
    return err;
}

static void *client_round(void *arg)
{
    client_t *c = arg;

    c->executes = c->all_executes = 0;
    for (size_t i = 0; c->err == 0 && !*c->env->interrupted && ts_now_ms() < c->deadline_ms; ++i) {
        bench_outcome_t o;
        if ((c->err = execute(c, &o)) == 0) {
            ++c->all_executes;
            if (i >= c->warmup) {
                bench_samples_add(c->samples, o.ms);
                ++c->executes;
            }
        }
        bench_outcome_dispose(&o);
    }
    return NULL;
}

/*
 * kgate's WebSockets are open during its own rounds only: kgate relays every iopub message of a
 * kernel to each of its sockets, so during the direct rounds an open socket nobody reads would
 * fill up (and be cut off) with the direct clients' traffic. Opening one is not timed.
 */
static int open_websockets(client_t *clients, unsigned n)
{
    char path[256];
    int err = 0;

    for (unsigned i = 0; i != n && err == 0; ++i) {
        snprintf(path, sizeof(path), "/api/kernels/%s/channels", clients[i].ctx);
        if ((err = bench_jws_open(&clients[i].jws, clients[i].env->kgate->port, path, clients[i].env->timeout_ms,
                                  clients[i].env->ws_quickack)) == 0)
            err = bench_jws_wait_ready(&clients[i].jws);
    }
    return err;
}

static void close_websockets(client_t *clients, unsigned n)
{
    for (unsigned i = 0; i != n; ++i)
        bench_jws_close(&clients[i].jws);
}

/*
 * One round of one side: every client loops until the deadline. Returns executes/s, or < 0 on
 * error; adds each party's CPU time during the round, and every execute it was spent on, to `cpu`
 * and `*cpu_executes`.
 */
static double run_round(client_t *clients, unsigned n, int side, unsigned round_ms, size_t warmup, bench_samples_t *samples,
                        cpu_snapshot_t *cpu, size_t *cpu_executes)
{
    size_t executes = 0, all_executes = 0;
    cpu_snapshot_t before, after;
    int err;

    if (side == 0 && clients[0].self->via_jupyter_ws && (err = open_websockets(clients, n)) != 0) {
        close_websockets(clients, n);
        return err;
    }
    cpu_snapshot(clients[0].env->kgate->pid, &before);
    int64_t t0 = ts_now_ms();

    for (unsigned i = 0; i != n; ++i) {
        clients[i].side = side;
        clients[i].deadline_ms = t0 + round_ms;
        clients[i].warmup = warmup;
        clients[i].samples = &samples[i];
        pthread_create(&clients[i].thread, NULL, client_round, &clients[i]);
    }
    for (unsigned i = 0; i != n; ++i)
        pthread_join(clients[i].thread, NULL);
    int64_t elapsed = ts_now_ms() - t0;
    cpu_snapshot(clients[0].env->kgate->pid, &after);
    if (side == 0 && clients[0].self->via_jupyter_ws)
        close_websockets(clients, n);
    for (unsigned i = 0; i != n; ++i) {
        if (clients[i].err != 0)
            return clients[i].err;
        executes += clients[i].executes;
        all_executes += clients[i].all_executes;
    }
    cpu->kgate += after.kgate - before.kgate;
    cpu->kernels += after.kernels - before.kernels;
    cpu->clients += after.clients - before.clients;
    for (int k = 0; k != 2; ++k) {
        cpu->kgate_switches[k] += after.kgate_switches[k] - before.kgate_switches[k];
        cpu->kernel_switches[k] += after.kernel_switches[k] - before.kernel_switches[k];
    }
    *cpu_executes += all_executes;
    return (double)executes * 1000.0 / (double)elapsed;
}

/* Merges the clients' samples of one side and summarises them; the p99 goes to *p99 as well. */
static void summarize_side(bench_samples_t *per_client, unsigned n, bench_summary_t *out, double *p99)
{
    bench_samples_t all;
    size_t total = 0;

    for (unsigned i = 0; i != n; ++i)
        total += per_client[i].size;
    bench_samples_init(&all, total + 1);
    for (unsigned i = 0; i != n; ++i)
        for (size_t k = 0; k != per_client[i].size; ++k)
            bench_samples_add(&all, per_client[i].ms[k]);
    bench_summarize(&all, out);
    *p99 = out->p99;
    bench_samples_dispose(&all);
}

int bench_run_concurrency(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    unsigned n = env->clients != 0 ? env->clients : self->clients, rounds = env->rounds != 0 ? env->rounds : self->rounds;
    size_t warmup = env->warmup != SIZE_MAX ? env->warmup : self->default_warmup;
    client_t *clients = wire_calloc(n, sizeof(*clients));
    bench_samples_t *samples = wire_calloc(2 * (size_t)n, sizeof(*samples));
    double eps[2][16], pairs[16];
    cpu_snapshot_t cpu[2] = {{0}};
    size_t cpu_executes[2] = {0};
    ts_rss_sampler_t rss = {0};
    int sampling = 0, err = 0;

    if (rounds > 16)
        rounds = 16;
    memset(out, 0, sizeof(*out));
    out->kgate_label = self->via_jupyter_ws ? "kgate WebSocket (v1)" : "kgate HTTP POST /code (SSE)";
    out->direct_label = "direct ZMQ, same kernels";
    out->kgate_rss_start_kb = ts_proc_rss_kb(env->kgate->pid);
    out->kgate_rss_peak_kb = out->peer_rss_start_kb = out->peer_rss_peak_kb = -1;
    if (self->max_rss_kb != 0)
        sampling = ts_rss_sampler_start(&rss, env->kgate->pid, RSS_PERIOD_MS) == 0;
    for (unsigned i = 0; i != n && err == 0; ++i) {
        char *conn_file = NULL;
        clients[i].self = self;
        clients[i].env = env;
        ts_http_init(&clients[i].http, env->kgate->port, 1);
        bench_samples_init(&samples[i], 1u << 16);
        bench_samples_init(&samples[n + i], 1u << 16);
        /* a kernel of the Jupyter API is a context too: the direct client finds it the same way */
        if ((err = self->via_jupyter_ws
                       ? bench_kgate_start_kernel(env->http, env->timeout_ms, "python3", &clients[i].ctx)
                       : bench_kgate_create_context(env->http, env->timeout_ms, self->language, &clients[i].ctx)) == 0 &&
            (err = bench_find_kernel(self, env, clients[i].ctx, &conn_file)) == 0 &&
            (err = bench_direct_open(&clients[i].direct, conn_file, env->timeout_ms)) == 0) {
            clients[i].direct_open = 1;
            err = bench_direct_wait_ready(&clients[i].direct);
        }
        free(conn_file);
    }
    /* alternating rounds, kgate first and direct first in turn; each round warms its connections up */
    for (unsigned r = 0; r != rounds && err == 0; ++r) {
        for (int k = 0; k != 2 && err == 0; ++k) {
            int side = k ^ (int)(r & 1);
            double v =
                run_round(clients, n, side, self->round_ms, warmup, &samples[side == 0 ? 0 : n], &cpu[side], &cpu_executes[side]);
            if (v < 0)
                err = (int)v;
            eps[side][r] = v;
            if (env->verbose && err == 0)
                fprintf(stderr, "[%s] round %u %s: %.1f executes/s\n", self->name, r + 1, side == 0 ? "kgate" : "direct", v);
        }
    }
    if (err == 0) {
        out->clients_run = n;
        out->rounds_run = rounds;
        memcpy(out->round_executes_per_s, eps, sizeof(eps));
        for (unsigned r = 0; r != rounds; ++r)
            pairs[r] = eps[1][r] > 0 ? eps[0][r] / eps[1][r] : 0;
        out->paired_ratio = bench_median(pairs, rounds);
        out->kgate_executes_per_s = bench_median(eps[0], rounds);
        out->direct_executes_per_s = bench_median(eps[1], rounds);
        summarize_side(samples, n, &out->kgate, &out->kgate_p99_ms);
        summarize_side(samples + n, n, &out->direct, &out->direct_p99_ms);
        for (int side = 0; side != 2; ++side) {
            double per = cpu_executes[side] != 0 ? 1.0 / (double)cpu_executes[side] : 0;
            out->cpu_per_execute[side][0] = cpu[side].kgate * per;
            out->cpu_per_execute[side][1] = cpu[side].kernels * per;
            out->cpu_per_execute[side][2] = cpu[side].clients * per;
            out->switches_per_execute[side][0] = cpu[side].kgate_switches[0] * per;
            out->switches_per_execute[side][1] = cpu[side].kgate_switches[1] * per;
            out->switches_per_execute[side][2] = cpu[side].kernel_switches[0] * per;
            out->switches_per_execute[side][3] = cpu[side].kernel_switches[1] * per;
        }
    }
    if (sampling)
        out->kgate_rss_peak_kb = ts_rss_sampler_stop(&rss);
    for (unsigned i = 0; i != n; ++i) {
        bench_jws_close(&clients[i].jws);
        if (clients[i].direct_open)
            bench_direct_close(&clients[i].direct);
        ts_http_dispose(&clients[i].http);
        if (self->via_jupyter_ws)
            bench_kgate_shutdown_kernel(env->http, env->timeout_ms, clients[i].ctx);
        else
            bench_kgate_drop_context(env->http, env->timeout_ms, clients[i].ctx);
        free(clients[i].ctx);
        bench_samples_dispose(&samples[i]);
        bench_samples_dispose(&samples[n + i]);
    }
    free(samples);
    free(clients);
    return err;
}
