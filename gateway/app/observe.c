/* Per-request figures (an h2o logger sees each request end), and the Prometheus exposition's route. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include "core/http.h"
#include "metrics/prometheus.h"
#include "app/observe.h"

typedef struct st_observe_logger_t {
    h2o_logger_t super;
    gw_observe_t *observe;
    int is_fallback; /* h2o's own answers: they never reached the handler, so were never in flight */
} observe_logger_t;

static const double duration_bounds[] = {GW_STATS_LATENCY_BUCKETS};

/* The door of the route `req` matches ("none": no route), the label every per-door figure uses. */
static const char *door_of(const gw_observe_t *observe, h2o_req_t *req)
{
    const gw_route_t *route = NULL;
    gw_route_params_t params;

    if (gw_route_match(observe->routes->entries, observe->routes->size, req->method, req->path_normalized, &route, &params) ==
            GW_ROUTE_FOUND &&
        route->door != NULL && route->door->name != NULL)
        return route->door->name;
    return "none";
}

static gw_stats_series_t *in_flight(gw_observe_t *observe, const char *door)
{
    return gw_stats_gauge(&observe->host->stats, "kgate_http_requests_in_flight",
                          "HTTP requests being answered, by front door (streams included: execd SSE, E2B executions, MCP calls)",
                          "door", door);
}

void gw_observe_close(gw_observe_t *observe)
{
    observe->closed = 1;
}

void gw_observe_request_begins(gw_observe_t *observe, h2o_req_t *req)
{
    if (observe->closed)
        return;
    gw_stats_inc(in_flight(observe, door_of(observe, req)), 1);
}

/* Seconds from the request's first byte to now, when h2o disposes it: its response's last byte has left (a WebSocket: its
 * upgrade). h2o's own response_end_at is the loop's cached time, which would call every request answered in one pass 0. */
static double duration_of(h2o_req_t *req)
{
    struct timeval end;

    gettimeofday(&end, NULL);
    if (req->timestamps.request_begin_at.tv_sec == 0)
        return 0;
    return (double)(end.tv_sec - req->timestamps.request_begin_at.tv_sec) +
           (double)(end.tv_usec - req->timestamps.request_begin_at.tv_usec) / 1e6;
}

/* "addr:port" of the peer ("[addr]:port" for IPv6), "-" when unknown */
static void peer_of(h2o_req_t *req, char *buf, size_t size)
{
    struct sockaddr_storage ss;
    char addr[INET6_ADDRSTRLEN] = "";
    socklen_t len = req->conn->callbacks->get_peername != NULL ? req->conn->callbacks->get_peername(req->conn, (void *)&ss) : 0;

    snprintf(buf, size, "-");
    if (len != 0 && ss.ss_family == AF_INET && inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, addr, sizeof(addr)))
        snprintf(buf, size, "%s:%u", addr, (unsigned)ntohs(((struct sockaddr_in *)&ss)->sin_port));
    else if (len != 0 && ss.ss_family == AF_INET6 &&
             inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, addr, sizeof(addr)))
        snprintf(buf, size, "[%s]:%u", addr, (unsigned)ntohs(((struct sockaddr_in6 *)&ss)->sin6_port));
}

/* The request's line: never a header (tokens travel in them) nor the query (a token may too: ?token=). */
static void log_line(gw_access_log_t *log, h2o_req_t *req, const char *door, double seconds)
{
    char peer[INET6_ADDRSTRLEN + 16], line[GW_ACCESS_LOG_MAX_PATH * 3 + 512];
    struct timeval now;
    gw_access_entry_t entry = {.peer = peer,
                               .method = req->method.base,
                               .method_len = req->method.len,
                               .path = req->path.base,
                               .path_len = req->path.len,
                               .status = req->res.status,
                               .bytes_sent = req->bytes_sent,
                               .seconds = seconds,
                               .door = door};

    gettimeofday(&now, NULL);
    entry.unix_ms = (int64_t)now.tv_sec * 1000 + now.tv_usec / 1000;
    peer_of(req, peer, sizeof(peer));
    gw_access_log_write(log, line, gw_access_log_format(&entry, line, sizeof(line)));
}

