/* bench/burst.h: clients that ask for contexts all at once (the bursts of the pool and template cases). */
#ifndef BENCH_BURST_H
#define BENCH_BURST_H

#include <stddef.h>

/** One create (and whatever the case times with it): 0 with the context's id in *id and the time in *ms, or an error with
 * `why` set; *id may be set on an error too (the caller deletes it). Called from a client thread: no bench_set_detail. */
typedef int (*bench_create_fn)(void *arg, char **id, double *ms, char *why, size_t whylen);

/** What one client of a burst got. */
typedef struct st_bench_burst_client_t {
    char *id; /* the context it created, owned (the caller deletes and frees it), or NULL */
    double ms;
    int err;
    char why[600];
} bench_burst_client_t;

/** Runs `create(arg, ...)` in `n` threads released together by one barrier; returns when every one has returned, its
 * outcome in clients[i]. */
void bench_burst(bench_create_fn create, void *arg, unsigned n, bench_burst_client_t *clients);

#endif
