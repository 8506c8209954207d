/* bench/case_jupyter.c: `1+1` through kgate's kernel WebSocket, a direct ZMQ client and Jupyter Server's WebSocket, rotated. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/base.h"
#include "support/proc.h"
#include "wire/alloc.h"
#include "cases.h"
#include "direct_client.h"
#include "jupyter_server.h"
#include "jupyter_ws.h"
#include "kgate_client.h"

#define RSS_PERIOD_MS 50
#define KERNEL_NAME "python3" /* kgate's and Jupyter Server's alike: Debian's ipykernel spec */

enum { SIDE_KGATE, SIDE_DIRECT, SIDE_PEER, NSIDES };

/* Every order of the three clients, used in turn, so that none always follows another (a kernel just woken, caches just warm). */
static const int orders[6][NSIDES] = {{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}};

typedef struct st_jcase_t {
    const bench_case_t *self;
    bench_env_t *env;
    char *kernel_id;
    bench_jws_t kgate_ws;
    bench_direct_t direct;
    bench_jserver_t server;
    bench_jws_t peer_ws;
    int has_peer;
} jcase_t;

static const char *side_name(int side)
{
    return side == SIDE_KGATE ? "kgate WebSocket" : side == SIDE_DIRECT ? "direct ZMQ" : "Jupyter Server WebSocket";
}

static int execute_one(jcase_t *j, int side, bench_outcome_t *o)
{
    const char *code = j->self->code;
    int err = side == SIDE_KGATE    ? bench_jws_execute(&j->kgate_ws, code, o)
              : side == SIDE_DIRECT ? bench_direct_execute(&j->direct, code, o)
                                    : bench_jws_execute(&j->peer_ws, code, o);

    if (err != 0)
        return err;
    return bench_expect_result(side_name(side), j->self->expect_result, o);
}

/* The peer: Debian's Jupyter Server, a kernel it manages, our WebSocket client on it. BENCH_ESKIPPED when not installed. */
static int open_peer(jcase_t *j)
{
    bench_env_t *env = j->env;
    const char *id;
    char path[256];
    int err;

    if (!bench_jserver_available())
        return BENCH_ESKIPPED;
    if ((err = bench_jserver_start(&j->server, env->timeout_ms)) != 0)
        return err;
    j->has_peer = 1;
    if (env->verbose)
        fprintf(stderr, "[%s] Jupyter Server %s pid %d on 127.0.0.1:%u\n", j->self->name, j->server.version, (int)j->server.pid,
                j->server.port);
    if ((err = bench_jserver_start_kernel(&j->server, KERNEL_NAME, &id)) != 0)
        return err;
    if ((err = bench_jws_open(&j->peer_ws, j->server.port, bench_jserver_channels_path(&j->server, id, path, sizeof(path)),
                              env->timeout_ms, env->ws_quickack)) != 0)
        return err;
    return bench_jws_wait_ready(&j->peer_ws);
}

int bench_run_jupyter(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    static char peer_label[64];
    jcase_t j = {.self = self, .env = env};
    bench_samples_t s[NSIDES] = {{0}};
    ts_rss_sampler_t kgate_rss = {0}, peer_rss = {0};
    int kgate_sampling = 0, peer_sampling = 0;
    char *conn_file = NULL, path[256];
    size_t samples = env->samples != 0 ? env->samples : self->default_samples;
    size_t warmup = env->warmup != SIZE_MAX ? env->warmup : self->default_warmup;
    int err;

    memset(out, 0, sizeof(*out));
    out->kgate_label = "kgate WebSocket (v1)";
    out->direct_label = "direct ZMQ, same kernel";
    out->kgate_rss_start_kb = ts_proc_rss_kb(env->kgate->pid);
    out->kgate_rss_peak_kb = out->peer_rss_start_kb = out->peer_rss_peak_kb = -1;
    kgate_sampling = ts_rss_sampler_start(&kgate_rss, env->kgate->pid, RSS_PERIOD_MS) == 0;
    for (int i = 0; i != NSIDES; ++i)
        bench_samples_init(&s[i], samples);

    /* kgate: a kernel through its Jupyter API, our WebSocket on it, and the direct client on the same kernel */
    if ((err = bench_kgate_start_kernel(env->http, env->timeout_ms, KERNEL_NAME, &j.kernel_id)) != 0)
        goto Exit;
    snprintf(path, sizeof(path), "/api/kernels/%s/channels", j.kernel_id);
    if ((err = bench_jws_open(&j.kgate_ws, env->kgate->port, path, env->timeout_ms, env->ws_quickack)) != 0 ||
        (err = bench_jws_wait_ready(&j.kgate_ws)) != 0)
        goto Exit;
    if ((err = bench_find_kernel(self, env, j.kernel_id, &conn_file)) != 0)
        goto Exit;
    if (env->verbose)
        fprintf(stderr, "[%s] kgate kernel %s, %s\n", self->name, j.kernel_id, conn_file);
    if ((err = bench_direct_open(&j.direct, conn_file, env->timeout_ms)) != 0 || (err = bench_direct_wait_ready(&j.direct)) != 0)
        goto Exit;

    if ((err = open_peer(&j)) == BENCH_ESKIPPED) {
        snprintf(out->peer_skipped, sizeof(out->peer_skipped), "%s", bench_detail());
        fprintf(stderr, "kgate_bench_execute: %s: the Jupyter Server column is skipped: %s\n", self->name, bench_detail());
        err = 0;
    } else if (err != 0) {
        goto Exit;
    } else {
        snprintf(peer_label, sizeof(peer_label), "Jupyter Server %s WS (v1)", j.server.version);
        out->peer_label = peer_label;
        out->peer_rss_start_kb = ts_proc_rss_kb(j.server.pid);
        peer_sampling = ts_rss_sampler_start(&peer_rss, j.server.pid, RSS_PERIOD_MS) == 0;
    }

    for (size_t i = 0; i != warmup + samples && err == 0; ++i) {
        if (*env->interrupted) {
            bench_set_detail("stopped sampling");
            err = BENCH_EINTERRUPTED;
            break;
        }
        for (int k = 0; k != NSIDES && err == 0; ++k) {
            int side = orders[i % 6][k];
            bench_outcome_t o;
            if (side == SIDE_PEER && !j.has_peer)
                continue;
            if ((err = execute_one(&j, side, &o)) == 0 && i >= warmup)
                bench_samples_add(&s[side], o.ms);
            bench_outcome_dispose(&o);
        }
        if (env->verbose && i >= warmup && (i - warmup + 1) % 50 == 0)
            fprintf(stderr, "[%s] %zu/%zu samples\n", self->name, i - warmup + 1, samples);
    }
    if (err == 0) {
        bench_summarize(&s[SIDE_KGATE], &out->kgate);
        bench_summarize(&s[SIDE_DIRECT], &out->direct);
        bench_summarize(&s[SIDE_PEER], &out->peer);
    }

Exit:
    if (kgate_sampling)
        out->kgate_rss_peak_kb = ts_rss_sampler_stop(&kgate_rss);
    if (peer_sampling)
        out->peer_rss_peak_kb = ts_rss_sampler_stop(&peer_rss);
    bench_jws_close(&j.peer_ws);
    if (j.has_peer)
        bench_jserver_stop(&j.server);
    bench_jws_close(&j.kgate_ws);
    bench_direct_close(&j.direct);
    bench_kgate_shutdown_kernel(env->http, env->timeout_ms, j.kernel_id);
    for (int i = 0; i != NSIDES; ++i)
        bench_samples_dispose(&s[i]);
    free(conn_file);
    free(j.kernel_id);
    return err;
}
