/* bench/template_probe.h: what the bench reads of a kgate's Python kernel template and its kernels (the `template` and
 * `idle` cases): whether it is ready (and a wait for it) and its pid (from kgate's log), and proportional set sizes. */
#ifndef BENCH_TEMPLATE_PROBE_H
#define BENCH_TEMPLATE_PROBE_H

#include <signal.h>
#include <stddef.h>
#include "support/gateway.h"

/** How long a case waits for the template: it imports ipykernel, a python start on a loaded machine. */
#define BENCH_TEMPLATE_WAIT_MS 120000

/** Whether kgate's log says its kernel template is ready. */
int bench_template_ready(const ts_gateway_t *gw);
/**
 * Waits until kgate's log says its kernel template is ready (looking every 100 ms): 0, or BENCH_ETIMEDOUT with the detail set
 * once BENCH_TEMPLATE_WAIT_MS have passed or `*interrupted` is set (the bench's signal flag).
 */
int bench_template_wait(const ts_gateway_t *gw, volatile sig_atomic_t *interrupted);
/** The pid of kgate's ready kernel template (its log), or 0. */
int bench_template_pid(const ts_gateway_t *gw);
/** Pss of /proc/<pid>/smaps_rollup in KiB, or -1. */
long long bench_pss_kib(int pid);
/** The PSS in KiB of the template's children that are none of `kernels[0..n)` (its spare, forked ahead: memory kgate keeps). */
long long bench_spare_pss_kib(int template_pid, const int *kernels, size_t n);

#endif
