/* kernels/bash/src/kernel.c: the bash kernel's sockets, request handlers and single-threaded poll loop.
 * Over 600 lines (about 750) on purpose: its sections (messages, output
 * streams, jobs, handlers, stdin, the loop) all work on the one bk_kernel_t and its in-flight job,
 * and are read top to bottom as one request's path; the pure parts already live apart (shell.c,
 * syntax.c, proc.c). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zmq.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "wire/codec.h"
#include "wire/errors.h"
#include "wire/ids.h"
#include "proc.h"
#include "shell.h"
#include "syntax.h"
#include "utf8.h"
#include "kernel.h"

#ifndef KGATE_VERSION
#define KGATE_VERSION "0.0.0"
#endif

/* Output is read in chunks of READ_CHUNK and published once FLUSH_BYTES are buffered or FLUSH_MS after
 * the first unpublished byte: streamed as produced, without one message per line of a fast writer. */
#define READ_CHUNK 65536
#define FLUSH_BYTES 65536
#define FLUSH_MS 20
/* How often a cell run with allow_stdin is checked for a process waiting on its stdin. */
#define STDIN_SCAN_MS 30
/* Bounds on what a client can make the kernel hold. */
#define MAX_FRAMES 64
#define MAX_MESSAGE_BYTES (64 << 20)
#define MAX_MATCHES 1000
#define MAX_COMPLETE_OUTPUT (1 << 20)
#define MAX_INPUT_BYTES 65536

typedef enum { JOB_NONE, JOB_EXECUTE, JOB_COMPLETE } job_kind_t;

typedef struct st_stream_t {
    char *buf; /* raw bytes not yet published; at most FLUSH_BYTES + READ_CHUNK */
    size_t len;
    long long flush_at; /* 0: nothing pending */
} stream_t;

struct st_bk_kernel_t {
    void *zctx;
    void *sock[WIRE_CHANNEL_COUNT];
    wire_signer_t signer;
    char session[WIRE_UUID_STRLEN + 1];
    int sigfd;
    bk_shell_t shell;
    char *bash_version;
    int execution_count;
    int exit_code;
    int stopping;

    /* The request being served by bash (shell requests wait in ZMQ's queue meanwhile). */
    job_kind_t job;
    wire_msg_t *job_req;
    unsigned long job_seq;
    int job_silent, job_allow_stdin, job_interrupted, job_count;
    bk_complete_ctx_t job_ctx;
    char *input_req_id; /* msg_id of the unanswered input_request */
    long long next_stdin_scan;

    /* Output goes to the latest execute_request (also output of background jobs between cells). */
    json_t *out_parent;
    int out_silent;
    stream_t streams[2];
};

static const char *const stream_names[2] = {"stdout", "stderr"};

/* ---- messages ---------------------------------------------------------------------------------- */

static void send_msg(bk_kernel_t *k, wire_channel_t ch, wire_msg_t *msg)
{
    wire_frames_t frames;

    wire_frames_init(&frames);
    wire_encode(&k->signer, msg, &frames);
    for (size_t i = 0; i != frames.size; ++i)
        zmq_send(k->sock[ch], frames.entries[i].base, frames.entries[i].len, i + 1 < frames.size ? ZMQ_SNDMORE : 0);
    wire_frames_dispose(&frames);
    wire_msg_destroy(msg);
}

/* Publishes on iopub; `parent_header` may be NULL (output no request asked for). Steals `content`. */
static void publish(bk_kernel_t *k, json_t *parent_header, const char *type, json_t *content)
{
    wire_msg_t *msg = wire_msg_create(type, k->session, content);
    char topic[128];

    if (parent_header != NULL) {
        json_decref(msg->parent_header);
        msg->parent_header = json_incref(parent_header);
    }
    snprintf(topic, sizeof(topic), "kernel.%s.%s", k->session, type);
    wire_frames_push_copy(&msg->identities, topic, strlen(topic));
    send_msg(k, WIRE_CHANNEL_IOPUB, msg);
}

static void publish_status(bk_kernel_t *k, const wire_msg_t *parent, const char *state)
{
    publish(k, parent->header, "status", json_pack("{ss}", "execution_state", state));
}

