/* bench/case_upload.c: `1+1` in a loop while another connection uploads a large file: does kgate's loop stall? */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "wire/alloc.h"
#include "support/base.h"
#include "support/http.h"
#include "support/proc.h"
#include "cases.h"
#include "kgate_client.h"

#define UPLOAD_NAME "kgate-bench-upload-stall.bin"
#define UPLOAD_BOUNDARY "kgate-bench-4f1d2c9a7e3b"
/* the pattern buffer, written again and again: the body is never held whole */
#define UPLOAD_WRITE ((size_t)256 << 10)
/* one upload of 1 GiB takes seconds on a quiet machine; on a loaded one, minutes */
#define UPLOAD_TIMEOUT_MS 900000
#define RSS_PERIOD_MS 50
#define MAX_SAMPLES ((size_t)1 << 18)
#define MAX_ROUNDS 16

/* The upload thread: its own connection, and what it measured (read after the join). */
typedef struct st_upload_t {
    unsigned short port;
    uint64_t file_bytes;
    volatile sig_atomic_t *interrupted;
    pthread_t thread;
    int sent; /* atomic: the whole body is written (kgate may still be reading the last socket buffers) */
    int done; /* atomic: the response head arrived, or the upload failed */
    double t0, t_sent, t_done;
    int status; /* HTTP status, or 0 */
    int err;
    char error[400];
} upload_t;

static void upload_fail(upload_t *u, int err, const char *what, const char *why)
{
    u->err = err;
    snprintf(u->error, sizeof(u->error), "POST /files/upload: %s: %s", what, why);
}

/* Bytes with no CR in them, so that no run of them can hold the multipart delimiter ("\r\n--" boundary). */
static char *pattern_buffer(void)
{
    char *p = wire_malloc(UPLOAD_WRITE);
    for (size_t i = 0; i != UPLOAD_WRITE; ++i)
        p[i] = (char)(' ' + (i * 7 + i / 4096) % 95);
    return p;
}

static void *upload_main(void *arg)
{
    upload_t *u = arg;
    static const char head[] = "--" UPLOAD_BOUNDARY "\r\n"
                               "Content-Disposition: form-data; name=\"metadata\"\r\n"
                               "Content-Type: application/json\r\n\r\n"
                               "{\"path\":\"" UPLOAD_NAME "\"}\r\n"
                               "--" UPLOAD_BOUNDARY "\r\n"
                               "Content-Disposition: form-data; name=\"file\"; filename=\"" UPLOAD_NAME "\"\r\n"
                               "Content-Type: application/octet-stream\r\n\r\n";
    static const char tail[] = "\r\n--" UPLOAD_BOUNDARY "--\r\n";
    const char *headers[] = {"Content-Type: multipart/form-data; boundary=" UPLOAD_BOUNDARY, NULL};
    char *pattern = pattern_buffer();
    ts_http_t http;
    ts_response_t resp;
    int64_t deadline = ts_now_ms() + UPLOAD_TIMEOUT_MS;
    uint64_t left = u->file_bytes;
    int err;

    ts_http_init(&http, u->port, 0);
    u->t0 = bench_now_ms();
    if ((err = ts_http_start_streamed(&http, "POST", "/files/upload", headers, sizeof(head) - 1 + u->file_bytes + sizeof(tail) - 1,
                                      deadline, &resp)) != 0 ||
        (err = ts_http_send_body(&http, head, sizeof(head) - 1, deadline, &resp)) != 0) {
        upload_fail(u, err, "sending the head", resp.error);
        goto Exit;
    }
    while (left != 0) {
        size_t n = left < UPLOAD_WRITE ? (size_t)left : UPLOAD_WRITE;
        if (*u->interrupted) {
            upload_fail(u, BENCH_EINTERRUPTED, "sending the body", "interrupted");
            goto Exit;
        }
        if ((err = ts_http_send_body(&http, pattern, n, deadline, &resp)) != 0) {
            upload_fail(u, err, "sending the body", resp.error);
            goto Exit;
        }
        left -= n;
    }
    if ((err = ts_http_send_body(&http, tail, sizeof(tail) - 1, deadline, &resp)) != 0) {
        upload_fail(u, err, "sending the body", resp.error);
        goto Exit;
    }
    u->t_sent = bench_now_ms();
    __atomic_store_n(&u->sent, 1, __ATOMIC_RELEASE);
    if ((err = ts_http_finish_request(&http, "POST", deadline, &resp)) != 0) {
        upload_fail(u, err, "waiting for the answer", resp.error);
        goto Exit;
    }
    u->t_done = bench_now_ms();
    u->status = resp.status;
    if (resp.status != 200) {
        ts_http_read_all(&http, &resp, 64 << 10, deadline);
        u->err = BENCH_ESTATUS;
        snprintf(u->error, sizeof(u->error), "POST /files/upload: HTTP %d %.300s", resp.status, resp.body != NULL ? resp.body : "");
    }

Exit:
    if (u->t_sent == 0)
        u->t_sent = bench_now_ms();
    if (u->t_done == 0)
        u->t_done = bench_now_ms();
    __atomic_store_n(&u->done, 1, __ATOMIC_RELEASE);
    ts_response_dispose(&resp);
    ts_http_dispose(&http);
    free(pattern);
    return NULL;
}

