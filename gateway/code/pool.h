/* code/pool.h: the warm pools' side of contexts; internal to code/ (context.c, above it, and pool.c). */
#ifndef GW_CODE_POOL_H
#define GW_CODE_POOL_H

#include "code/context.h"

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
/**
 * The pool that should get a kernel now (gw_contexts_tick starts one and hands it to gw_pool_add), or NULL: none lacks
 * one, one is in its back-off, a kernel is starting somewhere, or the contexts' bound is reached.
 */
gw_pool_t *gw_pool_to_fill(gw_contexts_t *contexts);
/** A kernel for `pool` could not be started (`why`): the pool backs off. */
void gw_pool_start_failed(gw_pool_t *pool, const char *why);
/** Adds `ctx`, a context started for `pool` and not registered, to the pool's kernels. */
void gw_pool_add(gw_pool_t *pool, gw_context_t *ctx);
/** Shuts down every pooled kernel and forgets the pools (gw_contexts_destroy_all). */
void gw_pool_dispose_all(gw_contexts_t *contexts);

#endif
