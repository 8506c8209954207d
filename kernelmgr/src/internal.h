/* kernelmgr/src/internal.h: private structures shared by the kernelmgr source files. */
#ifndef KMGR_INTERNAL_H
#define KMGR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "wire/connfile.h"
#include "wire/frames.h"
#include "wire/ids.h"
#include "wire/message.h"
#include "wire/signer.h"
#include "kmgr/kernel.h"
#include "kmgr/manager.h"
#include "channels.h"
#include "util_private.h"

/* A request that has its reply but no status idle is finished after this much silence. */
#define KMGR_IDLE_GRACE_MS 5000

/* ---- process.c: one incarnation of a kernel process with its directory and channels ---- */

typedef enum {
    KMGR_PROC_RUNNING,  /* owned by a kernel, alive (as far as we know) */
    KMGR_PROC_SHUTDOWN, /* shutdown_request sent; SIGTERM at the deadline */
    KMGR_PROC_TERMED,   /* SIGTERM sent; SIGKILL at the deadline */
    KMGR_PROC_KILLED,   /* SIGKILL sent; waiting to reap */
} kmgr_proc_phase_t;

typedef struct st_kmgr_proc_t kmgr_proc_t;

struct st_kmgr_proc_t {
    /* Link in mgr->shutting_down once detached. */
    kmgr_link_t link;
    char uuid[WIRE_UUID_STRLEN + 1];
    char *dir;       /* <runtime_dir>/<uuid> */
    char *conn_path; /* <dir>/connection.json */
    wire_connection_t conn;
    wire_signer_t signer;
    pid_t pid;   /* 0 once reaped */
    int wstatus; /* valid once reaped */
    kmgr_proc_phase_t phase;
    uint64_t deadline;
    /* Opened by the kernel that owns this incarnation, closed (but for control) once detached. */
    kmgr_channels_t channels;
};

/**
 * Creates the directory, connection file and IPython dir of a new incarnation and spawns it.
 * Returns 0 with `*out` set (phase RUNNING, its channels initialised but closed), or KMGR_EIO / KMGR_ESPAWN; on error
 * nothing is left behind and `why` (if non-NULL, `whylen` bytes) says what failed.
 */
int kmgr_proc_spawn(kmgr_manager_t *mgr, const kmgr_kernelspec_t *spec, const char *cwd, json_t *env, kmgr_proc_t **out, char *why,
                    size_t whylen);
/** Reaps the process if it has exited (WNOHANG). Returns 1 when it is (now or already) reaped. */
int kmgr_proc_reap(kmgr_proc_t *proc);
/** Sends `sig` to the process group (no-op once reaped). */
void kmgr_proc_signal(kmgr_proc_t *proc, int sig);
/** Formats why a reaped process ended: "exited with code 1", "killed by signal 9 (SIGKILL)". */
void kmgr_proc_describe_exit(const kmgr_proc_t *proc, char *buf, size_t bufsize);
/** Closes sockets, wipes the key, removes the directory and frees. The process must be reaped. */
void kmgr_proc_free(kmgr_proc_t *proc);
/** Removes a directory tree (no symlinks followed); best effort. */
void kmgr_rmtree(const char *path);

/* ---- kernel.c: what the manager drives ---- */

/** Tick work of one kernel: readiness retries, timeouts, heartbeats, reaping. */
void kmgr_kernel_tick(kmgr_kernel_t *kernel, uint64_t now);
/** Deferred work of one kernel: re-drain after sends, deferred failures and state notices. */
void kmgr_kernel_run_pending(kmgr_kernel_t *kernel);
/** Whether the kernel was destroyed and is waiting to be freed. */
int kmgr_kernel_is_destroyed(const kmgr_kernel_t *kernel);
/** Frees a destroyed kernel (only from the loop, never from inside its callbacks). */
void kmgr_kernel_free(kmgr_kernel_t *kernel);
/** Link of a kernel in mgr->kernels. */
kmgr_link_t *kmgr_kernel_link(kmgr_kernel_t *kernel);
kmgr_kernel_t *kmgr_kernel_from_link(kmgr_link_t *link);

/* ---- manager.c ---- */

struct st_kmgr_manager_t {
    kmgr_config_t config; /* defaults filled in */
    char *runtime_dir;
    int owns_runtime_dir;
    const kmgr_loop_ops_t *ops;
    void *loop;
    void *zctx;
    /* Every kernel handle, including destroyed ones waiting to be freed from the loop. */
    kmgr_link_t kernels;
    /* Detached incarnations in their shutdown sequence (kmgr_proc_t.link). */
    kmgr_link_t shutting_down;
    /* Set between ops->schedule and the kmgr_manager_run_pending it asked for. */
    int scheduled;
};

/** Asks the loop for a kmgr_manager_run_pending (coalesced). */
void kmgr_manager_schedule(kmgr_manager_t *mgr);
/**
 * Takes ownership of a detached incarnation and runs its shutdown sequence: shutdown_request on
 * control (if `polite` and it still runs), SIGTERM and SIGKILL after grace periods, then reaping.
 */
void kmgr_manager_adopt(kmgr_manager_t *mgr, kmgr_proc_t *proc, int polite);

#endif
