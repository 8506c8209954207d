/* kernels/bash/src/channels.c: binding the Jupyter sockets, and sending and receiving signed messages on them. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <zmq.h>
#include "wire/errors.h"
#include "channels.h"

int bk_channels_open(bk_channels_t *ch, const wire_connection_t *conn)
{
    static const int types[WIRE_CHANNEL_COUNT] = {ZMQ_ROUTER, ZMQ_PUB, ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_REP};

    wire_uuid4(ch->session);
    wire_signer_init(&ch->signer, conn->key, strlen(conn->key));
    ch->zctx = zmq_ctx_new();
    for (int c = 0; c != WIRE_CHANNEL_COUNT; ++c) {
        char endpoint[512];
        int linger = 1000;
        int64_t maxsize = BK_MAX_MESSAGE_BYTES;
        ch->sock[c] = zmq_socket(ch->zctx, types[c]);
        zmq_setsockopt(ch->sock[c], ZMQ_LINGER, &linger, sizeof(linger));
        zmq_setsockopt(ch->sock[c], ZMQ_MAXMSGSIZE, &maxsize, sizeof(maxsize));
        if (wire_connection_endpoint(conn, c, endpoint, sizeof(endpoint)) < 0 || zmq_bind(ch->sock[c], endpoint) != 0) {
            fprintf(stderr, "kgate-bash: cannot bind the %s socket to %s: %s\n", wire_channel_name(c), endpoint,
                    zmq_strerror(zmq_errno()));
            return -1;
        }
    }
    return 0;
}

void bk_channels_close(bk_channels_t *ch)
{
    for (int c = 0; c != WIRE_CHANNEL_COUNT; ++c)
        if (ch->sock[c] != NULL)
            zmq_close(ch->sock[c]);
    if (ch->zctx != NULL)
        zmq_ctx_term(ch->zctx);
    wire_signer_dispose(&ch->signer);
}

void bk_channels_send(bk_channels_t *ch, wire_channel_t channel, wire_msg_t *msg)
{
    wire_frames_t frames;

    wire_frames_init(&frames);
    wire_encode(&ch->signer, msg, &frames);
    for (size_t i = 0; i != frames.size; ++i)
        zmq_send(ch->sock[channel], frames.entries[i].base, frames.entries[i].len, i + 1 < frames.size ? ZMQ_SNDMORE : 0);
    wire_frames_dispose(&frames);
    wire_msg_destroy(msg);
}

void bk_channels_publish(bk_channels_t *ch, json_t *parent_header, const char *type, json_t *content)
{
    wire_msg_t *msg = wire_msg_create(type, ch->session, content);
    char topic[128];

    if (parent_header != NULL) {
        json_decref(msg->parent_header);
        msg->parent_header = json_incref(parent_header);
    }
    snprintf(topic, sizeof(topic), "kernel.%s.%s", ch->session, type);
    wire_frames_push_copy(&msg->identities, topic, strlen(topic));
    bk_channels_send(ch, WIRE_CHANNEL_IOPUB, msg);
}

void bk_channels_publish_status(bk_channels_t *ch, const wire_msg_t *parent, const char *state)
{
    bk_channels_publish(ch, parent->header, "status", json_pack("{ss}", "execution_state", state));
}

void bk_channels_reply(bk_channels_t *ch, wire_channel_t channel, const wire_msg_t *req, const char *type, json_t *content,
                       json_t *metadata)
{
    wire_msg_t *msg = wire_msg_create(type, ch->session, content);

    wire_msg_set_parent(msg, req);
    if (metadata != NULL) {
        json_decref(msg->metadata);
        msg->metadata = metadata;
    }
    bk_channels_send(ch, channel, msg);
}

int bk_channels_recv(bk_channels_t *ch, wire_channel_t channel, wire_msg_t **out)
{
    wire_frames_t frames;
    int more = 1, ret = 1;
    size_t total = 0;

    wire_frames_init(&frames);
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        /* Only the first frame may be absent; once it came, ZeroMQ delivers the rest of the message at once. */
        if (zmq_msg_recv(&part, ch->sock[channel], frames.size == 0 && total == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(&part);
            ret = frames.size == 0 ? 0 : -1;
            break;
        }
        more = zmq_msg_more(&part);
        total += zmq_msg_size(&part);
        /* Past the bounds the rest of the message is read and thrown away. */
        if (frames.size < BK_MAX_FRAMES && ret == 1)
            wire_frames_push_copy(&frames, zmq_msg_data(&part), zmq_msg_size(&part));
        else
            ret = -1;
        zmq_msg_close(&part);
    }
    if (ret == 1) {
        int err = wire_decode(&ch->signer, frames.entries, frames.size, out);
        if (err != 0) {
            fprintf(stderr, "kgate-bash: dropped a %s message: %s\n", wire_channel_name(channel), wire_strerror(err));
            ret = -1;
        }
    }
    wire_frames_dispose(&frames);
    return ret;
}

void bk_channels_echo_heartbeats(bk_channels_t *ch)
{
    for (;;) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, ch->sock[WIRE_CHANNEL_HB], ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            return;
        }
        int more = zmq_msg_more(&part);
        zmq_msg_send(&part, ch->sock[WIRE_CHANNEL_HB], more ? ZMQ_SNDMORE : 0);
        zmq_msg_close(&part);
    }
}
