/* tests/kernels/bk_client.c: a minimal Jupyter client for the bash kernel's tests. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/ids.h"
#include "bk_client.h"

#define KERNEL_BIN KGATE_BINARY_DIR "/kernels/bash/kgate-bash-kernel"

double bk_ms_since(const struct timespec *t0)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)(now.tv_sec - t0->tv_sec) * 1e3 + (double)(now.tv_nsec - t0->tv_nsec) / 1e6;
}

/* A free TCP port on 127.0.0.1 (bind to 0 and close: racy, so only the one tcp test uses it). */
static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    cr_assert(fd >= 0);
    cr_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    cr_assert(getsockname(fd, (struct sockaddr *)&sa, &len) == 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static void send_frames(void *sock, const wire_frames_t *frames)
{
    for (size_t i = 0; i != frames->size; ++i)
        zmq_send(sock, frames->entries[i].base, frames->entries[i].len, i + 1 < frames->size ? ZMQ_SNDMORE : 0);
}

static wire_msg_t *recv_now(bk_client_t *c, wire_channel_t ch)
{
    wire_frames_t frames;
    wire_msg_t *msg = NULL;
    int more = 1;

    wire_frames_init(&frames);
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, c->sock[ch], frames.size == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(&part);
            break;
        }
        more = zmq_msg_more(&part);
        wire_frames_push_copy(&frames, zmq_msg_data(&part), zmq_msg_size(&part));
        zmq_msg_close(&part);
    }
    if (frames.size != 0)
        cr_assert_eq(wire_decode(&c->signer, frames.entries, frames.size, &msg), 0, "bad message on %s", wire_channel_name(ch));
    wire_frames_dispose(&frames);
    return msg;
}

wire_msg_t *bk_client_recv(bk_client_t *c, wire_channel_t ch, int timeout_ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        wire_msg_t *msg = recv_now(c, ch);
        if (msg != NULL)
            return msg;
        int left = timeout_ms - (int)bk_ms_since(&t0);
        if (left <= 0)
            return NULL;
        zmq_pollitem_t item = {.socket = c->sock[ch], .events = ZMQ_POLLIN};
        zmq_poll(&item, 1, left);
    }
}

static void send_msg(bk_client_t *c, wire_channel_t ch, wire_msg_t *msg)
{
    wire_frames_t frames;
    wire_frames_init(&frames);
    wire_encode(&c->signer, msg, &frames);
    send_frames(c->sock[ch], &frames);
    wire_frames_dispose(&frames);
}

char *bk_client_send(bk_client_t *c, wire_channel_t ch, const char *type, json_t *content)
{
    wire_msg_t *msg = wire_msg_create(type, c->session, content);
    char *id = wire_strdup(wire_msg_id(msg));
    send_msg(c, ch, msg);
    wire_msg_destroy(msg);
    return id;
}

wire_msg_t *bk_client_reply(bk_client_t *c, const char *msg_id, int timeout_ms)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int left = timeout_ms - (int)bk_ms_since(&t0);
        wire_msg_t *msg = bk_client_recv(c, WIRE_CHANNEL_SHELL, left > 0 ? left : 0);
        if (msg == NULL)
            msg = bk_client_recv(c, WIRE_CHANNEL_CONTROL, 0);
        if (msg == NULL) {
            if (left <= 0)
                return NULL;
            continue;
        }
        if (strcmp(wire_msg_parent_id(msg), msg_id) == 0)
            return msg;
        wire_msg_destroy(msg);
    }
}

