/* app/runtime_init.h: execd's runtime initialisation (--runtime-init, /ready, POST /internal/init; docs/API.md 6.3). */
#ifndef GW_APP_RUNTIME_INIT_H
#define GW_APP_RUNTIME_INIT_H

#include <h2o.h>
#include "core/router.h"
#include "app/lifecycle.h"

/*
 * OpenSandbox may start execd before it knows the sandbox: with --runtime-init (or EXECD_RUNTIME_INIT=true) kgate answers
 * 503 NOT_INITIALIZED on every route but the public ones (/ping, /ready, /internal/init, /healthz, /readyz) until one
 * POST /internal/init names the sandbox; that call may set the token (as a SHA-256 hash, which the token is then checked
 * against instead of --access-token) and variables every later child process sees. A second init answers 409
 * ALREADY_INITIALIZED. Without --runtime-init kgate starts initialised.
 */
typedef struct st_gw_runtime_init_t {
    gw_door_t super;
    gw_shells_t *shells;               /* runs the lifecycle's preStart hook */
    const gw_lifecycle_t *template_lc; /* the lifecycle config kgate started with (app/lifecycle.h); an init may replace it */
    const char *status_file;           /* --lifecycle-startup-status-file; NULL: none */
    gw_lifecycle_t init_lc;            /* the init's own lifecycle, while its preStart runs */
    h2o_req_t *pending;                /* the POST /internal/init waiting for its preStart; NULL once answered or gone */
    json_t *warnings;                  /* the pending init's `warning` list */
    int control_fd;                    /* --init-control-fd: the launcher that owns the entrypoint; -1: none */
    char *entry_envs;                  /* entrypointPolicy=restart: the init's envs for the new entrypoint, "K=V\0"... */
    size_t entry_envs_len;
    unsigned initialized : 1;   /* user workloads may run: the routes are open */
    unsigned starting : 1;      /* a preStart runs (at startup, or in an init): GET /ready answers 503 */
    unsigned accepted : 1;      /* the one init was accepted (upstream's one-shot slot): later ones answer 409 */
    unsigned restart_entry : 1; /* the pending init asked for entrypointPolicy=restart and the launcher can do it */
    unsigned has_hash : 1;
    unsigned char token_hash[32]; /* SHA-256 of the token, when has_hash */
    char *sandbox_id;             /* owned; NULL before init */
    long long generation;
} gw_runtime_init_t;

/**
 * Starts uninitialised when `runtime_init` (the flag), else initialised. `shells`, `template_lc` and `status_file` are borrowed
 * for the door's life.
 *
 * POST /internal/init, once valid, consumes the one-shot slot (upstream's rule: a later init answers 409 whatever became of
 * this one), applies the token hash and envs, then runs the lifecycle's preStart (the init's `lifecycle` when present, even
 * empty, else `template_lc`) with `running`/`done` lines to `status_file`, and answers when it has ended: 200 and the runtime
 * initialised, or 500 RUNTIME_ERROR with the routes still closed. `entrypointPolicy` and `telemetry` are answered with
 * `warning` lines where kgate cannot act on them (docs/execd.md). With a launcher (`control_fd`, set after init; -1 by
 * default), entrypointPolicy=restart asks it on that pipe to retire the entrypoint when the init is accepted (`retire\n`) and
 * to start it again with the init's envs once preStart has succeeded (`start <bytes>\n` and `K=V\0`... of that length).
 */
void gw_runtime_init_init(gw_runtime_init_t *rt, int runtime_init, gw_shells_t *shells, const gw_lifecycle_t *template_lc,
                          const char *status_file);
void gw_runtime_init_dispose(gw_runtime_init_t *rt);

/** Adds GET /ready and POST /internal/init (public routes, body limit `max_body`). */
void gw_runtime_init_add_routes(gw_runtime_init_t *rt, gw_route_table_t *table, size_t max_body);

/**
 * Whether `req` carries the token: after an init with accessTokenHash, a presented token whose SHA-256 is that hash
 * (X-EXECD-ACCESS-TOKEN or Authorization: Bearer/token, compared in constant time); else 1 when `token` is NULL or matches.
 */
int gw_runtime_init_check_token(const gw_runtime_init_t *rt, h2o_req_t *req, const char *token);

#endif
