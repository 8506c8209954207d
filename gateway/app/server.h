/* app/server.h: the kgate server: composes the engine features and the front doors on one h2o event loop. */
#ifndef GW_SERVER_H
#define GW_SERVER_H

#include <limits.h>
#include <h2o.h>
#include "kmgr/manager.h"
#include "core/config.h"
#include "core/host.h"
#include "core/router.h"
#include "app/listener.h"
#include "app/memory.h"
#include "app/observe.h"
#include "app/runtime_init.h"
#include "code/context.h"
#include "code/languages.h"
#include "e2b/e2b.h"
#include "execd/execd.h"
#include "files/files.h"
#include "jupyter/jupyter.h"
#include "mcp/mcp.h"
#include "metrics/metrics.h"
#include "procs/command.h"
#include "procs/isolated.h"
#include "procs/pty.h"
#include "procs/shell.h"
#include "proxy/proxy.h"
#include "runs/run.h"

/**
 * The only struct that knows every feature. Each feature owns its state (embedded here) and gets
 * the pointers it needs at init; the front doors get the features they speak for; route handlers
 * get their front door's state, never this.
 */
struct st_gw_server_t {
    gw_host_t host;
    h2o_globalconf_t globalconf;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    gw_listener_t listener;
    gw_listener_t e2b_listener; /* --e2b-listen's: the same routes, on E2B's address */
    kmgr_manager_t *kmgr;
    /* kernels/python-template/kgate_template.py next to the executable (kmgr_config_t.template_script), "" when not found */
    char template_script[PATH_MAX];
    /* the engine */
    gw_languages_t languages;
    gw_runs_t runs;
    gw_contexts_t contexts;
    gw_shells_t shells;
    gw_commands_t commands;
    gw_ptys_t ptys;
    gw_isolated_t isolated;
    gw_files_t files;
    gw_metrics_t metrics;
    /* the front doors, and the app's own routes (health) */
    gw_door_t app_door;
    gw_observe_t observe;           /* per-request figures, GET /kgate/metrics (Prometheus) */
    gw_access_log_t access_log;     /* --access-log's, when access_log_open */
    gw_runtime_init_t runtime_init; /* --runtime-init: /ready, /internal/init, and the routes closed until init */
    gw_lifecycle_t lifecycle;       /* the lifecycle config kgate started with (app/lifecycle.h) */
    gw_execd_t execd;
    gw_proxy_t proxy;
    gw_jupyter_t jupyter;
    gw_mcp_t mcp;
    gw_e2b_t e2b;
    gw_route_table_t routes;
    /* timers of the app (the shared ones are the host's) */
    h2o_timeout_t tick_timeout; /* KMGR_TICK_MS: kernel manager, child processes, retention */
    h2o_timeout_entry_t tick_entry;
    h2o_timeout_entry_t kmgr_pending_entry;
    gw_memory_t memory;             /* freed memory back to the system after a burst, from the tick */
    int exit_status;                /* non-zero: kgate must stop and exit with it (a failed startup preStart) */
    size_t requests_in_flight;      /* requests whose pool h2o has not released: dispatched and not yet answered whole */
    unsigned draining : 1;          /* gw_server_begin_drain: new requests answer 503 */
    unsigned loopback_listener : 1; /* kgate listens on loopback: requests must name it in Host */
    unsigned initialised : 1;       /* gw_server_init got far enough for gw_server_dispose */
    unsigned listener_open : 1;     /* the listener's timer exists */
    unsigned e2b_listener_open : 1; /* --e2b-listen's timer exists */
    unsigned mcp_ready : 1;         /* the MCP door's timeout exists */
    unsigned e2b_ready : 1;         /* the E2B door's timeout exists */
    unsigned access_log_open : 1;   /* access_log needs its dispose (after h2o's context: requests log as they go) */
};

typedef struct st_gw_server_t gw_server_t;

/**
 * Sets the server up: discovers kernelspecs, creates the kernel manager inside `loop`'s h2o
 * context, binds and listens on config's address (TCP_NODELAY on every accepted connection).
 * Returns 0, or -1 after printing the reason to stderr (then call gw_server_dispose). `config`
 * is borrowed for the server's life.
 */
int gw_server_init(gw_server_t *server, const gw_config_t *config, h2o_evloop_t *loop);

/** The port actually bound (useful when config asked for 0). */
uint16_t gw_server_port(const gw_server_t *server);
/** The port --e2b-listen bound (0: none). */
uint16_t gw_server_e2b_port(const gw_server_t *server);

/**
 * Begins a graceful drain (--graceful-shutdown-timeout, on SIGTERM): stops accepting connections, and every request that
 * arrives afterwards on a connection already open answers 503 SHUTTING_DOWN and closes it; requests and streams in flight go
 * on. Run the loop until gw_server_requests_in_flight() is 0 or the drain's deadline, then gw_server_begin_shutdown.
 */
void gw_server_begin_drain(gw_server_t *server);
/** Requests dispatched whose answer h2o has not finished with (streams included). */
size_t gw_server_requests_in_flight(const gw_server_t *server);

/**
 * Begins an orderly shutdown: stops accepting, ends every stream, destroys every context (each
 * kernel runs its shutdown sequence). Call gw_server_is_drained() from the loop to know when
 * every kernel and child process is gone.
 */
void gw_server_begin_shutdown(gw_server_t *server);
/** True once no kernel or shell process remains. */
int gw_server_is_drained(gw_server_t *server);
/**
 * Ends the client connections still open once the engine is drained (idle keep-alives, readers
 * stuck on a full socket), so that h2o disposes their requests before gw_server_dispose. Returns
 * how many are still open; run the loop until 0 (or a short deadline).
 */
size_t gw_server_close_connections(gw_server_t *server);

/** Releases everything (kills what remains). Safe after a failed gw_server_init. */
void gw_server_dispose(gw_server_t *server);

#endif
