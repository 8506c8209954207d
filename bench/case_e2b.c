/* bench/case_e2b.c: `1+1` through E2B's POST /execute (NDJSON) against POST /code (SSE) of the same, alternately, on one kgate. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "support/base.h"
#include "support/http.h"
#include "support/proc.h"
#include "cases.h"
#include "kgate_client.h"

#define E2B_BODY_MAX (1u << 20)

enum { SIDE_E2B, SIDE_CODE };

typedef struct st_e2b_case_t {
    const bench_case_t *self;
    bench_env_t *env;
    ts_http_t e2b; /* the /execute side's keep-alive connection */
    char *ctx;     /* one context, both sides: what differs is the door */
    double cpu_ms[2];
    size_t cpu_n[2];
} e2b_case_t;

/* One POST /execute, read to its end: the main result's text, or the error, into `o`. */
static int execute_e2b(e2b_case_t *c, bench_outcome_t *o)
{
    json_t *req = json_pack("{s:s, s:s}", "code", c->self->code, "context_id", c->ctx);
    char *body = json_dumps(req, JSON_COMPACT);
    int64_t deadline = ts_now_ms() + c->env->timeout_ms;
    ts_response_t resp;
    int err, ended = 0;
    double t0 = bench_now_ms();

    memset(o, 0, sizeof(*o));
    json_decref(req);
    if ((err = ts_http_start(&c->e2b, "POST", "/execute", NULL, body, deadline, &resp)) != 0 ||
        (err = ts_http_read_all(&c->e2b, &resp, E2B_BODY_MAX, deadline)) != 0) {
        bench_set_detail("POST /execute: %s", resp.error);
        ts_http_close(&c->e2b);
        goto Exit;
    }
    o->ms = bench_now_ms() - t0;
    if (resp.status != 200) {
        bench_set_detail("POST /execute: HTTP %d %.300s", resp.status, resp.body);
        err = BENCH_ESTATUS;
        goto Exit;
    }
    for (char *save = NULL, *line = strtok_r(resp.body, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        json_t *v = json_loads(line, 0, NULL);
        const char *type = json_string_value(json_object_get(v, "type"));
        ++o->stream_messages;
        if (type != NULL && strcmp(type, "result") == 0 && json_is_true(json_object_get(v, "is_main_result")) &&
            o->result_text == NULL)
            o->result_text = strdup(json_string_value(json_object_get(v, "text")) ?: "");
        else if (type != NULL && strcmp(type, "error") == 0 && o->error == NULL)
            o->error = strdup(json_string_value(json_object_get(v, "name")) ?: "error");
        ended = type != NULL && strcmp(type, "end_of_execution") == 0;
        json_decref(v);
    }
    if (!ended) {
        bench_set_detail("POST /execute: the body did not end with end_of_execution");
        err = BENCH_EPROTO;
    }
Exit:
    ts_response_dispose(&resp);
    free(body);
    return err;
}

static int execute_one(void *data, int side, int timed, bench_outcome_t *o)
{
    e2b_case_t *c = data;
    const bench_case_t *self = c->self;
    bench_env_t *env = c->env;
    double cpu0 = (double)ts_proc_cpu_ms(env->kgate->pid), cpu1;
    int err = side == SIDE_E2B ? execute_e2b(c, o) : bench_kgate_execute(env->http, env->timeout_ms, c->ctx, self->code, 0, o);
    const char *who = side == SIDE_E2B ? "POST /execute" : "POST /code";

    cpu1 = (double)ts_proc_cpu_ms(env->kgate->pid);
    if (err != 0)
        return err;
    if ((err = bench_expect_result(who, self->expect_result, o)) != 0)
        return err;
    if (timed && cpu0 >= 0 && cpu1 >= 0) {
        c->cpu_ms[side] += cpu1 - cpu0;
        ++c->cpu_n[side];
    }
    return 0;
}

int bench_run_e2b(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    e2b_case_t c = {.self = self, .env = env};
    bench_samples_t s[2] = {{0}, {0}};
    size_t samples = env->samples != 0 ? env->samples : self->default_samples;
    size_t warmup = env->warmup != SIZE_MAX ? env->warmup : self->default_warmup;
    int err;

    memset(out, 0, sizeof(*out));
    out->kgate_label = "E2B POST /execute (NDJSON)";
    out->direct_label = "POST /code (SSE)";
    out->kgate_cpu_ms_relaying = out->kgate_cpu_ms_listening = -1;
    out->kgate_rss_start_kb = out->kgate_rss_peak_kb = out->peer_rss_start_kb = out->peer_rss_peak_kb = -1;
    ts_http_init(&c.e2b, env->kgate->port, 1);
    if ((err = bench_kgate_create_context(env->http, env->timeout_ms, self->language, &c.ctx)) != 0)
        goto Exit;
    if ((err = bench_alternate(env, self->name, warmup, samples, execute_one, &c, s, &out->kgate_reconnects)) != 0)
        goto Exit;
    out->kgate_reconnects += c.e2b.reconnects;
    bench_summarize(&s[SIDE_E2B], &out->kgate);
    bench_summarize(&s[SIDE_CODE], &out->direct);
    if (c.cpu_n[SIDE_E2B] > 0 && c.cpu_n[SIDE_CODE] > 0) {
        out->kgate_cpu_ms_relaying = c.cpu_ms[SIDE_E2B] / (double)c.cpu_n[SIDE_E2B];
        out->kgate_cpu_ms_listening = c.cpu_ms[SIDE_CODE] / (double)c.cpu_n[SIDE_CODE];
    }
Exit:
    ts_http_dispose(&c.e2b);
    bench_kgate_drop_context(env->http, env->timeout_ms, c.ctx);
    bench_samples_dispose(&s[0]);
    bench_samples_dispose(&s[1]);
    free(c.ctx);
    return err;
}
