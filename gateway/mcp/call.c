/*
 * tools/call: the quick tools answered at once, run_code and bash as engine runs read through a cursor and
 * answered in JSON when they end quickly, else in an SSE stream carrying progress notifications.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "core/http.h"
#include "core/json_out.h"
#include "core/stream.h"
#include "code/kernel_run.h"
#include "files/editor_tool.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"
#include "mcp/tools.h"

/* Kernelspec of the bash tool: kgate's own bash kernel (kernels/bash), as execd's /session uses. */
#define BASH_KERNEL "bash"
/* Messages queued for a client that does not read, beyond which progress and keep-alives are skipped (the answer never is). */
#define MAX_QUEUED 64
/* Progress notifications per output at most this often; the tick sends one every second anyway. */
#define PROGRESS_MIN_MS 200
/* A streamed call without a progress token gets an SSE comment this often (ticks): proxies see the stream alive. */
#define KEEPALIVE_TICKS 5

/**
 * One run_code or bash call in flight. It lives in its request's pool: a client that goes away takes
 * it along (the run goes on in the engine: a disconnection is not a cancellation, except in revision
 * 2026-07-28, where closing the response is how a client cancels: GW_MCP_ANSWER_STATELESS).
 */
typedef struct st_gw_mcp_call_t {
    gw_mcp_t *mcp;
    gw_mcp_session_t *session; /* NULL once the session has ended */
    h2o_linklist_t link;       /* in session->calls while it has one */
    h2o_req_t *req;
    json_t *id, *progress_token;
    char language[64];
    int structured;
    unsigned accepts;
    gw_run_cursor_t cursor; /* the reader of the run; open while cursor_open */
    gw_event_t *last;       /* the newest run event taken (a reference) */
    gw_mcp_output_t output;
    /* the SSE response, once streaming: this call's own messages, as an event source for core's writer */
    gw_event_source_t source;
    h2o_linklist_t queue; /* gw_event_t, oldest first */
    size_t queued;
    uint64_t next_event_id;
    int64_t started_ms, last_progress_ms;
    int64_t deadline_ms; /* started_ms + the run's timeout: by then the session has no call of this one in flight */
    unsigned ticks;
    double progress;
    h2o_timeout_entry_t tick_entry;
    h2o_timeout_entry_t finish_entry;
    unsigned cursor_open : 1;
    unsigned streaming : 1;
    unsigned answered : 1; /* the response is complete (JSON sent, or the stream's last message queued) */
    unsigned cancelled : 1;
} gw_mcp_call_t;

/* ---- answering at once ------------------------------------------------------------------------ */

static void respond_result(h2o_req_t *req, unsigned accepts, json_t *id, json_t *result)
{
    gw_mcp_respond(req, accepts, gw_mcp_result(id, result));
}

static void respond_tool_error(h2o_req_t *req, unsigned accepts, json_t *id, const char *text)
{
    respond_result(req, accepts, id, gw_mcp_text_result(text, strlen(text), 1));
}

/* ---- the SSE source ----------------------------------------------------------------------------- */

static gw_mcp_call_t *call_of_source(gw_event_source_t *source)
{
    return H2O_STRUCT_FROM_MEMBER(gw_mcp_call_t, source, source);
}

static gw_event_t *source_next(gw_event_source_t *source, const gw_event_t *prev, int *lost)
{
    gw_mcp_call_t *call = call_of_source(source);
    uint64_t seen = prev != NULL ? prev->id : 0;

    *lost = 0;
    /* what the writer has taken is its own now (it holds references while h2o sends): drop ours */
    while (!h2o_linklist_is_empty(&call->queue)) {
        gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, call->queue.next);
        if (ev->id > seen)
            return ev;
        h2o_linklist_unlink(&ev->link);
        --call->queued;
        gw_event_release(ev);
    }
    return NULL;
}

static int source_is_end(gw_event_source_t *source, const gw_event_t *prev)
{
    gw_mcp_call_t *call = call_of_source(source);
    uint64_t seen = prev != NULL ? prev->id : 0;

    return call->answered && seen == call->next_event_id;
}

