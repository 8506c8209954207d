/* Routes of /pty: execd's PTY sessions, and the WebSocket that drives one (docs/API.md 5.1). */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "execd/execd.h"
#include "core/errors.h"
#include "core/http.h"
#include "core/json_out.h"
#include "core/ws.h"

/* The first byte of a binary frame: its channel. */
#define CH_STDIN 0x00
#define CH_STDOUT 0x01
#define CH_STDERR 0x02
#define CH_REPLAY 0x03 /* then the 8-byte big-endian offset of the first byte */

/* Close codes of this protocol. */
#define CLOSE_TAKEN_OVER 4001
#define CLOSE_INTERNAL_ERROR 1011

/* Bytes a client message may carry beyond the stdin it holds (a frame's channel, JSON's quoting). */
#define MESSAGE_SLACK (64u << 10)

/* One WebSocket on a session; it outlives its attachment until the WebSocket has closed. */
typedef struct st_pty_client_t {
    gw_execd_t *execd;
    gw_pty_t *pty; /* NULL once detached: the session ended, was taken over, or its client fell behind */
    gw_ws_t *ws;
    h2o_linklist_t link; /* in execd->pty_clients */
} pty_client_t;

static const struct {
    const char *name;
    int sig;
} signals[] = {
    {"SIGINT", SIGINT},   {"SIGTERM", SIGTERM}, {"SIGKILL", SIGKILL}, {"SIGQUIT", SIGQUIT}, {"SIGHUP", SIGHUP},
    {"SIGTSTP", SIGTSTP}, {"SIGCONT", SIGCONT}, {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2},
};

/* ---- frames to the client ------------------------------------------------------------------ */

static void send_frame(pty_client_t *client, json_t *frame)
{
    char *text = json_dumps(frame, JSON_COMPACT);

    gw_ws_send(client->ws, 0, text, strlen(text));
    free(text);
    json_decref(frame);
}

static void send_error(pty_client_t *client, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void send_error(pty_client_t *client, const char *code, const char *fmt, ...)
{
    char message[512];
    va_list args;

    va_start(args, fmt);
    vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);
    send_frame(client, json_pack("{s:s, s:s, s:o}", "type", "error", "code", code, "error",
                                 gw_json_string_lossy(message, strlen(message))));
}

static void detach(pty_client_t *client)
{
    if (client->pty == NULL)
        return;
    gw_pty_detach(client->pty);
    client->pty = NULL;
}

/* Detaches the client and closes its WebSocket (it stays listed until on_close). */
static void end_client(pty_client_t *client, uint16_t code, const char *reason)
{
    detach(client);
    gw_ws_close(client->ws, code, reason);
}

/* ---- what the session reports --------------------------------------------------------------- */

static void on_pty_output(void *data, int is_stderr, uint64_t offset, const char *bytes, size_t len)
{
    pty_client_t *client = data;
    uint8_t channel = is_stderr ? CH_STDERR : CH_STDOUT;
    h2o_iovec_t bufs[] = {h2o_iovec_init(&channel, 1), h2o_iovec_init(bytes, len)};
    (void)offset;

    /* a client that stopped reading is cut off by the WebSocket core; the output stays in the ring */
    if (gw_ws_sendv(client->ws, 1, bufs, 2) != 0)
        detach(client);
}

static void on_pty_stdin_error(void *data, int err)
{
    send_error(data, "STDIN_WRITE_FAILED", "writing to the shell's stdin failed: %s", gw_strerror(err));
}

static void on_pty_exit(void *data)
{
    pty_client_t *client = data;

    send_frame(client, json_pack("{s:s, s:i}", "type", "exit", "exit_code", client->pty->exit_code));
    end_client(client, GW_WS_NORMAL, "process exited");
}

static const gw_pty_sink_t sink = {on_pty_output, on_pty_stdin_error, on_pty_exit};

/* ---- what the client sends ------------------------------------------------------------------ */

static void write_stdin(pty_client_t *client, const void *bytes, size_t len)
{
    int ret = gw_pty_write(client->pty, bytes, len);

    if (ret == GW_ESTDINFULL)
        send_error(client, "STDIN_WRITE_FAILED", "more than %zu bytes of stdin are waiting for the shell (--pty-stdin-bytes)",
                   client->execd->host->config->pty_stdin_bytes);
    else if (ret != 0)
        send_error(client, "STDIN_WRITE_FAILED", "%s", gw_strerror(ret));
}

static int signal_number(const char *name)
{
    for (size_t i = 0; i != sizeof(signals) / sizeof(signals[0]); ++i)
        if (strcasecmp(name, signals[i].name) == 0 || strcasecmp(name, signals[i].name + 3) == 0)
            return signals[i].sig;
    return 0;
}

static int is_dimension(json_t *value)
{
    return json_is_integer(value) && json_integer_value(value) > 0 && json_integer_value(value) <= 0xffff;
}

