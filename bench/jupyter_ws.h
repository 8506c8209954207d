/* bench/jupyter_ws.h: a C client of a Jupyter kernel WebSocket (`/api/kernels/{id}/channels`, v1 framing). */
#ifndef BENCH_JUPYTER_WS_H
#define BENCH_JUPYTER_WS_H

#include "wire/ids.h"
#include "support/ws_client.h"
#include "common.h"

#define BENCH_JWS_V1_PROTOCOL "v1.kernel.websocket.jupyter.org"

/**
 * What JupyterLab's kernel connection does, in C and nothing more: one WebSocket per kernel
 * speaking the `v1.kernel.websocket.jupyter.org` binary framing (8-byte little-endian offset count,
 * the offsets, then channel, header, parent_header, metadata, content). The same client talks to
 * kgate and to Jupyter Server, so that the two are compared through identical client code. Not
 * thread-safe; one client per thread.
 */
typedef struct st_bench_jws_t {
    wsc_t ws;
    int open;
    char session[WIRE_UUID_STRLEN + 1];
    unsigned timeout_ms;
} bench_jws_t;

/**
 * Connects to 127.0.0.1:`port`, asks to upgrade `path` (which carries the token as `?token=` when
 * the server needs one), offering the v1 subprotocol, and insists on getting it: a server that
 * answers without it would speak the legacy JSON framing, which this client does not. Returns 0, or
 * BENCH_EIO (no connection, no 101: the detail has the status and why) or BENCH_EPROTO (no v1);
 * on error nothing is left open. `quickack`: acknowledge every read at once (wsc_t.quickack).
 */
int bench_jws_open(bench_jws_t *c, unsigned short port, const char *path, unsigned timeout_ms, int quickack);

/**
 * Waits until the kernel answers on this socket: kernel_info_request (resent every 500 ms while
 * nothing comes) until one gets its shell reply and an iopub message with it as parent, so that
 * the iopub path is live before timing starts (a kernel still starting, or a gateway that
 * subscribes the socket to iopub on its first request). Then waits for that request's `status:
 * idle`, so that nothing of it is pending. Returns 0, BENCH_ETIMEDOUT, BENCH_EIO or BENCH_EPROTO.
 */
int bench_jws_wait_ready(bench_jws_t *c);

/**
 * Discards (untimed) whatever has arrived, such as the iopub messages of another client's runs in
 * the same kernel, then sends an execute_request for `code` on shell and waits for both its
 * execute_reply and the iopub `status: idle` whose parent it is, in either order. `out->ms` runs
 * from just before the request is built to just after the second of the two is parsed; the
 * execute_result's text/plain and an error reply are recorded as bench_direct_execute does. `out`
 * is zeroed first and owned by the caller. Returns 0, BENCH_ETIMEDOUT, BENCH_EIO or BENCH_EPROTO.
 */
int bench_jws_execute(bench_jws_t *c, const char *code, bench_outcome_t *out);

/** Sends a close frame (1000) and closes the socket. Accepts a closed or zeroed client. */
void bench_jws_close(bench_jws_t *c);

#endif
