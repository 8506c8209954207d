/* tests/e2e/test_runlog.c: a run's log lives on disk: 200 MB printed, two readers get every byte, kgate's RSS stays small. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_helpers.h"
#include "support/base.h"
#include "support/http.h"
#include "support/sse.h"
#include "support/stream.h"

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(runlog, .fini = fini, .timeout = 600);

/*
 * 250 kB per flushed write: one stream message each, as a print loop produces. Each message is
 * briefly in kgate several times over (the connection's receive buffer, the parsed JSON, the
 * rendered frame), so the size of one message, not the run's, sets the peak: with 1 MB writes
 * the same run peaked at 17-27 MiB (when libzmq's I/O thread still read ahead of the loop) on a
 * plain build (the run log itself holds at most its 256 KiB tail and the newest event).
 */
enum {
    CHUNK = 250000,
    CHUNKS = 800,       /* 200 MB in all */
    READ_SLICE_MS = 25, /* each reader's turn */
};
#define MiB (1ll << 20)
/*
 * The bound of issue 14, for a plain build: measured idle 11 MiB, peak and after 14-18 MiB (2-core
 * VM under load 4-13). Under ASan the same kgate idles at 21 MiB (shadow memory, the
 * allocator's metadata and size classes), peaked at 30 MiB and stayed at 24-25 MiB after: 10-12
 * MiB more throughout, too close to 32 MiB to hold under load. A sanitizer build (libasan in
 * kgate's maps) is held to 48 MiB, the plain bound plus 16 MiB.
 */
#define RSS_BOUND (32 * MiB)
#define RSS_BOUND_SANITIZED (48 * MiB)

/* `'0' + k % 10` for every offset k: the text of the whole run, at any offset, is a slice of this. */
static char pattern[CHUNK + 10];

/* One reader of the run's SSE stream: checks what it gets and keeps none of it. */
typedef struct st_big_reader_t {
    const char *name;
    ts_http_t http;
    ts_response_t resp;
    ts_sse_reader_t sse;
    long long last_id;
    unsigned long long stdout_bytes;
    int complete, ended;
    char exec_id[64];
} big_reader_t;

static void reader_start(big_reader_t *r, const char *name, unsigned short port, const char *method, const char *path,
                         const char *const *headers, const char *body)
{
    memset(r, 0, sizeof(*r));
    r->name = name;
    ts_http_init(&r->http, port, 0);
    ts_sse_reader_init(&r->sse, 1 << 16, 8 << 20);
    int rc = ts_http_start(&r->http, method, path, headers, body, ts_now_ms() + XH_HEAD_MS, &r->resp);
    cr_assert_eq(rc, 0, "%s: %s %s: %s", name, method, path, r->resp.error);
    cr_assert_eq(r->resp.status, 200, "%s: %s %s: HTTP %d", name, method, path, r->resp.status);
}

static void reader_dispose(big_reader_t *r)
{
    ts_sse_reader_dispose(&r->sse);
    ts_response_dispose(&r->resp);
    ts_http_dispose(&r->http);
}

/* The text of a stdout event: digits only, so it needs no unescaping. */
static void check_stdout(big_reader_t *r, const char *data, size_t len)
{
    static const char key[] = "\"text\":\"";
    const char *text = memmem(data, len, key, sizeof(key) - 1);
    cr_assert_not_null(text, "%s: a stdout event without text: %.100s", r->name, data);
    text += sizeof(key) - 1;
    const char *end = memchr(text, '"', len - (size_t)(text - data));
    cr_assert_not_null(end, "%s: unterminated text", r->name);
    size_t n = (size_t)(end - text);
    for (size_t done = 0; done < n;) {
        size_t piece = n - done < CHUNK ? n - done : CHUNK;
        size_t at = (size_t)((r->stdout_bytes + done) % 10);
        if (memcmp(text + done, pattern + at, piece) != 0) {
            size_t i = 0;
            while (text[done + i] == pattern[at + i])
                ++i;
            cr_assert_fail("%s: stdout byte %llu is '%c', expected '%c'", r->name, r->stdout_bytes + done + i, text[done + i],
                           pattern[at + i]);
        }
        done += piece;
    }
    r->stdout_bytes += n;
}