static void on_text(pty_client_t *client, const uint8_t *data, size_t len)
{
    json_t *frame = json_loadb((const char *)data, len, 0, NULL), *value;
    const char *type = json_string_value(json_object_get(frame, "type"));
    int ret, sig;

    if (type == NULL) {
        send_error(client, "INVALID_FRAME", "a text frame must be a JSON object with a string \"type\"");
    } else if (strcmp(type, "stdin") == 0) {
        if (json_is_string(value = json_object_get(frame, "data")))
            write_stdin(client, json_string_value(value), json_string_length(value));
        else
            send_error(client, "INVALID_FRAME", "stdin wants a string \"data\"");
    } else if (strcmp(type, "resize") == 0) {
        json_t *cols = json_object_get(frame, "cols"), *rows = json_object_get(frame, "rows");
        if (!is_dimension(cols) || !is_dimension(rows))
            send_error(client, "INVALID_FRAME", "resize wants integer \"cols\" and \"rows\" from 1 to 65535");
        else if ((ret = gw_pty_resize(client->pty, (unsigned)json_integer_value(cols), (unsigned)json_integer_value(rows))) < 0 &&
                 ret != GW_ENOTTY && ret != GW_ENOTRUNNING)
            send_error(client, "RUNTIME_ERROR", "resize failed: %s", gw_strerror(ret));
    } else if (strcmp(type, "signal") == 0) {
        const char *name = json_string_value(json_object_get(frame, "signal"));
        if (name == NULL || (sig = signal_number(name)) == 0)
            send_error(client, "INVALID_FRAME", "unknown signal \"%.32s\" (SIGINT, SIGTERM, SIGKILL, SIGQUIT, SIGHUP, ...)",
                       name != NULL ? name : "");
        else if ((ret = gw_pty_signal(client->pty, sig)) != 0 && ret != GW_ENOTRUNNING)
            send_error(client, "RUNTIME_ERROR", "signal failed: %s", gw_strerror(ret));
    } else if (strcmp(type, "ping") == 0) {
        send_frame(client, json_pack("{s:s}", "type", "pong"));
    } else {
        send_error(client, "INVALID_FRAME", "unknown frame type \"%.32s\"", type);
    }
    json_decref(frame);
}

static void on_ws_message(gw_ws_t *ws, int is_binary, const uint8_t *data, size_t len)
{
    pty_client_t *client = gw_ws_data(ws);

    if (client->pty == NULL)
        return;
    if (!is_binary)
        on_text(client, data, len);
    else if (len != 0 && data[0] == CH_STDIN)
        write_stdin(client, data + 1, len - 1);
    else if (len != 0)
        send_error(client, "INVALID_FRAME", "a binary frame from the client starts with 0x00 (stdin), not 0x%02x", data[0]);
}

static void on_ws_close(gw_ws_t *ws, uint16_t code)
{
    pty_client_t *client = gw_ws_data(ws);
    (void)code;

    detach(client);
    h2o_linklist_unlink(&client->link);
    free(client);
}

static const gw_ws_callbacks_t ws_callbacks = {on_ws_message, on_ws_close};

/* ---- routes --------------------------------------------------------------------------------- */

/* The session named by the path, or NULL after answering 404. */
static gw_pty_t *pty_from_params(gw_execd_t *execd, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *id = gw_path_param(req, params, 0);
    gw_pty_t *pty = id != NULL ? gw_pty_find(execd->ptys, id) : NULL;

    if (pty == NULL)
        gw_send_error(req, GW_HTTP_SESSION_NOT_FOUND, "no PTY session with id \"%.64s\"", id != NULL ? id : "(malformed)");
    return pty;
}

/* An optional non-empty string field without NUL characters: 0 (`*out` NULL when absent), or -1 after answering 400. */
static int optional_string(h2o_req_t *req, json_t *body, const char *name, const char **out)
{
    json_t *value = json_object_get(body, name);

    *out = NULL;
    if (value == NULL || json_is_null(value))
        return 0;
    if (!json_is_string(value) || json_string_length(value) == 0 || strlen(json_string_value(value)) != json_string_length(value)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "%s must be a non-empty string without NUL characters", name);
        return -1;
    }
    *out = json_string_value(value);
    return 0;
}

GW_EXECD_HANDLER(pty_create)
{
    gw_execd_t *execd = gw_execd_from(door);
    const gw_config_t *config = execd->host->config;
    json_t *body = NULL;
    const char *cwd = NULL, *command = NULL;
    struct stat st;
    gw_pty_t *pty;
    int ret;
    (void)params;

    /* the body is optional, as in execd */
    if (req->entity.len != 0) {
        if ((body = gw_parse_body(req)) == NULL)
            return;
        if (optional_string(req, body, "cwd", &cwd) != 0 || optional_string(req, body, "command", &command) != 0)
            goto Exit;
    }
    if (cwd != NULL && (stat(cwd, &st) != 0 || !S_ISDIR(st.st_mode))) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "cwd \"%.200s\" is not a directory", cwd);
        goto Exit;
    }
    if ((ret = gw_pty_create(execd->ptys, cwd != NULL ? cwd : config->workspace_root, command, &pty)) == GW_ETOOMANYPTYS)
        gw_send_error(req, GW_HTTP_TOO_MANY_SESSIONS, "%u PTY sessions are alive (--max-ptys)", config->max_ptys);
    else if (ret != 0)
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "%s", gw_strerror(ret));
    else /* execd answers 201 */
        gw_send_json(req, 201, json_pack("{s:s}", "session_id", pty->id));
