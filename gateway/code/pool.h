/* code/pool.h: the warm pools' side of contexts; internal to code/ (context.c and pool.c). */
#ifndef GW_CODE_POOL_H
#define GW_CODE_POOL_H

#include "code/context.h"

/**
 * context.c: starts a kernel for a context that is not registered yet (no id, in no list):
 * `opts->spec`, `env` and `sandbox` apply, `cwd` too but is not recorded. Returns 0 and the context
 * in `*out`, or a kmgr code with nothing left behind.
 */
int gw_context_spawn(gw_contexts_t *contexts, const gw_context_options_t *opts, gw_context_t **out);
/** context.c: shuts down the kernel of an unregistered context (gw_context_spawn's) and frees it. */
void gw_context_release(gw_context_t *ctx);

/**
 * A pooled kernel of `opts->spec` that can serve these options (gw_context_create says which),
 * taken out of its pool (is_pooled cleared, still unregistered): a ready one, else one starting;
 * NULL when there is none or the options ask for more.
 */
gw_context_t *gw_pool_take(gw_contexts_t *contexts, const gw_context_options_t *opts);
/** Shuts down one pooled kernel, of any spec (one still starting first, else the newest): 1, or 0 when none is pooled. */
int gw_pool_give_up_one(gw_contexts_t *contexts);
/** The kernel of pooled `ctx` changed state (from its on_state): ready resets the back-off; dead discards it (`ctx` is freed). */
void gw_pool_on_state(gw_context_t *ctx, kmgr_kernel_state_t state);
/** Starts one pooled kernel when a pool lacks one and nothing else is starting (gw_contexts_tick). */
void gw_pool_tick(gw_contexts_t *contexts);
/** Shuts down every pooled kernel and forgets the pools (gw_contexts_destroy_all). */
void gw_pool_dispose_all(gw_contexts_t *contexts);

#endif