/* Sends a reply to `req` on `ch` (to the same identities); steals `content`. */
static void reply(bk_kernel_t *k, wire_channel_t ch, const wire_msg_t *req, const char *type, json_t *content, json_t *metadata)
{
    wire_msg_t *msg = wire_msg_create(type, k->session, content);

    wire_msg_set_parent(msg, req);
    if (metadata != NULL) {
        json_decref(msg->metadata);
        msg->metadata = metadata;
    }
    send_msg(k, ch, msg);
}

/* Receives one message without waiting. Returns 1 (stored in *out), 0 (none), -1 (dropped: bad). */
static int recv_msg(bk_kernel_t *k, wire_channel_t ch, wire_msg_t **out)
{
    wire_frames_t frames;
    int more = 1, ret = 1;
    size_t total = 0;

    wire_frames_init(&frames);
    while (more) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, k->sock[ch], frames.size == 0 && total == 0 ? ZMQ_DONTWAIT : 0) < 0) {
            zmq_msg_close(&part);
            ret = frames.size == 0 ? 0 : -1;
            break;
        }
        more = zmq_msg_more(&part);
        total += zmq_msg_size(&part);
        /* Past the bounds the rest of the message is read and thrown away. */
        if (frames.size < MAX_FRAMES && ret == 1)
            wire_frames_push_copy(&frames, zmq_msg_data(&part), zmq_msg_size(&part));
        else
            ret = -1;
        zmq_msg_close(&part);
    }
    if (ret == 1) {
        int err = wire_decode(&k->signer, frames.entries, frames.size, out);
        if (err != 0) {
            fprintf(stderr, "kgate-bash: dropped a %s message: %s\n", wire_channel_name(ch), wire_strerror(err));
            ret = -1;
        }
    }
    wire_frames_dispose(&frames);
    return ret;
}

/* ---- output streams ---------------------------------------------------------------------------- */

static void stream_flush(bk_kernel_t *k, int i, int final)
{
    stream_t *s = &k->streams[i];
    char *text;
    size_t text_len, used;

    s->flush_at = 0;
    if (s->len == 0)
        return;
    used = wire_utf8_sanitize(s->buf, s->len, final, &text, &text_len);
    if (text_len != 0 && !k->out_silent)
        publish(k, k->out_parent, "stream", json_pack("{s:s,s:s%}", "name", stream_names[i], "text", text, text_len));
    free(text);
    memmove(s->buf, s->buf + used, s->len - used);
    s->len -= used;
}

static void stream_push(bk_kernel_t *k, int i, const char *data, size_t len)
{
    stream_t *s = &k->streams[i];

    /* The two pipes are read independently; publishing the other stream first keeps what was
     * written before this chunk ahead of it. */
    if (k->streams[!i].len != 0)
        stream_flush(k, !i, 0);
    memcpy(s->buf + s->len, data, len);
    s->len += len;
    if (s->len >= FLUSH_BYTES)
        stream_flush(k, i, 0);
    else if (s->flush_at == 0)
        s->flush_at = bk_now_ms() + FLUSH_MS;
}

/* Reads once from bash's stdout (0) or stderr (1). Returns 1 if bytes came, 0 otherwise. */
static int read_output(bk_kernel_t *k, int i)
{
    static char chunk[READ_CHUNK];
    int *fd = &k->shell.out_fd[i];
    ssize_t n;

    if (*fd < 0)
        return 0;
    n = read(*fd, chunk, sizeof(chunk));
    if (n == 0) {
        close(*fd);
        *fd = -1;
        return 0;
    }
    if (n < 0)
        return 0;
    if (k->shell.ready)
        stream_push(k, i, chunk, (size_t)n);
    return 1;
}

/* Everything a finished command wrote is in the pipes already: take it all before replying. */
static void drain_output(bk_kernel_t *k)
{
    for (int i = 0; i != 2; ++i)
        while (read_output(k, i))
            ;
}

/* ---- jobs (requests bash serves) ---------------------------------------------------------------- */

static void end_job(bk_kernel_t *k)
{
    wire_msg_destroy(k->job_req);
    k->job_req = NULL;
    k->job = JOB_NONE;
    k->job_seq = 0;
    free(k->input_req_id);
    k->input_req_id = NULL;
    bk_shell_drop_stdin(&k->shell);
}

