/* bench/direct_client.c: a direct ZeroMQ client of a Jupyter kernel, the benchmark's baseline. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/connfile.h"
#include "wire/errors.h"
#include "wire/message.h"
#include "stats.h"
#include "direct_client.h"

#define MAX_FRAMES 1024
#define READY_RETRY_MS 200
#define MAX_READY_PROBES 256

static int zmq_error(const char *what)
{
    bench_set_detail("%s: %s", what, zmq_strerror(zmq_errno()));
    return BENCH_EZMQ;
}

int bench_direct_open(bench_direct_t *d, const char *connection_file, unsigned timeout_ms)
{
    wire_connection_t conn;
    char endpoint[512], iopub[512];
    int err = wire_connection_read(connection_file, &conn);
    memset(d, 0, sizeof(*d));
    if (err != 0) {
        bench_set_detail("%s: %s", connection_file, wire_strerror(err));
        return BENCH_EIO;
    }
    d->timeout_ms = timeout_ms;
    wire_uuid4(d->session);
    wire_signer_init(&d->signer, conn.key, strlen(conn.key));
    d->zctx = zmq_ctx_new();
    d->shell = zmq_socket(d->zctx, ZMQ_DEALER);
    d->iopub = zmq_socket(d->zctx, ZMQ_SUB);
    if (d->shell == NULL || d->iopub == NULL) {
        err = zmq_error("zmq_socket");
        goto Exit;
    }
    int zero = 0;
    zmq_setsockopt(d->shell, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_setsockopt(d->iopub, ZMQ_LINGER, &zero, sizeof(zero));
    /* No receive bound: between this client's executes (a concurrency case's kgate rounds) the kernel's iopub carries
     * kgate's runs, unread here. With ZMQ's default bound of 1000 messages the backlog backed up into the kernel's
     * PUB, which then dropped what it published next, this client's own status idle among it: "no idle status within
     * 60000 ms" once in a few runs. drain_pending discards the backlog; memory is bounded by one round's traffic. */
    zmq_setsockopt(d->iopub, ZMQ_RCVHWM, &zero, sizeof(zero));
    if (zmq_setsockopt(d->iopub, ZMQ_SUBSCRIBE, "", 0) != 0) {
        err = zmq_error("ZMQ_SUBSCRIBE");
        goto Exit;
    }
    if (wire_connection_endpoint(&conn, WIRE_CHANNEL_SHELL, endpoint, sizeof(endpoint)) < 0 ||
        wire_connection_endpoint(&conn, WIRE_CHANNEL_IOPUB, iopub, sizeof(iopub)) < 0) {
        bench_set_detail("%s: cannot form the kernel's endpoints", connection_file);
        err = BENCH_EIO;
        goto Exit;
    }
    if (zmq_connect(d->shell, endpoint) != 0) {
        err = zmq_error(endpoint);
        goto Exit;
    }
    if (zmq_connect(d->iopub, iopub) != 0) {
        err = zmq_error(iopub);
        goto Exit;
    }
Exit:
    wire_connection_dispose(&conn);
    if (err != 0)
        bench_direct_close(d);
    return err;
}

void bench_direct_close(bench_direct_t *d)
{
    if (d->shell != NULL)
        zmq_close(d->shell);
    if (d->iopub != NULL)
        zmq_close(d->iopub);
    if (d->zctx != NULL) {
        zmq_ctx_term(d->zctx);
        wire_signer_dispose(&d->signer);
    }
    memset(d, 0, sizeof(*d));
}

/* Sends a new request of `msg_type` on shell; its msg_id is copied into `id`. */
static int send_request(bench_direct_t *d, const char *msg_type, json_t *content, char id[WIRE_UUID_STRLEN + 1])
{
    wire_msg_t *msg = wire_msg_create(msg_type, d->session, content);
    wire_frames_t frames;
    int err = 0;
    snprintf(id, WIRE_UUID_STRLEN + 1, "%s", wire_msg_id(msg));
    wire_frames_init(&frames);
    wire_encode(&d->signer, msg, &frames);
    for (size_t i = 0; i < frames.size; ++i) {
        if (zmq_send(d->shell, frames.entries[i].base, frames.entries[i].len, i + 1 < frames.size ? ZMQ_SNDMORE : 0) < 0) {
            err = zmq_error("zmq_send");
            break;
        }
    }
    wire_frames_dispose(&frames);
    wire_msg_destroy(msg);
    return err;
}