static void source_close(gw_event_source_t *source)
{
    (void)source;
    /* the writer is done (response ended, or the client went away): the pool's dispose frees the rest */
}

static const gw_event_source_ops_t source_ops = {source_next, source_is_end, source_close};

/* Queues raw SSE bytes; `always` for the answer, which a slow reader gets however far behind it is. */
static void push_bytes(gw_mcp_call_t *call, const char *bytes, size_t len, int always)
{
    gw_event_t *ev;

    if (!always && call->queued >= MAX_QUEUED)
        return;
    ev = gw_event_from_bytes(bytes, len);
    ev->id = ++call->next_event_id;
    h2o_linklist_insert(&call->queue, &ev->link);
    ++call->queued;
    gw_event_source_notify(&call->source);
}

/* Queues a JSON-RPC message (reference stolen) as one SSE event `message` (no id: kgate's streams are not resumable). */
static void push_message(gw_mcp_call_t *call, json_t *message, int always)
{
    static const char head[] = "event: message\ndata: ";
    size_t len;
    char *buf;

    if (call->accepts & GW_MCP_ANSWER_STATELESS)
        gw_mcp_stateless_stamp(message);
    len = gw_json_render(message, NULL);
    buf = wire_malloc(sizeof(head) - 1 + len + 2);

    memcpy(buf, head, sizeof(head) - 1);
    gw_json_render(message, buf + sizeof(head) - 1);
    memcpy(buf + sizeof(head) - 1 + len, "\n\n", 2);
    json_decref(message);
    push_bytes(call, buf, sizeof(head) - 1 + len + 2, always);
    free(buf);
}

static void start_streaming(gw_mcp_call_t *call)
{
    if (call->streaming || call->req == NULL)
        return;
    call->streaming = 1;
    call->source.ops = &source_ops;
    gw_sse_stream_start(call->req, &call->source, call->mcp->host->config->max_reader_batch_bytes, NULL, NULL);
}

static void send_progress(gw_mcp_call_t *call)
{
    char message[256];
    gw_mcp_output_t *out = &call->output;
    int64_t now = gw_now_ms();

    if (call->progress_token == NULL || !call->streaming || call->answered)
        return;
    call->last_progress_ms = now;
    snprintf(message, sizeof(message), "running %.1f s, %zu outputs%s%s", (double)(now - call->started_ms) / 1000.0, out->outputs,
             out->last_line[0] != '\0' ? "; last: " : "", out->last_line);
    /* the spec wants progress to grow with each notification: one step each */
    call->progress += 1;
    push_message(call,
                 gw_mcp_notification("notifications/progress", json_pack("{s:O, s:f, s:s}", "progressToken", call->progress_token,
                                                                         "progress", call->progress, "message", message)),
                 0);
}

/* ---- the run ------------------------------------------------------------------------------------ */

static void close_cursor(gw_mcp_call_t *call)
{
    if (!call->cursor_open)
        return;
    call->cursor_open = 0;
    call->cursor.super.on_ready = NULL;
    call->cursor.super.ops->close(&call->cursor.super);
}

/* The pieces of an event, read in turn by jansson (json_load_callback): a big event's body is parsed where it lies. */
typedef struct {
    h2o_iovec_t pieces[GW_EVENT_MAX_PIECES];
    size_t n, at;
} event_reader_t;

static size_t read_event(void *buffer, size_t buflen, void *data)
{
    event_reader_t *r = data;
    size_t len;

    while (r->at != r->n && r->pieces[r->at].len == 0)
        ++r->at;
    if (r->at == r->n)
        return 0;
    len = r->pieces[r->at].len < buflen ? r->pieces[r->at].len : buflen;
    memcpy(buffer, r->pieces[r->at].base, len);
    r->pieces[r->at].base += len;
    r->pieces[r->at].len -= len;
    return len;
}

