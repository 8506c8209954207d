/* code/context.h: contexts: a context id bound to one kernel whose state persists between runs. */
#ifndef GW_CONTEXT_H
#define GW_CONTEXT_H

#include <stdint.h>
#include <jansson.h>
#include <h2o/linklist.h>
#include "wire/ids.h"
#include "kmgr/kernel.h"
#include "kmgr/manager.h"
#include "core/host.h"
#include "core/idmap.h"
#include "code/figures.h"
#include "code/languages.h"
#include "code/sandbox.h"
#include "code/translate.h"
#include "runs/run.h"

typedef struct st_gw_context_t gw_context_t;

/**
 * The warm pool of one kernelspec (code/pool.c): kernels started ahead with the server's defaults
 * (no cwd, no env, the default sandbox and limits), handed out by gw_context_create.
 */
typedef struct st_gw_pool_t {
    h2o_linklist_t link; /* in contexts->pools */
    const kmgr_kernelspec_t *spec;
    unsigned size;          /* the target */
    h2o_linklist_t kernels; /* gw_context_t (is_pooled), starting or ready, oldest first */
    unsigned count;         /* in `kernels` */
    unsigned failures;      /* pooled kernels of this spec that died or failed in a row; 0 again once one is ready */
    int64_t next_start_ms;  /* gw_now_ms before which none is started (back-off after failures) */
} gw_pool_t;

/** The registry of contexts, and what their runs need: the kernel manager, the runs, translation options. */
typedef struct st_gw_contexts_t {
    gw_host_t *host;
    gw_runs_t *runs;
    gw_languages_t *languages;
    kmgr_manager_t *kmgr;
    gw_translate_opts_t translate;
    /* the workspace a sandboxed kernel may write (the files root: gw_files_t's); borrowed, set by the app once known */
    const char *workspace;
    h2o_linklist_t list; /* gw_context_t */
    size_t count;        /* bounded by config->max_contexts, with `pooled` */
    gw_idmap_t by_id;
    h2o_linklist_t pools; /* gw_pool_t: one per kernelspec given a pool (gw_contexts_set_pool) */
    size_t pooled;        /* pooled kernels of every spec: count + pooled <= max_contexts when a pool starts one */
    char *pool_cwd; /* the directory pooled kernels start in (kgate's own), resolved: a request's cwd naming it may use them */
    /*
     * context.c's, called by kernel_run.c once a run of `ctx` ended or was cancelled: a stateless run's context goes when
     * its last run did (returns 1: `ctx` is gone). A pointer, so that the runs below the registry never call up into it.
     */
    int (*after_run)(struct st_gw_context_t *ctx);
    gw_code_figures_t figures; /* operators' figures of contexts, runs and kernels (code/figures.h) */
} gw_contexts_t;

/**
 * One context. Its fields are read by anyone holding it and written by code/ only. A pooled one
 * (is_pooled) is a kernel waiting in a pool: no id yet, not registered, seen by code/ alone.
 */
struct st_gw_context_t {
    char id[WIRE_UUID_STRLEN + 1];
    gw_contexts_t *contexts;
    const kmgr_kernelspec_t *spec;
    kmgr_kernel_t *kernel;
    char *cwd;
    char *language_named;         /* gw_context_options_t's, copied; NULL: the creator named its spec's language */
    gw_context_sandbox_t sandbox; /* what its kernel runs under (config->sandbox decides the profile) */
    int64_t created_at_ms;
    int64_t last_activity_ms;      /* wall clock, for clients */
    int64_t last_activity_mono_ms; /* the same on the gw_now_ms clock, which no clock step moves: idle expiry */
    int execution_count;
    unsigned restarts_seen;           /* kmgr_kernel_auto_restarts already logged and told to its runs */
    unsigned not_answering : 1;       /* what its running run was last told of kmgr_kernel_answering */
    unsigned is_default : 1;          /* the language's default context (POST /code with only a language) */
    unsigned is_ephemeral : 1;        /* a stateless run's own kernel: not listed, deleted after its run (kernel_run.c) */
    unsigned was_ready : 1;           /* its kernel has been ready once */
    unsigned forget_failed_start : 1; /* gw_context_options_t's */
    unsigned is_pooled : 1;           /* waiting in pool->kernels (code/pool.c) */
    gw_pool_t *pool;                  /* while is_pooled */
    h2o_linklist_t link;              /* in contexts->list, or in pool->kernels while pooled */
    gw_idmap_entry_t by_id;           /* in contexts->by_id */
    h2o_linklist_t waiters;           /* gw_context_waiter_t: told once the kernel is ready */
    h2o_linklist_t runs;              /* gw_kernel_run_t queued or in progress */
    h2o_linklist_t taps;              /* gw_context_tap_t: relays of the kernel's messages */
    size_t ntaps;
};

