/* bench/case_kernels.c: two kernels of one language compared through kgate's HTTP API, execute by execute. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "support/base.h"
#include "common.h"
#include "kgate_client.h"
#include "cases.h"

#define JSON_BODY_MAX (1024 * 1024)

/* GET `path` on the bench's connection, as JSON; a new reference in *out. */
static int get_json(bench_env_t *env, const char *path, json_t **out)
{
    ts_response_t resp;
    int64_t deadline = ts_now_ms() + env->timeout_ms;
    int err = ts_http_start(env->http, "GET", path, NULL, NULL, deadline, &resp);
    if (err == 0)
        err = ts_http_read_all(env->http, &resp, JSON_BODY_MAX, deadline);
    if (err != 0)
        bench_set_detail("GET %s: %s", path, resp.error);
    else if (resp.status != 200) {
        bench_set_detail("GET %s: HTTP %d %.300s", path, resp.status, resp.body);
        err = BENCH_ESTATUS;
    } else if ((*out = json_incref(resp.json)) == NULL) {
        bench_set_detail("GET %s: not JSON: %.300s", path, resp.body);
        err = BENCH_EPROTO;
    }
    ts_response_dispose(&resp);
    return err;
}

/* 1 if GET /code/languages lists a kernelspec named `kernel`, 0 if not; or a negative error. */
static int kgate_has_kernel(bench_env_t *env, const char *kernel)
{
    json_t *list = NULL, *entry;
    size_t i;
    int err = get_json(env, "/code/languages", &list), found = 0;
    if (err != 0)
        return err;
    json_array_foreach(list, i, entry)
    {
        const char *name = json_string_value(json_object_get(entry, "kernel"));
        if (name != NULL && strcmp(name, kernel) == 0)
            found = 1;
    }
    json_decref(list);
    return found;
}

/* Creates a context for kernelspec `kernel` and checks that kgate resolved it to that very kernelspec. */
static int create_context(bench_env_t *env, const char *kernel, char **id)
{
    json_t *ctx = NULL;
    char path[256];
    int err = bench_kgate_create_context(env->http, env->timeout_ms, kernel, id);
    if (err != 0)
        return err;
    snprintf(path, sizeof(path), "/code/contexts/%s", *id);
    if ((err = get_json(env, path, &ctx)) != 0)
        return err;
    const char *got = json_string_value(json_object_get(ctx, "kernel"));
    if (got == NULL || strcmp(got, kernel) != 0) {
        bench_set_detail("language %s started kernelspec %s", kernel, got != NULL ? got : "(none)");
        err = BENCH_ENOKERNEL;
    }
    json_decref(ctx);
    return err;
}

static int check(const char *who, const bench_outcome_t *o, size_t stdout_bytes)
{
    if (o->error != NULL) {
        bench_set_detail("%s: the code raised %s", who, o->error);
        return BENCH_ERUN;
    }
    if (o->stdout_bytes != stdout_bytes) {
        bench_set_detail("%s: expected %zu bytes of stdout, got %zu", who, stdout_bytes, o->stdout_bytes);
        return BENCH_ERUN;
    }
    return 0;
}

/* The kernel pair's state: one context of each kernel, through the same kgate connection. */
typedef struct st_kernel_pair_t {
    const bench_case_t *self;
    bench_env_t *env;
    char *subject, *baseline;
} kernel_pair_t;

static int kernel_one(void *data, int use_baseline, int timed, bench_outcome_t *o)
{
    kernel_pair_t *pair = data;
    const bench_case_t *self = pair->self;
    int err = bench_kgate_execute(pair->env->http, pair->env->timeout_ms, use_baseline ? pair->baseline : pair->subject, self->code,
                                  0, o);
    (void)timed;

    if (err == 0)
        err = use_baseline ? check(self->baseline_language, o, self->baseline_stdout_bytes)
                           : check(self->language, o, self->subject_stdout_bytes);
    return err;
}

int bench_run_kernel_pair(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    /* the labels outlive the call (the report prints them after every case ran): one pair per case, never shared */
    static char labels[16][2][64];
    static size_t nlabels;
    size_t slot = nlabels++ % 16;
    char *subject_label = labels[slot][0], *baseline_label = labels[slot][1];
    kernel_pair_t pair = {.self = self, .env = env};
    bench_samples_t s[2] = {{0}, {0}};
    size_t samples = env->samples != 0 ? env->samples : self->default_samples;
    size_t warmup = env->warmup != SIZE_MAX ? env->warmup : self->default_warmup;
    int err;

    memset(out, 0, sizeof(*out));
    snprintf(subject_label, sizeof(labels[0][0]), "%s via POST /code", self->language);
    snprintf(baseline_label, sizeof(labels[0][1]), "%s via POST /code", self->baseline_language);
    out->kgate_label = subject_label;
    out->direct_label = baseline_label;

    if ((err = kgate_has_kernel(env, self->language)) <= 0) {
        if (err == 0) {
            bench_set_detail("kgate has no `%s` kernelspec", self->language);
            err = BENCH_ENOKERNEL;
        }
        goto Exit;
    }
    if ((err = kgate_has_kernel(env, self->baseline_language)) <= 0) {
        if (err == 0) {
            bench_set_detail("kgate has no `%s` kernelspec: %s", self->baseline_language, self->baseline_missing);
            err = BENCH_ESKIPPED;
        }
        goto Exit;
    }
    if ((err = create_context(env, self->language, &pair.subject)) != 0)
        goto Exit;
    if ((err = create_context(env, self->baseline_language, &pair.baseline)) != 0)
        goto Exit;
    if (env->verbose)
        fprintf(stderr, "[%s] contexts %s (%s), %s (%s)\n", self->name, pair.subject, self->language, pair.baseline,
                self->baseline_language);
    if ((err = bench_alternate(env, self->name, warmup, samples, kernel_one, &pair, s, &out->kgate_reconnects)) != 0)
        goto Exit;
    bench_summarize(&s[0], &out->kgate);
    bench_summarize(&s[1], &out->direct);

Exit:
    bench_kgate_drop_context(env->http, env->timeout_ms, pair.subject);
    bench_kgate_drop_context(env->http, env->timeout_ms, pair.baseline);
    bench_samples_dispose(&s[0]);
    bench_samples_dispose(&s[1]);
    free(pair.subject);
    free(pair.baseline);
    return err;
}
