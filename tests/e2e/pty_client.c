/* A client of kgate's PTY WebSocket for tests: connect, send stdin and control frames, sort what arrives by channel. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "support/api.h"
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"
#include "pty_client.h"

#define DISCONNECT_MS 2000

static void bytes_add(ptc_bytes_t *b, const void *data, size_t len)
{
    if (b->len + len + 1 > b->cap) {
        b->cap = (b->len + len + 1) * 2;
        b->base = realloc(b->base, b->cap);
    }
    memcpy(b->base + b->len, data, len);
    b->len += len;
    b->base[b->len] = '\0';
}

/* The body of a refused upgrade: what followed the head, up to its Content-Length. */
static void read_body(ptc_t *c, int64_t deadline_ms)
{
    char value[32];
    size_t want = wsc_header(&c->ws, "content-length", value, sizeof(value)) != NULL ? strtoul(value, NULL, 10) : 0, have;

    if (want >= sizeof(c->body))
        want = sizeof(c->body) - 1;
    have = c->ws.in_len < want ? c->ws.in_len : want;
    memcpy(c->body, c->ws.in, have);
    while (have < want) {
        struct pollfd pfd = {c->ws.fd, POLLIN, 0};
        int64_t left = deadline_ms - wsc_now_ms();
        ssize_t n;
        if (left <= 0 || poll(&pfd, 1, (int)left) <= 0 || (n = read(c->ws.fd, c->body + have, want - have)) <= 0)
            break;
        have += (size_t)n;
    }
    c->body[have] = '\0';
}

int ptc_connect(ptc_t *c, unsigned short port, const char *id, const char *query, const char *token, int64_t deadline_ms)
{
    char path[256], auth[256];
    const char *headers[] = {auth, NULL};
    wsc_msg_t msg;

    memset(c, 0, sizeof(*c));
    c->exit_code = -1;
    c->texts = json_array();
    snprintf(path, sizeof(path), "/pty/%s/ws%s", id, query);
    snprintf(auth, sizeof(auth), "X-EXECD-ACCESS-TOKEN: %s", token != NULL ? token : "");
    if (wsc_connect(&c->ws, port, path, token != NULL ? headers : NULL, deadline_ms) != 0) {
        snprintf(c->error, sizeof(c->error), "upgrade: HTTP %d: %s", c->ws.status, c->ws.error);
        if (c->ws.status != 0)
            read_body(c, deadline_ms);
        return -1;
    }
    if (wsc_recv(&c->ws, deadline_ms, &msg) != 0) {
        snprintf(c->error, sizeof(c->error), "no first frame: %s", c->ws.error);
        return -1;
    }
    if (msg.opcode == WSC_TEXT)
        c->connected = json_loadb((const char *)msg.data, msg.len, 0, NULL);
    if (c->connected == NULL || strcmp(json_string_value(json_object_get(c->connected, "type")) ?: "", "connected") != 0) {
        snprintf(c->error, sizeof(c->error), "the first frame is not `connected`: opcode %d, %.200s", msg.opcode, (char *)msg.data);
        free(msg.data);
        return -1;
    }
    free(msg.data);
    return 0;
}

int ptc_stdin(ptc_t *c, const char *text)
{
    size_t len = strlen(text);
    char *frame = malloc(len + 1);
    int ret;

    frame[0] = 0x00;
    memcpy(frame + 1, text, len);
    ret = wsc_send(&c->ws, WSC_BINARY, frame, len + 1);
    free(frame);
    return ret;
}

int ptc_text(ptc_t *c, const char *json)
{
    return wsc_send(&c->ws, WSC_TEXT, json, strlen(json));
}