typedef struct st_gw_context_waiter_t gw_context_waiter_t;
/**
 * The kernel of `ctx` is past start-up: `failure` is NULL when it is ready, else why it is not (it
 * failed to start, or the context was deleted: `ctx` is still readable during the call). The
 * waiter is detached before the call.
 */
typedef void (*gw_context_waiter_cb)(gw_context_waiter_t *waiter, gw_context_t *ctx, const char *failure);

struct st_gw_context_waiter_t {
    gw_context_waiter_cb cb;
    gw_context_t *ctx;   /* NULL once told or cancelled */
    h2o_linklist_t link; /* in ctx->waiters */
};

typedef struct st_gw_context_tap_t gw_context_tap_t;

/**
 * A relay attached to a context's kernel (a front door's client that speaks the Jupyter protocol
 * itself, such as a kernel WebSocket). Set the callbacks, then gw_context_tap_attach. Each is
 * called from the loop; a callback may detach its own tap, and nothing else of the context's taps.
 */
struct st_gw_context_tap_t {
    /**
     * A message the kernel sent (shell, control, stdin or iopub), as kmgr_tap_cb describes: decoded,
     * and its signed parts as the kernel sent them, both borrowed for the call. Every tap hears
     * every message: which client asked for a reply is the front door's business.
     */
    void (*on_message)(gw_context_tap_t *tap, wire_channel_t channel, const wire_msg_t *msg, const wire_frame_t *parts,
                       size_t nparts);
    /**
     * A message the kernel sent on `channel` was over the message cap and dropped unread (kmgr_tap_cb
     * with a NULL msg): `parent` (`parent_len` bytes, unverified JSON text) is its parent_header, or NULL
     * when unknown. Every tap hears it. NULL: the tap is not told.
     */
    void (*on_dropped)(gw_context_tap_t *tap, wire_channel_t channel, const char *parent, size_t parent_len);
    /**
     * An iopub `stream` message over the message cap came cut to the head of its text (kmgr_tap_cb: msg->content_cut,
     * msg->text_dropped; borrowed for the call): no signed parts to relay, its content raw unless a run parsed it. Every tap
     * hears it. NULL: the tap hears it as on_dropped (a relay that keeps messages for later keeps no head of the cap's size).
     */
    void (*on_cut)(gw_context_tap_t *tap, const wire_msg_t *msg);
    /** The kernel's state changed (kmgr_kernel_state of ctx->kernel): restarting, ready again, dead. */
    void (*on_state)(gw_context_tap_t *tap, kmgr_kernel_state_t state);
    /** The context is being destroyed: the tap is already detached, and `ctx` is still readable. */
    void (*on_destroy)(gw_context_tap_t *tap, gw_context_t *ctx);
    /**
     * With on_cut: the most decoded text of such a head it can pass on (a WebSocket's send bound less room for the rest of
     * the message); 0: as much as the cap lets through. The kernel reads a head no longer than its taps' largest
     * (kmgr_kernel_set_tap_text_room). Set before gw_context_tap_attach.
     */
    uint64_t text_room;
    gw_context_t *ctx;   /* NULL while detached */
    h2o_linklist_t link; /* in ctx->taps */
};

/**
 * Attaches `tap` (detached) to `ctx`: from now on it hears every kernel message and state change.
 * A context with a tap is never deleted for idleness: someone is connected.
 */