static void on_event(big_reader_t *r, const ts_sse_event_t *ev)
{
    cr_assert_eq(ev->id, r->last_id + 1, "%s: event id %lld after %lld", r->name, ev->id, r->last_id);
    r->last_id = ev->id;
    if (ev->len > 4096) {
        cr_assert(memmem(ev->data, 40, "\"stdout\"", 8) != NULL, "%s: a large event that is not stdout: %.100s", r->name, ev->data);
        check_stdout(r, ev->data, ev->len);
        return;
    }
    json_t *obj = json_loadb(ev->data, ev->len, 0, NULL);
    cr_assert_not_null(obj, "%s: event %lld is not JSON: %.*s", r->name, ev->id, (int)ev->len, ev->data);
    const char *type = json_string_value(json_object_get(obj, "type"));
    cr_assert_not_null(type);
    cr_assert_neq(strcmp(type, "error"), 0, "%s: an error event: %.*s", r->name, (int)ev->len, ev->data);
    if (strcmp(type, "init") == 0)
        snprintf(r->exec_id, sizeof(r->exec_id), "%s", json_string_value(json_object_get(obj, "execution_id")));
    else if (strcmp(type, "stdout") == 0)
        check_stdout(r, ev->data, ev->len);
    else if (strcmp(type, "execution_complete") == 0)
        r->complete = 1;
    json_decref(obj);
}

/* Reads what arrives within `ms` (or until the end of the stream). */
static void reader_step(big_reader_t *r, int ms)
{
    int64_t deadline = ts_now_ms() + ms;
    ts_sse_event_t ev;
    int rc;

    while (!r->ended) {
        rc = ts_sse_reader_next(&r->sse, &r->http, &r->resp, deadline, &ev);
        if (rc == 1) {
            on_event(r, &ev);
            continue;
        }
        if (rc == 0) {
            r->ended = 1;
            break;
        }
        cr_assert_eq(rc, TS_ETIMEDOUT, "%s: reading the stream: %s (%s) after %llu stdout bytes", r->name, ts_strerror(rc),
                     r->resp.error, r->stdout_bytes);
        break;
    }
}

/* Whether `pid` runs with AddressSanitizer's runtime (a sanitizer build of kgate). */
static int is_sanitized(pid_t pid)
{
    char path[64], line[512];
    int found = 0;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, "libasan") != NULL;
    fclose(f);
    return found;
}

typedef struct st_rss_t {
    pid_t pid;
    long long peak, samples;
    int64_t next_ms;
} rss_t;

static void rss_sample(rss_t *s, int force)
{
    if (!force && ts_now_ms() < s->next_ms)
        return;
    s->next_ms = ts_now_ms() + 50;
    long long rss = xh_rss_bytes(s->pid);
    cr_assert_gt(rss, 0);
    if (rss > s->peak)
        s->peak = rss;
    ++s->samples;
}

/*
 * Issue 14: a run prints 200 MB with two readers, one that reads as it goes and one that connects
 * once a quarter has been printed and resumes from the start (Last-Event-ID: 0), so that it is
 * served from the log on disk while the run still writes. Every stdout byte reaches both, in
 * order, and kgate's RSS stays under the bound throughout and after.
 */
