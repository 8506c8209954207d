/* bench/jupyter_ws.c: a C client of a Jupyter kernel WebSocket in the v1 binary framing, for kgate and Jupyter Server alike. */
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <jansson.h>
#include "support/jframe.h"
#include "wire/alloc.h"
#include "wire/json_in.h"
#include "stats.h"
#include "jupyter_ws.h"

#define READY_RETRY_MS 500
#define MAX_READY_PROBES 64
#define DRAIN_FRAME_MS 2 /* how long draining waits for the rest of what it has begun to read */
#define V1_PARTS 5       /* channel, header, parent_header, metadata, content */

/* One received message: slices of the frame it came in (which the caller frees). */
typedef struct st_jws_msg_t {
    const char *part[V1_PARTS];
    size_t len[V1_PARTS];
} jws_msg_t;

static int ws_error(bench_jws_t *c, const char *what)
{
    bench_set_detail("%s: %s", what, c->ws.error);
    return c->ws.error[0] != '\0' && strncmp(c->ws.error, "timed out", 9) == 0 ? BENCH_ETIMEDOUT : BENCH_EIO;
}

int bench_jws_open(bench_jws_t *c, unsigned short port, const char *path, unsigned timeout_ms, int quickack)
{
    static const char *const headers[] = {"Sec-WebSocket-Protocol: " BENCH_JWS_V1_PROTOCOL, NULL};
    char proto[128];

    memset(c, 0, sizeof(*c));
    c->timeout_ms = timeout_ms;
    wire_uuid4(c->session);
    if (wsc_connect(&c->ws, port, path, headers, wsc_now_ms() + timeout_ms) != 0) {
        bench_set_detail("WebSocket upgrade of 127.0.0.1:%u%s: HTTP %d: %s", port, path, c->ws.status, c->ws.error);
        wsc_close(&c->ws);
        return BENCH_EIO;
    }
    if (wsc_header(&c->ws, "sec-websocket-protocol", proto, sizeof(proto)) == NULL || strcmp(proto, BENCH_JWS_V1_PROTOCOL) != 0) {
        bench_set_detail("127.0.0.1:%u%s did not select the %s subprotocol", port, path, BENCH_JWS_V1_PROTOCOL);
        wsc_close(&c->ws);
        return BENCH_EPROTO;
    }
    c->ws.quickack = quickack;
    c->open = 1;
    return 0;
}

void bench_jws_close(bench_jws_t *c)
{
    static const uint8_t normal[2] = {0x03, 0xe8};

    if (c->open)
        wsc_send(&c->ws, WSC_CLOSE, normal, sizeof(normal));
    if (c->open || c->ws.in != NULL)
        wsc_close(&c->ws);
    c->open = 0;
}

