/* Routes of /metrics: execd's machine metrics, once or as a stream of one line per second. */
#include <stdio.h>
#include <string.h>
#include "execd/execd.h"
#include "core/http.h"
#include "core/stream.h"
#include "metrics/metrics.h"

#define WATCH_INTERVAL_MS GW_METRICS_INTERVAL_MS
/* one line of metrics JSON with its framing; a longer one is not sent */
#define WATCH_LINE_MAX 512

/* One GET /metrics/watch response; lives in the request's pool. */
typedef struct st_gw_metrics_watch_t {
    h2o_generator_t super;
    h2o_req_t *req;
    gw_execd_t *execd;   /* NULL once detached (ended, stopped, or the request is gone) */
    h2o_linklist_t link; /* in execd->metrics_watches while attached */
    gw_cpu_sample_t baseline;
    int64_t next_at_ms; /* gw_now_ms clock */
    unsigned sending : 1;
    unsigned ending : 1;       /* server shutdown: end the response once the line in flight is written */
    unsigned done : 1;         /* FINAL sent */
    char line[WATCH_LINE_MAX]; /* the line being sent: h2o keeps a pointer until proceed */
} gw_metrics_watch_t;

GW_EXECD_HANDLER(metrics)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_cpu_sample_t now;
    json_t *metrics = gw_metrics_read(gw_metrics_baseline(execd->metrics), &now);
    (void)params;

    if (metrics == NULL) {
        gw_send_error(req, GW_HTTP_RUNTIME_ERROR, "cannot read /proc/stat or /proc/meminfo");
        return;
    }
    gw_send_json(req, 200, metrics);
}

static void watch_detach(gw_metrics_watch_t *watch)
{
    if (watch->execd == NULL)
        return;
    h2o_linklist_unlink(&watch->link);
    watch->execd = NULL;
}

static void watch_end(gw_metrics_watch_t *watch)
{
    watch->done = 1;
    h2o_send(watch->req, NULL, 0, H2O_SEND_STATE_FINAL);
}

static void on_watch_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
    gw_metrics_watch_t *watch = H2O_STRUCT_FROM_MEMBER(gw_metrics_watch_t, super, generator);
    (void)req;
    watch->sending = 0;
    if (watch->ending && !watch->done)
        watch_end(watch);
}

static void on_watch_stop(h2o_generator_t *generator, h2o_req_t *req)
{
    (void)req;
    watch_detach(H2O_STRUCT_FROM_MEMBER(gw_metrics_watch_t, super, generator));
}

static void on_watch_dispose(void *p)
{
    watch_detach(p);
}

/* Sends the next line; a reader still busy with the previous one skips this second (never queues). */
static void watch_send(gw_metrics_watch_t *watch)
{
    gw_cpu_sample_t now;
    json_t *metrics;
    size_t len;
    int compat = watch->execd->host->config->compat_execd, prefix = compat ? 0 : 6;
    h2o_iovec_t buf;

    if (watch->sending || watch->done || (metrics = gw_metrics_read(&watch->baseline, &now)) == NULL)
        return;
    watch->baseline = now;
    /* standard SSE: `data: <json>\n\n`; execd's framing: the JSON line alone */
    memcpy(watch->line, "data: ", (size_t)prefix);
    len = json_dumpb(metrics, watch->line + prefix, sizeof(watch->line) - (size_t)prefix - 2, JSON_COMPACT);
    json_decref(metrics);
    if (len > sizeof(watch->line) - (size_t)prefix - 2)
        return;
    len += (size_t)prefix;
    watch->line[len++] = '\n';
    if (!compat)
        watch->line[len++] = '\n';
    buf = h2o_iovec_init(watch->line, len);
    watch->sending = 1;
    h2o_send(watch->req, &buf, 1, H2O_SEND_STATE_IN_PROGRESS);
}

GW_EXECD_HANDLER(metrics_watch)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_metrics_watch_t *watch = h2o_mem_alloc_shared(&req->pool, sizeof(*watch), on_watch_dispose);
    (void)params;

    memset(watch, 0, sizeof(*watch));
    watch->super.proceed = on_watch_proceed;
    watch->super.stop = on_watch_stop;
    watch->req = req;
    watch->execd = execd;
    watch->baseline = *gw_metrics_baseline(execd->metrics);
    watch->next_at_ms = gw_now_ms() + WATCH_INTERVAL_MS;
    h2o_linklist_insert(&execd->metrics_watches, &watch->link);
    gw_sse_prepare_response(req);
    h2o_start_response(req, &watch->super);
    watch_send(watch);
}

void gw_execd_tick(gw_execd_t *execd)
{
    int64_t now = gw_now_ms();
    h2o_linklist_t *node, *next;

    for (node = execd->metrics_watches.next; node != &execd->metrics_watches; node = next) {
        gw_metrics_watch_t *watch = H2O_STRUCT_FROM_MEMBER(gw_metrics_watch_t, link, node);
        next = node->next;
        if (watch->ending || now < watch->next_at_ms)
            continue;
        watch->next_at_ms += WATCH_INTERVAL_MS;
        if (watch->next_at_ms <= now) /* the loop was held up: no burst of late lines */
            watch->next_at_ms = now + WATCH_INTERVAL_MS;
        watch_send(watch);
    }
}

void gw_execd_metrics_shutdown(gw_execd_t *execd)
{
    h2o_linklist_t *node;

    /* each stays listed until its request is disposed: the loop runs until the last line is out */
    for (node = execd->metrics_watches.next; node != &execd->metrics_watches; node = node->next) {
        gw_metrics_watch_t *watch = H2O_STRUCT_FROM_MEMBER(gw_metrics_watch_t, link, node);
        if (watch->ending)
            continue;
        watch->ending = 1;
        /* only one send may be in flight: a busy stream ends when its line is written */
        if (!watch->sending)
            watch_end(watch);
    }
}
