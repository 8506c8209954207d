/* code/figures.h: the engine's figures of contexts, runs and kernels for operators (core/stats.h), in one place. */
#ifndef GW_CODE_FIGURES_H
#define GW_CODE_FIGURES_H

#include <stdint.h>
#include "core/stats.h"

struct st_gw_contexts_t;

/**
 * Series the code engine counts into, registered by gw_code_figures_init so that a scrape shows them (at 0) before
 * anything happened. Pointers into the host's registry: they live as long as it does.
 */
typedef struct st_gw_code_figures_t {
    gw_stats_t *stats;
    gw_stats_series_t *deaths;             /* kgate_kernel_deaths_total: kernels that died on their own (not deleted) */
    gw_stats_series_t *restarts_automatic; /* kgate_kernel_restarts_total{reason="automatic"}: after a death */
    gw_stats_series_t *restarts_requested; /* {reason="requested"}: a client restarted its context */
    gw_stats_series_t *restarts_timeout;   /* {reason="timeout"}: a run that did not stop when interrupted */
    gw_stats_series_t *restarts_stop;      /* {reason="stop"}: a stopped run its kernel's interrupt never ends (Deno's) */
    gw_stats_series_t *first_output;       /* kgate_run_first_output_seconds: submission to the run's first output */
    gw_stats_series_t *duration;           /* kgate_run_duration_seconds: submission to the run's end */
} gw_code_figures_t;

/**
 * Registers the figures in `stats`: the counters and histograms above, kgate_runs_total{outcome} for every outcome,
 * and gauges read at scrape time from `contexts`: kgate_contexts{kernel} (every kernelspec, 0 included),
 * kgate_runs_in_flight (submitted, not ended) and kgate_run_queue (waiting behind the run their context's kernel has).
 */
void gw_code_figures_init(gw_code_figures_t *figures, gw_stats_t *stats, struct st_gw_contexts_t *contexts);

/** A code run ended with `outcome` (a gw_run_finish outcome), `submitted_ms` (gw_now_ms clock) after it was submitted. */
void gw_code_figures_run_end(gw_code_figures_t *figures, const char *outcome, int64_t submitted_ms);
/** A code run relayed its first output (stream, result, display or error) `submitted_ms` after its submission. */
void gw_code_figures_first_output(gw_code_figures_t *figures, int64_t submitted_ms);

#endif