static json_t *load_event(const gw_event_t *ev, const char *brace, size_t flags)
{
    event_reader_t r = {.at = 0};

    r.n = gw_event_pieces(ev, r.pieces);
    r.pieces[0].len -= (size_t)(brace - r.pieces[0].base);
    r.pieces[0].base = (char *)brace;
    return json_load_callback(read_event, &r, flags, NULL);
}

/* The run's events are rendered frames (`id: n\ndata: {json}\n\n`, or execd's `{json}\n\n`): the JSON is read back. */
static json_t *event_json(const gw_event_t *ev)
{
    size_t head = ev->body_storage != NULL ? ev->head_len : ev->len;
    const char *brace = memchr(ev->frame, '{', head);
    json_t *v;

    if (brace == NULL)
        return NULL;
    if ((v = load_event(ev, brace, JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL)) != NULL)
        return v;
    /* a result relayed as the kernel encoded it may hold an integer beyond 64 bits: read as a real, not lost */
    return load_event(ev, brace, JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL);
}

static void on_finish(h2o_timeout_entry_t *entry)
{
    gw_mcp_call_t *call = H2O_STRUCT_FROM_MEMBER(gw_mcp_call_t, finish_entry, entry);
    json_t *message;

    close_cursor(call);
    if (h2o_timeout_is_linked(&call->tick_entry))
        h2o_timeout_unlink(&call->tick_entry);
    if (call->session != NULL) {
        h2o_linklist_unlink(&call->link);
        call->session = NULL;
    }
    if (call->answered || call->req == NULL)
        return;
    if (call->cancelled) {
        /* a cancelled request gets no response (MCP's cancellation): the stream just ends */
        if (call->accepts & GW_MCP_ACCEPT_SSE) {
            start_streaming(call);
            call->answered = 1;
            gw_event_source_notify(&call->source);
            return;
        }
    }
    message = gw_mcp_result(call->id, gw_mcp_output_result(&call->output, call->language, call->structured));
    if (call->streaming) {
        call->answered = 1;
        push_message(call, message, 1);
    } else {
        call->answered = 1;
        gw_mcp_respond(call->req, call->accepts, message);
    }
}

static void on_run_ready(gw_event_source_t *source)
{
    gw_mcp_call_t *call = H2O_STRUCT_FROM_MEMBER(gw_mcp_call_t, cursor.super, source);
    gw_event_t *ev;
    json_t *event;
    int lost = 0, is_output = 0;

    while ((ev = source->ops->next(source, call->last, &lost)) != NULL) {
        if ((event = event_json(ev)) != NULL) {
            is_output |= gw_mcp_output_add(&call->output, event);
            json_decref(event);
        }
        gw_event_addref(ev);
        gw_event_release(call->last);
        call->last = ev;
    }
    if (is_output && gw_now_ms() - call->last_progress_ms >= PROGRESS_MIN_MS)
        send_progress(call);
    if (lost) {
        /* cannot happen while this reader keeps up inside the notification; if it did, the output is incomplete */
        call->output.engine_dropped = 1;
    } else if (!source->ops->is_end(source, call->last)) {
        return;
    }
    /* answered from the loop, not inside the run's append */
    call->cursor.super.on_ready = NULL;
    gw_host_defer(call->mcp->host, &call->finish_entry);
}

static void on_tick(h2o_timeout_entry_t *entry)
{
    gw_mcp_call_t *call = H2O_STRUCT_FROM_MEMBER(gw_mcp_call_t, tick_entry, entry);

    if (call->answered || call->req == NULL)
        return;
    ++call->ticks;
    /* the first tick comes GW_MCP_TICK_MS after the start: the run is a long one */
    if (!call->streaming && (call->accepts & GW_MCP_ACCEPT_SSE)) {
        start_streaming(call);
        /* the head goes out with a first event: a comment, which SSE readers skip */
        push_bytes(call, H2O_STRLIT(": kgate: the run takes a while, its answer follows\n\n"), 0);
    }
    if (call->streaming) {
        if (call->progress_token != NULL)
            send_progress(call);
        /* revision 2026-07-28: every tick, so that a client gone (its cancellation) is seen within two */
        else if (call->ticks % KEEPALIVE_TICKS == 0 || (call->accepts & GW_MCP_ANSWER_STATELESS))
            push_bytes(call, H2O_STRLIT(": keep-alive\n\n"), 0);
    }
    h2o_timeout_link(call->mcp->host->loop, &call->mcp->tick_timeout, &call->tick_entry);
}

