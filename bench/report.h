/* bench/report.h: the benchmark's output, a table for people or JSON for scripts (never a verdict that fails the run). */
#ifndef BENCH_REPORT_H
#define BENCH_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include "cases.h"

/** What the run was asked that changes how figures read (said beside them). */
typedef struct st_bench_report_opts_t {
    int ws_quickack;  /* --ws-quickack */
    int mcp_sse_only; /* --mcp-sse-only */
} bench_report_opts_t;

/** Prints every case's rows and its lines of figures and targets (kgate on 127.0.0.1:`port`). */
void bench_print_table(const bench_case_t **cases, const bench_result_t *results, size_t n, uint16_t port,
                       const bench_report_opts_t *opts);
/** Prints one JSON document with every case's summaries and targets. */
void bench_print_json(const bench_case_t **cases, const bench_result_t *results, size_t n, const bench_report_opts_t *opts);

#endif
