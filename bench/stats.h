/* bench/stats.h: latency samples and their summary (median, percentiles, range). */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stddef.h>

/** A fixed-capacity list of samples in milliseconds. */
typedef struct st_bench_samples_t {
    double *ms;
    size_t size;
    size_t capacity;
} bench_samples_t;

/** Summary of a sample list; every field is 0 when there are no samples. */
typedef struct st_bench_summary_t {
    size_t n;
    double median;
    double p10;
    double p90;
    double p99;
    double min;
    double max;
    double mean;
} bench_summary_t;

/** Allocates room for `capacity` samples. */
void bench_samples_init(bench_samples_t *s, size_t capacity);
/** Frees the storage; leaves an empty list. */
void bench_samples_dispose(bench_samples_t *s);
/** Appends one sample; samples beyond the capacity are ignored (the caller sized the list). */
void bench_samples_add(bench_samples_t *s, double ms);

/** Summarises `s` (which is left unchanged); percentiles interpolate linearly between ranks. */
void bench_summarize(const bench_samples_t *s, bench_summary_t *out);

/** The median of `v[0..n)` as bench_summarize defines it (`v` is left unchanged); 0 when n is 0. */
double bench_median(const double *v, size_t n);

/** Milliseconds of CLOCK_MONOTONIC, with sub-microsecond resolution. */
double bench_now_ms(void);

#endif
