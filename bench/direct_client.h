/* bench/direct_client.h: a direct ZeroMQ client of a Jupyter kernel (shell DEALER + iopub SUB). */
#ifndef BENCH_DIRECT_CLIENT_H
#define BENCH_DIRECT_CLIENT_H

#include "wire/ids.h"
#include "wire/signer.h"
#include "common.h"

/**
 * The baseline of the benchmark: what a C program talking to the kernel itself pays. It shares
 * the kernel with kgate (a kernel's ROUTER serves several DEALERs; both clients filter iopub by
 * parent msg_id), so the two are timed against the very same process.
 */
typedef struct st_bench_direct_t {
    void *zctx;
    void *shell;
    void *iopub;
    wire_signer_t signer;
    char session[WIRE_UUID_STRLEN + 1];
    unsigned timeout_ms;
} bench_direct_t;

/**
 * Reads `connection_file` and connects a shell DEALER and an iopub SUB (subscribed to everything)
 * to the kernel. Returns 0, or BENCH_EIO (unreadable or invalid file; detail says why) or
 * BENCH_EZMQ; on error nothing is left to close.
 */
int bench_direct_open(bench_direct_t *d, const char *connection_file, unsigned timeout_ms);

/**
 * Waits until the iopub subscription is live: sends kernel_info_request until an iopub message
 * whose parent is one of them arrives (messages published earlier are lost, PLATFORM.md), then
 * until every request has its reply, so that no stale reply is pending when timing starts.
 * Returns 0, BENCH_ETIMEDOUT (nothing within the timeout), BENCH_EZMQ or BENCH_EWIRE.
 */
int bench_direct_wait_ready(bench_direct_t *d);

/**
 * Discards (untimed) whatever arrived since the last call, such as the iopub messages of kgate's
 * runs, then sends an execute_request for `code` and waits for both its execute_reply and the iopub
 * `status: idle` whose parent it is, in either order. `out->ms` runs from just before the send to
 * just after the second of the two is decoded. `out` is zeroed first and owned by the caller.
 * A run that raises is not an error here (see `out->error`). Returns 0, BENCH_ETIMEDOUT,
 * BENCH_EZMQ or BENCH_EWIRE.
 */
int bench_direct_execute(bench_direct_t *d, const char *code, bench_outcome_t *out);

/** Closes the sockets (linger 0) and the ZMQ context, and wipes the key. Accepts a closed client. */
void bench_direct_close(bench_direct_t *d);

#endif