/* `exited`: bash itself ended (status from its wait status) rather than the cell. */
static void finish_execute(bk_kernel_t *k, int status, int exited, const char *why)
{
    json_t *content, *metadata;
    char evalue[16], line[256];

    drain_output(k);
    for (int i = 0; i != 2; ++i)
        stream_flush(k, i, 1);
    content = json_pack("{sisis[]s{}sb}", "execution_count", k->job_count, "exit_status", status, "payload", "user_expressions",
                        "bash_exited", exited);
    metadata = json_pack("{si}", "exit_status", status);
    if (status == 0) {
        json_object_set_new(content, "status", json_string("ok"));
    } else {
        if (why != NULL)
            snprintf(line, sizeof(line), "%s", why);
        else if (exited)
            snprintf(line, sizeof(line), "bash exited with status %d; the next execution starts a new bash", status);
        else if (k->job_interrupted)
            snprintf(line, sizeof(line), "interrupted (exit status %d)", status);
        else
            snprintf(line, sizeof(line), "exit status %d", status);
        snprintf(evalue, sizeof(evalue), "%d", status);
        json_t *err = json_pack("{sssss[s]}", "ename", "ExitStatus", "evalue", evalue, "traceback", line);
        if (!k->job_silent)
            publish(k, k->job_req->header, "error", json_deep_copy(err));
        json_object_update(content, err);
        json_decref(err);
        json_object_set_new(content, "status", json_string("error"));
    }
    reply(k, WIRE_CHANNEL_SHELL, k->job_req, "execute_reply", content, metadata);
    publish_status(k, k->job_req, "idle");
    end_job(k);
}

static void finish_complete(bk_kernel_t *k, int ok)
{
    const char *code = json_string_value(json_object_get(k->job_req->content, "code"));
    char *path = NULL, *data = wire_malloc(MAX_COMPLETE_OUTPUT);
    size_t len = 0;
    json_t *matches;

    if (code == NULL)
        code = "";
    if (asprintf(&path, "%s/complete.out", k->shell.dir) < 0)
        abort();
    if (ok) {
        FILE *fp = fopen(path, "r");
        if (fp != NULL) {
            len = fread(data, 1, MAX_COMPLETE_OUTPUT, fp);
            fclose(fp);
        }
    }
    unlink(path);
    free(path);
    matches = bk_complete_matches(data, len, k->job_ctx.sigil, MAX_MATCHES);
    free(data);
    reply(k, WIRE_CHANNEL_SHELL, k->job_req, "complete_reply",
          json_pack("{sssosIsIs{}}", "status", "ok", "matches", matches, "cursor_start",
                    (json_int_t)bk_utf8_count(code, k->job_ctx.start), "cursor_end",
                    (json_int_t)bk_utf8_count(code, k->job_ctx.end), "metadata"),
          NULL);
    publish_status(k, k->job_req, "idle");
    end_job(k);
}

static void finish_job(bk_kernel_t *k, int status, int exited, const char *why)
{
    if (k->job == JOB_EXECUTE)
        finish_execute(k, status, exited, why);
    else if (k->job == JOB_COMPLETE)
        finish_complete(k, !exited); /* the status is the user's $?, restored after compgen */
}

static void interrupt(bk_kernel_t *k)
{
    if (k->job == JOB_NONE)
        return;
    k->job_interrupted = 1;
    if (bk_shell_cancel_pending(&k->shell))
        finish_job(k, 130, 0, NULL); /* bash had not even received it */
    else
        bk_shell_interrupt(&k->shell);
}

static void on_bash_exit(bk_kernel_t *k, int wstatus)
{
    int status = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
    int was_ready = k->shell.ready;

    drain_output(k);
    fprintf(stderr, "kgate-bash: bash exited with status %d\n", status);
    if (k->job != JOB_NONE)
        finish_job(k, status, 1, was_ready ? NULL : "bash could not be started");
    bk_shell_forget(&k->shell);
}

static void check_bash(bk_kernel_t *k)
{
    int wstatus;
    if (bk_shell_reap(&k->shell, &wstatus))
        on_bash_exit(k, wstatus);
}

static void on_markers(bk_kernel_t *k)
{
    unsigned long seq;
    int status, r;

    while ((r = bk_shell_read_marker(&k->shell, &seq, &status)) == 1)
        if (k->job != JOB_NONE && seq == k->job_seq)
            finish_job(k, status, 0, NULL);
    if (r == -EPIPE)
        check_bash(k);
}

/* ---- shell requests ---------------------------------------------------------------------------- */

