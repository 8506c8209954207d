/* The kernel manager's host-loop operations, implemented on h2o's evloop (kernel connections' fds become h2o sockets). */
#include <stdlib.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "app/kmgr_loop.h"
#include "app/server.h"

typedef struct st_watch_t {
    h2o_socket_t *sock;
    void (*cb)(void *arg);
    void *arg;
    void (*write_cb)(void *arg); /* a pending notify_writable */
    void *write_arg;
} watch_t;

static void on_readable(h2o_socket_t *sock, const char *err)
{
    watch_t *watch = sock->data;
    (void)err;
    /* nothing may touch `watch` after the callback: it may unwatch (and free) itself */
    watch->cb(watch->arg);
}

static void on_writable(h2o_socket_t *sock, const char *err)
{
    watch_t *watch = sock->data;
    void (*cb)(void *arg) = watch->write_cb;
    (void)err; /* kernelmgr reads the socket's own error */

    watch->write_cb = NULL;
    cb(watch->write_arg);
}

static void *loop_watch(void *loop, int fd, void (*cb)(void *arg), void *arg)
{
    gw_server_t *server = loop;
    watch_t *watch;
    /* h2o closes the fd it owns, and kernelmgr owns this one: give h2o a duplicate. DONT_READ:
     * kernelmgr reads the kernel's bytes itself, straight into the buffer they are parsed in. */
    int dupfd = dup(fd);

    if (dupfd == -1)
        return NULL;
    watch = wire_calloc(1, sizeof(*watch));
    watch->cb = cb;
    watch->arg = arg;
    watch->sock = h2o_evloop_socket_create(server->host.loop, dupfd, H2O_SOCKET_FLAG_DONT_READ);
    watch->sock->data = watch;
    h2o_socket_read_start(watch->sock, on_readable);
    return watch;
}

static void loop_notify_writable(void *loop, void *handle, void (*cb)(void *arg), void *arg)
{
    watch_t *watch = handle;
    (void)loop;

    watch->write_cb = cb;
    watch->write_arg = arg;
    h2o_socket_notify_write(watch->sock, on_writable);
}

static void loop_unwatch(void *loop, void *handle)
{
    watch_t *watch = handle;
    (void)loop;

    h2o_socket_read_stop(watch->sock);
    h2o_socket_close(watch->sock);
    free(watch);
}

static void on_kmgr_pending(h2o_timeout_entry_t *entry)
{
    gw_server_t *server = H2O_STRUCT_FROM_MEMBER(gw_server_t, kmgr_pending_entry, entry);
    kmgr_manager_run_pending(server->kmgr);
}

static void loop_schedule(void *loop)
{
    gw_server_t *server = loop;
    /* not the 0 ms timeout: h2o runs entries linked while it runs that one in the same pass, so a
     * kernel printing at full speed would be drained forever without a write going out */
    server->kmgr_pending_entry.cb = on_kmgr_pending;
    if (!h2o_timeout_is_linked(&server->kmgr_pending_entry))
        h2o_timeout_link(server->host.loop, &server->host.yield_timeout, &server->kmgr_pending_entry);
}

const kmgr_loop_ops_t gw_kmgr_loop_ops = {
    .watch = loop_watch, .unwatch = loop_unwatch, .notify_writable = loop_notify_writable, .schedule = loop_schedule};