/* Receives one multipart message if one is waiting (*out NULL otherwise) and decodes it. */
static int recv_message(bench_direct_t *d, void *sock, wire_msg_t **out)
{
    zmq_msg_t parts[MAX_FRAMES];
    wire_frame_t frames[MAX_FRAMES];
    size_t n = 0;
    int err = 0, more = 1, flags = ZMQ_DONTWAIT;
    *out = NULL;
    while (more) {
        if (n == MAX_FRAMES) {
            bench_set_detail("a kernel message has more than %d frames", MAX_FRAMES);
            err = BENCH_EWIRE;
            goto Exit;
        }
        zmq_msg_init(&parts[n]);
        if (zmq_msg_recv(&parts[n], sock, flags) < 0) {
            zmq_msg_close(&parts[n]);
            if (zmq_errno() == EAGAIN && n == 0)
                goto Exit;
            if (zmq_errno() == EINTR && n == 0)
                goto Exit;
            err = zmq_error("zmq_msg_recv");
            goto Exit;
        }
        frames[n].base = zmq_msg_data(&parts[n]);
        frames[n].len = zmq_msg_size(&parts[n]);
        more = zmq_msg_more(&parts[n]);
        ++n;
        flags = 0; /* the rest of a multipart message is already there */
    }
    int werr = wire_decode(&d->signer, frames, n, out);
    if (werr != 0) {
        /* A bad signature means a wrong key, which would otherwise look like a hung kernel. */
        bench_set_detail("decoding a kernel message: %s", wire_strerror(werr));
        err = BENCH_EWIRE;
    }
Exit:
    for (size_t i = 0; i < n; ++i)
        zmq_msg_close(&parts[i]);
    return err;
}

/* Waits until either socket is readable or `deadline` (bench_now_ms) passes. */
static int wait_readable(bench_direct_t *d, double deadline, int *shell_ready, int *iopub_ready)
{
    zmq_pollitem_t items[2] = {{d->shell, 0, ZMQ_POLLIN, 0}, {d->iopub, 0, ZMQ_POLLIN, 0}};
    double left = deadline - bench_now_ms();
    if (left <= 0)
        return BENCH_ETIMEDOUT;
    int r = zmq_poll(items, 2, (long)left + 1);
    if (r < 0 && zmq_errno() != EINTR)
        return zmq_error("zmq_poll");
    *shell_ready = r > 0 && (items[0].revents & ZMQ_POLLIN);
    *iopub_ready = r > 0 && (items[1].revents & ZMQ_POLLIN);
    return 0;
}

int bench_direct_wait_ready(bench_direct_t *d)
{
    char ids[MAX_READY_PROBES][WIRE_UUID_STRLEN + 1];
    size_t sent = 0, replies = 0;
    int subscribed = 0, err = 0;
    double deadline = bench_now_ms() + d->timeout_ms, next_probe = 0;
    while (!subscribed || replies < sent) {
        double now = bench_now_ms();
        if (now >= deadline) {
            bench_set_detail("the kernel gave no iopub message for %zu kernel_info_requests within %u ms", sent, d->timeout_ms);
            return BENCH_ETIMEDOUT;
        }
        if (!subscribed && now >= next_probe && sent < MAX_READY_PROBES) {
            if ((err = send_request(d, "kernel_info_request", NULL, ids[sent])) != 0)
                return err;
            ++sent;
            next_probe = now + READY_RETRY_MS;
        }
        int shell_ready, iopub_ready;
        double until = !subscribed && next_probe < deadline ? next_probe : deadline;
        if ((err = wait_readable(d, until, &shell_ready, &iopub_ready)) != 0 && err != BENCH_ETIMEDOUT)
            return err;
        for (int ch = 0; ch < 2; ++ch) {
            wire_msg_t *msg;
            do {
                if ((err = recv_message(d, ch == 0 ? d->shell : d->iopub, &msg)) != 0)
                    return err;
                if (msg == NULL)
                    break;
                const char *parent = wire_msg_parent_id(msg);
                for (size_t i = 0; i < sent; ++i) {
                    if (strcmp(parent, ids[i]) != 0)
                        continue;
                    if (ch == 0)
                        ++replies;
                    else
                        subscribed = 1;
                    break;
                }
                wire_msg_destroy(msg);
            } while (1);
        }
    }
    return 0;
}

