/* e2b/e2b.h: the E2B door: E2B's code-interpreter protocol (docs/e2b.md, docs/API.md 6.2) over the engine's contexts and runs. */
#ifndef GW_E2B_H
#define GW_E2B_H

#include <h2o.h>
#include "core/host.h"
#include "core/router.h"
#include "code/context.h"
#include "code/languages.h"
#include "runs/run.h"

/* E2B's server sends a `keepalive` line after this long without output (to notice a client gone). */
#define GW_E2B_KEEPALIVE_MS 5000
/*
 * How often a stream looks whether its client hung up (h2o 2.2.5 notices it only when a write fails,
 * so without this a silent run would go on until the next keepalive line): a client gone stops its run.
 */
#define GW_E2B_GONE_CHECK_MS 250

typedef struct st_gw_e2b_t {
    gw_door_t super;
    gw_host_t *host;
    gw_languages_t *languages;
    gw_contexts_t *contexts;
    h2o_timeout_t keepalive_timeout; /* GW_E2B_KEEPALIVE_MS: one entry per /execute stream */
    h2o_timeout_t gone_timeout;      /* GW_E2B_GONE_CHECK_MS: one entry per /execute stream whose run goes on */
    h2o_linklist_t streams;          /* gw_e2b_stream_t open (execute.c) */
} gw_e2b_t;

/** Initialises the door over the engine's features (borrowed for the door's life). */
void gw_e2b_init(gw_e2b_t *e2b, gw_host_t *host, gw_languages_t *languages, gw_contexts_t *contexts);
/**
 * Appends the door's routes: POST /execute, POST and GET /contexts, POST /contexts/{id}/restart,
 * DELETE /contexts/{id}, GET /health (public), and OPTIONS on each (CORS preflight, public). Besides
 * kgate's own forms, the token is taken from E2B-Traffic-Access-Token on every route and from
 * X-Access-Token on /execute, where the SDK sends its sandbox's tokens.
 */
void gw_e2b_add_routes(gw_e2b_t *e2b, gw_route_table_t *table);
/** True when no /execute stream is open. */
int gw_e2b_is_drained(gw_e2b_t *e2b);
/** Releases the door's timer (after the loop has stopped: every stream has ended). */
void gw_e2b_dispose(gw_e2b_t *e2b);

/* ---- shared by the door's files ---- */

static inline gw_e2b_t *gw_e2b_from(gw_door_t *door)
{
    return H2O_STRUCT_FROM_MEMBER(gw_e2b_t, super, door);
}

#define GW_E2B_HANDLER(name) void gw_e2b_##name(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
GW_E2B_HANDLER(execute);
GW_E2B_HANDLER(context_create);
GW_E2B_HANDLER(context_list);
GW_E2B_HANDLER(context_restart);
GW_E2B_HANDLER(context_delete);
GW_E2B_HANDLER(health);
GW_E2B_HANDLER(preflight);

/** E2B's CORS header on an answer (Access-Control-Allow-Origin: *; which origins get through at all is kgate's check). */
void gw_e2b_add_headers(h2o_req_t *req);
/** A text/plain answer with `status`, as E2B's server sends its errors (the SDK shows the body). */
void gw_e2b_send_text(h2o_req_t *req, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/** A context as E2B shows it: {"id", "language", "cwd"}. A new object. */
json_t *gw_e2b_context_json(const gw_context_t *ctx);
/**
 * The context E2B's `language` (normalised: translate.h) runs in: the kernelspec of its kernel
 * language, or NULL after answering 400 naming the languages there are.
 */
const kmgr_kernelspec_t *gw_e2b_spec_of(gw_e2b_t *e2b, h2o_req_t *req, const char *language);
/** gw_context_create, or -1 after answering the error (text). */
int gw_e2b_create_context(gw_e2b_t *e2b, h2o_req_t *req, const gw_context_options_t *opts, gw_context_t **out);

#endif
