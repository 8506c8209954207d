/* core/stats.h: the figures operators scrape (counters, gauges, histograms): one registry, owned by the host, no HTTP. */
#ifndef GW_STATS_H
#define GW_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>

/*
 * Every feature counts into the host's registry (gw_host_t.stats) and metrics/prometheus.h renders it. A family is a
 * metric name with its help text, type and at most one label name; a series is one value of that label. Label values
 * are code constants (outcomes, door names) or come from a sampler at render time (kernelspec names), so the number of
 * series is fixed by the code, not by requests; GW_STATS_MAX_SERIES bounds it anyway (a registration beyond it aborts:
 * a bug, never input). Names follow Prometheus: [a-zA-Z_:][a-zA-Z0-9_:]*, counters end in _total.
 *
 * Adding a figure is one line where the feature is initialised or counts:
 *     gw_stats_gauge_fn(&host->stats, "kgate_mcp_sessions", "MCP sessions open", NULL, NULL, count_sessions, mcp);
 *     gw_stats_inc(gw_stats_counter(&host->stats, "kgate_x_total", "what it counts", "door", "mcp"), 1);
 * Registration is idempotent: the same (name, label value) gives the same series, so a hot path may keep the pointer.
 */

#define GW_STATS_MAX_SERIES 1024

typedef enum { GW_STATS_COUNTER, GW_STATS_GAUGE, GW_STATS_HISTOGRAM } gw_stats_type_t;

/** Latency buckets in seconds (Prometheus's defaults, stretched to a minute for runs). */
#define GW_STATS_LATENCY_BUCKETS 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60

/** Figures several folders count into (one name, one help text). */
#define GW_STATS_SENT_BYTES "kgate_sent_bytes_total"
#define GW_STATS_SENT_BYTES_HELP                                                                                                   \
    "Bytes sent to clients, by front door (HTTP bodies when their response ends, WebSocket frames as they leave)"

/** Reads a gauge at render time. */
typedef double (*gw_stats_read_cb)(void *arg);

typedef struct st_gw_stats_emit_t gw_stats_emit_t;
/** Emits a sampled family's series at render time (one gw_stats_emit call per label value). */
typedef void (*gw_stats_sample_cb)(void *arg, gw_stats_emit_t *emit);

/** One series: a counter's or gauge's value, a read callback, or a histogram. Written by its feature, read by the renderer. */
typedef struct st_gw_stats_series_t {
    char *label_value; /* NULL when the family has no label */
    double value;      /* counter or gauge (doubles count exactly up to 2^53) */
    gw_stats_read_cb read;
    void *read_arg;
    /* histogram: buckets[i] counts observations <= the family's bounds[i] (not cumulative); the rest only in count */
    uint64_t *buckets;
    uint64_t count;
    double sum;
    struct st_gw_stats_family_t *family;
} gw_stats_series_t;

typedef struct st_gw_stats_family_t {
    char *name;
    char *help;
    char *label; /* NULL: none */
    gw_stats_type_t type;
    double *bounds; /* histogram: ascending upper bounds, +Inf implied */
    size_t num_bounds;
    gw_stats_sample_cb sample; /* a sampled family: its series come from here at render time */
    void *sample_arg;
    H2O_VECTOR(gw_stats_series_t *) series;
} gw_stats_family_t;

typedef struct st_gw_stats_t {
    H2O_VECTOR(gw_stats_family_t *) families; /* in registration order, which is the rendering order */
    size_t num_series;
} gw_stats_t;

/** A zeroed gw_stats_t is an empty registry; so is one after init. */
void gw_stats_init(gw_stats_t *stats);
/** Frees every family and series (pointers handed out die with it). */
void gw_stats_dispose(gw_stats_t *stats);

/** The counter (`label`=`value`, both NULL for none) of family `name`, registered on first use. */
gw_stats_series_t *gw_stats_counter(gw_stats_t *stats, const char *name, const char *help, const char *label, const char *value);
/** A gauge set by its feature (gw_stats_set, gw_stats_inc with a negative delta). */
gw_stats_series_t *gw_stats_gauge(gw_stats_t *stats, const char *name, const char *help, const char *label, const char *value);
/** A gauge read by `read(arg)` at render time; `arg` must outlive the registry's renders (the server's life). */
void gw_stats_gauge_fn(gw_stats_t *stats, const char *name, const char *help, const char *label, const char *value,
                       gw_stats_read_cb read, void *arg);
/** A counter read by `read(arg)` at render time (a count another part keeps, never decreasing); `arg` as gw_stats_gauge_fn's. */
void gw_stats_counter_fn(gw_stats_t *stats, const char *name, const char *help, const char *label, const char *value,
                         gw_stats_read_cb read, void *arg);
/** A gauge family whose series `sample(arg, emit)` emits at render time (label values not known in advance). */
void gw_stats_gauge_sampled(gw_stats_t *stats, const char *name, const char *help, const char *label, gw_stats_sample_cb sample,
                            void *arg);
/** A histogram with `num_bounds` ascending upper bounds (copied; the family's first registration sets them). */
gw_stats_series_t *gw_stats_histogram(gw_stats_t *stats, const char *name, const char *help, const char *label, const char *value,
                                      const double *bounds, size_t num_bounds);

/** Adds `delta` to a counter or gauge (NULL: no-op). */
static inline void gw_stats_inc(gw_stats_series_t *series, double delta)
{
    if (series != NULL)
        series->value += delta;
}
/** Sets a gauge. */
static inline void gw_stats_set(gw_stats_series_t *series, double value)
{
    if (series != NULL)
        series->value = value;
}
/** Counts one observation in a histogram series (NULL: no-op). */
void gw_stats_observe(gw_stats_series_t *series, double value);

/** What a sampler's emit collects; the renderer owns it. */
struct st_gw_stats_emit_t {
    void (*cb)(gw_stats_emit_t *emit, const char *label_value, double value);
};
/** Emits one series of a sampled family. */
static inline void gw_stats_emit(gw_stats_emit_t *emit, const char *label_value, double value)
{
    emit->cb(emit, label_value, value);
}

#endif