int ptc_pump(ptc_t *c, int64_t deadline_ms)
{
    wsc_msg_t msg;
    json_t *text;

    if (c->closed)
        return -1;
    if (wsc_recv(&c->ws, deadline_ms, &msg) != 0) {
        snprintf(c->error, sizeof(c->error), "%s", c->ws.error);
        if (strstr(c->ws.error, "timed out") == NULL)
            c->closed = 1;
        return -1;
    }
    switch (msg.opcode) {
    case WSC_CLOSE:
        c->closed = 1;
        c->close_code = msg.close_code;
        if (msg.len > 2)
            snprintf(c->close_reason, sizeof(c->close_reason), "%.*s", (int)(msg.len - 2), (char *)msg.data + 2);
        break;
    case WSC_TEXT:
        if ((text = json_loadb((const char *)msg.data, msg.len, 0, NULL)) != NULL) {
            if (strcmp(json_string_value(json_object_get(text, "type")) ?: "", "exit") == 0)
                c->exit_code = (int)json_integer_value(json_object_get(text, "exit_code"));
            json_array_append_new(c->texts, text);
        }
        break;
    case WSC_BINARY:
        if (msg.len >= 1 && msg.data[0] == 0x01)
            bytes_add(&c->out, msg.data + 1, msg.len - 1);
        else if (msg.len >= 1 && msg.data[0] == 0x02)
            bytes_add(&c->err, msg.data + 1, msg.len - 1);
        else if (msg.len >= 9 && msg.data[0] == 0x03) {
            if (c->replays++ == 0)
                for (int i = 0; i != 8; ++i)
                    c->replay_start = c->replay_start << 8 | msg.data[1 + i];
            bytes_add(&c->replay, msg.data + 9, msg.len - 9);
        }
        break;
    }
    free(msg.data);
    return 0;
}

int ptc_wait_output(ptc_t *c, const char *needle, int in_stderr, int64_t deadline_ms)
{
    const ptc_bytes_t *b = in_stderr ? &c->err : &c->out;

    while (b->base == NULL || strstr(b->base, needle) == NULL)
        if (ptc_pump(c, deadline_ms) != 0)
            return -1;
    return 0;
}

int ptc_wait_close(ptc_t *c, int64_t deadline_ms)
{
    while (!c->closed)
        if (ptc_pump(c, deadline_ms) != 0 && !c->closed)
            return -1;
    return 0;
}

json_t *ptc_find_text(const ptc_t *c, const char *type)
{
    size_t i;
    json_t *frame;

    json_array_foreach(c->texts, i, frame)
    {
        if (strcmp(json_string_value(json_object_get(frame, "type")) ?: "", type) == 0)
            return frame;
    }
    return NULL;
}

void ptc_disconnect(ptc_t *c)
{
    static const uint8_t normal[] = {0x03, 0xe8};

    if (c->ws.fd > 0 && !c->closed && wsc_send(&c->ws, WSC_CLOSE, normal, sizeof(normal)) == 0)
        ptc_wait_close(c, wsc_now_ms() + DISCONNECT_MS);
    wsc_close(&c->ws);
}

void ptc_dispose(ptc_t *c)
{
    wsc_close(&c->ws);
    json_decref(c->connected);
    json_decref(c->texts);
    free(c->out.base);
    free(c->err.base);
    free(c->replay.base);
    memset(c, 0, sizeof(*c));
}

char *ptc_create(unsigned short port, const char *token, const char *body, int *status)
{
    char auth[256];
    const char *headers[] = {"Content-Type: application/json", token != NULL ? auth : NULL, NULL};
    ts_response_t r;
    char *id = NULL;

    snprintf(auth, sizeof(auth), "X-EXECD-ACCESS-TOKEN: %s", token != NULL ? token : "");
    *status = ts_http_request(port, "POST", "/pty", headers, body, &r);
    if (*status == 201 && json_is_string(json_object_get(r.json, "session_id")))
        id = strdup(json_string_value(json_object_get(r.json, "session_id")));
    ts_response_dispose(&r);
    return id;
}

long ptc_rss_kib(int pid)
{
    char path[64], line[256];
    long kib = -1;
    FILE *fp;

    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if ((fp = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof(line), fp) != NULL)
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(fp);
    return kib;
}