static const char *bash_version(bk_kernel_t *k)
{
    char *argv[] = {(char *)bk_bash_path(), "--norc", "--noprofile", "-c", "printf %s \"$BASH_VERSION\"", NULL};
    char *out = NULL;
    int wstatus;

    if (k->bash_version != NULL)
        return k->bash_version;
    if (bk_run_capture(argv, 2000, 256, &out, &wstatus) == 0 && WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) {
        out[strcspn(out, "(\n")] = '\0'; /* 5.2.15(1)-release -> 5.2.15 */
        k->bash_version = out;
    } else {
        free(out);
        k->bash_version = wire_strdup("unknown");
    }
    return k->bash_version;
}

static void on_kernel_info(bk_kernel_t *k, wire_channel_t ch, wire_msg_t *req)
{
    const char *version = bash_version(k);
    char banner[256];

    snprintf(banner, sizeof(banner), "kgate bash kernel %s (GNU bash %s)", KGATE_VERSION, version);
    reply(k, ch, req, "kernel_info_reply",
          json_pack("{sssssssss{ssssssssssss}sssbs[]}", "status", "ok", "protocol_version", WIRE_PROTOCOL_VERSION, "implementation",
                    "kgate-bash", "implementation_version", KGATE_VERSION, "language_info", "name", "bash", "version", version,
                    "mimetype", "text/x-sh", "file_extension", ".sh", "pygments_lexer", "bash", "codemirror_mode", "shell",
                    "banner", banner, "debugger", 0, "help_links"),
          NULL);
}

static void on_execute(bk_kernel_t *k, wire_msg_t *req)
{
    json_t *c = req->content;
    const char *code = json_string_value(json_object_get(c, "code"));
    size_t len = json_string_length(json_object_get(c, "code"));
    int silent = json_is_true(json_object_get(c, "silent"));
    json_t *store = json_object_get(c, "store_history");
    int store_history = !silent && (store == NULL || json_is_true(store));
    int err;

    if (code == NULL)
        code = "";
    if (store_history)
        ++k->execution_count;
    k->job = JOB_EXECUTE;
    k->job_req = req;
    k->job_silent = silent;
    k->job_allow_stdin = json_is_true(json_object_get(c, "allow_stdin"));
    k->job_interrupted = 0;
    k->job_count = k->execution_count;
    k->next_stdin_scan = bk_now_ms() + 5;
    json_decref(k->out_parent);
    k->out_parent = json_incref(req->header);
    k->out_silent = silent;
    if (!silent)
        publish(k, req->header, "execute_input", json_pack("{s:s%,s:i}", "code", code, len, "execution_count", k->job_count));
    if ((err = bk_shell_run_cell(&k->shell, code, len, k->job_allow_stdin, &k->job_seq)) != 0) {
        char why[128];
        snprintf(why, sizeof(why), "cannot run bash: %s", strerror(-err));
        finish_execute(k, 126, 0, why);
    }
}

static void on_complete(bk_kernel_t *k, wire_msg_t *req)
{
    const char *code = json_string_value(json_object_get(req->content, "code"));
    size_t len = json_string_length(json_object_get(req->content, "code"));
    json_t *pos = json_object_get(req->content, "cursor_pos");
    char *out = NULL, *line;

    if (code == NULL)
        code = "";
    /* cursor_pos counts code points (protocol 5.2); absent or null means the end. */
    size_t cursor =
        json_is_integer(pos) && json_integer_value(pos) >= 0 ? bk_utf8_offset(code, len, (size_t)json_integer_value(pos)) : len;
    bk_complete_find(code, len, cursor, &k->job_ctx);
    k->job = JOB_COMPLETE;
    k->job_req = req;
    k->job_interrupted = 0;
    if (asprintf(&out, "%s/complete.out", k->shell.dir) < 0)
        abort();
    unlink(out);
    line = bk_complete_command(&k->job_ctx, code, out);
    if (bk_shell_submit(&k->shell, line, &k->job_seq) != 0)
        finish_complete(k, 0);
    free(line);
    free(out);
}

static void on_is_complete(bk_kernel_t *k, wire_msg_t *req)
{
    const char *code = json_string_value(json_object_get(req->content, "code"));
    size_t len = json_string_length(json_object_get(req->content, "code"));
    char *path = NULL;
    const char *verdict;

    if (code == NULL)
        code = "";
    if (asprintf(&path, "%s/check.sh", k->shell.dir) < 0)
        abort();
    verdict = bk_is_complete(path, code, len);
    free(path);
    json_t *content = json_pack("{ss}", "status", verdict);
    if (strcmp(verdict, "incomplete") == 0)
        json_object_set_new(content, "indent", json_string(""));
    reply(k, WIRE_CHANNEL_SHELL, req, "is_complete_reply", content, NULL);
}

