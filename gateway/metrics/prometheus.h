/* metrics/prometheus.h: the registry's figures as Prometheus text exposition format 0.0.4 (pure: no I/O, no HTTP). */
#ifndef GW_PROMETHEUS_H
#define GW_PROMETHEUS_H

#include <stddef.h>
#include "core/stats.h"

/** The Content-Type of what gw_prom_render writes. */
#define GW_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/**
 * Renders every family of `stats`, in registration order: `# HELP` and `# TYPE` once per family, then its series
 * (a histogram's cumulative `_bucket{le=...}` lines up to `+Inf`, `_sum` and `_count`). Help text escapes `\` and
 * newlines, label values `\`, `"` and newlines. Gauges with a read callback, and sampled families, are read now (a
 * sampled family's emitted series in the order emitted). A family without any series is written with its HELP and TYPE
 * only. Returns a new NUL-terminated string (free() it), its length in `*len`.
 */
char *gw_prom_render(gw_stats_t *stats, size_t *len);

#endif