void gw_context_tap_attach(gw_context_t *ctx, gw_context_tap_t *tap);
/** Detaches `tap`; accepts a detached one. */
void gw_context_tap_detach(gw_context_tap_t *tap);

/**
 * Sends a client's message to the kernel verbatim (kmgr_kernel_send_parts): what the kernel answers
 * reaches the taps. Records activity. Returns 0, KSYS_ENOTREADY (starting or restarting: wait for
 * the tap's on_state), KSYS_EDIED, KSYS_EINVAL or KSYS_EZMQ.
 */
int gw_context_send_parts(gw_context_t *ctx, wire_channel_t channel, const wire_frame_t *parts, size_t nparts);

/** How to create a context. */
typedef struct st_gw_context_options_t {
    const kmgr_kernelspec_t *spec;
    const char *cwd;                     /* copied; NULL: kgate's own */
    json_t *env;                         /* {"K": "V"} added to the kernel's environment; borrowed; may be NULL */
    const gw_context_sandbox_t *sandbox; /* NULL: gw_context_sandbox_defaults */
    /* the language the creator asked for when it is not the spec's own (E2B's "javascript" on Deno's "typescript"
     * kernel), for the creator's door to say again; copied; NULL: the spec's */
    const char *language_named;
    unsigned is_default : 1;
    unsigned is_ephemeral : 1;
    /* the creator reports a failed start itself and never hands out the id: a context whose kernel
     * dies before it was ever ready is deleted, not left listed as dead */
    unsigned forget_failed_start : 1;
} gw_context_options_t;

/** Initialises an empty registry; `kmgr` (borrowed) starts the kernels. */
void gw_contexts_init(gw_contexts_t *contexts, gw_host_t *host, gw_runs_t *runs, gw_languages_t *languages, kmgr_manager_t *kmgr);

/**
 * Registers a context: with a kernel of the spec's warm pool when the options ask for nothing a
 * pooled kernel lacks (no cwd but kgate's own, an empty env, the default sandbox and limits), a
 * ready one first, else one still starting; otherwise with a kernel started now, after giving up a
 * pooled kernel if the pools' take the last places of config->max_contexts. Returns 0 and the
 * context in `*out`, or GW_ESHUTTINGDOWN, GW_ETOOMANYCONTEXTS (config->max_contexts contexts
 * alive, pooled kernels not counted) or a kmgr code (the kernel could not be started); nothing is
 * registered then.
 */
int gw_context_create(gw_contexts_t *contexts, const gw_context_options_t *opts, gw_context_t **out);

/** Shuts the kernel down (in the background) and frees the context; waiters are told, runs end. */
void gw_context_destroy(gw_context_t *ctx);
/** As gw_context_destroy, but the kernel is killed at once (kmgr_kernel_kill): its state is thrown away, not shut down. */
void gw_context_discard(gw_context_t *ctx);

typedef struct st_gw_kernel_run_options_t gw_kernel_run_options_t; /* code/kernel_run.h */
/**
 * A stateless run: a context of its own (made with `copts`, ephemeral: no door lists it) whose kernel serves this one run
 * and goes with it. code/ alone destroys such a context (context.c's after_run and kernel death): here when the
 * submission fails, when its run ends or is cancelled, or when its kernel dies. Returns 0 with `*out` set, a
 * gw_context_create error (nothing was created), or a gw_kernel_run_submit error (GW_ETOOLSUNSUPPORTED, ...; the
 * context is gone again).
 */
int gw_kernel_run_submit_stateless(gw_contexts_t *contexts, const gw_context_options_t *copts, const gw_kernel_run_options_t *opts,
                                   gw_run_t **out);

/** Destroys every context and every pooled kernel (server shutdown). */
void gw_contexts_destroy_all(gw_contexts_t *contexts);

/**
 * Keeps `size` kernels of `spec` started ahead (0: none; the pooled kernels beyond are shut down).
 * gw_contexts_tick starts them, one at a time for all pools, only while no context's kernel is
 * starting or restarting and while contexts and pooled kernels together stay under
 * config->max_contexts; a pooled kernel that dies or fails to start is discarded and replaced after
 * a back-off (1 s, doubling to 60 s; the first failure in a row is logged). Pooled kernels are
 * neither listed nor found by id, and never expire.
 */
