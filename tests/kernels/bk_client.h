/* tests/kernels/bk_client.h: a minimal Jupyter client (DEALER/SUB/REQ) that drives kgate-bash-kernel in tests. */
#ifndef BK_CLIENT_H
#define BK_CLIENT_H

#include <stddef.h>
#include <sys/types.h>
#include "wire/connfile.h"
#include "wire/message.h"
#include "wire/signer.h"

typedef struct st_bk_client_t {
    char dir[128];       /* private directory with the connection file and ipc endpoints */
    char conn_path[192]; /* connection file */
    wire_connection_t conn;
    wire_signer_t signer;
    char session[40];
    pid_t pid; /* the kernel; 0 once reaped */
    void *zctx;
    void *sock[WIRE_CHANNEL_COUNT]; /* shell, iopub, stdin, control, hb; shell and stdin share one identity */
} bk_client_t;

/** What one execute_request produced. */
typedef struct st_bk_run_t {
    char *out, *err; /* concatenated stdout / stderr stream text (NUL-terminated) */
    size_t out_len, err_len;
    size_t streams;     /* number of stream messages */
    json_t *error;      /* content of the iopub error message, or NULL */
    json_t *reply;      /* execute_reply content, or NULL (timeout) */
    int idle;           /* the iopub idle for the request arrived */
    int input_requests; /* input_request messages answered */
    int execute_input;  /* execute_input messages seen */
    double ms;          /* request to reply-and-idle */
} bk_run_t;

/** Starts the kernel binary on a fresh ipc (or tcp when `tcp`) connection file, connects, waits until ready. */
void bk_client_start(bk_client_t *c, int tcp);
/** Shuts everything down: SIGTERM, SIGKILL after 2 s, reaps; closes sockets, removes files. */
void bk_client_stop(bk_client_t *c);

/** Sends a request on shell or control; returns its msg_id (caller frees). Steals `content`. */
char *bk_client_send(bk_client_t *c, wire_channel_t ch, const char *type, json_t *content);
/** Receives one message on `ch` within `timeout_ms`; NULL on timeout. */
wire_msg_t *bk_client_recv(bk_client_t *c, wire_channel_t ch, int timeout_ms);
/** Waits for the shell reply to `msg_id` (other replies are dropped); NULL on timeout. */
wire_msg_t *bk_client_reply(bk_client_t *c, const char *msg_id, int timeout_ms);

/**
 * Runs `code`; with `inputs` non-NULL, allow_stdin is true and each input_request is answered with
 * the next string (then ""). Waits for the reply and idle at most `timeout_ms`.
 */
void bk_client_run(bk_client_t *c, const char *code, const char *const *inputs, int timeout_ms, bk_run_t *run);
/** Like bk_client_run, but only sends; bk_client_collect then gathers the results for `msg_id`. */
char *bk_client_start_run(bk_client_t *c, const char *code, int allow_stdin);
void bk_client_collect(bk_client_t *c, const char *msg_id, const char *const *inputs, int timeout_ms, bk_run_t *run);
void bk_run_dispose(bk_run_t *run);

/** Status string of a run's reply ("ok", "error", or "" when there is none). */
const char *bk_run_status(const bk_run_t *run);

double bk_ms_since(const struct timespec *t0);

#endif
