/* kmgr/manager.h: the kernel manager: owns the ZMQ context, every kernel, and their runtime dir. */
#ifndef KMGR_MANAGER_H
#define KMGR_MANAGER_H

#include <stddef.h>
#include <stdint.h>
#include "kmgr/kernelspec.h"
#include "kmgr/loop.h"
#include "ksys/util.h" /* ksys_now_ms: the clock of the deadlines below */

typedef struct st_kmgr_manager_t kmgr_manager_t;

/** The default of kmgr_config_t.max_message_bytes. */
#define KMGR_DEFAULT_MAX_MESSAGE_BYTES ((size_t)64 << 20)

/** Tunables; zero fields take the documented default. */
typedef struct st_kmgr_config_t {
    /** Directory for connection files and per-kernel state; NULL: a new mkdtemp dir under $TMPDIR (or /tmp). */
    const char *runtime_dir;
    /** Interval between heartbeats (default 500 ms). */
    unsigned heartbeat_interval_ms;
    /**
     * A kernel that has not answered a heartbeat for this long is "not answering" (kmgr_kernel_answering): information,
     * never a death by itself (default 1500 ms). Many kernels (IRkernel, metakernel's) answer heartbeats on the thread that
     * runs the user's code, so a long cell is silent; a stopped (SIGSTOP) or swapping kernel is silent too, and comes back.
     */
    unsigned heartbeat_timeout_ms;
    /**
     * Opt-in: a kernel that has not answered a heartbeat for this long is killed and declared DEAD ("stopped answering
     * heartbeats"), busy or not; at least heartbeat_timeout_ms. 0 (the default): never. Every kernel kernelmgr manages is a
     * process it started, and such a kernel is dead when its process is gone (exit, signal, OOM kill), as jupyter_client
     * decides it; a kill for silence suits a host that prefers a fresh kernel to one that may be wedged.
     */
    unsigned heartbeat_kill_ms;
    /**
     * A kernel restarted automatically (kmgr_kernel_options_t.restart_limit) that then stays up this long, from its
     * readiness to its next death, starts its count of restarts in a row afresh (default 10000 ms: Jupyter's
     * stable_start_time).
     */
    unsigned restart_stable_ms;
    /** A kernel not ready this long after spawn has failed to start (default 60000 ms). */
    unsigned startup_timeout_ms;
    /** Grace after shutdown_request before SIGTERM, and after SIGTERM before SIGKILL (default 2000 ms). */
    unsigned shutdown_grace_ms;
    /** Interval between kernel_info_request retries while starting (default 250 ms): the first resend's wait, doubled at each
     * resend (up to 8 times it) until the shell has answered, then the nudges' for iopub (kernel.c says why). */
    unsigned kernel_info_retry_ms;
    /**
     * Largest message a kernel may send, its frames together (default
     * KMGR_DEFAULT_MAX_MESSAGE_BYTES). A bigger one is never buffered: its bytes are passed over as
     * they arrive and the connection goes on; kernelmgr logs one line, tells the requests in flight
     * (KMGR_REQ_DROPPED) and ends them once the kernel has dealt with them.
     */
    size_t max_message_bytes;
    /** The bwrap executable for sandboxed kernels; NULL: "bwrap" on PATH. */
    const char *bwrap_path;
    /**
     * Kernels spawned and not ready yet, at most (0: no bound). A kernel started beyond it waits in
     * STARTING, unspawned (no pid, no connection file), until one of them is ready or dead, in the
     * order of the starts; its startup timeout counts from its spawn, so that a storm of starts
     * never times out for want of CPU. Restarts are not held back, but count.
     */
    unsigned max_starting;
    /**
     * Kernels started and not ready yet, at most, when the next start forks from a template (0: max_starting): a forked
     * kernel's start is ~0.1-0.2 s of CPU and ~20 MiB, a spawned one's ~0.6 s and ~50 MiB, so more go at once. Both count
     * every kernel in flight; the queue keeps the order of the starts.
     */
    unsigned max_forking;
    /** Kernels waiting for their spawn, at most (with max_starting; 0: none waits), counting the starts let go that await a
     * template's fork answer (they come back to wait if it answers no fork); beyond, kmgr_kernel_start fails with
     * KSYS_ESTARTQUEUE. Relaunches (restarts) are not held back and take no place. */
    unsigned max_start_queue;
    /**
     * The Python program of kernel templates (kernels/python-template/kgate_template.py), run by a spec's interpreter;
     * NULL: no templates (kmgr_manager_use_template fails).
     */
    const char *template_script;
    /**
     * Fork requests written to a template and not answered yet, at most, per template (default
     * KMGR_DEFAULT_TEMPLATE_MAX_PENDING). A start beyond it is spawned at once (fallback "queue_full",
     * kmgr_start_stats_t), never held: the loop never waits on a template, and a spawn is what every start
     * was before templates.
     */
    unsigned template_max_pending;
    /**
     * Non-zero: templates mark their memory, and so their kernels', mergeable by KSM (the template's `--merge`;
     * docs/kernels.md, docs/security.md). 0 by default: merging identical pages across contexts is a side channel.
     */
    int template_merge;
    /**
     * Non-zero: templates fork kernels from their imports alone (the template's `--imports-only`), each running ipykernel's
     * start itself, instead of from a warm kernel made once (the default; docs/kernels.md, "A warm kernel forked").
     */
    int template_imports_only;
} kmgr_config_t;

