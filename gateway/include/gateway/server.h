/* gateway/server.h: the kgate server: one h2o event loop hosting HTTP, the kernels' ZMQ sockets and timers. */
#ifndef GW_SERVER_H
#define GW_SERVER_H

#include <h2o.h>
#include "kmgr/kernel.h"
#include "kmgr/kernelspec.h"
#include "kmgr/manager.h"
#include "gateway/config.h"
#include "gateway/metrics.h"
#include "gateway/translate.h"

struct st_gw_server_t {
    const gw_config_t *config;
    h2o_globalconf_t globalconf;
    h2o_context_t ctx;
    h2o_accept_ctx_t accept_ctx;
    h2o_socket_t *listener;
    kmgr_manager_t *kmgr;
    kmgr_kernelspecs_t specs;
    gw_translate_opts_t translate;
    struct st_gw_files_t *files; /* files_api.h: the workspace root, the editor's undo history */
    /* timers: h2o 2.2.5 has one h2o_timeout_t per fixed duration (PLATFORM.md) */
    h2o_timeout_t zero_timeout;  /* "later in this loop iteration": deferred work */
    h2o_timeout_t yield_timeout; /* 1 ms: after the next poll for I/O (kernelmgr's pending work) */
    h2o_timeout_t tick_timeout;  /* KMGR_TICK_MS: kernel manager and child processes */
    h2o_timeout_t ping_timeout;  /* config->ping_interval_ms: keep-alive events */
    h2o_timeout_entry_t tick_entry;
    h2o_timeout_entry_t kmgr_pending_entry;
    h2o_linklist_t contexts;      /* gw_context_t */
    h2o_linklist_t runs;          /* gw_run_t, not finished */
    h2o_linklist_t finished_runs; /* gw_run_t, finished and retained for resumption, oldest first */
    size_t retained_bytes;        /* log bytes of finished_runs */
    h2o_linklist_t shell_runs;    /* gw_shell_t */
    size_t num_contexts;
    h2o_linklist_t commands; /* gw_command_t, oldest first */
    size_t num_commands;
    h2o_linklist_t metrics_watches; /* GET /metrics/watch responses */
    gw_cpu_sample_t cpu_samples[2]; /* the tick's last two, about a second apart: GET /metrics measures since one */
    json_t *language_info;          /* kernelspec name -> language_info of its first kernel_info_reply */
    int shutting_down;
};

typedef struct st_gw_server_t gw_server_t;

/**
 * Sets the server up: discovers kernelspecs, creates the kernel manager inside `loop`'s h2o
 * context, binds and listens on config's address (TCP_NODELAY on every accepted connection).
 * Returns 0, or -1 after printing the reason to stderr. `config` is borrowed for the server's life.
 */
int gw_server_init(gw_server_t *server, const gw_config_t *config, h2o_evloop_t *loop);

/** The port actually bound (useful when config asked for 0). */
uint16_t gw_server_port(const gw_server_t *server);

/**
 * Begins an orderly shutdown: stops accepting, ends every stream, destroys every context (each
 * kernel runs its shutdown sequence). Call gw_server_is_drained() from the loop to know when
 * every kernel and child process is gone.
 */
void gw_server_begin_shutdown(gw_server_t *server);
/** True once no kernel or shell process remains. */
int gw_server_is_drained(gw_server_t *server);
/** Releases everything (kills what remains). */
void gw_server_dispose(gw_server_t *server);

/** Remembers the language_info of a kernel of `spec` that answered kernel_info (GET /code/languages). */
void gw_languages_note_kernel_info(gw_server_t *server, const kmgr_kernelspec_t *spec, json_t *kernel_info);

/** Schedules `entry` to run from the loop, later in this iteration (never inside the caller). */
void gw_server_defer(gw_server_t *server, h2o_timeout_entry_t *entry);

#endif