/* The request's pool is going away (answered, or the client left): the call's last word. */
static void on_call_dispose(void *p)
{
    gw_mcp_call_t *call = p;

    /* revision 2026-07-28: the client closed the response before its answer, which cancels the call (state kept) */
    if ((call->accepts & GW_MCP_ANSWER_STATELESS) && !call->answered && call->cursor_open && call->cursor.run != NULL)
        gw_run_stop(call->cursor.run);
    close_cursor(call);
    if (h2o_timeout_is_linked(&call->tick_entry))
        h2o_timeout_unlink(&call->tick_entry);
    if (h2o_timeout_is_linked(&call->finish_entry))
        h2o_timeout_unlink(&call->finish_entry);
    if (call->session != NULL)
        h2o_linklist_unlink(&call->link);
    while (!h2o_linklist_is_empty(&call->queue)) {
        gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, call->queue.next);
        h2o_linklist_unlink(&ev->link);
        gw_event_release(ev);
    }
    gw_event_release(call->last);
    gw_mcp_output_dispose(&call->output);
    json_decref(call->id);
    json_decref(call->progress_token);
}

void gw_mcp_call_forget_session(h2o_linklist_t *link)
{
    H2O_STRUCT_FROM_MEMBER(gw_mcp_call_t, link, link)->session = NULL;
}

int64_t gw_mcp_call_deadline_ms(h2o_linklist_t *link)
{
    return H2O_STRUCT_FROM_MEMBER(gw_mcp_call_t, link, link)->deadline_ms;
}

void gw_mcp_cancel(gw_mcp_session_t *session, json_t *request_id)
{
    if (request_id == NULL)
        return;
    for (h2o_linklist_t *node = session->calls.next; node != &session->calls; node = node->next) {
        gw_mcp_call_t *call = H2O_STRUCT_FROM_MEMBER(gw_mcp_call_t, link, node);
        if (json_equal(call->id, request_id)) {
            call->cancelled = 1;
            if (call->cursor_open && call->cursor.run != NULL)
                gw_run_stop(call->cursor.run);
            return;
        }
    }
}

/* ---- contexts of a session ---------------------------------------------------------------------- */

/* The session's context of `spec` (created on first use, in the workspace root), or NULL with `why`. */
static gw_context_t *session_context(gw_mcp_session_t *session, const kmgr_kernelspec_t *spec, char *why, size_t size)
{
    gw_mcp_t *mcp = session->mcp;
    const char *id = json_string_value(json_object_get(session->contexts, spec->name));
    gw_context_options_t opts = {0};
    gw_context_t *ctx = id != NULL ? gw_context_find(mcp->contexts, id) : NULL;
    int ret;

    if (ctx != NULL && gw_context_is_dead(ctx)) {
        /* a kernel that died (OOM, a crash) comes back empty rather than failing every later call */
        if (gw_context_restart(ctx) == 0)
            return ctx;
        gw_context_destroy(ctx);
        ctx = NULL;
    }
    if (ctx != NULL)
        return ctx;
    opts.spec = spec;
    opts.cwd = mcp->files->ws.root;
    switch (ret = gw_context_create(mcp->contexts, &opts, &ctx)) {
    case 0:
        json_object_set_new(session->contexts, spec->name, json_string(ctx->id));
        return ctx;
    case GW_ETOOMANYCONTEXTS:
        snprintf(why, size, "cannot start a %s kernel: %zu contexts are alive, kgate's maximum (--max-contexts)", spec->name,
                 mcp->contexts->count);
        break;
    default:
        snprintf(why, size, "cannot start a %s kernel: %s", spec->name, gw_strerror(ret));
        break;
    }
    return NULL;
}

