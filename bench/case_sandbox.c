/* bench/case_sandbox.c: `1+1` in a context of a kgate started with --sandbox bwrap against the bench's own kgate, alternately. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "cases.h"
#include "kgate_client.h"

/* The two kgates' contexts: the sandboxed one (the `kgate` slot) and the bench's own, plain (the `direct` slot). */
typedef struct st_sandbox_pair_t {
    const bench_case_t *self;
    bench_env_t *env;
    ts_gateway_t gw;
    ts_http_t http;
    char *sandboxed, *plain;
} sandbox_pair_t;

static int sandbox_one(void *data, int plain, int timed, bench_outcome_t *o)
{
    sandbox_pair_t *p = data;
    int err = bench_kgate_execute(plain ? p->env->http : &p->http, p->env->timeout_ms, plain ? p->plain : p->sandboxed,
                                  p->self->code, 0, o);
    (void)timed;

    if (err == 0 && (o->error != NULL || o->result_text == NULL || strcmp(o->result_text, p->self->expect_result) != 0)) {
        bench_set_detail("%s context: expected %s, got %s", plain ? "plain" : "sandboxed", p->self->expect_result,
                         o->error != NULL         ? o->error
                         : o->result_text != NULL ? o->result_text
                                                  : "nothing");
        err = BENCH_ERUN;
    }
    return err;
}

int bench_run_sandbox(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    static const char *const args[] = {"--sandbox", "bwrap", NULL};
    sandbox_pair_t p = {.self = self, .env = env};
    ts_gateway_opts_t opts = {
        .exe = env->kgate_exe, .args = args, .label = "bench-sandbox", .keep_env = "KGATE_BENCH_KEEP", .startup_ms = 15000};
    bench_samples_t s[2] = {{0}, {0}};
    size_t samples = env->samples != 0 ? env->samples : self->default_samples;
    size_t warmup = env->warmup != SIZE_MAX ? env->warmup : self->default_warmup;
    int err, started = 0;

    memset(out, 0, sizeof(*out));
    out->kgate_label = "sandboxed context (--sandbox bwrap)";
    out->direct_label = "plain context";
    /* kgate refuses to start with --sandbox bwrap where bwrap cannot make its namespaces (a container) */
    if (ts_gateway_start(&p.gw, &opts) != 0) {
        bench_set_detail("kgate --sandbox bwrap did not start (bwrap missing, or no namespaces here): %s", p.gw.error);
        return BENCH_ESKIPPED;
    }
    started = 1;
    ts_http_init(&p.http, p.gw.port, 1);
    if ((err = bench_kgate_create_context(&p.http, env->timeout_ms, self->language, &p.sandboxed)) != 0)
        goto Exit;
    if ((err = bench_kgate_create_context(env->http, env->timeout_ms, self->language, &p.plain)) != 0)
        goto Exit;
    if (env->verbose)
        fprintf(stderr, "[%s] sandboxed kgate pid %d: context %s; plain context %s\n", self->name, (int)p.gw.pid, p.sandboxed,
                p.plain);
    if ((err = bench_alternate(env, self->name, warmup, samples, sandbox_one, &p, s, &out->kgate_reconnects)) != 0)
        goto Exit;
    bench_summarize(&s[0], &out->kgate);
    bench_summarize(&s[1], &out->direct);

Exit:
    bench_kgate_drop_context(&p.http, env->timeout_ms, p.sandboxed);
    bench_kgate_drop_context(env->http, env->timeout_ms, p.plain);
    ts_http_dispose(&p.http);
    if (started && ts_gateway_stop(&p.gw, NULL) != 0)
        fprintf(stderr, "kgate_bench_execute: warning: %s: %s\n", self->name, p.gw.error);
    bench_samples_dispose(&s[0]);
    bench_samples_dispose(&s[1]);
    free(p.sandboxed);
    free(p.plain);
    return err;
}
