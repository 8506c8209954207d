/* gateway/contexts_api.h: helpers the context and code routes share (language resolution, creation). */
#ifndef GW_CONTEXTS_API_H
#define GW_CONTEXTS_API_H

#include <stddef.h>
#include <h2o.h>
#include "kmgr/kernelspec.h"
#include "gateway/context.h"

typedef struct st_gw_server_t gw_server_t;

/** Writes "python (kernel python3), ..." for error messages. */
void gw_languages_describe(gw_server_t *server, char *buf, size_t size);

/** Resolves `language` to a kernelspec, or answers 400 UNKNOWN_LANGUAGE (naming the available ones) and returns NULL. */
const kmgr_kernelspec_t *gw_resolve_language(gw_server_t *server, h2o_req_t *req, const char *language);

/**
 * Creates a context, or answers the error (429 TOO_MANY_CONTEXTS, 503 KERNEL_UNAVAILABLE) and
 * returns -1.
 */
int gw_context_create_or_respond(gw_server_t *server, h2o_req_t *req, const kmgr_kernelspec_t *spec, const char *cwd, json_t *env,
                                 int is_default, gw_context_t **out);

#endif
