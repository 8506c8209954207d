/* sys/src/detach.c: detached worker threads for one-off blocking work. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/detach.h"

/* Threads at most at once: work driven by clients (a DELETE of a directory full of big files) must not make a thread
 * each; past the bound the caller does the work itself, as it would without threads. */
#define MAX_IN_FLIGHT 8

static unsigned in_flight; /* __atomic_* only */

typedef struct st_detached_t {
    void (*fn)(void *arg);
    void *arg;
} detached_t;

static void *run_detached(void *p)
{
    detached_t d = *(detached_t *)p;

    free(p);
    d.fn(d.arg);
    __atomic_fetch_sub(&in_flight, 1, __ATOMIC_RELEASE);
    return NULL;
}

int ksys_detach(void (*fn)(void *arg), void *arg)
{
    detached_t *d;
    pthread_attr_t attr;
    pthread_t thread;
    sigset_t all, old;
    int ret;

    if (__atomic_fetch_add(&in_flight, 1, __ATOMIC_ACQUIRE) >= MAX_IN_FLIGHT) {
        __atomic_fetch_sub(&in_flight, 1, __ATOMIC_RELEASE);
        return EAGAIN;
    }
    d = wire_malloc(sizeof(*d));
    d->fn = fn;
    d->arg = arg;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    ret = pthread_create(&thread, &attr, run_detached, d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (ret != 0) {
        free(d);
        __atomic_fetch_sub(&in_flight, 1, __ATOMIC_RELEASE);
    }
    return ret;
}

static void close_fd(void *arg)
{
    close((int)(intptr_t)arg);
}

void ksys_close_detached(int fd)
{
    if (fd != -1 && ksys_detach(close_fd, (void *)(intptr_t)fd) != 0)
        close(fd);
}
