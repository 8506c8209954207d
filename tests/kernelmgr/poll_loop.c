/* tests/kernelmgr/poll_loop.c: a minimal poll()-based host loop for kernelmgr. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include "wire/alloc.h"
#include "poll_loop.h"

typedef struct st_poll_watch_t {
    int fd;
    int active;
    void (*cb)(void *arg);
    void *arg;
    void (*write_cb)(void *arg); /* a pending notify_writable */
    void *write_arg;
} poll_watch_t;

struct st_poll_loop_t {
    kmgr_manager_t *mgr;
    poll_watch_t **watches;
    size_t size, capacity;
    int scheduled;
    uint64_t next_tick;
};

static void *watch(void *vloop, int fd, void (*cb)(void *arg), void *arg)
{
    poll_loop_t *loop = vloop;
    poll_watch_t *w = wire_calloc(1, sizeof(*w));

    w->fd = fd;
    w->active = 1;
    w->cb = cb;
    w->arg = arg;
    if (loop->size == loop->capacity) {
        loop->capacity = loop->capacity != 0 ? loop->capacity * 2 : 16;
        loop->watches = wire_realloc(loop->watches, loop->capacity * sizeof(loop->watches[0]));
    }
    loop->watches[loop->size++] = w;
    return w;
}

/* Only marks the entry: it may be the one whose callback is running; compact() frees it later. */
static void unwatch(void *vloop, void *handle)
{
    (void)vloop;
    ((poll_watch_t *)handle)->active = 0;
}

static void notify_writable(void *vloop, void *handle, void (*cb)(void *arg), void *arg)
{
    poll_watch_t *w = handle;
    (void)vloop;
    w->write_cb = cb;
    w->write_arg = arg;
}

static void schedule(void *vloop)
{
    ((poll_loop_t *)vloop)->scheduled = 1;
}

const kmgr_loop_ops_t poll_loop_ops = {
    .watch = watch, .unwatch = unwatch, .notify_writable = notify_writable, .schedule = schedule};

poll_loop_t *poll_loop_create(void)
{
    poll_loop_t *loop = wire_calloc(1, sizeof(*loop));
    loop->next_tick = ksys_now_ms() + KMGR_TICK_MS;
    return loop;
}

static void compact(poll_loop_t *loop)
{
    size_t j = 0;
    for (size_t i = 0; i != loop->size; ++i) {
        if (loop->watches[i]->active)
            loop->watches[j++] = loop->watches[i];
        else
            free(loop->watches[i]);
    }
    loop->size = j;
}

void poll_loop_destroy(poll_loop_t *loop)
{
    if (loop == NULL)
        return;
    for (size_t i = 0; i != loop->size; ++i)
        free(loop->watches[i]);
    free(loop->watches);
    free(loop);
}

void poll_loop_set_manager(poll_loop_t *loop, kmgr_manager_t *mgr)
{
    loop->mgr = mgr;
}

void poll_loop_run_once(poll_loop_t *loop, int max_wait_ms)
{
    struct pollfd *fds;
    poll_watch_t **snapshot;
    size_t n = loop->size;
    uint64_t now = ksys_now_ms();
    int timeout = max_wait_ms, ret;

    if (loop->scheduled)
        timeout = 0;
    else if (loop->next_tick <= now)
        timeout = 0;
    else if (loop->next_tick - now < (uint64_t)timeout)
        timeout = (int)(loop->next_tick - now);

    fds = wire_calloc(n, sizeof(*fds));
    snapshot = wire_calloc(n, sizeof(*snapshot));
    for (size_t i = 0; i != n; ++i) {
        snapshot[i] = loop->watches[i];
        fds[i].fd = snapshot[i]->active ? snapshot[i]->fd : -1;
        fds[i].events = POLLIN | (snapshot[i]->write_cb != NULL ? POLLOUT : 0);
    }
    ret = poll(fds, n, timeout);
    if (ret > 0) {
        for (size_t i = 0; i != n; ++i) {
            /* as h2o does: readable first, then a writable notification (each callback may unwatch) */
            if ((fds[i].revents & (POLLIN | POLLERR | POLLHUP)) != 0 && snapshot[i]->active)
                snapshot[i]->cb(snapshot[i]->arg);
            if ((fds[i].revents & (POLLOUT | POLLERR | POLLHUP)) != 0 && snapshot[i]->active && snapshot[i]->write_cb != NULL) {
                void (*cb)(void *arg) = snapshot[i]->write_cb;
                snapshot[i]->write_cb = NULL;
                cb(snapshot[i]->write_arg);
            }
        }
    }
    free(fds);
    free(snapshot);

    if (loop->scheduled && loop->mgr != NULL) {
        loop->scheduled = 0;
        kmgr_manager_run_pending(loop->mgr);
    }
    now = ksys_now_ms();
    if (now >= loop->next_tick && loop->mgr != NULL) {
        loop->next_tick = now + KMGR_TICK_MS;
        kmgr_manager_tick(loop->mgr);
    }
    compact(loop);
}

int poll_loop_run_until(poll_loop_t *loop, int (*done)(void *arg), void *arg, unsigned timeout_ms)
{
    uint64_t deadline = ksys_now_ms() + timeout_ms;

    while (!done(arg)) {
        uint64_t now = ksys_now_ms();
        if (now >= deadline)
            return 0;
        poll_loop_run_once(loop, (int)(deadline - now < 20 ? deadline - now : 20));
    }
    return 1;
}

void poll_loop_run_for(poll_loop_t *loop, unsigned ms)
{
    uint64_t deadline = ksys_now_ms() + ms;

    for (uint64_t now; (now = ksys_now_ms()) < deadline;)
        poll_loop_run_once(loop, (int)(deadline - now < 20 ? deadline - now : 20));
}

size_t poll_loop_num_watches(const poll_loop_t *loop)
{
    size_t n = 0;
    for (size_t i = 0; i != loop->size; ++i)
        n += loop->watches[i]->active;
    return n;
}
