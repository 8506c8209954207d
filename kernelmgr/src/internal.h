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
#include "util_private.h"

/* Largest inbound frame accepted from a kernel (ZMQ_MAXMSGSIZE); a bigger one drops the peer. */
#define KMGR_MAX_FRAME_BYTES ((int64_t)64 * 1024 * 1024)
/* Most frames one message may have (a kernel's buffers); the rest of a longer one is discarded. */
#define KMGR_MAX_FRAMES 1024
/* Messages, and bytes, drained from one socket per wakeup before yielding back to the loop: a
 * kernel printing at full speed must leave the loop time to write what it already relayed. */
#define KMGR_DRAIN_BATCH 64
#define KMGR_DRAIN_BYTES ((size_t)1024 * 1024)
/* Messages kgate's iopub socket queues before it stops reading from the kernel. Unbounded, a
 * kernel printing faster than kgate relays grew kgate without limit; bounded, the backlog waits
 * in the kernel's own PUB queue (which drops beyond its high-water mark: KMGR_IDLE_GRACE_MS). */
#define KMGR_IOPUB_RCVHWM 16
/* A request that has its reply but no status idle is finished after this much silence. */
#define KMGR_IDLE_GRACE_MS 5000
/* An iopub message larger than this that arrives while no request awaits anything is passed over
 * unread (kmgr_channels_drain): verifying and parsing output nobody will see would cost as much as
 * relaying it. Status messages, which track the kernel's state, are far smaller. */
#define KMGR_UNAWAITED_MAX_BYTES ((size_t)64 * 1024)

/* ---- process.c: one incarnation of a kernel process with its directory and channels ---- */

typedef enum {
    KMGR_PROC_RUNNING,  /* owned by a kernel, alive (as far as we know) */
    KMGR_PROC_SHUTDOWN, /* shutdown_request sent; SIGTERM at the deadline */
    KMGR_PROC_TERMED,   /* SIGTERM sent; SIGKILL at the deadline */
    KMGR_PROC_KILLED,   /* SIGKILL sent; waiting to reap */
} kmgr_proc_phase_t;

typedef struct st_kmgr_proc_t kmgr_proc_t;

/* The watch argument of one socket: which process and which channel signalled. */
typedef struct st_kmgr_chan_t {
    kmgr_proc_t *proc;
    wire_channel_t channel;
} kmgr_chan_t;

struct st_kmgr_proc_t {
    kmgr_manager_t *mgr;
    /* The kernel this is the current incarnation of; NULL once it moved to the shutdown list. */
    kmgr_kernel_t *kernel;
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
    void *sockets[WIRE_CHANNEL_COUNT];
    void *watches[WIRE_CHANNEL_COUNT];
    kmgr_chan_t chans[WIRE_CHANNEL_COUNT];
    /* A ROUTER drops messages for a peer whose handshake it has not seen, so an input_request sent
     * before our stdin DEALER finished (re)connecting is lost and the kernel waits forever. A
     * monitor of the stdin socket (a PAIR, channel WIRE_CHANNEL_COUNT) tells when it has. */
    void *monitor;
    void *monitor_watch;
    kmgr_chan_t monitor_chan;
    int stdin_connected;
    /* Messages dropped because they failed to verify or decode; logged once. */
    uint64_t dropped;
    /* Set by a send: the sockets must be drained again from run_pending. */
    int redrain;
};

/**
 * Creates the directory, connection file and IPython dir of a new incarnation and spawns it.
 * Returns 0 with `*out` set (phase RUNNING, no sockets yet), or KMGR_EIO / KMGR_ESPAWN; on error
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

/* ---- channels.c: the five ZMQ sockets of an incarnation ---- */

/** Opens and connects the five sockets (and the stdin monitor) and watches them. Returns 0 or KMGR_EZMQ. */
int kmgr_channels_open(kmgr_proc_t *proc);
/** Stops watching and closes every socket (keep_control: leave the control socket open, unwatched). */
void kmgr_channels_close(kmgr_proc_t *proc, int keep_control);
/** Signs and sends `msg` on `channel` (no-op if that socket is closed). Returns 0 or KMGR_EZMQ. */
int kmgr_channels_send(kmgr_proc_t *proc, wire_channel_t channel, const wire_msg_t *msg);
/** Reads stdin monitor events; calls kmgr_kernel_on_stdin_connected once the handshake is done. */
void kmgr_channels_drain_monitor(kmgr_proc_t *proc);
/** Sends a heartbeat ping. */
void kmgr_channels_ping(kmgr_proc_t *proc);
/**
 * Receives at most KMGR_DRAIN_BATCH messages from `channel`, passing each verified message to
 * kmgr_kernel_on_message (ownership passes) and counting heartbeats through kmgr_kernel_on_pong.
 * Big iopub messages nobody awaits are passed over unread (KMGR_UNAWAITED_MAX_BYTES). Stops
 * early when the kernel moves on to another incarnation or is destroyed. Returns 1 if the batch
 * was exhausted with more to read, else 0.
 */
int kmgr_channels_drain(kmgr_proc_t *proc, wire_channel_t channel);

/* ---- kernel.c: callbacks from channels into the state machine ---- */

/** A decoded message from the kernel's current incarnation (`msg` owned by the callee). */
void kmgr_kernel_on_message(kmgr_kernel_t *kernel, wire_channel_t channel, wire_msg_t *msg);
/** The stdin channel finished its handshake (readiness waits for it). */
void kmgr_kernel_on_stdin_connected(kmgr_kernel_t *kernel);
/** A heartbeat answer arrived. */
void kmgr_kernel_on_pong(kmgr_kernel_t *kernel);
/**
 * Whether an iopub message could matter to anyone: true while the kernel starts (any message proves
 * iopub live) and while any request is registered. Otherwise only status messages matter.
 */
int kmgr_kernel_awaits_iopub(const kmgr_kernel_t *kernel);
/** Counts a message passed over unread (KMGR_UNAWAITED_MAX_BYTES). */
void kmgr_kernel_on_unawaited(kmgr_kernel_t *kernel);
/** An incremented generation means the drain must stop (restart, death, destroy). */
uint64_t kmgr_kernel_generation(const kmgr_kernel_t *kernel);
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