static void on_shutdown(bk_kernel_t *k, wire_channel_t ch, wire_msg_t *req)
{
    int restart = json_is_true(json_object_get(req->content, "restart"));
    reply(k, ch, req, "shutdown_reply", json_pack("{sssb}", "status", "ok", "restart", restart), NULL);
    k->stopping = 1;
}

/* Handles one shell or control request. Takes ownership of `req`. */
static void on_request(bk_kernel_t *k, wire_channel_t ch, wire_msg_t *req)
{
    const char *type = wire_msg_type(req);

    publish_status(k, req, "busy");
    if (ch == WIRE_CHANNEL_SHELL && strcmp(type, "execute_request") == 0) {
        on_execute(k, req);
        return; /* idle once bash is done */
    }
    if (ch == WIRE_CHANNEL_SHELL && strcmp(type, "complete_request") == 0) {
        on_complete(k, req);
        return;
    }
    if (strcmp(type, "kernel_info_request") == 0)
        on_kernel_info(k, ch, req);
    else if (strcmp(type, "is_complete_request") == 0)
        on_is_complete(k, req);
    else if (strcmp(type, "history_request") == 0)
        reply(k, ch, req, "history_reply", json_pack("{sss[]}", "status", "ok", "history"), NULL);
    else if (strcmp(type, "comm_info_request") == 0)
        reply(k, ch, req, "comm_info_reply", json_pack("{sss{}}", "status", "ok", "comms"), NULL);
    else if (strcmp(type, "inspect_request") == 0)
        reply(k, ch, req, "inspect_reply", json_pack("{sssbs{}s{}}", "status", "ok", "found", 0, "data", "metadata"), NULL);
    else if (strcmp(type, "interrupt_request") == 0) {
        interrupt(k);
        reply(k, ch, req, "interrupt_reply", json_pack("{ss}", "status", "ok"), NULL);
    } else if (strcmp(type, "shutdown_request") == 0)
        on_shutdown(k, ch, req);
    else
        fprintf(stderr, "kgate-bash: ignoring %s on %s\n", type, wire_channel_name(ch));
    publish_status(k, req, "idle");
    wire_msg_destroy(req);
}

/* ---- stdin and heartbeat ----------------------------------------------------------------------- */

static void on_input_reply(bk_kernel_t *k, wire_msg_t *msg)
{
    const char *value = json_string_value(json_object_get(msg->content, "value"));
    size_t len = json_string_length(json_object_get(msg->content, "value"));

    /* jupyter_client sends input_reply without a parent_header (ipykernel takes whatever comes next on
     * stdin), so an empty parent is accepted; a reply to an older input_request is not. */
    const char *parent = wire_msg_parent_id(msg);
    if (strcmp(wire_msg_type(msg), "input_reply") == 0 && k->input_req_id != NULL &&
        (parent[0] == '\0' || strcmp(parent, k->input_req_id) == 0) && value != NULL && len < MAX_INPUT_BYTES) {
        char *line = wire_malloc(len + 1);
        memcpy(line, value, len);
        line[len] = '\n';
        bk_shell_feed_stdin(&k->shell, line, len + 1);
        free(line);
        free(k->input_req_id);
        k->input_req_id = NULL;
        k->next_stdin_scan = bk_now_ms() + STDIN_SCAN_MS;
    }
    wire_msg_destroy(msg);
}

static void ask_for_input(bk_kernel_t *k)
{
    wire_msg_t *msg;

    /* What the cell printed before it started reading (its prompt) goes out first. */
    drain_output(k);
    for (int i = 0; i != 2; ++i)
        stream_flush(k, i, 0);
    msg = wire_msg_create("input_request", k->session, json_pack("{sssb}", "prompt", "", "password", 0));
    wire_msg_set_parent(msg, k->job_req); /* the shell identity, which the client's stdin socket shares */
    k->input_req_id = wire_strdup(wire_msg_id(msg));
    send_msg(k, WIRE_CHANNEL_STDIN, msg);
}

static void on_heartbeat(bk_kernel_t *k)
{
    for (;;) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, k->sock[WIRE_CHANNEL_HB], ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            return;
        }
        int more = zmq_msg_more(&part);
        zmq_msg_send(&part, k->sock[WIRE_CHANNEL_HB], more ? ZMQ_SNDMORE : 0);
        zmq_msg_close(&part);
    }
}