Exit:
    json_decref(body);
}

GW_EXECD_HANDLER(pty_get)
{
    gw_pty_t *pty = pty_from_params(gw_execd_from(door), req, params);

    if (pty == NULL)
        return;
    gw_send_json(req, 200,
                 json_pack("{s:s, s:b, s:I, s:o}", "session_id", pty->id, "running", gw_pty_is_running(pty), "output_offset",
                           (json_int_t)pty->output.total, "exit_code", pty->finished ? json_integer(pty->exit_code) : json_null()));
}

GW_EXECD_HANDLER(pty_delete)
{
    gw_pty_t *pty = pty_from_params(gw_execd_from(door), req, params);
    pty_client_t *client;

    if (pty == NULL)
        return;
    if ((client = gw_pty_client(pty)) != NULL) {
        send_error(client, "SESSION_GONE", "the session was deleted");
        end_client(client, GW_WS_NORMAL, "session deleted");
    }
    gw_pty_destroy(pty);
    gw_send_empty(req);
}

/* Sends the retained output from `since` as one replay frame (nothing when there is none). */
static void send_replay(pty_client_t *client, uint64_t since)
{
    uint8_t head[9];
    h2o_iovec_t bufs[3];
    uint64_t start;

    if (gw_ring_read(&client->pty->output, since, &start, bufs + 1) == 0)
        return;
    /* the offset says where the bytes begin: past `since` when older ones were dropped from the ring */
    head[0] = CH_REPLAY;
    for (int i = 0; i != 8; ++i)
        head[1 + i] = (uint8_t)(start >> (56 - 8 * i));
    bufs[0] = h2o_iovec_init(head, sizeof(head));
    gw_ws_sendv(client->ws, 1, bufs, 3);
}

GW_EXECD_HANDLER(pty_ws)
{
    gw_execd_t *execd = gw_execd_from(door);
    const gw_config_t *config = execd->host->config;
    gw_pty_t *pty = pty_from_params(execd, req, params);
    const char *mode = gw_query_param(req, "pty"), *since_arg = gw_query_param(req, "since"),
               *takeover = gw_query_param(req, "takeover");
    gw_ws_limits_t limits = {config->pty_stdin_bytes + MESSAGE_SLACK, config->pty_ring_bytes + config->pty_send_queue_bytes, 0, 0,
                             execd->super.name};
    pty_client_t *client, *current;
    uint64_t since = 0;
    char err[256];

    if (pty == NULL)
        return;
    /* as execd: without `since` the whole ring is replayed */
    if (since_arg != NULL && since_arg[0] != '\0' && wire_parse_decimal(since_arg, INT64_MAX, &since) != 0) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "since must be a byte offset (a non-negative integer)");
        return;
    }
    if ((current = gw_pty_client(pty)) != NULL && !(takeover != NULL && strcmp(takeover, "1") == 0)) {
        gw_send_error(req, GW_HTTP_ALREADY_CONNECTED, "another client is attached to PTY session %s (takeover=1 replaces it)",
                      pty->id);
        return;
    }
    client = wire_calloc(1, sizeof(*client));
    client->execd = execd;
    /* a failed handshake answers 400 and evicts nobody */
    if ((client->ws = gw_ws_upgrade(req, execd->host, NULL, &limits, &ws_callbacks, client)) == NULL) {
        free(client);
        return;
    }
    h2o_linklist_insert(&execd->pty_clients, &client->link);
    if (current != NULL)
        end_client(current, CLOSE_TAKEN_OVER, "TAKEN_OVER");
    if (gw_pty_start(pty, mode != NULL && strcmp(mode, "0") == 0, err, sizeof(err)) != 0) {
        send_error(client, "START_FAILED", "%s", err);
        gw_ws_close(client->ws, CLOSE_INTERNAL_ERROR, "start failed");
        return;
    }
    client->pty = pty;
    gw_pty_attach(pty, &sink, client);
    send_frame(client,
               json_pack("{s:s, s:s, s:s}", "type", "connected", "session_id", pty->id, "mode", pty->is_pipe ? "pipe" : "pty"));
    send_replay(client, since);
    if (pty->finished)
        on_pty_exit(client);
}

void gw_execd_pty_shutdown(gw_execd_t *execd)
{
    for (h2o_linklist_t *node = execd->pty_clients.next; node != &execd->pty_clients; node = node->next)
        end_client(H2O_STRUCT_FROM_MEMBER(pty_client_t, link, node), GW_WS_GOING_AWAY, "kgate is shutting down");
}
