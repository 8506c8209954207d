/* kernelmgr/src/kernel.c: the kernel state machine: readiness, requests, routing, death, restart. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "kmgr/errors.h"
#include "kmgr/kernel.h"
#include "internal.h"

struct st_kmgr_request_t {
    /* In kernel->requests while registered, in kernel->failing while its FAILED is deferred. */
    kmgr_link_t link;
    kmgr_request_t *hash_next;
    int hashed;
    kmgr_kernel_t *kernel;
    char *msg_id;
    /* The request while the kernel is not ready yet; NULL once sent. */
    wire_msg_t *unsent;
    /* NULL once cancelled or dropped: later messages are routed here and discarded. */
    kmgr_request_cb cb;
    void *data;
    int got_reply, got_idle;
    /* When the reply or the request's last iopub message arrived (kmgr_now_ms): see KMGR_IDLE_GRACE_MS. */
    uint64_t last_heard_at;
    /* Set while the final event is being delivered (the request is unlinked and freed after). */
    int finished;
    int fail_err;
    /* Header of the pending input_request (the parent of our input_reply), or NULL. */
    json_t *input_header;
};

struct st_kmgr_kernel_t {
    kmgr_link_t link; /* in mgr->kernels */
    kmgr_manager_t *mgr;
    const kmgr_kernelspec_t *spec;
    char *cwd;
    json_t *env;
    void (*on_state)(kmgr_kernel_t *kernel, void *data);
    void *data;
    kmgr_kernel_state_t state;
    /* What on_state last reported; a notice is due whenever it differs from `state`. */
    kmgr_kernel_state_t notified_state;
    int destroyed;
    /* Bumped whenever the current incarnation stops being current: drains and dispatch stop. */
    uint64_t generation;
    char exit_reason[256];
    kmgr_proc_t *proc;
    char session[WIRE_UUID_STRLEN + 1];
    json_t *info;
    int got_info_reply, got_iopub;
    uint64_t started_at, next_info_at;
    uint64_t next_ping_at, ping_sent_at; /* ping_sent_at: 0 when no ping is outstanding */
    kmgr_link_t requests;
    kmgr_link_t failing;
    /* iopub messages passed over unread: big, and nobody awaiting anything (KMGR_UNAWAITED_MAX_BYTES) */
    uint64_t unawaited;
    /* msg_id -> request, chained; every registered request is in it. */
    kmgr_request_t **buckets;
    size_t nbuckets, nhashed;
};

const char *kmgr_kernel_state_name(kmgr_kernel_state_t state)
{
    switch (state) {
    case KMGR_KERNEL_STARTING:
        return "starting";
    case KMGR_KERNEL_IDLE:
        return "idle";
    case KMGR_KERNEL_BUSY:
        return "busy";
    case KMGR_KERNEL_RESTARTING:
        return "restarting";
    case KMGR_KERNEL_DEAD:
        return "dead";
    }
    return "unknown";
}

/* ---- the msg_id table ---- */

static size_t hash_id(const char *s)
{
    uint64_t h = 14695981039346656037ull;
    for (; *s != '\0'; ++s)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return (size_t)h;
}

static void hash_insert(kmgr_kernel_t *k, kmgr_request_t *req)
{
    if (k->nhashed + 1 > k->nbuckets) {
        size_t n = k->nbuckets != 0 ? k->nbuckets * 2 : 16;
        kmgr_request_t **b = wire_calloc(n, sizeof(*b));
        for (size_t i = 0; i != k->nbuckets; ++i) {
            while (k->buckets[i] != NULL) {
                kmgr_request_t *r = k->buckets[i];
                k->buckets[i] = r->hash_next;
                r->hash_next = b[hash_id(r->msg_id) & (n - 1)];
                b[hash_id(r->msg_id) & (n - 1)] = r;
            }
        }
        free(k->buckets);
        k->buckets = b;
        k->nbuckets = n;
    }
    size_t i = hash_id(req->msg_id) & (k->nbuckets - 1);
    req->hash_next = k->buckets[i];
    k->buckets[i] = req;
    req->hashed = 1;
    ++k->nhashed;
}

