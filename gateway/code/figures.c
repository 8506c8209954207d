/* The code engine's figures: registered once, counted where runs end and kernels die, sampled at scrape time. */
#include "code/context.h"
#include "code/figures.h"

static const double latency_bounds[] = {GW_STATS_LATENCY_BUCKETS};
#define NUM_LATENCY_BOUNDS (sizeof(latency_bounds) / sizeof(latency_bounds[0]))

#define RUNS_HELP "Code runs ended, by outcome (ok, error, timeout, cancelled, kernel_died)"

/* every kernelspec, 0 included: a dashboard sees the series before the first context of a kernel */
static void sample_contexts(void *arg, gw_stats_emit_t *emit)
{
    gw_contexts_t *contexts = arg;
    const kmgr_kernelspecs_t *specs = &contexts->languages->specs;

    for (size_t i = 0; i != specs->size; ++i) {
        size_t n = 0;
        for (h2o_linklist_t *node = contexts->list.next; node != &contexts->list; node = node->next)
            n += H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node)->spec == specs->entries[i];
        gw_stats_emit(emit, specs->entries[i]->name, (double)n);
    }
}

/* runs linked in their context (code/kernel_run.c's ctx->runs: the head is the kernel's, the rest wait) */
static double count_runs(gw_contexts_t *contexts, int waiting_only)
{
    size_t n = 0;

    for (h2o_linklist_t *node = contexts->list.next; node != &contexts->list; node = node->next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        size_t in_ctx = 0;
        for (h2o_linklist_t *run = ctx->runs.next; run != &ctx->runs; run = run->next)
            ++in_ctx;
        n += waiting_only && in_ctx != 0 ? in_ctx - 1 : in_ctx;
    }
    return (double)n;
}

static double read_in_flight(void *arg)
{
    return count_runs(arg, 0);
}

static double read_queue(void *arg)
{
    return count_runs(arg, 1);
}

void gw_code_figures_init(gw_code_figures_t *figures, gw_stats_t *stats, gw_contexts_t *contexts)
{
    static const char *const outcomes[] = {"ok", "error", "timeout", "cancelled", "kernel_died"};
    static const char *restarts_help = "Kernel restarts: automatic (after a death), requested (by a client), timeout (a run "
                                       "that did not stop when interrupted)";

    figures->stats = stats;
    gw_stats_gauge_sampled(stats, "kgate_contexts", "Contexts (each with its kernel), by kernelspec", "kernel", sample_contexts,
                           contexts);
    for (size_t i = 0; i != sizeof(outcomes) / sizeof(outcomes[0]); ++i)
        gw_stats_counter(stats, "kgate_runs_total", RUNS_HELP, "outcome", outcomes[i]);
    gw_stats_gauge_fn(stats, "kgate_runs_in_flight", "Code runs submitted and not ended", NULL, NULL, read_in_flight, contexts);
    gw_stats_gauge_fn(stats, "kgate_run_queue", "Code runs waiting behind the run their context's kernel has", NULL, NULL,
                      read_queue, contexts);
    figures->deaths = gw_stats_counter(stats, "kgate_kernel_deaths_total",
                                       "Kernels of contexts that died on their own (exit, signal, OOM), not deleted", NULL, NULL);
    figures->restarts_automatic = gw_stats_counter(stats, "kgate_kernel_restarts_total", restarts_help, "reason", "automatic");
    figures->restarts_requested = gw_stats_counter(stats, "kgate_kernel_restarts_total", restarts_help, "reason", "requested");
    figures->restarts_timeout = gw_stats_counter(stats, "kgate_kernel_restarts_total", restarts_help, "reason", "timeout");
    figures->restarts_stop = gw_stats_counter(stats, "kgate_kernel_restarts_total", restarts_help, "reason", "stop");
    figures->first_output =
        gw_stats_histogram(stats, "kgate_run_first_output_seconds", "Code runs: from submission to their first output", NULL, NULL,
                           latency_bounds, NUM_LATENCY_BOUNDS);
    figures->duration = gw_stats_histogram(stats, "kgate_run_duration_seconds", "Code runs: from submission to their end", NULL,
                                           NULL, latency_bounds, NUM_LATENCY_BOUNDS);
}

void gw_code_figures_run_end(gw_code_figures_t *figures, const char *outcome, int64_t submitted_ms)
{
    gw_stats_inc(gw_stats_counter(figures->stats, "kgate_runs_total", RUNS_HELP, "outcome", outcome), 1);
    gw_stats_observe(figures->duration, (double)(gw_now_ms() - submitted_ms) / 1000.0);
}

void gw_code_figures_first_output(gw_code_figures_t *figures, int64_t submitted_ms)
{
    gw_stats_observe(figures->first_output, (double)(gw_now_ms() - submitted_ms) / 1000.0);
}