void gw_mcp_session_release(gw_mcp_session_t *session, int discard)
{
    const char *spec;
    json_t *id;

    /* the calls first: their runs end with the contexts below, and they answer without a session */
    while (!h2o_linklist_is_empty(&session->calls)) {
        h2o_linklist_t *node = session->calls.next;
        h2o_linklist_unlink(node);
        gw_mcp_call_forget_session(node);
    }
    json_object_foreach(session->contexts, spec, id)
    {
        gw_context_t *ctx = gw_context_find(session->mcp->contexts, json_string_value(id));
        if (ctx != NULL && discard)
            gw_context_discard(ctx);
        else if (ctx != NULL)
            gw_context_destroy(ctx);
    }
    json_decref(session->contexts);
    session->contexts = NULL;
}

/* ---- tools/call --------------------------------------------------------------------------------- */

static void call_run(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, json_t *progress_token, unsigned accepts,
                     gw_mcp_tool_t tool, json_t *args)
{
    gw_mcp_t *mcp = session->mcp;
    const gw_config_t *config = mcp->host->config;
    const kmgr_kernelspec_t *spec;
    gw_kernel_run_options_t opts = {0};
    gw_mcp_run_args_t a;
    gw_context_t *ctx;
    gw_mcp_call_t *call;
    gw_run_t *run;
    char why[1024];
    int ret;

    if ((tool == GW_MCP_TOOL_RUN_CODE ? gw_mcp_run_code_args(args, config->max_timeout_ms, &a, why, sizeof(why))
                                      : gw_mcp_bash_args(args, config->max_timeout_ms, &a, why, sizeof(why))) != 0) {
        respond_tool_error(req, accepts, id, why);
        return;
    }
    if ((spec = tool == GW_MCP_TOOL_RUN_CODE ? gw_languages_resolve(mcp->languages, a.language)
                                             : gw_languages_find(mcp->languages, BASH_KERNEL)) == NULL) {
        char available[768];
        gw_languages_describe(mcp->languages, available, sizeof(available));
        if (tool == GW_MCP_TOOL_RUN_CODE)
            snprintf(why, sizeof(why), "unknown language \"%.100s\"; available: %s", a.language, available);
        else
            snprintf(why, sizeof(why),
                     "the bash tool needs kgate's bash kernel (kernelspec \"" BASH_KERNEL "\"), which is not installed");
        respond_tool_error(req, accepts, id, why);
        return;
    }
    if (a.restart) {
        /* a fresh shell: the old one goes (in the background), a new one starts in the workspace root */
        const char *old = json_string_value(json_object_get(session->contexts, spec->name));
        gw_context_t *octx = old != NULL ? gw_context_find(mcp->contexts, old) : NULL;
        if (octx != NULL)
            gw_context_destroy(octx);
        json_object_del(session->contexts, spec->name);
    }
    if ((ctx = session_context(session, spec, why, sizeof(why))) == NULL) {
        respond_tool_error(req, accepts, id, why);
        return;
    }
    if (a.code == NULL) {
        respond_result(req, accepts, id, gw_mcp_text_result(H2O_STRLIT("The bash session was restarted."), 0));
        return;
    }
    opts.code = a.code;
    opts.timeout_ms = a.timeout_ms != 0 ? a.timeout_ms : config->default_timeout_ms;
    opts.limits.output_bytes = config->mcp_output_bytes;
    opts.limits.result_bytes = config->mcp_output_bytes;
    if ((ret = gw_kernel_run_submit(ctx, &opts, &run)) != 0) {
        snprintf(why, sizeof(why),
                 ret == GW_EQUEUEFULL ? "the %s kernel of this session has too many runs waiting (--max-queue)"
                                      : "the %s kernel of this session is not available (it died)",
                 spec->name);
        respond_tool_error(req, accepts, id, why);
        return;
    }

    call = h2o_mem_alloc_shared(&req->pool, sizeof(*call), on_call_dispose);
    memset(call, 0, sizeof(*call));
    call->mcp = mcp;
    call->session = session;
    h2o_linklist_insert(&session->calls, &call->link);
    call->req = req;
    call->id = json_incref(id);
    call->progress_token = json_incref(progress_token);
    snprintf(call->language, sizeof(call->language), "%s", tool == GW_MCP_TOOL_RUN_CODE ? spec->language : "bash");
    call->structured = tool == GW_MCP_TOOL_RUN_CODE;
    call->accepts = accepts;
    gw_mcp_output_init(&call->output, config->mcp_output_bytes);
    call->output.timeout_asked_ms = a.asked_timeout_ms;
    call->output.timeout_applied_ms = a.asked_timeout_ms != 0 ? a.timeout_ms : 0;
    h2o_linklist_init_anchor(&call->queue);
    call->started_ms = gw_now_ms();
    call->deadline_ms = call->started_ms + (int64_t)opts.timeout_ms;
    call->tick_entry.cb = on_tick;
    call->finish_entry.cb = on_finish;
    /* the run was just created: its first events are in its log, nothing is trimmed yet */
    gw_run_cursor_open(run, &call->cursor, 0);
    call->cursor_open = 1;
    call->cursor.super.on_ready = on_run_ready;
    /* progress needs a stream from the start; a client that reads only SSE gets one anyway */
    if ((call->progress_token != NULL && (accepts & GW_MCP_ACCEPT_SSE)) || !(accepts & GW_MCP_ACCEPT_JSON))
        start_streaming(call);
    h2o_timeout_link(mcp->host->loop, &mcp->tick_timeout, &call->tick_entry);
    on_run_ready(&call->cursor.super);
}