static kmgr_request_t *hash_find(kmgr_kernel_t *k, const char *msg_id)
{
    if (k->nbuckets == 0 || msg_id[0] == '\0')
        return NULL;
    for (kmgr_request_t *r = k->buckets[hash_id(msg_id) & (k->nbuckets - 1)]; r != NULL; r = r->hash_next)
        if (strcmp(r->msg_id, msg_id) == 0)
            return r;
    return NULL;
}

static void hash_remove(kmgr_kernel_t *k, kmgr_request_t *req)
{
    if (!req->hashed)
        return;
    for (kmgr_request_t **p = &k->buckets[hash_id(req->msg_id) & (k->nbuckets - 1)]; *p != NULL; p = &(*p)->hash_next) {
        if (*p == req) {
            *p = req->hash_next;
            break;
        }
    }
    req->hashed = 0;
    --k->nhashed;
}

/* ---- requests ---- */

static void request_free(kmgr_request_t *req)
{
    wire_msg_destroy(req->unsent);
    json_decref(req->input_header);
    free(req->msg_id);
    free(req);
}

static void deliver(kmgr_request_t *req, kmgr_req_event_t ev, const wire_msg_t *msg, int err)
{
    if (req->cb != NULL)
        req->cb(req, ev, msg, err, req->data);
}

/* Delivers the final event of a request; it is unlinked first so that nothing can free it twice. */
static void finish(kmgr_request_t *req, kmgr_req_event_t ev, int err)
{
    hash_remove(req->kernel, req);
    kmgr_link_unlink(&req->link);
    req->finished = 1;
    deliver(req, ev, NULL, err);
    request_free(req);
}

/* Moves every registered request to the failing list; their FAILED events go out from the loop. */
static void fail_all(kmgr_kernel_t *k, int err)
{
    while (!kmgr_list_empty(&k->requests)) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, k->requests.next);
        hash_remove(k, req);
        kmgr_link_unlink(&req->link);
        wire_msg_destroy(req->unsent);
        req->unsent = NULL;
        req->fail_err = err;
        kmgr_list_append(&k->failing, &req->link);
    }
}

/* Loop context only. One at a time, since each callback may destroy or restart the kernel. */
static void process_failing(kmgr_kernel_t *k)
{
    while (!k->destroyed && !kmgr_list_empty(&k->failing)) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, k->failing.next);
        kmgr_link_unlink(&req->link);
        req->finished = 1;
        deliver(req, KMGR_REQ_FAILED, NULL, req->fail_err);
        request_free(req);
    }
}

/* ---- state ---- */

/* Loop context only: tells the owner about the current state if it has not heard of it yet. */
static void flush_state(kmgr_kernel_t *k)
{
    if (k->destroyed || k->state == k->notified_state)
        return;
    k->notified_state = k->state;
    if (k->on_state != NULL)
        k->on_state(k, k->data);
}

/* From a public call, the notice waits for run_pending: no callback may run inside the call. */
static void set_state_later(kmgr_kernel_t *k, kmgr_kernel_state_t state)
{
    k->state = state;
    kmgr_manager_schedule(k->mgr);
}

static void flush_deferred(kmgr_kernel_t *k)
{
    process_failing(k);
    flush_state(k);
}

static int send_msg(kmgr_kernel_t *k, wire_channel_t channel, wire_msg_t *msg)
{
    int ret = k->proc != NULL ? kmgr_channels_send(&k->proc->channels, channel, msg) : KMGR_EZMQ;
    wire_msg_destroy(msg);
    return ret;
}

static void send_kernel_info(kmgr_kernel_t *k)
{
    send_msg(k, WIRE_CHANNEL_SHELL, wire_msg_create("kernel_info_request", k->session, NULL));
}