Test(runlog, two_readers_of_a_200_mb_run_get_every_byte_and_kgate_stays_small)
{
    for (size_t i = 0; i < sizeof(pattern); i++)
        pattern[i] = (char)('0' + i % 10);
    /* the whole run stays resumable: its log (on disk) holds it all */
    const char *args[] = {"--max-run-log-bytes", "268435456", NULL};
    ts_gateway_t gw;
    xh_gateway_start(&gw, args);
    char *ctx = xh_context_new(gw.port, NULL, NULL);
    ts_events_t evs;
    xh_run_ok(gw.port, ctx, "1 + 1", &evs);
    ts_events_dispose(&evs);
    int sanitized = is_sanitized(gw.pid);
    long long bound = sanitized ? RSS_BOUND_SANITIZED : RSS_BOUND;
    long long idle = xh_rss_bytes(gw.pid);

    char code[256];
    snprintf(code, sizeof(code),
             "import sys\nchunk = '0123456789' * %d\nfor _ in range(%d):\n    sys.stdout.write(chunk); sys.stdout.flush()\n",
             CHUNK / 10, CHUNKS);
    json_t *body = xh_body(ctx, code);
    json_object_set_new(body, "output_limit", json_integer(512ll << 20));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);

    rss_t rss = {.pid = gw.pid};
    int64_t t0 = ts_now_ms(), deadline = t0 + 2 * XH_BIG_RUN_MS;
    big_reader_t live, late;
    memset(&late, 0, sizeof(late));
    reader_start(&live, "the live reader", gw.port, "POST", "/code", NULL, text);
    free(text);
    int late_started = 0, late_while_running = 0;
    while (!live.ended || !late_started || !late.ended) {
        cr_assert(ts_now_ms() < deadline, "the run did not end in %d ms: live reader at %llu bytes, late reader at %llu",
                  2 * XH_BIG_RUN_MS, live.stdout_bytes, late_started ? late.stdout_bytes : 0);
        reader_step(&live, READ_SLICE_MS);
        rss_sample(&rss, 0);
        if (!late_started && live.stdout_bytes >= (unsigned long long)CHUNK * CHUNKS / 4) {
            char path[128];
            cr_assert(live.exec_id[0] != '\0');
            snprintf(path, sizeof(path), "/code/executions/%s/events", live.exec_id);
            const char *headers[] = {"Last-Event-ID: 0", NULL};
            reader_start(&late, "the late reader", gw.port, "GET", path, headers, NULL);
            late_started = 1;
            late_while_running = !live.complete;
        }
        if (late_started)
            reader_step(&late, READ_SLICE_MS);
        rss_sample(&rss, 0);
    }
    int64_t run_ms = ts_now_ms() - t0;

    /* after: the run is retained (resumable), its log on disk */
    rss_t rss_after = {.pid = gw.pid};
    for (int i = 0; i < 10; i++) {
        ts_sleep_ms(100);
        rss_sample(&rss_after, 1);
    }
    long long after = rss_after.peak;
    json_t *ex = xh_execution(gw.port, live.exec_id);
    char *dump = json_dumps(ex, JSON_COMPACT);
    cr_log_info("200 MB run with two readers in %lld ms: kgate RSS idle %lld KiB, peak %lld KiB, after %lld KiB (%s build, bound "
                "%lld MiB, %lld samples); %s",
                (long long)run_ms, idle >> 10, rss.peak >> 10, after >> 10, sanitized ? "sanitizer" : "plain", bound >> 20,
                rss.samples, dump);
    fprintf(stderr,
            "runlog: 200 MB with two readers in %lld ms: kgate RSS idle %lld KiB, peak %lld KiB, after %lld KiB (%s build)\n",
            (long long)run_ms, idle >> 10, rss.peak >> 10, after >> 10, sanitized ? "sanitizer" : "plain");

    cr_assert(live.complete && late.complete, "both readers reached execution_complete (%d, %d)", live.complete, late.complete);
    cr_assert_eq(live.stdout_bytes, (unsigned long long)CHUNK * CHUNKS, "the live reader got %llu stdout bytes", live.stdout_bytes);
    cr_assert_eq(late.stdout_bytes, (unsigned long long)CHUNK * CHUNKS, "the late reader got %llu stdout bytes", late.stdout_bytes);
    cr_assert(late_while_running, "the late reader started before the run ended (it read the log while the run wrote it)");
    cr_assert_eq(live.last_id, late.last_id, "both readers end at the same event (%lld, %lld)", live.last_id, late.last_id);
    cr_assert_str_eq(xh_str(ex, "outcome"), "ok", "%s", dump);
    cr_assert_lt(rss.peak, bound, "kgate's RSS peaked at %lld KiB during the run (bound %lld MiB, %s build, idle %lld KiB)",
                 rss.peak >> 10, bound >> 20, sanitized ? "sanitizer" : "plain", idle >> 10);
    cr_assert_lt(after, bound, "kgate's RSS was %lld KiB after the run (bound %lld MiB)", after >> 10, bound >> 20);
    free(dump);
    json_decref(ex);
    reader_dispose(&live);
    reader_dispose(&late);
    free(ctx);
    xh_gateway_stop(&gw);
}
