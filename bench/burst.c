/* bench/burst.c: clients that ask for contexts all at once (burst.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "burst.h"

typedef struct st_burst_thread_t {
    bench_create_fn create;
    void *arg;
    pthread_barrier_t *barrier;
    pthread_t thread;
    bench_burst_client_t *out;
} burst_thread_t;

static void *run(void *p)
{
    burst_thread_t *t = p;

    pthread_barrier_wait(t->barrier);
    t->out->err = t->create(t->arg, &t->out->id, &t->out->ms, t->out->why, sizeof(t->out->why));
    return NULL;
}

void bench_burst(bench_create_fn create, void *arg, unsigned n, bench_burst_client_t *clients)
{
    burst_thread_t *threads = wire_calloc(n, sizeof(*threads));
    pthread_barrier_t barrier;

    pthread_barrier_init(&barrier, NULL, n);
    for (unsigned i = 0; i != n; ++i) {
        memset(&clients[i], 0, sizeof(clients[i]));
        threads[i] = (burst_thread_t){.create = create, .arg = arg, .barrier = &barrier, .out = &clients[i]};
        pthread_create(&threads[i].thread, NULL, run, &threads[i]);
    }
    for (unsigned i = 0; i != n; ++i)
        pthread_join(threads[i].thread, NULL);
    pthread_barrier_destroy(&barrier);
    free(threads);
}