/* Loop context: the kernel is gone (or as good as). Fails its requests, then tells the owner. */
static void die(kmgr_kernel_t *k, const char *reason, int kill_it)
{
    ++k->generation;
    snprintf(k->exit_reason, sizeof(k->exit_reason), "%s", reason);
    if (k->proc != NULL) {
        kmgr_channels_close(&k->proc->channels, 0);
        if (kill_it)
            kmgr_proc_signal(k->proc, SIGKILL);
    }
    k->state = KMGR_KERNEL_DEAD;
    fail_all(k, KMGR_EDIED);
    flush_deferred(k);
}

static void maybe_ready(kmgr_kernel_t *k)
{
    kmgr_link_t *link;
    uint64_t now;

    if ((k->state != KMGR_KERNEL_STARTING && k->state != KMGR_KERNEL_RESTARTING) || !k->got_info_reply || !k->got_iopub ||
        !k->proc->channels.stdin_connected)
        return;
    now = kmgr_now_ms();
    k->state = KMGR_KERNEL_IDLE;
    k->next_ping_at = now;
    k->ping_sent_at = 0;
    for (link = k->requests.next; link != &k->requests; link = link->next) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, link);
        if (req->unsent != NULL) {
            kmgr_channels_send(&k->proc->channels, WIRE_CHANNEL_SHELL, req->unsent);
            wire_msg_destroy(req->unsent);
            req->unsent = NULL;
        }
    }
    flush_state(k);
}

/* ---- what the channels report ---- */

static void on_status(kmgr_kernel_t *k, const wire_msg_t *msg)
{
    const char *state = json_string_value(json_object_get(msg->content, "execution_state"));

    if (state == NULL || (k->state != KMGR_KERNEL_IDLE && k->state != KMGR_KERNEL_BUSY))
        return;
    if (strcmp(state, "busy") == 0)
        k->state = KMGR_KERNEL_BUSY;
    else if (strcmp(state, "idle") == 0)
        k->state = KMGR_KERNEL_IDLE;
    flush_state(k);
}

static void on_message(void *data, wire_channel_t channel, wire_msg_t *msg)
{
    kmgr_kernel_t *k = data;
    uint64_t generation = k->generation;
    const char *type = wire_msg_type(msg);
    kmgr_request_t *req;

    /* Deferred events (a restart's FAILED, its state notice) go out before anything newer. */
    flush_deferred(k);
    if (k->generation != generation)
        goto Exit;

    switch (channel) {
    case WIRE_CHANNEL_SHELL:
        req = hash_find(k, wire_msg_parent_id(msg));
        if (req == NULL) {
            /* A reply to one of our own handshake requests. */
            if (strcmp(type, "kernel_info_reply") == 0 &&
                (k->state == KMGR_KERNEL_STARTING || k->state == KMGR_KERNEL_RESTARTING)) {
                if (k->info == NULL)
                    k->info = json_incref(msg->content);
                k->got_info_reply = 1;
                maybe_ready(k);
            }
            goto Exit;
        }
        req->got_reply = 1;
        req->last_heard_at = kmgr_now_ms();
        deliver(req, KMGR_REQ_REPLY, msg, 0);
        if (k->generation == generation && req->got_idle)
            finish(req, KMGR_REQ_DONE, 0);
        break;
    case WIRE_CHANNEL_IOPUB:
        k->got_iopub = 1;
        if (k->state == KMGR_KERNEL_STARTING || k->state == KMGR_KERNEL_RESTARTING) {
            maybe_ready(k);
        } else if (strcmp(type, "status") == 0) {
            on_status(k, msg);
        }
        if (k->generation != generation || (req = hash_find(k, wire_msg_parent_id(msg))) == NULL)
            goto Exit;
        if (strcmp(type, "status") == 0) {
            const char *state = json_string_value(json_object_get(msg->content, "execution_state"));
            if (state != NULL && strcmp(state, "idle") == 0)
                req->got_idle = 1;
        }
        req->last_heard_at = kmgr_now_ms();
        deliver(req, KMGR_REQ_IOPUB, msg, 0);
        if (k->generation == generation && req->got_idle && req->got_reply)
            finish(req, KMGR_REQ_DONE, 0);
        break;
    case WIRE_CHANNEL_STDIN:
        if (strcmp(type, "input_request") != 0 || (req = hash_find(k, wire_msg_parent_id(msg))) == NULL)
            goto Exit;
        json_decref(req->input_header);
        req->input_header = json_incref(msg->header);
        /* Nobody will answer a cancelled request, and the kernel would wait for input forever,
         * wedging every later request: give it an empty line. */
        if (req->cb == NULL) {
            kmgr_request_input_reply(req, "");
            break;
        }
        deliver(req, KMGR_REQ_INPUT, msg, 0);
        break;
    default:
        /* control replies (interrupt_reply) concern nobody. */
        break;
    }
Exit:
    wire_msg_destroy(msg);
}

