/* execd/contexts_api.h: what the context, code and session routes share: language resolution, creation, readiness. */
#ifndef GW_CONTEXTS_API_H
#define GW_CONTEXTS_API_H

#include <h2o.h>
#include "kmgr/kernelspec.h"
#include "code/context.h"
#include "execd/execd.h"

/** Resolves `language` to a kernelspec, or answers 400 UNKNOWN_LANGUAGE (naming the available ones) and returns NULL. */
const kmgr_kernelspec_t *gw_execd_resolve_language(gw_execd_t *execd, h2o_req_t *req, const char *language);

/** Creates a context, or answers the error (429 TOO_MANY_CONTEXTS, 503 KERNEL_UNAVAILABLE) and returns -1. */
int gw_execd_create_context(gw_execd_t *execd, h2o_req_t *req, const gw_context_options_t *opts, gw_context_t **out);
/** Answers gw_context_create's error `err` for a kernel of `spec` (429 TOO_MANY_CONTEXTS, 503 KERNEL_UNAVAILABLE). */
void gw_execd_respond_create_error(gw_execd_t *execd, h2o_req_t *req, const kmgr_kernelspec_t *spec, int err);

/** Answers `req` with the context object once its kernel is ready (200), or 503 KERNEL_UNAVAILABLE when it fails. */
void gw_execd_respond_when_ready(gw_context_t *ctx, h2o_req_t *req);

#endif
