/* A fake kernel manager: kmgr_kernel_* and kmgr_request_* over scripted kernels, for the engine's module tests. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/codec.h"
#include "wire/ids.h"
#include "ksys/errors.h"
#include "ksys/util.h"
#include "fake_kmgr.h"

struct st_kmgr_manager_t {
    h2o_loop_t *loop;
    h2o_timeout_t zero_timeout;
    h2o_timeout_entry_t pending; /* deferred notices, as kmgr_manager_run_pending */
    h2o_linklist_t kernels;      /* kmgr_kernel_t, in start order, destroyed ones included */
    size_t started;
    int fail_next_start;
    int parse_all; /* fake_kmgr_parse_all */
    size_t misuse;
    char misuse_what[200];
};

struct st_kmgr_kernel_t {
    kmgr_manager_t *mgr;
    h2o_linklist_t link; /* in mgr->kernels */
    kmgr_kernel_state_t state, notified_state;
    int answering, notified_answering;
    void (*on_state)(kmgr_kernel_t *kernel, void *data);
    void *data;
    char exit_reason[200];
    char last_death[200];
    unsigned restarts, restarts_in_row;
    h2o_linklist_t requests; /* kmgr_request_t, in send order, finished ones included */
    fake_kernel_seen_t seen;
    kmgr_tap_cb tap;
    void *tap_data;
};

struct st_kmgr_request_t {
    kmgr_kernel_t *kernel;
    h2o_linklist_t link; /* in kernel->requests */
    kmgr_request_cb cb;  /* NULL once cancelled */
    void *data;
    char msg_id[WIRE_UUID_STRLEN + 1];
    char *code;   /* seen.code */
    int fail_err; /* != 0: FAILED is owed, from the loop */
    int input_pending;
    uint64_t sent_at;          /* kmgr_request_sent_at: 0 while its kernel is not ready (as kernelmgr keeps it unsent) */
    int done;                  /* it ended with DONE (kernelmgr remembers it for its late output) */
    kmgr_late_sink_cb late_cb; /* kmgr_request_set_late_sink; NULL: none, or cancelled */
    void *late_data;
    char *late_tag;
    fake_request_seen_t seen;
};

static void note_misuse(kmgr_manager_t *mgr, const char *what)
{
    if (mgr->misuse++ == 0)
        snprintf(mgr->misuse_what, sizeof(mgr->misuse_what), "%s", what);
}

/* A call on `kernel` by the gateway: valid only while it is not destroyed. */
static int kernel_usable(const kmgr_kernel_t *kernel, const char *call)
{
    if (!kernel->seen.destroyed)
        return 1;
    note_misuse(kernel->mgr, call);
    return 0;
}

static int request_usable(const kmgr_request_t *req, const char *call)
{
    if (!req->seen.cancelled && !req->seen.finished && !req->kernel->seen.destroyed)
        return 1;
    note_misuse(req->kernel->mgr, call);
    return 0;
}

static void schedule(kmgr_manager_t *mgr)
{
    if (!h2o_timeout_is_linked(&mgr->pending))
        h2o_timeout_link(mgr->loop, &mgr->zero_timeout, &mgr->pending);
}

/* A kernel that becomes ready sends what waited for it, as kernelmgr's kmgr_requests_send_unsent. */
static void send_unsent(kmgr_kernel_t *kernel)
{
    if (kernel->state != KMGR_KERNEL_IDLE && kernel->state != KMGR_KERNEL_BUSY)
        return;
    for (h2o_linklist_t *node = kernel->requests.next; node != &kernel->requests; node = node->next) {
        kmgr_request_t *req = H2O_STRUCT_FROM_MEMBER(kmgr_request_t, link, node);
        if (req->sent_at == 0 && !req->seen.finished && !req->seen.cancelled)
            req->sent_at = ksys_now_ms();
    }
}

static void flush_state(kmgr_kernel_t *kernel)
{
    send_unsent(kernel);
    if (kernel->seen.destroyed || (kernel->state == kernel->notified_state && kernel->answering == kernel->notified_answering))
        return;
    kernel->notified_state = kernel->state;
    kernel->notified_answering = kernel->answering;
    if (kernel->on_state != NULL)
        kernel->on_state(kernel, kernel->data);
}

/* Ends `req` with `ev`; its callback may destroy or restart the kernel. */
static void finish(kmgr_request_t *req, kmgr_req_event_t ev, int err)
{
    req->seen.finished = 1;
    req->done = ev == KMGR_REQ_DONE;
    req->input_pending = 0;
    if (req->cb != NULL)
        req->cb(req, ev, NULL, err, req->data);
}

