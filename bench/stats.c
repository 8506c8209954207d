/* bench/stats.c: latency samples and their summary. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "wire/alloc.h"
#include "stats.h"

void bench_samples_init(bench_samples_t *s, size_t capacity)
{
    s->ms = wire_calloc(capacity ? capacity : 1, sizeof(*s->ms));
    s->size = 0;
    s->capacity = capacity;
}

void bench_samples_dispose(bench_samples_t *s)
{
    free(s->ms);
    memset(s, 0, sizeof(*s));
}

void bench_samples_add(bench_samples_t *s, double ms)
{
    if (s->size < s->capacity)
        s->ms[s->size++] = ms;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Linear interpolation between closest ranks (numpy's default), so p50 of an even count is the
 * mean of the two middle samples, as "median" usually means. */
static double percentile(const double *sorted, size_t n, double p)
{
    double rank = p * (double)(n - 1);
    size_t lo = (size_t)rank;
    if (lo + 1 >= n)
        return sorted[n - 1];
    double frac = rank - (double)lo;
    return sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac;
}

void bench_summarize(const bench_samples_t *s, bench_summary_t *out)
{
    memset(out, 0, sizeof(*out));
    if (s->size == 0)
        return;
    double *sorted = wire_malloc(s->size * sizeof(*sorted));
    memcpy(sorted, s->ms, s->size * sizeof(*sorted));
    qsort(sorted, s->size, sizeof(*sorted), cmp_double);
    double sum = 0;
    for (size_t i = 0; i < s->size; ++i)
        sum += sorted[i];
    out->n = s->size;
    out->median = percentile(sorted, s->size, 0.5);
    out->p10 = percentile(sorted, s->size, 0.1);
    out->p90 = percentile(sorted, s->size, 0.9);
    out->p99 = percentile(sorted, s->size, 0.99);
    out->min = sorted[0];
    out->max = sorted[s->size - 1];
    out->mean = sum / (double)s->size;
    free(sorted);
}

double bench_median(const double *v, size_t n)
{
    bench_samples_t view = {(double *)v, n, n};
    bench_summary_t sum;

    bench_summarize(&view, &sum);
    return sum.median;
}

double bench_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}