static void on_stdin_connected(void *data)
{
    kmgr_kernel_t *k = data;

    flush_deferred(k);
    if (!k->destroyed)
        maybe_ready(k);
}

static void on_pong(void *data)
{
    kmgr_kernel_t *k = data;

    k->ping_sent_at = 0;
}

/*
 * An iopub message could matter to someone while the kernel starts (any message proves iopub live)
 * and while any request is registered; otherwise only status messages matter, and a big message
 * is not one.
 */
static int pass_over_iopub(void *data)
{
    kmgr_kernel_t *k = data;

    if ((k->state != KMGR_KERNEL_IDLE && k->state != KMGR_KERNEL_BUSY) || !kmgr_list_empty(&k->requests))
        return 0;
    ++k->unawaited;
    return 1;
}

static void on_redrain(void *data)
{
    kmgr_kernel_t *k = data;

    kmgr_manager_schedule(k->mgr);
}

static const kmgr_channels_ops_t channel_ops = {
    .on_message = on_message,
    .on_stdin_connected = on_stdin_connected,
    .on_pong = on_pong,
    .pass_over_iopub = pass_over_iopub,
    .on_redrain = on_redrain,
};

/* Spawns a new incarnation and starts its handshake. No callbacks. */
static int launch(kmgr_kernel_t *k, char *why, size_t whylen)
{
    kmgr_proc_t *proc;
    int ret;

    if ((ret = kmgr_proc_spawn(k->mgr, k->spec, k->cwd, k->env, &proc, why, whylen)) != 0)
        return ret;
    if ((ret = kmgr_channels_open(&proc->channels, &channel_ops, k)) != 0) {
        snprintf(why, whylen, "cannot open the kernel's channels");
        kmgr_manager_adopt(k->mgr, proc, 0);
        return ret;
    }
    k->proc = proc;
    k->got_info_reply = 0;
    k->got_iopub = 0;
    k->started_at = kmgr_now_ms();
    k->next_info_at = k->started_at + k->mgr->config.kernel_info_retry_ms;
    k->ping_sent_at = 0;
    send_kernel_info(k);
    return 0;
}

/* ---- lifecycle ---- */

int kmgr_kernel_start(kmgr_manager_t *mgr, const kmgr_kernel_options_t *opts, kmgr_kernel_t **out)
{
    kmgr_kernel_t *k;
    char why[256];
    int ret;

    if (opts == NULL || opts->spec == NULL)
        return KMGR_EINVAL;
    k = wire_calloc(1, sizeof(*k));
    k->mgr = mgr;
    k->spec = opts->spec;
    k->cwd = wire_strdup(opts->cwd);
    k->env = opts->env != NULL ? json_deep_copy(opts->env) : NULL;
    k->on_state = opts->on_state;
    k->data = opts->data;
    k->state = k->notified_state = KMGR_KERNEL_STARTING;
    wire_uuid4(k->session);
    kmgr_list_init(&k->link);
    kmgr_list_init(&k->requests);
    kmgr_list_init(&k->failing);
    if ((ret = launch(k, why, sizeof(why))) != 0) {
        fprintf(stderr, "kgate: cannot start a %s kernel: %s\n", k->spec->name, why);
        kmgr_kernel_free(k);
        return ret;
    }
    kmgr_list_append(&mgr->kernels, &k->link);
    *out = k;
    return 0;
}