/* One at a time: each callback may destroy the kernel, which silences the rest. */
static void deliver_failures(kmgr_kernel_t *kernel)
{
    h2o_linklist_t *node;

    for (node = kernel->requests.next; node != &kernel->requests && !kernel->seen.destroyed; node = node->next) {
        kmgr_request_t *req = H2O_STRUCT_FROM_MEMBER(kmgr_request_t, link, node);
        if (!req->seen.finished && req->fail_err != 0)
            finish(req, KMGR_REQ_FAILED, req->fail_err);
    }
}

static void fail_all_later(kmgr_kernel_t *kernel, int err)
{
    for (h2o_linklist_t *node = kernel->requests.next; node != &kernel->requests; node = node->next) {
        kmgr_request_t *req = H2O_STRUCT_FROM_MEMBER(kmgr_request_t, link, node);
        if (!req->seen.finished && req->fail_err == 0)
            req->fail_err = err;
    }
}

static void on_pending(h2o_timeout_entry_t *entry)
{
    kmgr_manager_t *mgr = H2O_STRUCT_FROM_MEMBER(kmgr_manager_t, pending, entry);

    for (h2o_linklist_t *node = mgr->kernels.next; node != &mgr->kernels; node = node->next) {
        kmgr_kernel_t *kernel = H2O_STRUCT_FROM_MEMBER(kmgr_kernel_t, link, node);
        deliver_failures(kernel);
        flush_state(kernel);
    }
}

kmgr_manager_t *fake_kmgr_create(h2o_loop_t *loop)
{
    kmgr_manager_t *mgr = wire_calloc(1, sizeof(*mgr));

    mgr->loop = loop;
    h2o_timeout_init(loop, &mgr->zero_timeout, 0);
    mgr->pending.cb = on_pending;
    h2o_linklist_init_anchor(&mgr->kernels);
    return mgr;
}

void fake_kmgr_destroy(kmgr_manager_t *mgr)
{
    if (h2o_timeout_is_linked(&mgr->pending))
        h2o_timeout_unlink(&mgr->pending);
    h2o_timeout_dispose(mgr->loop, &mgr->zero_timeout);
    while (!h2o_linklist_is_empty(&mgr->kernels)) {
        kmgr_kernel_t *kernel = H2O_STRUCT_FROM_MEMBER(kmgr_kernel_t, link, mgr->kernels.next);
        while (!h2o_linklist_is_empty(&kernel->requests)) {
            kmgr_request_t *req = H2O_STRUCT_FROM_MEMBER(kmgr_request_t, link, kernel->requests.next);
            h2o_linklist_unlink(&req->link);
            json_decref(req->seen.input_replies);
            free(req->code);
            free(req->late_tag);
            free(req);
        }
        h2o_linklist_unlink(&kernel->link);
        free(kernel);
    }
    free(mgr);
}

void fake_kmgr_fail_next_start(kmgr_manager_t *mgr, int err)
{
    mgr->fail_next_start = err;
}

size_t fake_kmgr_num_started(const kmgr_manager_t *mgr)
{
    return mgr->started;
}

size_t fake_kmgr_misuse(const kmgr_manager_t *mgr, const char **what)
{
    *what = mgr->misuse_what;
    return mgr->misuse;
}

/* --- the kmgr API gateway/code calls --- */

int kmgr_kernel_start(kmgr_manager_t *mgr, const kmgr_kernel_options_t *opts, kmgr_kernel_t **out)
{
    kmgr_kernel_t *kernel;
    int err = mgr->fail_next_start;

    if (opts == NULL || opts->spec == NULL)
        return KSYS_EINVAL;
    if (err != 0) {
        mgr->fail_next_start = 0;
        return err;
    }
    kernel = wire_calloc(1, sizeof(*kernel));
    kernel->mgr = mgr;
    kernel->state = kernel->notified_state = KMGR_KERNEL_STARTING;
    kernel->answering = kernel->notified_answering = 1;
    kernel->seen.restart_limit = opts->restart_limit;
    kernel->on_state = opts->on_state;
    kernel->data = opts->data;
    h2o_linklist_init_anchor(&kernel->requests);
    h2o_linklist_insert(&mgr->kernels, &kernel->link);
    ++mgr->started;
    *out = kernel;
    return 0;
}

void kmgr_kernel_destroy(kmgr_kernel_t *kernel)
{
    if (kernel == NULL || !kernel_usable(kernel, "kmgr_kernel_destroy on a destroyed kernel"))
        return;
    kernel->seen.destroyed = 1;
}

