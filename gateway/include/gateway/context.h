/* gateway/context.h: contexts: a context id bound to one kernel whose state persists between runs. */
#ifndef GW_CONTEXT_H
#define GW_CONTEXT_H

#include <stdint.h>
#include <jansson.h>
#include <h2o.h>
#include "wire/ids.h"
#include "kmgr/kernel.h"

typedef struct st_gw_server_t gw_server_t;

typedef struct st_gw_context_t {
    char id[WIRE_UUID_STRLEN + 1];
    gw_server_t *server;
    const kmgr_kernelspec_t *spec;
    kmgr_kernel_t *kernel;
    char *cwd;
    int64_t created_at_ms;
    int64_t last_activity_ms;
    int execution_count;
    unsigned is_default : 1;   /* the language's default context (POST /code with only a language) */
    unsigned is_ephemeral : 1; /* a stateless run's own kernel: not listed, deleted after its run */
    h2o_linklist_t link;       /* in server->contexts */
    h2o_linklist_t waiters;    /* gw_context_waiter_t: POST /code/context answered once ready */
    h2o_linklist_t runs;       /* gw_kernel_run_t in progress */
} gw_context_t;

/**
 * Starts a kernel for `spec` and registers a context for it. `cwd` and `env` (borrowed) reach the
 * kernel. Returns 0 and the context in `*out`, or a kmgr error code (nothing registered).
 */
int gw_context_create(gw_server_t *server, const kmgr_kernelspec_t *spec, const char *cwd, json_t *env, int is_default,
                      gw_context_t **out);

/** Deletes contexts idle (no run, no activity) for longer than config->context_idle_ms (server tick). */
void gw_contexts_cull_idle(gw_server_t *server);

/** Shuts the kernel down (in the background) and frees the context; waiters get 503. */
void gw_context_destroy(gw_context_t *ctx);

/** The context with `id`, or NULL. */
gw_context_t *gw_context_find(gw_server_t *server, const char *id);
/** The default context of `spec`, or NULL. */
gw_context_t *gw_context_find_default(gw_server_t *server, const kmgr_kernelspec_t *spec);

/**
 * Answers `req` with the context object once the kernel is ready (200), or 503
 * KERNEL_UNAVAILABLE when it fails to start. Answers at once if the kernel is already past start-up.
 */
void gw_context_respond_when_ready(gw_context_t *ctx, h2o_req_t *req);

/** The context object: id, language, kernel, status, cwd, created_at, last_activity, execution_count. */
json_t *gw_context_to_json(const gw_context_t *ctx);

#endif
