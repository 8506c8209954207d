/* jupyter/jupyter.h: the Jupyter Server front door: its kernels, kernelspecs and sessions REST API and the kernel WebSocket
 * (docs/API.md 5.2). */
#ifndef GW_JUPYTER_H
#define GW_JUPYTER_H

#include <h2o.h>
#include <jansson.h>
#include "core/host.h"
#include "core/router.h"
#include "code/context.h"
#include "code/languages.h"

/* Sessions alive at once, at most: each holds a kernel, so the contexts' bound applies first. */
#define GW_JUPYTER_MAX_SESSIONS 1024
/* Variables of a POST /api/kernels `env` that pass, at most, and the longest value. */
#define GW_JUPYTER_MAX_ENV 64
#define GW_JUPYTER_MAX_ENV_VALUE 4096

/**
 * The door's state. Kernels are the engine's contexts (one registry: a kernel started here is a
 * context of /code/contexts and the reverse); sessions are the door's own, each naming one context.
 */
typedef struct st_gw_jupyter_t {
    gw_door_t super;
    gw_host_t *host;
    gw_languages_t *languages;
    gw_contexts_t *contexts;
    h2o_linklist_t sessions; /* gw_jsession_t */
    size_t nsessions;
    h2o_linklist_t conns; /* gw_jconn_t: kernel WebSockets, open or closing */
    /* gw_jaway_t: at most one per kernel, the messages kept for a session_id whose last WebSocket closed (away.c) */
    h2o_linklist_t away;
    /* where a kernel message is encoded for a client (one loop: one at a time); NULL until the first */
    struct st_gw_jmsg_encoded_t *encoded;
} gw_jupyter_t;

/** Initialises the door over the engine's languages and contexts (borrowed for the door's life). */
void gw_jupyter_init(gw_jupyter_t *jupyter, gw_host_t *host, gw_languages_t *languages, gw_contexts_t *contexts);
/** Appends the door's routes to `table`; they take the token in `?token=` too, as Jupyter Server does. */
void gw_jupyter_add_routes(gw_jupyter_t *jupyter, gw_route_table_t *table);
/** Periodic work (the server's tick): drops the buffers of absent clients that expired (--jupyter-replay-ms). */
void gw_jupyter_tick(gw_jupyter_t *jupyter);
/** Closes every kernel WebSocket and drops every buffer kept for an absent client (server shutdown). */
void gw_jupyter_shutdown(gw_jupyter_t *jupyter);
/** True once every WebSocket of the door has been disposed (after gw_jupyter_shutdown). */
int gw_jupyter_is_drained(gw_jupyter_t *jupyter);
/** Frees the sessions (after every context is gone). */
void gw_jupyter_dispose(gw_jupyter_t *jupyter);

/* ---- shared by the door's files ---- */

/**
 * Sends a Jupyter Server error: `{"message": ..., "reason": ...}` with `status` (`reason` is the
 * HTTP reason phrase, as tornado's write_error gives it).
 */
void gw_jupyter_error(h2o_req_t *req, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** The name of the spec a kernel starts with when a client names none ("" when there is no spec). */
const char *gw_jupyter_default_spec_name(const gw_languages_t *languages);
/**
 * The kernel model: id, name, last_activity, execution_state, connections (the open WebSockets and
 * execd taps; a buffer kept for an absent client is no connection, as in Jupyter Server).
 */
json_t *gw_jupyter_kernel_model(gw_jupyter_t *jupyter, const gw_context_t *ctx);
/**
 * Upgrades `req` (a WebSocket upgrade for the kernel of `ctx`, checked by the caller) to a kernel WebSocket: its client
 * hears the kernel through a tap on `ctx` (channels.c).
 */
void gw_jupyter_channels_open(gw_jupyter_t *jupyter, h2o_req_t *req, gw_context_t *ctx);
/** Whether a buffer is kept on `ctx` for an absent client (it holds one of ctx's taps). */
int gw_jupyter_is_buffering(gw_jupyter_t *jupyter, const gw_context_t *ctx);
/** The context of kernel `id` as a kernel (ephemeral ones are not kernels), or NULL. */
gw_context_t *gw_jupyter_find_kernel(gw_jupyter_t *jupyter, const char *id);
/**
 * Starts a kernel of spec `name` (NULL or "": the default spec) with the `env` a client sent
 * (filtered: see gw_jupyter_filter_env). Returns the context, or NULL after answering the error.
 */
gw_context_t *gw_jupyter_start_kernel(gw_jupyter_t *jupyter, h2o_req_t *req, const char *name, json_t *env);
/**
 * The variables of a client's `env` that a kernel may get: names `KERNEL_*` (letters, digits, '_'),
 * string values without NUL of at most GW_JUPYTER_MAX_ENV_VALUE bytes, at most GW_JUPYTER_MAX_ENV of
 * them; everything else (PATH, HOME, JUPYTER_* of the client's host) is dropped. A new object.
 */
json_t *gw_jupyter_filter_env(json_t *env);
/** Removes the sessions of kernel `ctx` (it is going away). */
void gw_jupyter_forget_kernel_sessions(gw_jupyter_t *jupyter, const gw_context_t *ctx);

#define GW_JUPYTER_HANDLER(name) void gw_jupyter_##name(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
GW_JUPYTER_HANDLER(api_root);
GW_JUPYTER_HANDLER(kernelspecs_list);
GW_JUPYTER_HANDLER(kernelspec_get);
GW_JUPYTER_HANDLER(kernelspec_resource);
GW_JUPYTER_HANDLER(kernels_list);
GW_JUPYTER_HANDLER(kernel_start);
GW_JUPYTER_HANDLER(kernel_get);
GW_JUPYTER_HANDLER(kernel_delete);
GW_JUPYTER_HANDLER(kernel_interrupt);
GW_JUPYTER_HANDLER(kernel_restart);
GW_JUPYTER_HANDLER(kernel_channels);
GW_JUPYTER_HANDLER(sessions_list);
GW_JUPYTER_HANDLER(session_create);
GW_JUPYTER_HANDLER(session_get);
GW_JUPYTER_HANDLER(session_patch);
GW_JUPYTER_HANDLER(session_delete);

static inline gw_jupyter_t *gw_jupyter_from(gw_door_t *door)
{
    return H2O_STRUCT_FROM_MEMBER(gw_jupyter_t, super, door);
}

#endif
