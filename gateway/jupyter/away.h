/* jupyter/away.h: a kernel's messages kept for a Jupyter client whose last WebSocket of its session_id closed, until it
 * returns (Jupyter Server's start_buffering / get_buffer, services/kernels/kernelmanager.py): at most one buffer per kernel,
 * a tap of its own on the context so that messages are kept while no socket is open, bounded in bytes and in time
 * (jupyter/replay.h). A restart or the kernel's deletion drops it, and so does a socket of another session_id. The kernel
 * WebSocket (channels.c) starts and ends it; this file knows no socket. Private to the door. */
#ifndef GW_JUPYTER_AWAY_H
#define GW_JUPYTER_AWAY_H

#include "code/context.h"
#include "jupyter/jupyter.h"
#include "jupyter/replay.h"

/**
 * The last socket of client `session_id` on kernel `ctx` closed: what the kernel sends it from now on is kept (the iopub,
 * and the replies and input requests whose requests are in `asked`, moved in: `asked` is left empty), for at most
 * --jupyter-replay-bytes and --jupyter-replay-ms. A buffer the kernel had for another client is dropped (one per kernel).
 */
void gw_jaway_start(gw_jupyter_t *jupyter, gw_context_t *ctx, const char *session_id, gw_jasked_t *asked);
/**
 * A socket of `session_id` (NULL: none) opened on kernel `ctx`: when the kernel's buffer is that client's, every kept
 * message goes to `send(data, msg)` first, oldest first, and the replies still awaited to `asked`; the buffer is dropped
 * either way (another client means the absent one is not coming back). Nothing when the kernel has none.
 */
void gw_jaway_end(gw_jupyter_t *jupyter, gw_context_t *ctx, const char *session_id, void (*send)(void *data, const gw_jmsg_t *msg),
                  void *data, gw_jasked_t *asked);
/** Drops and frees every buffer (server shutdown). */
void gw_jaway_free_all(gw_jupyter_t *jupyter);

#endif