/* The whole case's state. */
typedef struct st_stall_t {
    const bench_case_t *self;
    bench_env_t *env;
    char *ctx;
    uint64_t file_bytes;
    size_t warmup;
    bench_samples_t baseline, during, sending, processing;
    double upload_ms[MAX_ROUNDS], send_ms[MAX_ROUNDS], cpu_ms[MAX_ROUNDS];
    unsigned uploads;
    long long rss_peak_kb;
} stall_t;

static int execute(stall_t *st, bench_outcome_t *o)
{
    int err = bench_kgate_execute(st->env->http, st->env->timeout_ms, st->ctx, st->self->code, 0, o);
    if (err == 0 && (o->error != NULL || o->result_text == NULL || strcmp(o->result_text, st->self->expect_result) != 0)) {
        bench_set_detail("1+1 gave %s", o->error != NULL ? o->error : o->result_text != NULL ? o->result_text : "no result");
        err = BENCH_ERUN;
    }
    return err;
}

/* Checks that the upload landed whole, then removes it: each round starts from an empty workspace. */
static int check_and_remove(stall_t *st)
{
    ts_response_t resp;
    int64_t deadline = ts_now_ms() + st->env->timeout_ms;
    int st_info = ts_http_request_until(st->env->kgate->port, "GET", "/files/info?path=" UPLOAD_NAME, NULL, NULL, deadline, &resp);
    json_int_t size = json_integer_value(json_object_get(json_object_get(resp.json, UPLOAD_NAME), "size"));
    int err = 0;

    if (st_info != 200 || (uint64_t)size != st->file_bytes) {
        bench_set_detail("GET /files/info after the upload: HTTP %d, size %lld where %llu was sent: %.200s", st_info,
                         (long long)size, (unsigned long long)st->file_bytes, resp.body != NULL ? resp.body : "");
        err = BENCH_ERUN;
    }
    ts_response_dispose(&resp);
    if (ts_http_request_until(st->env->kgate->port, "DELETE", "/files?path=" UPLOAD_NAME, NULL, NULL, deadline, &resp) != 200 &&
        err == 0) {
        bench_set_detail("DELETE /files?path=" UPLOAD_NAME ": HTTP %d %.200s", resp.status, resp.body != NULL ? resp.body : "");
        err = BENCH_ESTATUS;
    }
    ts_response_dispose(&resp);
    return err;
}

/*
 * One round: warm-up executes, then executes until the upload has its answer (`with_upload`) or for
 * `ms` (a baseline round). An execute in flight when the upload ends counts: it started during it.
 */