static void on_signals(bk_kernel_t *k)
{
    struct signalfd_siginfo si;

    while (read(k->sigfd, &si, sizeof(si)) == sizeof(si)) {
        switch (si.ssi_signo) {
        case SIGINT:
            interrupt(k);
            break;
        case SIGCHLD:
            check_bash(k);
            break;
        default:
            k->stopping = 1;
            break;
        }
    }
}

/* ---- loop -------------------------------------------------------------------------------------- */

static void on_timers(bk_kernel_t *k)
{
    long long now = bk_now_ms();

    for (int i = 0; i != 2; ++i)
        if (k->streams[i].flush_at != 0 && k->streams[i].flush_at <= now)
            stream_flush(k, i, 0);
    if (k->job == JOB_EXECUTE && k->job_allow_stdin && k->input_req_id == NULL && k->next_stdin_scan <= now) {
        k->next_stdin_scan = now + STDIN_SCAN_MS;
        if (bk_shell_stdin_wanted(&k->shell))
            ask_for_input(k);
    }
    /* fd 3 closed but no SIGCHLD seen yet: look again shortly. */
    if (k->shell.pid > 0 && k->shell.status_fd < 0)
        check_bash(k);
}

static long poll_timeout(bk_kernel_t *k)
{
    long long now = bk_now_ms(), next = -1;

    for (int i = 0; i != 2; ++i)
        if (k->streams[i].flush_at != 0 && (next < 0 || k->streams[i].flush_at < next))
            next = k->streams[i].flush_at;
    if (k->job == JOB_EXECUTE && k->job_allow_stdin && k->input_req_id == NULL && (next < 0 || k->next_stdin_scan < next))
        next = k->next_stdin_scan;
    if (k->shell.pid > 0 && k->shell.status_fd < 0 && (next < 0 || now + 10 < next))
        next = now + 10;
    if (next < 0)
        return -1;
    return next <= now ? 0 : (long)(next - now);
}