/* Sends a request on shell with a fresh msg_id (copied into `id`); `content` is JSON text. */
static int send_request(bench_jws_t *c, const char *msg_type, const char *content, char id[WIRE_UUID_STRLEN + 1])
{
    char header[512], date[64];
    struct timeval tv;
    struct tm tm;
    const char *parts[V1_PARTS];
    size_t total;
    uint8_t *frame;
    int err = 0;

    wire_uuid4(id);
    gettimeofday(&tv, NULL);
    gmtime_r(&tv.tv_sec, &tm);
    snprintf(date, sizeof(date), "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (long)tv.tv_usec);
    snprintf(
        header, sizeof(header),
        "{\"msg_id\":\"%s\",\"msg_type\":\"%s\",\"session\":\"%s\",\"username\":\"bench\",\"date\":\"%s\",\"version\":\"5.3\"}", id,
        msg_type, c->session, date);
    parts[0] = "shell";
    parts[1] = header;
    parts[2] = "{}";
    parts[3] = "{}";
    parts[4] = content;
    frame = ts_jframe_v1(parts, V1_PARTS, &total);
    if (wsc_send(&c->ws, WSC_BINARY, frame, total) != 0)
        err = ws_error(c, "sending a request");
    free(frame);
    return err;
}

/* Splits a v1 frame into its parts (the slices point into `m`). */
static int split(const wsc_msg_t *m, jws_msg_t *out)
{
    uint64_t n, prev;

    if (m->opcode != WSC_BINARY || m->len < 8 || (n = ts_jframe_le64(m->data)) < V1_PARTS + 1 || n > 4096 || m->len < 8 * (n + 1)) {
        bench_set_detail("a message that is not a v1 frame (opcode %d, %zu bytes)", m->opcode, m->len);
        return BENCH_EPROTO;
    }
    prev = ts_jframe_le64(m->data + 8);
    for (uint64_t i = 0; i != V1_PARTS; ++i) {
        uint64_t end = ts_jframe_le64(m->data + 16 + 8 * i);
        if (end < prev || end > m->len) {
            bench_set_detail("a v1 frame with bad offsets");
            return BENCH_EPROTO;
        }
        out->part[i] = (const char *)m->data + prev;
        out->len[i] = (size_t)(end - prev);
        prev = end;
    }
    return 0;
}

/* Receives one message before `deadline` (wsc_now_ms clock) into `m` (free m->data), skipping pings. */
static int recv_message(bench_jws_t *c, int64_t deadline, wsc_msg_t *m, jws_msg_t *msg)
{
    int err;

    if (wsc_recv(&c->ws, deadline, m) != 0)
        return ws_error(c, "receiving");
    if (m->opcode == WSC_CLOSE) {
        bench_set_detail("the server closed the WebSocket (code %u: %.*s)", m->close_code, m->len > 2 ? (int)m->len - 2 : 0,
                         m->len > 2 ? (const char *)m->data + 2 : "");
        free(m->data);
        return BENCH_EIO;
    }
    if ((err = split(m, msg)) != 0)
        free(m->data);
    return err;
}

static int part_is(const jws_msg_t *msg, int i, const char *s)
{
    size_t n = strlen(s);
    return msg->len[i] == n && memcmp(msg->part[i], s, n) == 0;
}

/* The string `key` of a parsed part, or "". */
static const char *str_of(json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s != NULL ? s : "";
}

/* 1 when the message's parent is the request `id`: its parent_header is parsed, as a gateway's client must. */
static int is_child_of(const jws_msg_t *msg, const char *id)
{
    json_t *parent = wire_json_parse(msg->part[2], msg->len[2]);
    int yes = strcmp(str_of(parent, "msg_id"), id) == 0;
    json_decref(parent);
    return yes;
}

/*
 * Discards the messages that are readable now, without waiting for more: a frame still arriving
 * stays buffered (the next read completes it), and a lone ping (kgate and Jupyter Server both ping
 * idle sockets) is answered and costs at most DRAIN_FRAME_MS.
 */
static int drain(bench_jws_t *c)
{
    for (;;) {
        struct pollfd pfd = {c->ws.fd, POLLIN, 0};
        wsc_msg_t m;
        if (c->ws.in_len == 0 && poll(&pfd, 1, 0) <= 0)
            return 0;
        if (wsc_recv(&c->ws, wsc_now_ms() + DRAIN_FRAME_MS, &m) != 0)
            return strncmp(c->ws.error, "timed out", 9) == 0 ? 0 : ws_error(c, "draining");
        free(m.data);
        if (m.opcode == WSC_CLOSE) {
            bench_set_detail("the server closed the WebSocket (code %u)", m.close_code);
            return BENCH_EIO;
        }
    }
}

int bench_jws_wait_ready(bench_jws_t *c)
{
    char ids[MAX_READY_PROBES][WIRE_UUID_STRLEN + 1];
    /* per probe: bit 0 its reply came, bit 1 an iopub message of it came, bit 2 its idle came */
    unsigned char seen[MAX_READY_PROBES] = {0};
    size_t sent = 0;
    int ready = 0, answered = 0, err;
    int64_t deadline = wsc_now_ms() + c->timeout_ms, next_probe = 0;

    while (!ready) {
        int64_t now = wsc_now_ms(), until;
        wsc_msg_t m;
        jws_msg_t msg;
        if (now >= deadline) {
            bench_set_detail("no kernel_info_reply and iopub idle for %zu kernel_info_requests within %u ms", sent, c->timeout_ms);
            return BENCH_ETIMEDOUT;
        }
        /* an answered probe whose iopub does not come (the subscription was not live yet): probe again */
        if (answered && now >= next_probe + READY_RETRY_MS)
            answered = 0;
        /* probe again only while nothing answered: an answered probe's idle is on its way */
        if (!answered && now >= next_probe && sent < MAX_READY_PROBES) {
            if ((err = send_request(c, "kernel_info_request", "{}", ids[sent])) != 0)
                return err;
            ++sent;
            next_probe = now + READY_RETRY_MS;
        }
        until = next_probe + (answered ? READY_RETRY_MS : 0);
        until = until < deadline ? until : deadline;
        if (wsc_recv(&c->ws, until, &m) != 0) {
            if (wsc_now_ms() < until)
                return ws_error(c, "waiting for the kernel");
            continue;
        }
        if (m.opcode == WSC_CLOSE || (err = split(&m, &msg)) != 0) {
            if (m.opcode == WSC_CLOSE)
                bench_set_detail("the server closed the WebSocket (code %u)", m.close_code);
            free(m.data);
            return m.opcode == WSC_CLOSE ? BENCH_EIO : err;
        }
        json_t *parent = wire_json_parse(msg.part[2], msg.len[2]);
        const char *pid = str_of(parent, "msg_id");
        for (size_t i = 0; i != sent; ++i) {
            if (strcmp(pid, ids[i]) != 0)
                continue;
            if (part_is(&msg, 0, "shell")) {
                seen[i] |= 1;
                answered = 1;
            } else if (part_is(&msg, 0, "iopub")) {
                json_t *content = wire_json_parse(msg.part[4], msg.len[4]);
                seen[i] |= strcmp(str_of(content, "execution_state"), "idle") == 0 ? 6 : 2;
                json_decref(content);
            }
            ready = seen[i] == 7;
            break;
        }
        json_decref(parent);
        free(m.data);
    }
    /* the other probes' replies and messages may still come: the next execute drains them */
    return 0;
}

/* Records what a message of our request says. Returns 1 for the execute_reply, 2 for iopub `status: idle`. */
static int on_message(const jws_msg_t *msg, bench_outcome_t *out)
{
    json_t *header = wire_json_parse(msg->part[1], msg->len[1]), *content = NULL;
    const char *type = str_of(header, "msg_type");
    int ret = 0;

    if (part_is(msg, 0, "shell") && strcmp(type, "execute_reply") == 0) {
        content = wire_json_parse(msg->part[4], msg->len[4]);
        const char *status = str_of(content, "status");
        if (strcmp(status, "ok") != 0) {
            char buf[512];
            snprintf(buf, sizeof(buf), "%s: %s",
                     content != NULL && json_object_get(content, "ename") ? str_of(content, "ename") : status,
                     str_of(content, "evalue"));
            free(out->error);
            out->error = wire_strdup(buf);
        }
        ret = 1;
    } else if (part_is(msg, 0, "iopub")) {
        content = wire_json_parse(msg->part[4], msg->len[4]);
        if (strcmp(type, "status") == 0) {
            ret = strcmp(str_of(content, "execution_state"), "idle") == 0 ? 2 : 0;
        } else if (strcmp(type, "stream") == 0) {
            ++out->stream_messages;
            if (strcmp(str_of(content, "name"), "stdout") == 0)
                out->stdout_bytes += json_string_length(json_object_get(content, "text"));
        } else if ((strcmp(type, "execute_result") == 0 || strcmp(type, "display_data") == 0) && out->result_text == NULL) {
            const char *text = json_string_value(json_object_get(json_object_get(content, "data"), "text/plain"));
            if (text != NULL)
                out->result_text = wire_strdup(text);
        }
    }
    json_decref(content);
    json_decref(header);
    return ret;
}

int bench_jws_execute(bench_jws_t *c, const char *code, bench_outcome_t *out)
{
    char id[WIRE_UUID_STRLEN + 1];
    int err, got_reply = 0, got_idle = 0;
    json_t *content = json_pack("{sssbsbs{}sbsb}", "code", code, "silent", 0, "store_history", 1, "user_expressions", "allow_stdin",
                                0, "stop_on_error", 1);

    memset(out, 0, sizeof(*out));
    if ((err = drain(c)) != 0) {
        json_decref(content);
        return err;
    }
    /* as the direct client does: the content is packed before the clock starts, serialised after */
    double t0 = bench_now_ms();
    int64_t deadline = wsc_now_ms() + c->timeout_ms;
    char *text = json_dumps(content, JSON_COMPACT);
    json_decref(content);
    err = send_request(c, "execute_request", text, id);
    free(text);
    while (err == 0 && (!got_reply || !got_idle)) {
        wsc_msg_t m;
        jws_msg_t msg;
        if ((err = recv_message(c, deadline, &m, &msg)) != 0) {
            if (err == BENCH_ETIMEDOUT)
                bench_set_detail("execute_request: %s within %u ms", got_reply ? "no idle status" : "no execute_reply",
                                 c->timeout_ms);
            break;
        }
        if (is_child_of(&msg, id)) {
            int what = on_message(&msg, out);
            got_reply |= what == 1;
            got_idle |= what == 2;
        }
        free(m.data);
    }
    if (err == 0)
        out->ms = bench_now_ms() - t0;
    return err;
}
