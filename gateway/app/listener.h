/* app/listener.h: the listening socket, and the bound on client connections that keeps fds for kernels and files. */
#ifndef GW_LISTENER_H
#define GW_LISTENER_H

#include <stddef.h>
#include <stdint.h>
#include <h2o.h>
#include "core/config.h"

/**
 * Accepts client connections into `accept_ctx`, at most `max_conns` at once: min(--max-connections,
 * RLIMIT_NOFILE - --fd-reserve), so that kernels (about 22 fds each), files and logs always find
 * descriptors. At the bound, a new connection takes the place of the oldest one that has not sent
 * a byte (a silent client must not lock everyone out); when there is none, accepting pauses until
 * a connection closes. When accept fails for want of descriptors (EMFILE, ENFILE), accepting
 * pauses for GW_LISTENER_PAUSE_MS and one line is logged per episode: never a busy loop.
 *
 * A request head must be whole within --header-timeout-ms of the first time its bytes are seen
 * (every GW_LISTENER_SWEEP_MS): h2o's own deadline (--request-timeout-ms) covers the head and the
 * body together and must be long enough for large uploads, so without this a client sending its
 * head a byte at a time (slowloris) would hold its connection that long, on every route. A
 * connection past the deadline is shut down (h2o then closes it), as nginx's client_header_timeout
 * does.
 */
typedef struct st_gw_listener_t {
    h2o_loop_t *loop;
    h2o_socket_t *sock; /* NULL when closed */
    h2o_accept_ctx_t *accept_ctx;
    h2o_linklist_t conns; /* gw_listener_conn_t, oldest first */
    size_t num_conns;
    size_t num_evicting; /* of num_conns, those shut down to make room and not closed yet */
    size_t max_conns;
    uint64_t header_timeout_ms;
    h2o_timeout_t pause_timeout;
    h2o_timeout_t sweep_timeout;
    h2o_timeout_entry_t sweep_entry;
    h2o_timeout_entry_t pause_entry;
    unsigned reading : 1;
    unsigned starved : 1; /* in an EMFILE/ENFILE episode (logged once) */
} gw_listener_t;

#define GW_LISTENER_PAUSE_MS 250
#define GW_LISTENER_SWEEP_MS 1000

/**
 * Binds and listens on config's address (TCP_NODELAY on every accepted connection) and starts
 * accepting on `loop`. Returns 0, or -1 after printing why to stderr; gw_listener_dispose is due
 * either way.
 */
int gw_listener_open(gw_listener_t *listener, const gw_config_t *config, h2o_loop_t *loop, h2o_accept_ctx_t *accept_ctx);
/** The same on `host`:`port` (another address with config's bounds: --e2b-listen's). */
int gw_listener_open_at(gw_listener_t *listener, const gw_config_t *config, const char *host, uint16_t port, h2o_loop_t *loop,
                        h2o_accept_ctx_t *accept_ctx);
/** The port bound (0 when closed). */
uint16_t gw_listener_port(const gw_listener_t *listener);
/** Stops accepting and closes the listening socket; connections already accepted stay. */
void gw_listener_close(gw_listener_t *listener);
/**
 * Shuts down the socket of every connection still open (an idle keep-alive, a reader stuck on a
 * full socket): h2o then fails its next read or write and closes the connection itself, disposing
 * its requests. Returns how many were open. For the end of shutdown, after streams had their
 * chance to finish.
 */
size_t gw_listener_shutdown_conns(gw_listener_t *listener);

/** Connections accepted and not yet closed. */
size_t gw_listener_num_conns(const gw_listener_t *listener);

/** Releases the timer (after the loop has stopped; connections are h2o's to close). */
void gw_listener_dispose(gw_listener_t *listener, h2o_loop_t *loop);

#endif
