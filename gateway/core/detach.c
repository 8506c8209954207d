/* Detached worker threads for one-off blocking work. */
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "core/detach.h"

typedef struct st_detached_t {
    void (*fn)(void *arg);
    void *arg;
} detached_t;

static void *run_detached(void *p)
{
    detached_t d = *(detached_t *)p;

    free(p);
    d.fn(d.arg);
    return NULL;
}

int gw_detach(void (*fn)(void *arg), void *arg)
{
    detached_t *d = wire_malloc(sizeof(*d));
    pthread_attr_t attr;
    pthread_t thread;
    sigset_t all, old;
    int ret;

    d->fn = fn;
    d->arg = arg;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    ret = pthread_create(&thread, &attr, run_detached, d);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (ret != 0)
        free(d);
    return ret;
}

static void close_fd(void *arg)
{
    close((int)(intptr_t)arg);
}

void gw_close_detached(int fd)
{
    if (fd != -1 && gw_detach(close_fd, (void *)(intptr_t)fd) != 0)
        close(fd);
}