static void call_editor(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, unsigned accepts, json_t *args)
{
    gw_editor_result_t res;
    char why[256];

    if (gw_mcp_editor_args(args, why, sizeof(why)) != 0) {
        respond_tool_error(req, accepts, id, why);
        return;
    }
    gw_editor_tool_run(session->mcp->files, args, &res);
    respond_result(req, accepts, id, gw_mcp_text_result(res.text, res.len, res.status != GW_EDITOR_OK));
    gw_editor_result_dispose(&res);
}

void gw_mcp_tools_call(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, json_t *params, unsigned accepts)
{
    const char *name = json_string_value(json_object_get(params, "name"));
    json_t *args = json_object_get(params, "arguments"), *meta = json_object_get(params, "_meta"), *token;
    gw_mcp_tool_t tool = gw_mcp_tool_find(name);
    char text[256];

    token = json_object_get(meta, "progressToken");
    if (token != NULL && !json_is_string(token) && !json_is_integer(token))
        token = NULL;
    switch (tool) {
    case GW_MCP_TOOL_UNKNOWN:
        snprintf(text, sizeof(text), "Unknown tool: %.100s (tools/list names them)", name);
        gw_mcp_respond(req, accepts, gw_mcp_error(id, GW_MCP_INVALID_PARAMS, text));
        break;
    case GW_MCP_TOOL_RUN_CODE:
    case GW_MCP_TOOL_BASH:
        call_run(session, req, id, token, accepts, tool, args);
        break;
    case GW_MCP_TOOL_EDITOR:
        call_editor(session, req, id, accepts, args);
        break;
    case GW_MCP_TOOL_INTERRUPT:
        gw_mcp_tool_interrupt(session, req, id, accepts, args);
        break;
    case GW_MCP_TOOL_RESTART:
        gw_mcp_tool_restart(session, req, id, accepts, args);
        break;
    case GW_MCP_TOOL_LIST_CONTEXTS:
        gw_mcp_tool_list_contexts(session, req, id, accepts);
        break;
    case GW_MCP_TOOL_LIST_LANGUAGES: {
        json_t *languages = gw_languages_to_json(session->mcp->languages), *result;
        char *listing = json_dumps(languages, JSON_INDENT(1));
        result = gw_mcp_text_result(listing, strlen(listing), 0);
        free(listing);
        json_object_set_new(result, "structuredContent", json_pack("{s:o}", "languages", languages));
        respond_result(req, accepts, id, result);
        break;
    }
    }
}