void kmgr_kernel_destroy(kmgr_kernel_t *k)
{
    kmgr_link_t *link;

    if (k == NULL || k->destroyed)
        return;
    k->destroyed = 1;
    ++k->generation;
    /* Dropped silently: requests stay allocated (and are freed with the kernel) so that a handle
     * held by a callback further up the stack stays valid until the loop frees the kernel. */
    for (link = k->requests.next; link != &k->requests; link = link->next)
        KMGR_FROM_MEMBER(kmgr_request_t, link, link)->cb = NULL;
    for (link = k->failing.next; link != &k->failing; link = link->next)
        KMGR_FROM_MEMBER(kmgr_request_t, link, link)->cb = NULL;
    if (k->proc != NULL) {
        kmgr_manager_adopt(k->mgr, k->proc, k->state != KMGR_KERNEL_DEAD);
        k->proc = NULL;
    }
    kmgr_manager_schedule(k->mgr);
}

void kmgr_kernel_free(kmgr_kernel_t *k)
{
    while (!kmgr_list_empty(&k->requests)) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, k->requests.next);
        kmgr_link_unlink(&req->link);
        request_free(req);
    }
    while (!kmgr_list_empty(&k->failing)) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, k->failing.next);
        kmgr_link_unlink(&req->link);
        request_free(req);
    }
    if (k->proc != NULL)
        kmgr_manager_adopt(k->mgr, k->proc, 0);
    free(k->buckets);
    json_decref(k->info);
    json_decref(k->env);
    free(k->cwd);
    free(k);
}

int kmgr_kernel_restart(kmgr_kernel_t *k)
{
    char why[256];
    int ret;

    if (k->destroyed)
        return KMGR_ESHUTDOWN;
    ++k->generation;
    fail_all(k, KMGR_ESHUTDOWN);
    if (k->proc != NULL) {
        kmgr_manager_adopt(k->mgr, k->proc, k->state != KMGR_KERNEL_DEAD);
        k->proc = NULL;
    }
    json_decref(k->info);
    k->info = NULL;
    k->exit_reason[0] = '\0';
    set_state_later(k, KMGR_KERNEL_RESTARTING);
    if ((ret = launch(k, why, sizeof(why))) != 0) {
        snprintf(k->exit_reason, sizeof(k->exit_reason), "%s", why);
        set_state_later(k, KMGR_KERNEL_DEAD);
        return ret;
    }
    return 0;
}

int kmgr_kernel_interrupt(kmgr_kernel_t *k)
{
    if (k->destroyed || k->state == KMGR_KERNEL_DEAD || k->proc == NULL || k->proc->pid == 0)
        return KMGR_EDIED;
    if (k->spec->interrupt_mode == KMGR_INTERRUPT_SIGNAL) {
        kmgr_proc_signal(k->proc, SIGINT);
        return 0;
    }
    return send_msg(k, WIRE_CHANNEL_CONTROL, wire_msg_create("interrupt_request", k->session, NULL)) == 0 ? 0 : KMGR_EDIED;
}

kmgr_kernel_state_t kmgr_kernel_state(const kmgr_kernel_t *k)
{
    return k->state;
}

const kmgr_kernelspec_t *kmgr_kernel_spec(const kmgr_kernel_t *k)
{
    return k->spec;
}

pid_t kmgr_kernel_pid(const kmgr_kernel_t *k)
{
    return k->proc != NULL ? k->proc->pid : 0;
}

const char *kmgr_kernel_connection_file(const kmgr_kernel_t *k)
{
    return k->proc != NULL ? k->proc->conn_path : "";
}