void gw_contexts_set_pool(gw_contexts_t *contexts, const kmgr_kernelspec_t *spec, unsigned size);
/** {"<kernelspec>": {"size", "ready", "starting"}} for every spec given a pool. A new object. */
json_t *gw_contexts_pool_to_json(const gw_contexts_t *contexts);
/** The pool entry of `spec` as gw_contexts_pool_to_json renders it, or NULL when the spec has none. A new object. */
json_t *gw_contexts_pool_spec_to_json(const gw_contexts_t *contexts, const kmgr_kernelspec_t *spec);

/**
 * Enforces run timeouts, deletes contexts idle for longer than config->context_idle_ms and refills
 * the warm pools (server tick).
 */
void gw_contexts_tick(gw_contexts_t *contexts);

/** The context with `id`, or NULL. */
gw_context_t *gw_context_find(gw_contexts_t *contexts, const char *id);
/** The context with `id` if a door lists it (any but a stateless run's own, is_ephemeral), or NULL. */
gw_context_t *gw_context_find_listed(gw_contexts_t *contexts, const char *id);
/**
 * Calls `fn` for each context a door lists (every one but a stateless run's own, is_ephemeral), oldest first, so that no
 * door filters by hand. `fn` may destroy the context it is given, and no other.
 */
void gw_contexts_each_listed(gw_contexts_t *contexts, void (*fn)(gw_context_t *ctx, void *arg), void *arg);
/** The default context of `spec`, or NULL. */
gw_context_t *gw_context_find_default(gw_contexts_t *contexts, const kmgr_kernelspec_t *spec);

/** Records activity on the context now (its runs' events): last_activity, and the idle clock. */
static inline void gw_context_touch(gw_context_t *ctx)
{
    ctx->last_activity_ms = gw_unix_ms();
    ctx->last_activity_mono_ms = gw_now_ms();
}

/** True when the context's kernel is dead (a restart brings it back). */
static inline int gw_context_is_dead(const gw_context_t *ctx)
{
    return kmgr_kernel_state(ctx->kernel) == KMGR_KERNEL_DEAD;
}
/** Why the kernel died or failed, for messages ("" while alive). */
const char *gw_context_exit_reason(const gw_context_t *ctx);

/**
 * Tells `waiter` (its `cb` set by the caller) once the kernel is past start-up: at once, inside
 * this call, when it already is; later otherwise. Exactly once, unless cancelled first.
 */
void gw_context_wait_ready(gw_context_t *ctx, gw_context_waiter_t *waiter);
/**
 * Inside a waiter's callback with a failure: whether that failure is the context's deletion (a client deleted it while the
 * kernel started or restarted), not its kernel's. The doors answer it as a context that does not exist (404), not as a failed
 * kernel: nothing failed, and a 5xx would count against kgate.
 */
int gw_context_is_deleted(const gw_context_t *ctx);
/** Forgets a waiter that has not been told yet (its owner is going away). Accepts a told one. */
void gw_context_waiter_cancel(gw_context_waiter_t *waiter);

/** Interrupts what the kernel runs (state is kept). Returns 0 (a kernel still starting runs nothing: nothing is sent), or a kmgr
 * code (the kernel is dead). */
int gw_context_interrupt(gw_context_t *ctx);

/**
 * Restarts the kernel: runs queued or running end with KernelRestarted, the execution count goes
 * back to 0. Returns 0 (wait with gw_context_wait_ready), or a kmgr code.
 */
int gw_context_restart(gw_context_t *ctx);

/**
 * The context object: id, language, kernel, status, cwd, created_at, last_activity, execution_count,
 * default, sandbox ({"profile", "share_net"}), limits (those in force), answering (false while its
 * ready kernel misses heartbeats: kmgr_kernel_answering), restarts (automatic restarts of its kernel
 * after it died on its own, --kernel-restart-limit in a row) and last_death (why its kernel last died,
 * or null).
 */
json_t *gw_context_to_json(const gw_context_t *ctx);

#endif