int bk_kernel_run(bk_kernel_t *k)
{
    while (!k->stopping) {
        zmq_pollitem_t items[8];
        int n = 0, i_sig, i_ctl, i_stdin, i_hb, i_shell = -1, i_out[2] = {-1, -1}, i_st = -1;

        i_sig = n;
        items[n++] = (zmq_pollitem_t){.fd = k->sigfd, .events = ZMQ_POLLIN};
        i_ctl = n;
        items[n++] = (zmq_pollitem_t){.socket = k->sock[WIRE_CHANNEL_CONTROL], .events = ZMQ_POLLIN};
        i_stdin = n;
        items[n++] = (zmq_pollitem_t){.socket = k->sock[WIRE_CHANNEL_STDIN], .events = ZMQ_POLLIN};
        i_hb = n;
        items[n++] = (zmq_pollitem_t){.socket = k->sock[WIRE_CHANNEL_HB], .events = ZMQ_POLLIN};
        /* Shell requests are served one at a time: while bash works, they wait in ZMQ's queue. */
        if (k->job == JOB_NONE) {
            i_shell = n;
            items[n++] = (zmq_pollitem_t){.socket = k->sock[WIRE_CHANNEL_SHELL], .events = ZMQ_POLLIN};
        }
        for (int i = 0; i != 2; ++i) {
            if (k->shell.out_fd[i] >= 0) {
                i_out[i] = n;
                items[n++] = (zmq_pollitem_t){.fd = k->shell.out_fd[i], .events = ZMQ_POLLIN};
            }
        }
        if (k->shell.status_fd >= 0) {
            i_st = n;
            items[n++] = (zmq_pollitem_t){.fd = k->shell.status_fd, .events = ZMQ_POLLIN};
        }
        if (zmq_poll(items, n, poll_timeout(k)) < 0) {
            if (zmq_errno() == EINTR)
                continue;
            fprintf(stderr, "kgate-bash: zmq_poll: %s\n", zmq_strerror(zmq_errno()));
            return 1;
        }
        if (items[i_hb].revents & ZMQ_POLLIN)
            on_heartbeat(k);
        if (items[i_sig].revents & ZMQ_POLLIN)
            on_signals(k);
        /* Output before markers: a marker means the output before it is complete. */
        for (int i = 0; i != 2; ++i)
            if (i_out[i] >= 0 && (items[i_out[i]].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
                read_output(k, i);
        if (i_st >= 0 && (items[i_st].revents & (ZMQ_POLLIN | ZMQ_POLLERR)))
            on_markers(k);
        if (items[i_ctl].revents & ZMQ_POLLIN) {
            wire_msg_t *msg;
            int r;
            while (!k->stopping && (r = recv_msg(k, WIRE_CHANNEL_CONTROL, &msg)) != 0)
                if (r > 0)
                    on_request(k, WIRE_CHANNEL_CONTROL, msg);
        }
        if (items[i_stdin].revents & ZMQ_POLLIN) {
            wire_msg_t *msg;
            int r;
            while ((r = recv_msg(k, WIRE_CHANNEL_STDIN, &msg)) != 0)
                if (r > 0)
                    on_input_reply(k, msg);
        }
        if (i_shell >= 0 && (items[i_shell].revents & ZMQ_POLLIN)) {
            wire_msg_t *msg;
            int r;
            while (!k->stopping && k->job == JOB_NONE && (r = recv_msg(k, WIRE_CHANNEL_SHELL, &msg)) != 0)
                if (r > 0)
                    on_request(k, WIRE_CHANNEL_SHELL, msg);
        }
        on_timers(k);
    }
    return k->exit_code;
}

/* ---- set-up ------------------------------------------------------------------------------------ */

bk_kernel_t *bk_kernel_create(const wire_connection_t *conn, int sigfd)
{
    static const int types[WIRE_CHANNEL_COUNT] = {ZMQ_ROUTER, ZMQ_PUB, ZMQ_ROUTER, ZMQ_ROUTER, ZMQ_REP};
    bk_kernel_t *k = wire_calloc(1, sizeof(*k));
    int err;

    k->sigfd = sigfd;
    k->shell.fifo_fd = k->shell.in_fd = k->shell.out_fd[0] = k->shell.out_fd[1] = k->shell.status_fd = -1;
    wire_uuid4(k->session);
    wire_signer_init(&k->signer, conn->key, strlen(conn->key));
    for (int i = 0; i != 2; ++i)
        k->streams[i].buf = wire_malloc(FLUSH_BYTES + READ_CHUNK);
    k->zctx = zmq_ctx_new();
    for (int ch = 0; ch != WIRE_CHANNEL_COUNT; ++ch) {
        char endpoint[512];
        int linger = 1000;
        int64_t maxsize = MAX_MESSAGE_BYTES;
        k->sock[ch] = zmq_socket(k->zctx, types[ch]);
        zmq_setsockopt(k->sock[ch], ZMQ_LINGER, &linger, sizeof(linger));
        zmq_setsockopt(k->sock[ch], ZMQ_MAXMSGSIZE, &maxsize, sizeof(maxsize));
        if (wire_connection_endpoint(conn, ch, endpoint, sizeof(endpoint)) < 0 || zmq_bind(k->sock[ch], endpoint) != 0) {
            fprintf(stderr, "kgate-bash: cannot bind the %s socket to %s: %s\n", wire_channel_name(ch), endpoint,
                    zmq_strerror(zmq_errno()));
            goto Fail;
        }
    }
    if ((err = bk_shell_init(&k->shell)) != 0) {
        fprintf(stderr, "kgate-bash: cannot create a private directory: %s\n", strerror(-err));
        goto Fail;
    }
    /* Started now, so that the first execution does not wait for it; a failure shows then. */
    if ((err = bk_shell_ensure(&k->shell)) != 0)
        fprintf(stderr, "kgate-bash: cannot start bash: %s\n", strerror(-err));
    return k;

Fail:
    bk_kernel_destroy(k);
    return NULL;
}

void bk_kernel_destroy(bk_kernel_t *k)
{
    if (k == NULL)
        return;
    bk_shell_dispose(&k->shell);
    wire_msg_destroy(k->job_req);
    free(k->input_req_id);
    json_decref(k->out_parent);
    for (int i = 0; i != 2; ++i)
        free(k->streams[i].buf);
    for (int ch = 0; ch != WIRE_CHANNEL_COUNT; ++ch)
        if (k->sock[ch] != NULL)
            zmq_close(k->sock[ch]);
    if (k->zctx != NULL)
        zmq_ctx_term(k->zctx);
    wire_signer_dispose(&k->signer);
    free(k->bash_version);
    if (k->sigfd >= 0)
        close(k->sigfd);
    free(k);
}