static void on_log_access(h2o_logger_t *super, h2o_req_t *req)
{
    observe_logger_t *self = (observe_logger_t *)super;
    gw_observe_t *observe = self->observe;
    gw_stats_t *stats = &observe->host->stats;
    const char *door = door_of(observe, req);
    double duration = duration_of(req);

    if (observe->closed) {
        if (observe->access_log != NULL)
            log_line(observe->access_log, req, door, duration < 0 ? 0 : duration);
        return;
    }
    if (!self->is_fallback)
        gw_stats_inc(in_flight(observe, door), -1);
    gw_stats_observe(gw_stats_histogram(stats, "kgate_http_request_duration_seconds",
                                        "HTTP requests by front door: from the request's first byte to the response's last (a "
                                        "WebSocket: to its upgrade)",
                                        "door", door, duration_bounds, sizeof(duration_bounds) / sizeof(duration_bounds[0])),
                     duration < 0 ? 0 : duration);
    gw_stats_inc(gw_stats_counter(stats, GW_STATS_SENT_BYTES, GW_STATS_SENT_BYTES_HELP, "door", door), (double)req->bytes_sent);
    if (observe->access_log != NULL)
        log_line(observe->access_log, req, door, duration < 0 ? 0 : duration);
}

static double read_dropped(void *arg)
{
    return (double)((gw_access_log_t *)arg)->dropped_total;
}

void gw_observe_set_access_log(gw_observe_t *observe, gw_access_log_t *log)
{
    observe->access_log = log;
    gw_stats_counter_fn(&observe->host->stats, "kgate_access_log_dropped_lines_total",
                        "Access log lines dropped because the log's disk was behind (--access-log-buffer-bytes)", NULL, NULL,
                        read_dropped, log);
}

static double read_start_queue(void *arg)
{
    unsigned launching, queued;
    kmgr_manager_count_starting(arg, &launching, &queued);
    return queued;
}

static double read_starting(void *arg)
{
    unsigned launching, queued;
    kmgr_manager_count_starting(arg, &launching, &queued);
    return launching;
}

/* the kernel start figures that are no fallback reason (those are 0 .. KMGR_FALLBACK_COUNT - 1) */
enum { START_FORKED = KMGR_FALLBACK_COUNT, START_SPAWNED, START_FALLBACK, START_TEMPLATES, START_TEMPLATE_RESTARTS };

static double read_start_figure(void *arg)
{
    const struct st_gw_observe_start_figure_t *figure = arg;
    kmgr_start_stats_t stats;
    unsigned long long fallbacks = 0;

    kmgr_manager_start_stats(figure->kmgr, &stats);
    for (int i = 0; i != KMGR_FALLBACK_COUNT; ++i)
        fallbacks += stats.fallback[i];
    switch (figure->which) {
    case START_FORKED:
        return (double)stats.forked;
    case START_SPAWNED:
        return (double)stats.spawned;
    case START_FALLBACK:
        return (double)fallbacks;
    case START_TEMPLATES:
        return stats.templates_running;
    case START_TEMPLATE_RESTARTS:
        return (double)stats.template_restarts;
    default:
        return (double)stats.fallback[figure->which];
    }
}

/* How kernels start (docs/kernels.md, "Kernels forked from a template"): by path, the fallbacks by reason, the templates. */
static void register_start_figures(gw_observe_t *observe, gw_stats_t *stats)
{
    static const char *starts_help = "Kernel processes started, by path: forked (from a template), spawned (no template for the "
                                     "kernelspec, or sandboxed), fallback (spawned although the kernelspec has a template)";
    static const char *const paths[] = {"forked", "spawned", "fallback"};

    for (int i = 0; i != KMGR_FALLBACK_COUNT + 5; ++i)
        observe->start_figures[i] = (struct st_gw_observe_start_figure_t){observe->kmgr, i};
    for (int i = 0; i != 3; ++i)
        gw_stats_counter_fn(stats, "kgate_kernel_starts_total", starts_help, "path", paths[i], read_start_figure,
                            &observe->start_figures[START_FORKED + i]);
    for (int i = 0; i != KMGR_FALLBACK_COUNT; ++i)
        gw_stats_counter_fn(stats, "kgate_kernel_start_fallbacks_total",
                            "Kernels spawned although their kernelspec has a template, by reason", "reason",
                            kmgr_fallback_name((kmgr_fallback_t)i), read_start_figure, &observe->start_figures[i]);
    gw_stats_gauge_fn(stats, "kgate_kernel_templates_running", "Kernel templates ready to fork kernels", NULL, NULL,
                      read_start_figure, &observe->start_figures[START_TEMPLATES]);
    gw_stats_counter_fn(stats, "kgate_kernel_template_restarts_total",
                        "Kernel template processes started again after one died or was killed", NULL, NULL, read_start_figure,
                        &observe->start_figures[START_TEMPLATE_RESTARTS]);
}

