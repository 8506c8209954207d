/* kernels/bash/src/channels.h: the kernel's five Jupyter sockets and the signed messages that cross them. */
#ifndef BK_CHANNELS_H
#define BK_CHANNELS_H

#include <jansson.h>
#include "wire/codec.h"
#include "wire/connfile.h"
#include "wire/ids.h"

/* Bounds on what a client can make the kernel hold while it receives one message. */
#define BK_MAX_FRAMES 64
#define BK_MAX_MESSAGE_BYTES (64 << 20)

/** The sockets (shell, iopub, stdin, control, heartbeat), the signing key and the session id every message carries. */
typedef struct st_bk_channels_t {
    void *zctx;
    void *sock[WIRE_CHANNEL_COUNT];
    wire_signer_t signer;
    char session[WIRE_UUID_STRLEN + 1];
} bk_channels_t;

/**
 * Keys the signer with `conn`'s key, picks a new session id and binds the sockets on `conn`'s endpoints
 * (ZMQ_MAXMSGSIZE is BK_MAX_MESSAGE_BYTES; a second of linger). Returns 0, or -1 after printing why to
 * stderr. In both cases `ch` holds what was opened until bk_channels_close; `conn` is not kept.
 */
int bk_channels_open(bk_channels_t *ch, const wire_connection_t *conn);

/** Closes what bk_channels_open opened and wipes the key. Accepts a zeroed or partly opened `ch`. */
void bk_channels_close(bk_channels_t *ch);

/** Signs `msg` and sends it on `channel` (to the identities it carries). Takes ownership of `msg`. */
void bk_channels_send(bk_channels_t *ch, wire_channel_t channel, wire_msg_t *msg);

/**
 * Publishes a message of `type` on iopub, under the topic "kernel.<session>.<type>". `parent_header`
 * (borrowed) may be NULL for output no request asked for. Steals `content`.
 */
void bk_channels_publish(bk_channels_t *ch, json_t *parent_header, const char *type, json_t *content);

/** Publishes the kernel's execution_state (`state`: "busy", "idle") while it serves `parent`. */
void bk_channels_publish_status(bk_channels_t *ch, const wire_msg_t *parent, const char *state);

/**
 * Sends a reply of `type` to `req` on `channel` (to the same identities). Steals `content` and
 * `metadata` (NULL: an empty object).
 */
void bk_channels_reply(bk_channels_t *ch, wire_channel_t channel, const wire_msg_t *req, const char *type, json_t *content,
                       json_t *metadata);

/**
 * Receives one message from `channel` without waiting for its first frame. Returns 1 (the caller owns
 * `*out`), 0 (none queued) or -1 (one was dropped: more than BK_MAX_FRAMES frames, or a bad signature
 * or form, which is printed to stderr). The rest of a dropped message is read and thrown away.
 */
int bk_channels_recv(bk_channels_t *ch, wire_channel_t channel, wire_msg_t **out);

/** Sends every queued heartbeat back as it came, without waiting. */
void bk_channels_echo_heartbeats(bk_channels_t *ch);

#endif