void bk_client_start(bk_client_t *c, int tcp)
{
    static const int types[WIRE_CHANNEL_COUNT] = {ZMQ_DEALER, ZMQ_SUB, ZMQ_DEALER, ZMQ_DEALER, ZMQ_REQ};
    char key[65], ipc_prefix[160];

    memset(c, 0, sizeof(*c));
    wire_global_init();
    snprintf(c->dir, sizeof(c->dir), "/tmp/kgate-bktest-XXXXXX");
    cr_assert_not_null(mkdtemp(c->dir));
    snprintf(c->conn_path, sizeof(c->conn_path), "%s/conn.json", c->dir);
    snprintf(ipc_prefix, sizeof(ipc_prefix), "%s/k", c->dir);
    wire_random_hex(key, 32);
    c->conn.transport = wire_strdup(tcp ? "tcp" : "ipc");
    c->conn.ip = wire_strdup(tcp ? "127.0.0.1" : ipc_prefix);
    for (int i = 0; i != WIRE_CHANNEL_COUNT; ++i)
        c->conn.ports[i] = tcp ? free_port() : i + 1;
    c->conn.key = wire_strdup(key);
    c->conn.signature_scheme = wire_strdup("hmac-sha256");
    c->conn.kernel_name = wire_strdup("bash");
    cr_assert_eq(wire_connection_write(&c->conn, c->conn_path), 0);
    wire_signer_init(&c->signer, key, strlen(key));
    wire_uuid4(c->session);

    c->pid = fork();
    cr_assert(c->pid >= 0);
    if (c->pid == 0) {
        setsid();
        execl(KERNEL_BIN, KERNEL_BIN, "-f", c->conn_path, (char *)NULL);
        _exit(127);
    }

    c->zctx = zmq_ctx_new();
    for (int ch = 0; ch != WIRE_CHANNEL_COUNT; ++ch) {
        char endpoint[256];
        int linger = 0;
        c->sock[ch] = zmq_socket(c->zctx, types[ch]);
        zmq_setsockopt(c->sock[ch], ZMQ_LINGER, &linger, sizeof(linger));
        if (ch == WIRE_CHANNEL_SHELL || ch == WIRE_CHANNEL_STDIN)
            zmq_setsockopt(c->sock[ch], ZMQ_ROUTING_ID, c->session, strlen(c->session));
        if (ch == WIRE_CHANNEL_IOPUB)
            zmq_setsockopt(c->sock[ch], ZMQ_SUBSCRIBE, "", 0);
        cr_assert(wire_connection_endpoint(&c->conn, ch, endpoint, sizeof(endpoint)) > 0);
        cr_assert_eq(zmq_connect(c->sock[ch], endpoint), 0);
    }

    /* Ready once an iopub status arrives: iopub messages sent before the subscription are lost. */
    for (int tries = 0; tries != 100; ++tries) {
        char *id = bk_client_send(c, WIRE_CHANNEL_SHELL, "kernel_info_request", NULL);
        wire_msg_t *st = bk_client_recv(c, WIRE_CHANNEL_IOPUB, 100);
        free(id);
        if (st != NULL) {
            wire_msg_destroy(st);
            break;
        }
        cr_assert(tries != 99, "kernel did not become ready");
    }
    /* Drop what the readiness probes produced. */
    for (wire_msg_t *m; (m = bk_client_recv(c, WIRE_CHANNEL_SHELL, 200)) != NULL;)
        wire_msg_destroy(m);
    for (wire_msg_t *m; (m = bk_client_recv(c, WIRE_CHANNEL_IOPUB, 50)) != NULL;)
        wire_msg_destroy(m);
}

void bk_client_stop(bk_client_t *c)
{
    if (c->pid > 0) {
        int st;
        pid_t r = 0;
        kill(c->pid, SIGTERM);
        for (int i = 0; i != 200 && (r = waitpid(c->pid, &st, WNOHANG)) == 0; ++i)
            usleep(10000);
        if (r == 0) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &st, 0);
        }
        c->pid = 0;
    }
    for (int ch = 0; ch != WIRE_CHANNEL_COUNT; ++ch)
        if (c->sock[ch] != NULL)
            zmq_close(c->sock[ch]);
    if (c->zctx != NULL)
        zmq_ctx_term(c->zctx);
    wire_signer_dispose(&c->signer);
    unlink(c->conn_path);
    /* ipc endpoint files stay behind when the kernel goes (removing them is the client's job, as in
     * jupyter_client). */
    for (int ch = 0; ch != WIRE_CHANNEL_COUNT; ++ch) {
        char path[256];
        snprintf(path, sizeof(path), "%s/k-%d", c->dir, c->conn.ports[ch]);
        unlink(path);
    }
    rmdir(c->dir);
    wire_connection_dispose(&c->conn);
}

char *bk_client_start_run(bk_client_t *c, const char *code, int allow_stdin)
{
    return bk_client_send(c, WIRE_CHANNEL_SHELL, "execute_request",
                          json_pack("{sssbsbs{}sbsb}", "code", code, "silent", 0, "store_history", 1, "user_expressions",
                                    "allow_stdin", allow_stdin, "stop_on_error", 1));
}