/** The default of kmgr_config_t.template_max_pending: more than the starts a burst on a few cores asks for at once. */
#define KMGR_DEFAULT_TEMPLATE_MAX_PENDING 64

/**
 * Creates a manager hosted by `loop` through `ops` (both borrowed, must outlive the manager).
 * Creates the runtime directory (mode 0700) when `config->runtime_dir` is NULL and removes it
 * again in kmgr_manager_destroy. Returns 0 and stores the manager in `*out`, or KSYS_EIO.
 *
 * Every process a kgate starts carries its instance mark in its environment
 * (kmgr_manager_instance_env), and so do their descendants, however they detach. The manager
 * records itself in the runtime directory (`kgate-<token>.instance`: pid, start time, boot id, pid
 * namespace, token) and, first, sweeps what earlier kgates that died there left: when the recorded
 * kgate no longer runs (its pid is gone, or holds a process that started at another time), every
 * process carrying its mark that started after it is killed (SIGKILL), and then its record is
 * removed (the record of an earlier boot just goes; one from another pid namespace is left alone).
 * When no recorded kgate still runs, their kernel directories and `*-<uuid>.log` files go too. All
 * of this only in a directory owned by this user and writable by no one else.
 *
 * Last, it forks a watchdog (a child named `kgate-watchdog`, in a session of its own, ignoring every
 * signal that can be ignored): when the process holding the manager dies without
 * kmgr_manager_destroy (SIGKILL, a crash), the watchdog kills every process carrying the mark and
 * exits; kmgr_manager_destroy stops and reaps it. Create the manager before any thread exists, and
 * reap only the pids the host started itself (no waitpid(-1)).
 */
int kmgr_manager_create(const kmgr_config_t *config, const kmgr_loop_ops_t *ops, void *loop, kmgr_manager_t **out);

/**
 * Releases the manager. Every kernel must have been destroyed; processes still in their shutdown
 * sequence are killed (SIGKILL) and reaped before this returns, so no kernel outlives it. Then
 * every process still carrying this manager's mark (what left its group: a double fork, a
 * command's background job) is killed, and the manager's record is removed.
 */
void kmgr_manager_destroy(kmgr_manager_t *mgr);

/** Drives timers: heartbeats, start-up retries and timeouts, shutdown grace periods, child reaping. */
void kmgr_manager_tick(kmgr_manager_t *mgr);
/** Runs the work requested through kmgr_loop_ops_t.schedule (re-draining sockets after sends). */
void kmgr_manager_run_pending(kmgr_manager_t *mgr);

/**
 * kgate's exit, before every kernel is shut down at once: every kernel process (its process group, and its session's
 * scheduler autogroup) gets the lowest CPU priority, so that hundreds of kernels ending together leave kgate the cores it
 * needs to keep its grace deadlines (manager.c says what was measured). Best effort.
 */
void kmgr_manager_yield_cpu(kmgr_manager_t *mgr);
/** Starts the shutdown sequence of every kernel (as kmgr_kernel_destroy does for each). */
void kmgr_manager_shutdown_all(kmgr_manager_t *mgr);
/** Number of kernel processes not yet reaped (live kernels and those shutting down). */
size_t kmgr_manager_num_processes(const kmgr_manager_t *mgr);

/**
 * Kernels spawned and not ready yet (`*launching`, at most kmgr_config_t.max_starting), and kernels waiting in the start
 * queue for their spawn (`*queued`, at most max_start_queue): the start queue's depth, for operators' figures.
 */
void kmgr_manager_count_starting(kmgr_manager_t *mgr, unsigned *launching, unsigned *queued);

/** The runtime directory in use. */
const char *kmgr_manager_runtime_dir(const kmgr_manager_t *mgr);