void kmgr_kernel_kill(kmgr_kernel_t *kernel)
{
    kmgr_kernel_destroy(kernel);
}

int kmgr_kernel_restart(kmgr_kernel_t *kernel)
{
    if (!kernel_usable(kernel, "kmgr_kernel_restart on a destroyed kernel"))
        return KSYS_ESHUTDOWN;
    ++kernel->seen.restarts;
    fail_all_later(kernel, KSYS_ESHUTDOWN);
    kernel->exit_reason[0] = kernel->last_death[0] = '\0';
    kernel->restarts_in_row = 0;
    kernel->state = KMGR_KERNEL_RESTARTING;
    schedule(kernel->mgr);
    return 0;
}

int kmgr_kernel_interrupt(kmgr_kernel_t *kernel)
{
    if (!kernel_usable(kernel, "kmgr_kernel_interrupt on a destroyed kernel") || kernel->state == KMGR_KERNEL_DEAD)
        return KSYS_EDIED;
    ++kernel->seen.interrupts;
    return 0;
}

kmgr_kernel_state_t kmgr_kernel_state(const kmgr_kernel_t *kernel)
{
    kernel_usable(kernel, "kmgr_kernel_state on a destroyed kernel");
    return kernel->state;
}

void kmgr_kernel_set_tap_text_room(kmgr_kernel_t *kernel, uint64_t bytes)
{
    if (kernel_usable(kernel, "kmgr_kernel_set_tap_text_room on a destroyed kernel"))
        kernel->seen.tap_text_room = bytes;
}

void kmgr_kernel_set_tap(kmgr_kernel_t *kernel, kmgr_tap_cb cb, void *data)
{
    if (!kernel_usable(kernel, "kmgr_kernel_set_tap on a destroyed kernel"))
        return;
    kernel->tap = cb;
    kernel->tap_data = data;
}

int kmgr_kernel_send_parts(kmgr_kernel_t *kernel, wire_channel_t channel, const wire_frame_t *parts, size_t nparts)
{
    (void)parts;
    if (!kernel_usable(kernel, "kmgr_kernel_send_parts on a destroyed kernel") || kernel->state == KMGR_KERNEL_DEAD)
        return KSYS_EDIED;
    if ((channel != WIRE_CHANNEL_SHELL && channel != WIRE_CHANNEL_CONTROL && channel != WIRE_CHANNEL_STDIN) || nparts < 4)
        return KSYS_EINVAL;
    if (kernel->state != KMGR_KERNEL_IDLE && kernel->state != KMGR_KERNEL_BUSY)
        return KSYS_ENOTREADY;
    ++kernel->seen.sent_parts;
    return 0;
}

int fake_kernel_tap_message(kmgr_kernel_t *kernel, wire_channel_t channel, const char *msg_type, const char *parent_id)
{
    wire_msg_t *msg;
    wire_frame_t parts[4] = {{"{}", 2}, {"{}", 2}, {"{}", 2}, {"{}", 2}};

    if (kernel->tap == NULL)
        return 0;
    msg = wire_msg_create(msg_type, "fake", NULL);
    json_object_set_new(msg->parent_header, "msg_id", json_string(parent_id));
    kernel->tap(kernel, channel, msg, parts, 4, kernel->tap_data);
    wire_msg_destroy(msg);
    return 1;
}

const char *kmgr_kernel_state_name(kmgr_kernel_state_t state)
{
    static const char *const names[] = {"starting", "idle", "busy", "restarting", "dead"};
    return (unsigned)state < sizeof(names) / sizeof(names[0]) ? names[state] : "unknown";
}

json_t *kmgr_kernel_info(const kmgr_kernel_t *kernel)
{
    kernel_usable(kernel, "kmgr_kernel_info on a destroyed kernel");
    return NULL;
}

const char *kmgr_kernel_exit_reason(const kmgr_kernel_t *kernel)
{
    kernel_usable(kernel, "kmgr_kernel_exit_reason on a destroyed kernel");
    return kernel->state == KMGR_KERNEL_DEAD ? kernel->exit_reason : "";
}

const char *kmgr_kernel_last_death(const kmgr_kernel_t *kernel)
{
    kernel_usable(kernel, "kmgr_kernel_last_death on a destroyed kernel");
    return kernel->last_death;
}

const char *kmgr_kernel_start_path(const kmgr_kernel_t *kernel)
{
    kernel_usable(kernel, "kmgr_kernel_start_path on a destroyed kernel");
    return "spawned";
}