/* Records what an iopub message of our request says; returns 1 for `status: idle`. */
static int on_iopub(const wire_msg_t *msg, bench_outcome_t *out)
{
    const char *type = wire_msg_type(msg);
    if (strcmp(type, "status") == 0) {
        const char *state = json_string_value(json_object_get(msg->content, "execution_state"));
        return state != NULL && strcmp(state, "idle") == 0;
    }
    if (strcmp(type, "stream") == 0) {
        ++out->stream_messages;
        const char *name = json_string_value(json_object_get(msg->content, "name"));
        if (name != NULL && strcmp(name, "stdout") == 0)
            out->stdout_bytes += json_string_length(json_object_get(msg->content, "text"));
    } else if (strcmp(type, "execute_result") == 0 || strcmp(type, "display_data") == 0) {
        const char *text = json_string_value(json_object_get(json_object_get(msg->content, "data"), "text/plain"));
        if (text != NULL && out->result_text == NULL)
            out->result_text = wire_strdup(text);
    }
    return 0;
}

static void on_reply(const wire_msg_t *msg, bench_outcome_t *out)
{
    const char *status = json_string_value(json_object_get(msg->content, "status"));
    if (status != NULL && strcmp(status, "ok") == 0)
        return;
    const char *ename = json_string_value(json_object_get(msg->content, "ename"));
    const char *evalue = json_string_value(json_object_get(msg->content, "evalue"));
    char buf[512];
    snprintf(buf, sizeof(buf), "%s: %s", ename != NULL ? ename : status != NULL ? status : "?", evalue != NULL ? evalue : "");
    free(out->error);
    out->error = wire_strdup(buf);
}

/* Discards what arrived since the last execute: the SUB also receives the iopub traffic of kgate's
 * runs in the same kernel, and decoding it must not be billed to the next timed execute. The frames
 * are dropped undecoded: after a streaming case that is tens of MB of JSON nobody reads. */
static int drain_pending(bench_direct_t *d)
{
    for (int ch = 0; ch < 2; ++ch) {
        void *sock = ch == 0 ? d->shell : d->iopub;
        zmq_msg_t part;
        for (;;) {
            zmq_msg_init(&part);
            int r = zmq_msg_recv(&part, sock, ZMQ_DONTWAIT);
            zmq_msg_close(&part);
            if (r >= 0)
                continue; /* the frames of one message, and the next message, alike */
            if (zmq_errno() == EAGAIN)
                break;
            if (zmq_errno() != EINTR)
                return zmq_error("zmq_msg_recv");
        }
    }
    return 0;
}

int bench_direct_execute(bench_direct_t *d, const char *code, bench_outcome_t *out)
{
    char id[WIRE_UUID_STRLEN + 1];
    int err, got_reply = 0, got_idle = 0;
    memset(out, 0, sizeof(*out));
    json_t *content = json_pack("{sssbsbs{}sbsb}", "code", code, "silent", 0, "store_history", 1, "user_expressions", "allow_stdin",
                                0, "stop_on_error", 1);
    if ((err = drain_pending(d)) != 0) {
        json_decref(content);
        return err;
    }
    double t0 = bench_now_ms(), deadline = t0 + d->timeout_ms;
    if ((err = send_request(d, "execute_request", content, id)) != 0)
        return err;
    while (!got_reply || !got_idle) {
        int shell_ready, iopub_ready;
        if ((err = wait_readable(d, deadline, &shell_ready, &iopub_ready)) != 0) {
            if (err == BENCH_ETIMEDOUT)
                bench_set_detail("execute_request: %s within %u ms", got_reply ? "no idle status" : "no execute_reply",
                                 d->timeout_ms);
            return err;
        }
        /* Drain both sockets each wakeup: ZMQ's readiness is edge-like (PLATFORM.md). */
        for (int ch = 0; ch < 2; ++ch) {
            wire_msg_t *msg;
            while ((err = recv_message(d, ch == 0 ? d->shell : d->iopub, &msg)) == 0 && msg != NULL) {
                if (strcmp(wire_msg_parent_id(msg), id) == 0) {
                    if (ch == 0 && strcmp(wire_msg_type(msg), "execute_reply") == 0) {
                        on_reply(msg, out);
                        got_reply = 1;
                    } else if (ch == 1 && on_iopub(msg, out)) {
                        got_idle = 1;
                    }
                }
                wire_msg_destroy(msg);
            }
            if (err != 0)
                return err;
        }
    }
    out->ms = bench_now_ms() - t0;
    return 0;
}
