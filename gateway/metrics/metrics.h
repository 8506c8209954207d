/* metrics/metrics.h: the machine's CPU and memory use, execd's GET /metrics (parsing is pure). */
#ifndef GW_METRICS_H
#define GW_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/** Cumulative CPU time of the whole machine, from the `cpu` line of /proc/stat (clock ticks). */
typedef struct st_gw_cpu_sample_t {
    uint64_t busy;  /* user + nice + system + irq + softirq + steal */
    uint64_t total; /* busy + idle + iowait */
    int64_t at_ms;  /* when it was read (ksys_now_ms); 0: no sample */
} gw_cpu_sample_t;

/** Parses /proc/stat's text (`len` bytes). Returns 0, or -1 when it holds no valid `cpu ` line. */
int gw_metrics_parse_stat(const char *text, size_t len, gw_cpu_sample_t *out);

/**
 * Parses /proc/meminfo's text: MemTotal and MemAvailable in KiB (MemAvailable missing, as on old
 * kernels: MemFree + Buffers + Cached). Returns 0, or -1 without MemTotal.
 */
int gw_metrics_parse_meminfo(const char *text, size_t len, uint64_t *total_kib, uint64_t *available_kib);

/** Percentage of CPU time spent busy between two samples (0..100; 0 when no time passed). */
double gw_metrics_cpu_pct(const gw_cpu_sample_t *older, const gw_cpu_sample_t *newer);

/** Reads the CPU sample of now. Returns 0, or -1 when /proc/stat cannot be read. */
int gw_metrics_sample_cpu(gw_cpu_sample_t *now);

/**
 * The machine's figures as execd publishes them: `{"cpu_count", "cpu_used_pct", "mem_total_mib",
 * "mem_used_mib", "timestamp"}` (timestamp in Unix ms; memory used = MemTotal - MemAvailable;
 * cpu_count the CPUs kgate may run on). cpu_used_pct covers the time since `baseline` (NULL or
 * empty: since boot). Stores the CPU sample taken now in `*now` (the next call's baseline).
 * Returns a new object, or NULL when /proc cannot be read.
 */
json_t *gw_metrics_read(const gw_cpu_sample_t *baseline, gw_cpu_sample_t *now);

/** The machine's CPU samples, taken about once a second by the tick: one-off readings measure since one of them. */
typedef struct st_gw_metrics_t {
    gw_cpu_sample_t samples[2]; /* the tick's last two, about a second apart */
} gw_metrics_t;

/** How often the tick samples the CPU, and the interval of /metrics/watch lines. */
#define GW_METRICS_INTERVAL_MS 1000

/** Takes a first sample. */
void gw_metrics_init(gw_metrics_t *metrics);
/** Samples the CPU when the newest sample is GW_METRICS_INTERVAL_MS old (server tick). */
void gw_metrics_tick(gw_metrics_t *metrics);
/** The baseline for a one-off reading: the tick's newest sample unless it is too fresh to mean anything. */
const gw_cpu_sample_t *gw_metrics_baseline(const gw_metrics_t *metrics);

#endif