/**
 * "KGATE_INSTANCE=<token>": the mark kernels get in their environment. A host that starts processes
 * of its own puts it in their environment too (replacing any inherited one), so that the sweeps
 * described at kmgr_manager_create cover them. Owned by the manager.
 */
const char *kmgr_manager_instance_env(const kmgr_manager_t *mgr);

/**
 * Which mechanism enforces memory and process limits (ksys_limits_t) on this host, for a log line:
 * "memory limits: cgroup v1 memory.limit_in_bytes; process limits: cgroup pids.max (cgroup v1 under
 * ...)" or "memory limits: RLIMIT_AS; ...". Owned by the manager.
 */
const char *kmgr_manager_limits_mechanism(const kmgr_manager_t *mgr);

/** The bwrap executable sandboxed kernels start with, or NULL when none was found. */
const char *kmgr_manager_bwrap_path(const kmgr_manager_t *mgr);

/**
 * Starts a kernel template for `spec` (borrowed: must outlive the manager): a process of the spec's interpreter running
 * config.template_script, which imports ipykernel once and forks each kernel of `spec` on request (docs/kernels.md, "Kernels
 * forked from a template"). From when it is ready, a kernel of `spec` without a sandbox is forked from it (its start path
 * "forked", kmgr_kernel_start_path); until then, while it is dead, or when a fork fails, kernels are spawned as always. The
 * exchange never blocks the loop: the request is written as the template's socket takes it, the answer read when the loop
 * finds the socket readable, and the kernel's process exists from then (its start path "" until that answer). A
 * template that dies is started again from the tick (after a backoff while it keeps dying before it is ready). Returns 0 (also
 * when `spec` has one already), KSYS_EINVAL when `spec` is no ipykernel spec (`<python> -m ipykernel_launcher ...`) or there
 * is no template_script, KSYS_ESPAWN when its interpreter is not found.
 */
int kmgr_manager_use_template(kmgr_manager_t *mgr, const kmgr_kernelspec_t *spec);

/** Why a kernel of a spec with a template was spawned instead of forked (kmgr_start_stats_t.fallback). */
typedef enum {
    KMGR_FALLBACK_UNAVAILABLE, /* "unavailable": no template ready (starting, or started again after a death) */
    KMGR_FALLBACK_QUEUE_FULL,  /* "queue_full": template_max_pending requests were waiting for their answers */
    KMGR_FALLBACK_FAILED,      /* "failed": the template answered that it could not fork */
    KMGR_FALLBACK_TIMEOUT,     /* "timeout": no answer within KMGR_TPL_FORK_TIMEOUT_MS (the template is killed) */
    KMGR_FALLBACK_DIED,        /* "died": the template died or closed its socket before answering */
    KMGR_FALLBACK_PROTOCOL,    /* "protocol": the template sent a frame kgate cannot parse (it is killed) */
    KMGR_FALLBACK_SETUP,       /* "setup": the request cannot be said, or the forked kernel not watched or moved to its cgroup */
    KMGR_FALLBACK_COUNT
} kmgr_fallback_t;

/** The label of a fallback reason ("unavailable", ...), as in the comments above. */
const char *kmgr_fallback_name(kmgr_fallback_t reason);

/** How kernels started, since the manager was created: operators' figures. */
typedef struct st_kmgr_start_stats_t {
    unsigned long long forked;                        /* from a template */
    unsigned long long spawned;                       /* a plain start: no template for the spec, or a sandboxed kernel */
    unsigned long long fallback[KMGR_FALLBACK_COUNT]; /* spawned although the spec has a template, by reason */
    unsigned long long template_restarts;             /* template processes started after a first one died */
    unsigned templates_running;                       /* templates ready to fork now */
} kmgr_start_stats_t;

/** Fills `out` (a process started: counted once its path is known, when its template answered). */
void kmgr_manager_start_stats(const kmgr_manager_t *mgr, kmgr_start_stats_t *out);

/**
 * Kernel output no request received, since the manager was created, summed over every kernel it ever had: a kernel
 * destroyed or freed keeps its share, so neither figure ever goes down (operators' counters).
 */
typedef struct st_kmgr_lost_output_t {
    unsigned long long late;      /* published for a request after it had ended: each kernel's kmgr_kernel_late_messages */
    unsigned long long unawaited; /* big iopub messages passed over unread: each kernel's kmgr_kernel_unawaited_messages */
} kmgr_lost_output_t;

/** Fills `out`. */
void kmgr_manager_lost_output(const kmgr_manager_t *mgr, kmgr_lost_output_t *out);

/** How many processes left by dead kgates kmgr_manager_create killed in the runtime directory. */
size_t kmgr_manager_swept(const kmgr_manager_t *mgr);

#endif