json_t *kmgr_kernel_info(const kmgr_kernel_t *k)
{
    return k->state == KMGR_KERNEL_IDLE || k->state == KMGR_KERNEL_BUSY ? k->info : NULL;
}

const char *kmgr_kernel_exit_reason(const kmgr_kernel_t *k)
{
    return k->state == KMGR_KERNEL_DEAD ? k->exit_reason : "";
}

/* ---- requests (public) ---- */

int kmgr_kernel_request(kmgr_kernel_t *k, const char *msg_type, json_t *content, kmgr_request_cb cb, void *data,
                        kmgr_request_t **out)
{
    kmgr_request_t *req;
    wire_msg_t *msg;

    if (k->destroyed || k->state == KMGR_KERNEL_DEAD) {
        json_decref(content);
        return KMGR_EDIED;
    }
    msg = wire_msg_create(msg_type, k->session, content);
    req = wire_calloc(1, sizeof(*req));
    req->kernel = k;
    req->msg_id = wire_strdup(wire_msg_id(msg));
    req->cb = cb;
    req->data = data;
    if (k->state == KMGR_KERNEL_IDLE || k->state == KMGR_KERNEL_BUSY) {
        int ret = kmgr_channels_send(&k->proc->channels, WIRE_CHANNEL_SHELL, msg);
        wire_msg_destroy(msg);
        if (ret != 0) {
            request_free(req);
            return ret;
        }
    } else {
        req->unsent = msg;
    }
    kmgr_list_append(&k->requests, &req->link);
    hash_insert(k, req);
    if (out != NULL)
        *out = req;
    return 0;
}

int kmgr_kernel_execute(kmgr_kernel_t *k, const char *code, const kmgr_execute_options_t *opts, kmgr_request_cb cb, void *data,
                        kmgr_request_t **out)
{
    static const kmgr_execute_options_t defaults = {.silent = 0, .store_history = 1, .allow_stdin = 0, .stop_on_error = 1};
    json_t *jcode = json_string(code);

    if (jcode == NULL)
        return KMGR_EINVAL; /* not UTF-8 */
    if (opts == NULL)
        opts = &defaults;
    return kmgr_kernel_request(k, "execute_request",
                               json_pack("{s:o, s:b, s:b, s:{}, s:b, s:b}", "code", jcode, "silent", opts->silent, "store_history",
                                         opts->store_history, "user_expressions", "allow_stdin", opts->allow_stdin, "stop_on_error",
                                         opts->stop_on_error),
                               cb, data, out);
}

const char *kmgr_request_msg_id(const kmgr_request_t *req)
{
    return req->msg_id;
}

int kmgr_request_input_reply(kmgr_request_t *req, const char *value)
{
    kmgr_kernel_t *k = req->kernel;
    json_t *jvalue;
    wire_msg_t *msg;

    if (req->finished || req->input_header == NULL || k->destroyed || k->proc == NULL || k->state == KMGR_KERNEL_DEAD)
        return KMGR_ENOINPUT;
    if ((jvalue = json_string(value)) == NULL)
        return KMGR_EINVAL;
    msg = wire_msg_create("input_reply", k->session, json_pack("{s:o}", "value", jvalue));
    json_decref(msg->parent_header);
    msg->parent_header = req->input_header;
    req->input_header = NULL;
    send_msg(k, WIRE_CHANNEL_STDIN, msg);
    return 0;
}

void kmgr_request_cancel(kmgr_request_t *req)
{
    kmgr_kernel_t *k = req->kernel;

    req->cb = NULL;
    /* Never sent: nothing can arrive for it, so it can go now (it has had no callback to be inside). */
    if (!req->finished && req->unsent != NULL && !k->destroyed) {
        hash_remove(k, req);
        kmgr_link_unlink(&req->link);
        request_free(req);
    }
}

/* ---- from the loop ---- */