unsigned kmgr_kernel_auto_restarts(const kmgr_kernel_t *kernel, unsigned *in_a_row, unsigned *limit)
{
    kernel_usable(kernel, "kmgr_kernel_auto_restarts on a destroyed kernel");
    if (in_a_row != NULL)
        *in_a_row = kernel->restarts_in_row;
    if (limit != NULL)
        *limit = kernel->seen.restart_limit;
    return kernel->restarts;
}

int kmgr_kernel_answering(const kmgr_kernel_t *kernel)
{
    kernel_usable(kernel, "kmgr_kernel_answering on a destroyed kernel");
    return kernel->answering;
}

void kmgr_kernel_set_restart_limit(kmgr_kernel_t *kernel, unsigned limit)
{
    if (kernel_usable(kernel, "kmgr_kernel_set_restart_limit on a destroyed kernel"))
        kernel->seen.restart_limit = limit;
}

int kmgr_kernel_execute(kmgr_kernel_t *kernel, const char *code, const kmgr_execute_options_t *opts, kmgr_request_cb cb, void *data,
                        kmgr_request_t **out)
{
    kmgr_request_t *req;

    if (!kernel_usable(kernel, "kmgr_kernel_execute on a destroyed kernel") || kernel->state == KMGR_KERNEL_DEAD)
        return KSYS_EDIED;
    req = wire_calloc(1, sizeof(*req));
    req->kernel = kernel;
    req->cb = cb;
    req->data = data;
    wire_uuid4(req->msg_id);
    req->seen.code = req->code = wire_strdup(code);
    req->seen.allow_stdin = opts->allow_stdin;
    req->seen.raw_stream = opts->raw_stream;
    req->seen.text_room = UINT64_MAX;
    req->seen.input_replies = json_array();
    h2o_linklist_insert(&kernel->requests, &req->link);
    send_unsent(kernel);
    ++kernel->seen.executes;
    if (out != NULL)
        *out = req;
    return 0;
}

int kmgr_request_input_reply(kmgr_request_t *req, const char *value)
{
    if (!request_usable(req, "kmgr_request_input_reply on an ended request") || !req->input_pending)
        return KSYS_ENOINPUT;
    req->input_pending = 0;
    json_array_append_new(req->seen.input_replies, json_string(value));
    return 0;
}

uint64_t kmgr_request_sent_at(const kmgr_request_t *req)
{
    return req->sent_at;
}

void kmgr_request_set_text_room(kmgr_request_t *req, uint64_t bytes)
{
    if (request_usable(req, "kmgr_request_set_text_room on an ended request"))
        req->seen.text_room = bytes;
}

void kmgr_request_set_late_sink(kmgr_request_t *req, kmgr_late_sink_cb cb, void *data, const char *tag)
{
    if (!request_usable(req, "kmgr_request_set_late_sink on an ended request"))
        return;
    free(req->late_tag);
    req->late_cb = cb;
    req->late_data = data;
    req->late_tag = cb != NULL && tag != NULL ? wire_strdup(tag) : NULL;
}

void kmgr_request_cancel(kmgr_request_t *req)
{
    if (!request_usable(req, "kmgr_request_cancel on an ended request"))
        return;
    req->seen.cancelled = 1;
    req->cb = NULL;
    req->late_cb = NULL; /* as kernelmgr: its late output is no longer told either */
    /* kernelmgr answers a cancelled request's input_request with an empty line */
    if (req->input_pending) {
        req->input_pending = 0;
        json_array_append_new(req->seen.input_replies, json_string(""));
    }
}

/* --- scripting --- */

void fake_kernel_set_state(kmgr_kernel_t *kernel, kmgr_kernel_state_t state)
{
    kernel->state = state;
    flush_state(kernel);
}

void fake_kernel_set_answering(kmgr_kernel_t *kernel, int answering)
{
    kernel->answering = answering;
    flush_state(kernel);
}

void fake_kernel_die_and_restart(kmgr_kernel_t *kernel, const char *reason)
{
    snprintf(kernel->last_death, sizeof(kernel->last_death), "%s", reason);
    ++kernel->restarts;
    ++kernel->restarts_in_row;
    kernel->state = KMGR_KERNEL_RESTARTING;
    fail_all_later(kernel, KSYS_EDIED);
    deliver_failures(kernel);
    flush_state(kernel);
}

