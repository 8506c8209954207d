/* Routes of /metrics: execd's machine metrics, once or as a stream of one line per second. */
#include <stdio.h>
#include <string.h>
#include "kmgr/manager.h"
#include "gateway/api.h"
#include "gateway/http.h"
#include "gateway/metrics.h"
#include "gateway/server.h"

#define WATCH_INTERVAL_MS 1000
/* one line of metrics JSON with its framing; a longer one is not sent */
#define WATCH_LINE_MAX 512

/* One GET /metrics/watch response; lives in the request's pool. */
typedef struct st_gw_metrics_watch_t {
    h2o_generator_t super;
    h2o_req_t *req;
    gw_server_t *server; /* NULL once detached (ended, stopped, or the request is gone) */
    h2o_linklist_t link; /* in server->metrics_watches while attached */
    gw_cpu_sample_t baseline;
    int64_t next_at_ms; /* kmgr_now_ms clock */
    unsigned sending : 1;
    unsigned ending : 1;       /* server shutdown: end the response once the line in flight is written */
    unsigned done : 1;         /* FINAL sent */
    char line[WATCH_LINE_MAX]; /* the line being sent: h2o keeps a pointer until proceed */
} gw_metrics_watch_t;

/* The baseline for a one-off reading: the tick's newest sample unless it is too fresh to mean anything. */
static const gw_cpu_sample_t *server_baseline(gw_server_t *server)
{
    int64_t now = (int64_t)kmgr_now_ms();

    if (server->cpu_samples[1].at_ms != 0 && now - server->cpu_samples[1].at_ms >= 100)
        return &server->cpu_samples[1];
    return server->cpu_samples[0].at_ms != 0 ? &server->cpu_samples[0] : &server->cpu_samples[1];
}

void gw_api_metrics(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_cpu_sample_t now;
    json_t *metrics = gw_metrics_read(server_baseline(server), &now);
    (void)params;

    if (metrics == NULL) {
        gw_send_error(req, GW_ERR_RUNTIME_ERROR, "cannot read /proc/stat or /proc/meminfo");
        return;
    }
    gw_send_json(req, 200, metrics);
}

static void watch_detach(gw_metrics_watch_t *watch)
{
    if (watch->server == NULL)
        return;
    h2o_linklist_unlink(&watch->link);
    watch->server = NULL;
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
    int compat = watch->server->config->compat_execd, prefix = compat ? 0 : 6;
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

void gw_api_metrics_watch(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_metrics_watch_t *watch = h2o_mem_alloc_shared(&req->pool, sizeof(*watch), on_watch_dispose);
    (void)params;

    memset(watch, 0, sizeof(*watch));
    watch->super.proceed = on_watch_proceed;
    watch->super.stop = on_watch_stop;
    watch->req = req;
    watch->server = server;
    watch->baseline = *server_baseline(server);
    watch->next_at_ms = (int64_t)kmgr_now_ms() + WATCH_INTERVAL_MS;
    h2o_linklist_insert(&server->metrics_watches, &watch->link);
    req->res.status = 200;
    req->res.reason = "OK";
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/event-stream"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-cache"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-accel-buffering"), 0, NULL, H2O_STRLIT("no"));
    gw_add_common_headers(req);
    h2o_start_response(req, &watch->super);
    watch_send(watch);
}

void gw_metrics_init(gw_server_t *server)
{
    h2o_linklist_init_anchor(&server->metrics_watches);
    memset(server->cpu_samples, 0, sizeof(server->cpu_samples));
    gw_metrics_sample_cpu(&server->cpu_samples[1]);
}

void gw_metrics_tick(gw_server_t *server)
{
    int64_t now = (int64_t)kmgr_now_ms();
    h2o_linklist_t *node, *next;

    if (now - server->cpu_samples[1].at_ms >= WATCH_INTERVAL_MS) {
        gw_cpu_sample_t sample;
        if (gw_metrics_sample_cpu(&sample) == 0) {
            server->cpu_samples[0] = server->cpu_samples[1];
            server->cpu_samples[1] = sample;
        }
    }
    for (node = server->metrics_watches.next; node != &server->metrics_watches; node = next) {
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

void gw_metrics_shutdown(gw_server_t *server)
{
    h2o_linklist_t *node;

    /* each stays listed until its request is disposed: the loop runs until the last line is out */
    for (node = server->metrics_watches.next; node != &server->metrics_watches; node = node->next) {
        gw_metrics_watch_t *watch = H2O_STRUCT_FROM_MEMBER(gw_metrics_watch_t, link, node);
        if (watch->ending)
            continue;
        watch->ending = 1;
        /* only one send may be in flight: a busy stream ends when its line is written */
        if (!watch->sending)
            watch_end(watch);
    }
}

int gw_metrics_is_drained(gw_server_t *server)
{
    return h2o_linklist_is_empty(&server->metrics_watches);
}