uint64_t kmgr_kernel_unawaited_messages(const kmgr_kernel_t *k)
{
    return k->unawaited;
}

/*
 * A kernel's PUB socket drops messages when kgate falls more than its high-water mark behind
 * (kgate bounds its own iopub queue: KMGR_IOPUB_RCVHWM). Should the lost one be a request's
 * status idle, the request would never end: one that has its reply and has heard nothing for
 * KMGR_IDLE_GRACE_MS is finished anyway. Any iopub message for it restarts the wait, so output
 * still queued is never cut short.
 */
static void finish_replied_without_idle(kmgr_kernel_t *k, uint64_t now)
{
    uint64_t generation = k->generation;
    kmgr_link_t *link, *next;

    for (link = k->requests.next; link != &k->requests; link = next) {
        kmgr_request_t *req = KMGR_FROM_MEMBER(kmgr_request_t, link, link);
        next = link->next;
        if (!req->got_reply || req->got_idle || now - req->last_heard_at < KMGR_IDLE_GRACE_MS)
            continue;
        finish(req, KMGR_REQ_DONE, 0);
        /* the callback may have destroyed or restarted the kernel, and with it the list */
        if (k->generation != generation || k->destroyed)
            return;
        next = k->requests.next;
    }
}

void kmgr_kernel_tick(kmgr_kernel_t *k, uint64_t now)
{
    const kmgr_config_t *config = &k->mgr->config;
    char reason[256];

    flush_deferred(k);
    if (k->destroyed || k->proc == NULL)
        return;
    if (k->state == KMGR_KERNEL_DEAD) {
        kmgr_proc_reap(k->proc);
        return;
    }
    if (kmgr_proc_reap(k->proc)) {
        uint64_t generation = k->generation;
        /* What it said before exiting (a last reply, its output) still belongs to its requests. */
        kmgr_channels_drain_all(&k->proc->channels);
        if (k->generation != generation || k->destroyed)
            return;
        kmgr_proc_describe_exit(k->proc, reason, sizeof(reason));
        die(k, reason, 0);
        return;
    }
    switch (k->state) {
    case KMGR_KERNEL_STARTING:
    case KMGR_KERNEL_RESTARTING:
        if (now - k->started_at >= config->startup_timeout_ms) {
            snprintf(reason, sizeof(reason), "did not become ready within %u ms", config->startup_timeout_ms);
            die(k, reason, 1);
        } else if (now >= k->next_info_at) {
            send_kernel_info(k);
            k->next_info_at = now + config->kernel_info_retry_ms;
        }
        break;
    default:
        if (k->ping_sent_at != 0) {
            /* A stalled loop must not read as a dead kernel: collect pongs that already arrived. */
            kmgr_channels_drain(&k->proc->channels, WIRE_CHANNEL_HB);
            if (k->ping_sent_at != 0 && now - k->ping_sent_at >= config->heartbeat_timeout_ms) {
                die(k, "stopped answering heartbeats", 1);
                return;
            }
        }
        if (k->ping_sent_at == 0 && now >= k->next_ping_at) {
            kmgr_channels_ping(&k->proc->channels);
            k->ping_sent_at = now;
            k->next_ping_at = now + config->heartbeat_interval_ms;
        }
        finish_replied_without_idle(k, now);
        break;
    }
}

void kmgr_kernel_run_pending(kmgr_kernel_t *k)
{
    flush_deferred(k);
    if (k->destroyed || k->proc == NULL || !k->proc->channels.redrain)
        return;
    kmgr_channels_drain_all(&k->proc->channels);
}

int kmgr_kernel_is_destroyed(const kmgr_kernel_t *k)
{
    return k->destroyed;
}

kmgr_link_t *kmgr_kernel_link(kmgr_kernel_t *k)
{
    return &k->link;
}

kmgr_kernel_t *kmgr_kernel_from_link(kmgr_link_t *link)
{
    return KMGR_FROM_MEMBER(kmgr_kernel_t, link, link);
}