static void append(char **buf, size_t *len, const char *s, size_t n)
{
    *buf = wire_realloc(*buf, *len + n + 1);
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
}

void bk_client_collect(bk_client_t *c, const char *msg_id, const char *const *inputs, int timeout_ms, bk_run_t *run)
{
    struct timespec t0;
    size_t next_input = 0;

    memset(run, 0, sizeof(*run));
    run->out = wire_strdup("");
    run->err = wire_strdup("");
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!(run->reply != NULL && run->idle)) {
        int left = timeout_ms - (int)bk_ms_since(&t0);
        zmq_pollitem_t items[3] = {{.socket = c->sock[WIRE_CHANNEL_SHELL], .events = ZMQ_POLLIN},
                                   {.socket = c->sock[WIRE_CHANNEL_IOPUB], .events = ZMQ_POLLIN},
                                   {.socket = c->sock[WIRE_CHANNEL_STDIN], .events = ZMQ_POLLIN}};
        if (left <= 0)
            break;
        zmq_poll(items, 3, left);
        wire_msg_t *m;
        while ((m = recv_now(c, WIRE_CHANNEL_SHELL)) != NULL) {
            if (strcmp(wire_msg_parent_id(m), msg_id) == 0 && strcmp(wire_msg_type(m), "execute_reply") == 0)
                run->reply = json_incref(m->content);
            wire_msg_destroy(m);
        }
        while ((m = recv_now(c, WIRE_CHANNEL_IOPUB)) != NULL) {
            const char *type = wire_msg_type(m);
            if (strcmp(wire_msg_parent_id(m), msg_id) != 0) {
                wire_msg_destroy(m);
                continue;
            }
            if (strcmp(type, "stream") == 0) {
                const char *name = json_string_value(json_object_get(m->content, "name"));
                json_t *text = json_object_get(m->content, "text");
                if (strcmp(name, "stdout") == 0)
                    append(&run->out, &run->out_len, json_string_value(text), json_string_length(text));
                else
                    append(&run->err, &run->err_len, json_string_value(text), json_string_length(text));
                run->streams++;
            } else if (strcmp(type, "error") == 0) {
                run->error = json_incref(m->content);
            } else if (strcmp(type, "execute_input") == 0) {
                run->execute_input++;
            } else if (strcmp(type, "status") == 0 &&
                       strcmp(json_string_value(json_object_get(m->content, "execution_state")), "idle") == 0) {
                run->idle = 1;
            }
            wire_msg_destroy(m);
        }
        while ((m = recv_now(c, WIRE_CHANNEL_STDIN)) != NULL) {
            if (strcmp(wire_msg_type(m), "input_request") == 0 && strcmp(wire_msg_parent_id(m), msg_id) == 0) {
                const char *value = inputs != NULL && inputs[next_input] != NULL ? inputs[next_input++] : "";
                wire_msg_t *r = wire_msg_create("input_reply", c->session, json_pack("{ss}", "value", value));
                /* Every other reply without a parent_header, as jupyter_client sends them. */
                if (run->input_requests % 2 == 0) {
                    json_decref(r->parent_header);
                    r->parent_header = json_incref(m->header);
                }
                send_msg(c, WIRE_CHANNEL_STDIN, r);
                wire_msg_destroy(r);
                run->input_requests++;
            }
            wire_msg_destroy(m);
        }
    }
    run->ms = bk_ms_since(&t0);
}

void bk_client_run(bk_client_t *c, const char *code, const char *const *inputs, int timeout_ms, bk_run_t *run)
{
    char *id = bk_client_start_run(c, code, inputs != NULL);
    bk_client_collect(c, id, inputs, timeout_ms, run);
    free(id);
}

void bk_run_dispose(bk_run_t *run)
{
    free(run->out);
    free(run->err);
    json_decref(run->error);
    json_decref(run->reply);
    memset(run, 0, sizeof(*run));
}

const char *bk_run_status(const bk_run_t *run)
{
    const char *s = json_string_value(json_object_get(run->reply, "status"));
    return s != NULL ? s : "";
}