static int run_round(stall_t *st, int with_upload, double ms)
{
    bench_env_t *env = st->env;
    upload_t up = {.port = env->kgate->port, .file_bytes = st->file_bytes, .interrupted = env->interrupted};
    ts_rss_sampler_t rss;
    int64_t cpu0 = 0;
    int err = 0, sampling = 0;
    double end = 0;

    for (size_t i = 0; i != st->warmup && err == 0; ++i) {
        bench_outcome_t o;
        err = execute(st, &o);
        bench_outcome_dispose(&o);
    }
    if (err != 0)
        return err;
    if (with_upload) {
        sampling = ts_rss_sampler_start(&rss, env->kgate->pid, RSS_PERIOD_MS) == 0;
        cpu0 = ts_proc_cpu_ms(env->kgate->pid);
        if (pthread_create(&up.thread, NULL, upload_main, &up) != 0) {
            bench_set_detail("cannot start the upload thread");
            return BENCH_EIO;
        }
    } else {
        end = bench_now_ms() + ms;
    }
    for (;;) {
        if (with_upload ? __atomic_load_n(&up.done, __ATOMIC_ACQUIRE) : bench_now_ms() >= end)
            break;
        if (*env->interrupted) {
            bench_set_detail("stopped sampling");
            err = BENCH_EINTERRUPTED;
            break;
        }
        bench_outcome_t o;
        int sending = with_upload && !__atomic_load_n(&up.sent, __ATOMIC_ACQUIRE);
        double t = bench_now_ms();
        if ((err = execute(st, &o)) != 0) {
            bench_outcome_dispose(&o);
            break;
        }
        if (!with_upload) {
            bench_samples_add(&st->baseline, o.ms);
        } else {
            bench_samples_add(&st->during, o.ms);
            bench_samples_add(sending ? &st->sending : &st->processing, o.ms);
            if (env->verbose && o.ms >= st->self->max_p99_ms)
                fprintf(stderr, "[%s] slow execute: %.1f ms, started %.3f s into the upload (%s)\n", st->self->name, o.ms,
                        (t - up.t0) / 1000, sending ? "sending" : "sent, kgate parsing and copying");
        }
        bench_outcome_dispose(&o);
    }
    if (!with_upload)
        return err;
    pthread_join(up.thread, NULL);
    int64_t cpu1 = ts_proc_cpu_ms(env->kgate->pid);
    if (sampling) {
        long long kb = ts_rss_sampler_stop(&rss);
        if (kb > st->rss_peak_kb)
            st->rss_peak_kb = kb;
    }
    if (err == 0 && up.err != 0) {
        bench_set_detail("%s", up.error);
        err = up.err;
    }
    if (err == 0 && st->uploads < MAX_ROUNDS) {
        st->upload_ms[st->uploads] = up.t_done - up.t0;
        st->send_ms[st->uploads] = up.t_sent - up.t0;
        st->cpu_ms[st->uploads] = cpu0 >= 0 && cpu1 >= 0 ? (double)(cpu1 - cpu0) : -1;
        ++st->uploads;
        if (env->verbose)
            fprintf(stderr, "[%s] upload %u: %.0f ms (%.0f ms sending, %.0f ms more until its 200), kgate CPU %.0f ms\n",
                    st->self->name, st->uploads, up.t_done - up.t0, up.t_sent - up.t0, up.t_done - up.t_sent,
                    st->cpu_ms[st->uploads - 1]);
    }
    return err == 0 ? check_and_remove(st) : err;
}

int bench_run_upload_stall(const bench_case_t *self, bench_env_t *env, bench_result_t *out)
{
    stall_t st = {.self = self, .env = env, .rss_peak_kb = -1};
    unsigned rounds = env->rounds != 0 ? env->rounds : self->rounds;
    uint64_t mib = env->upload_mib != 0 ? env->upload_mib : self->upload_mib;
    int err;

    memset(out, 0, sizeof(*out));
    if (rounds > MAX_ROUNDS)
        rounds = MAX_ROUNDS;
    st.file_bytes = mib << 20;
    st.warmup = env->warmup != SIZE_MAX ? env->warmup : self->default_warmup;
    out->kgate_label = "1+1 during the upload";
    out->direct_label = "1+1, baseline rounds";
    out->kgate_rss_start_kb = ts_proc_rss_kb(env->kgate->pid);
    out->kgate_rss_peak_kb = out->peer_rss_start_kb = out->peer_rss_peak_kb = -1;
    bench_samples_init(&st.baseline, MAX_SAMPLES);
    bench_samples_init(&st.during, MAX_SAMPLES);
    bench_samples_init(&st.sending, MAX_SAMPLES);
    bench_samples_init(&st.processing, MAX_SAMPLES);
    if ((err = bench_kgate_create_context(env->http, env->timeout_ms, self->language, &st.ctx)) != 0)
        goto Exit;
    /* upload first and baseline first in turn; a baseline round lasts as long as the last upload did */
    for (unsigned r = 0; r != rounds && err == 0; ++r) {
        for (int k = 0; k != 2 && err == 0; ++k) {
            int with_upload = (k ^ (int)(r & 1)) == 0;
            err = run_round(&st, with_upload, st.uploads != 0 ? st.upload_ms[st.uploads - 1] : 0);
        }
    }
    if (err != 0)
        goto Exit;
    bench_summarize(&st.during, &out->kgate);
    bench_summarize(&st.baseline, &out->direct);
    bench_summarize(&st.sending, &out->upload_sending);
    bench_summarize(&st.processing, &out->upload_processing);
    out->upload_bytes = st.file_bytes;
    out->uploads = st.uploads;
    {
        bench_samples_t view = {st.upload_ms, st.uploads, st.uploads};
        bench_summary_t sum;
        bench_summarize(&view, &sum);
        out->upload_ms = sum.median;
        out->upload_min_ms = sum.min;
        out->upload_max_ms = sum.max;
        out->upload_send_ms = bench_median(st.send_ms, st.uploads);
        out->upload_cpu_ms = bench_median(st.cpu_ms, st.uploads);
    }
    out->kgate_rss_peak_kb = st.rss_peak_kb;

Exit:
    bench_kgate_drop_context(env->http, env->timeout_ms, st.ctx);
    free(st.ctx);
    bench_samples_dispose(&st.baseline);
    bench_samples_dispose(&st.during);
    bench_samples_dispose(&st.sending);
    bench_samples_dispose(&st.processing);
    return err;
}