void fake_kernel_die(kmgr_kernel_t *kernel, const char *reason)
{
    snprintf(kernel->exit_reason, sizeof(kernel->exit_reason), "%s", reason);
    snprintf(kernel->last_death, sizeof(kernel->last_death), "%s", reason);
    kernel->state = KMGR_KERNEL_DEAD;
    fail_all_later(kernel, KSYS_EDIED);
    deliver_failures(kernel);
    flush_state(kernel);
}

const fake_kernel_seen_t *fake_kernel_seen(const kmgr_kernel_t *kernel)
{
    return &kernel->seen;
}

kmgr_request_t *fake_kernel_request(const kmgr_kernel_t *kernel, size_t i)
{
    for (h2o_linklist_t *node = kernel->requests.next; node != &kernel->requests; node = node->next)
        if (i-- == 0)
            return H2O_STRUCT_FROM_MEMBER(kmgr_request_t, link, node);
    return NULL;
}

const fake_request_seen_t *fake_request_seen(const kmgr_request_t *req)
{
    return &req->seen;
}

/* True when the kernel may still say something about `req` to its owner. */
static int request_listens(const kmgr_request_t *req)
{
    return !req->seen.finished && !req->kernel->seen.destroyed;
}

/* Sends a message of `msg_type` whose parent is `req` as event `ev`. */
static void deliver_msg(kmgr_request_t *req, kmgr_req_event_t ev, const char *msg_type, json_t *content)
{
    wire_msg_t *msg = wire_msg_create(msg_type, "fake-kernel-session", content);

    json_object_set_new(msg->parent_header, "msg_id", json_string(req->msg_id));
    json_object_set_new(msg->parent_header, "msg_type", json_string("execute_request"));
    if (request_listens(req) && req->cb != NULL)
        req->cb(req, ev, msg, 0, req->data);
    wire_msg_destroy(msg);
}

void fake_request_iopub(kmgr_request_t *req, const char *msg_type, json_t *content)
{
    deliver_msg(req, KMGR_REQ_IOPUB, msg_type, content);
}

void fake_kmgr_parse_all(kmgr_manager_t *mgr, int on)
{
    mgr->parse_all = on;
}

void fake_request_iopub_bytes(kmgr_request_t *req, const char *msg_type, const char *content, size_t len)
{
    wire_msg_t *msg = wire_msg_create(msg_type, "fake-kernel-session", NULL);

    json_object_set_new(msg->parent_header, "msg_id", json_string(req->msg_id));
    json_object_set_new(msg->parent_header, "msg_type", json_string("execute_request"));
    /* what wire_decode_ex with WIRE_DECODE_RAW_STREAM, then kmgr_requests_on_iopub, make of it */
    wire_msg_set_raw_content(msg, content, len, NULL);
    if (strcmp(msg_type, "stream") != 0 || !req->seen.raw_stream || req->kernel->mgr->parse_all)
        wire_msg_parse_raw_content(msg);
    if (request_listens(req) && req->cb != NULL)
        req->cb(req, KMGR_REQ_IOPUB, msg, 0, req->data);
    wire_msg_destroy(msg);
}

void fake_request_reply(kmgr_request_t *req, json_t *content)
{
    deliver_msg(req, KMGR_REQ_REPLY, "execute_reply", content);
}

void fake_request_input(kmgr_request_t *req, const char *prompt, int password)
{
    if (!request_listens(req))
        return;
    if (req->cb == NULL) { /* cancelled: kernelmgr answers for its former owner */
        json_array_append_new(req->seen.input_replies, json_string(""));
        return;
    }
    req->input_pending = 1;
    deliver_msg(req, KMGR_REQ_INPUT, "input_request", json_pack("{s:s, s:b}", "prompt", prompt, "password", password));
}

void fake_request_done(kmgr_request_t *req)
{
    if (request_listens(req))
        finish(req, KMGR_REQ_DONE, 0);
}

void fake_request_fail(kmgr_request_t *req, int err)
{
    if (request_listens(req))
        finish(req, KMGR_REQ_FAILED, err);
}

int fake_request_late(kmgr_request_t *req, const char *msg_type, uint64_t text_bytes)
{
    if (!req->done || req->kernel->seen.destroyed || req->late_cb == NULL)
        return -1;
    return req->late_cb(req->late_tag, msg_type, text_bytes, req->late_data);
}

void fake_request_complete(kmgr_request_t *req, int execution_count)
{
    fake_request_reply(req, json_pack("{s:s, s:i}", "status", "ok", "execution_count", execution_count));
    fake_request_iopub(req, "status", json_pack("{s:s}", "execution_state", "idle"));
    fake_request_done(req);
}