static double read_late_messages(void *arg)
{
    kmgr_lost_output_t lost;
    kmgr_manager_lost_output(arg, &lost);
    return (double)lost.late;
}

static double read_unawaited_messages(void *arg)
{
    kmgr_lost_output_t lost;
    kmgr_manager_lost_output(arg, &lost);
    return (double)lost.unawaited;
}

/* Kernel output no request received (docs/kernels.md, "Output after a run ended"), which a run no longer retained shows
 * nowhere else but kgate's log. Summed in the manager over every kernel it had: a deleted context's kernel takes nothing away. */
static void register_lost_output(gw_observe_t *observe, gw_stats_t *stats)
{
    gw_stats_counter_fn(stats, "kgate_kernel_late_messages_total",
                        "Kernel messages (other than status) published for a request after that request had ended: not "
                        "delivered, counted on the run if it is still retained",
                        NULL, NULL, read_late_messages, observe->kmgr);
    gw_stats_counter_fn(stats, "kgate_kernel_unawaited_messages_total",
                        "Kernel iopub messages over 64 KiB passed over unread because no request of the kernel was open and no "
                        "WebSocket attached (output of a background thread after its run): their run is not known",
                        NULL, NULL, read_unawaited_messages, observe->kmgr);
}

void gw_observe_init(gw_observe_t *observe, gw_host_t *host, const gw_route_table_t *routes, kmgr_manager_t *kmgr,
                     h2o_pathconf_t *pathconf, h2o_pathconf_t *fallback)
{
    h2o_pathconf_t *confs[] = {pathconf, fallback};

    observe->super.name = "kgate";
    observe->host = host;
    observe->routes = routes;
    observe->kmgr = kmgr;
    for (size_t i = 0; i != sizeof(confs) / sizeof(confs[0]); ++i) {
        observe_logger_t *logger = (observe_logger_t *)h2o_create_logger(confs[i], sizeof(*logger));
        logger->super.log_access = on_log_access;
        logger->observe = observe;
        logger->is_fallback = confs[i] == fallback;
    }
    gw_stats_gauge_fn(&host->stats, "kgate_kernel_start_queue",
                      "Kernels waiting for their spawn behind --max-starting-kernels (bounded by --max-start-queue)", NULL, NULL,
                      read_start_queue, kmgr);
    gw_stats_gauge_fn(&host->stats, "kgate_kernels_starting", "Kernels spawned and not ready yet", NULL, NULL, read_starting, kmgr);
    register_start_figures(observe, &host->stats);
    register_lost_output(observe, &host->stats);
}

static void on_prometheus(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_observe_t *observe = H2O_STRUCT_FROM_MEMBER(gw_observe_t, super, door);
    size_t len;
    char *text = gw_prom_render(&observe->host->stats, &len);
    (void)params;

    req->res.status = 200;
    req->res.reason = "OK";
    gw_add_common_headers(req);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT(GW_PROM_CONTENT_TYPE));
    req->res.content_length = len;
    h2o_send_inline(req, text, len); /* copies */
    free(text);
}

void gw_observe_add_routes(gw_observe_t *observe, gw_route_table_t *routes)
{
    gw_route_t prometheus = {.method = "GET",
                             .pattern = GW_OBSERVE_PROMETHEUS_PATH,
                             .handler = on_prometheus,
                             .max_body_bytes = observe->host->config->max_body_bytes,
                             .door = &observe->super};
    gw_route_table_add(routes, &prometheus);
}
