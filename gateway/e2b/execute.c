/* POST /execute: a kernel run streamed as E2B's NDJSON lines, through the core's writer. */
#include <string.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "core/http.h"
#include "code/kernel_run.h"
#include "e2b/e2b.h"
#include "e2b/translate.h"

/*
 * One /execute answer: an event source (core/stream.h) over the run's cursor. Each run event is read
 * back as JSON and becomes zero or more lines (translate.h), queued as events of their own (in_log
 * while queued, as the proxy's chunks are) until the writer has taken them. The writer takes one
 * event past what it sends at most, so the queue stays within one run event's lines plus a
 * keepalive (a long line in pieces of LINE_PIECE_BYTES). Lives in the request's pool; `close`
 * (exactly once, from the writer) ends it.
 */
typedef struct st_gw_e2b_stream_t {
    gw_event_source_t super;
    gw_e2b_t *e2b;
    h2o_req_t *req;
    gw_run_cursor_t cursor;
    gw_event_t *inner_last; /* the last run event read (a reference), or NULL */
    gw_e2b_lines_t partial; /* a run event read back from the log file in pieces, until whole */
    gw_e2b_xlate_t xlate;
    h2o_linklist_t queue; /* gw_event_t lines not taken yet */
    uint64_t next_seq;    /* the id of the next line: the writer's `prev` says what it took */
    h2o_timeout_entry_t keepalive;
    h2o_timeout_entry_t gone_check;
    h2o_linklist_t link; /* in e2b->streams */
    unsigned ended : 1;  /* end_of_execution is queued: nothing follows */
    unsigned closed : 1;
    unsigned stopped : 1; /* its client went away: the run was asked to stop */
} gw_e2b_stream_t;

/*
 * A line longer than this is queued as several events: the writer keeps the last event it sent (its bookmark for `next`)
 * until it sends another, so a 50 MB line queued whole stayed in memory for the rest of the run.
 */
#define LINE_PIECE_BYTES ((size_t)1 << 20)

static void queue_bytes(gw_e2b_stream_t *s, const char *bytes, size_t len)
{
    do {
        size_t n = len < LINE_PIECE_BYTES ? len : LINE_PIECE_BYTES;
        gw_event_t *ev = gw_event_from_bytes(bytes, n);
        ev->id = ++s->next_seq;
        ev->in_log = 1;
        h2o_linklist_insert(&s->queue, &ev->link);
        bytes += n;
        len -= n;
    } while (len != 0);
}

static void pop_line(gw_e2b_stream_t *s)
{
    gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, s->queue.next);

    h2o_linklist_unlink(&ev->link);
    ev->in_log = 0;
    gw_event_release(ev);
}

/* Output went out (or a keepalive): the 5 s of silence count from now. */
static void rearm_keepalive(gw_e2b_stream_t *s)
{
    if (h2o_timeout_is_linked(&s->keepalive))
        h2o_timeout_unlink(&s->keepalive);
    if (!s->ended && !s->closed)
        h2o_timeout_link(s->e2b->host->loop, &s->e2b->keepalive_timeout, &s->keepalive);
}

static void on_keepalive(h2o_timeout_entry_t *entry)
{
    gw_e2b_stream_t *s = H2O_STRUCT_FROM_MEMBER(gw_e2b_stream_t, keepalive, entry);

    /* a reader that has not taken what is queued gets nothing more: the queue stays bounded */
    if (h2o_linklist_is_empty(&s->queue))
        queue_bytes(s, "{\"type\":\"keepalive\"}\n", 21);
    rearm_keepalive(s);
    gw_event_source_notify(&s->super);
}

/* The client went away before the run's end: E2B's server interrupts the kernel, and so does kgate (once). */
static void stop_run(gw_e2b_stream_t *s)
{
    if (!s->ended && !s->stopped && s->cursor.run != NULL) {
        s->stopped = 1;
        gw_run_stop(s->cursor.run);
    }
}

static void on_gone_check(h2o_timeout_entry_t *entry)
{
    gw_e2b_stream_t *s = H2O_STRUCT_FROM_MEMBER(gw_e2b_stream_t, gone_check, entry);

    if (s->ended || s->closed)
        return;
    if (gw_req_peer_gone(s->req))
        stop_run(s);
    else
        h2o_timeout_link(s->e2b->host->loop, &s->e2b->gone_timeout, &s->gone_check);
}

/* The JSON of a whole run event (frames: `id: n\ndata: {json}\n\n`, or execd's `{json}\n\n`). */
static json_t *event_json(const char *frame, size_t len)
{
    const char *brace = memchr(frame, '{', len);
    json_t *v;

    if (brace == NULL)
        return NULL;
    len -= (size_t)(brace - frame);
    if ((v = json_loadb(brace, len, JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL, NULL)) != NULL)
        return v;
    /* an integer beyond 64 bits, relayed as the kernel wrote it: read as a real, not lost */
    return json_loadb(brace, len, JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL | JSON_DECODE_INT_AS_REAL, NULL);
}

/* Appends `len` bytes to the event being put together. */
static void partial_put(gw_e2b_stream_t *s, const char *bytes, size_t len)
{
    if (s->partial.len + len + 1 > s->partial.cap) {
        s->partial.cap = (s->partial.len + len + 1) * 2;
        s->partial.p = wire_realloc(s->partial.p, s->partial.cap);
    }
    memcpy(s->partial.p + s->partial.len, bytes, len);
    s->partial.len += len;
}

/* Translates one run event (or a piece of one read back from the log) into queued lines. */
static void take_run_event(gw_e2b_stream_t *s, const gw_event_t *ev)
{
    gw_e2b_lines_t lines = {NULL, 0, 0};
    h2o_iovec_t pieces[GW_EVENT_MAX_PIECES];
    size_t n = gw_event_pieces(ev, pieces);
    const char *frame = pieces[0].base;
    size_t len = pieces[0].len;
    json_t *json;

    /* compact JSON holds no raw line break: a frame is whole when it ends in its blank line; one in several pieces (a big
     * stream event's text held apart, or pieces read back from the log) is put together first */
    if (s->partial.len != 0 || n != 1 || len < 2 || memcmp(frame + len - 2, "\n\n", 2) != 0) {
        for (size_t i = 0; i != n; ++i)
            partial_put(s, pieces[i].base, pieces[i].len);
        if (s->partial.len < 2 || memcmp(s->partial.p + s->partial.len - 2, "\n\n", 2) != 0)
            return;
        frame = s->partial.p;
        len = s->partial.len;
    }
    json = event_json(frame, len);
    s->partial.len = 0;
    /* a big event's copy goes once read, not with the stream, which may stay open for the rest of a long run */
    if (frame == s->partial.p) {
        free(s->partial.p);
        s->partial.p = NULL;
        s->partial.cap = 0;
    }
    if (json != NULL) {
        gw_e2b_translate(&s->xlate, json, &lines);
        json_decref(json);
    }
    if (lines.len != 0) {
        queue_bytes(s, lines.p, lines.len);
        rearm_keepalive(s);
    }
    free(lines.p);
}

/* Reads run events until a line is queued, the run has nothing new, or it has ended. */
static void refill(gw_e2b_stream_t *s, int *lost)
{
    gw_event_source_t *inner = &s->cursor.super;

    while (h2o_linklist_is_empty(&s->queue) && !s->ended) {
        gw_event_t *ev = inner->ops->next(inner, s->inner_last, lost);
        if (*lost)
            return;
        if (ev == NULL) {
            if (!inner->ops->is_end(inner, s->inner_last))
                return;
            /* E2B ends every stream with this line; a client reads the end of the body as the run's */
            queue_bytes(s, "{\"type\":\"end_of_execution\"}\n", 28);
            s->ended = 1;
            if (h2o_timeout_is_linked(&s->keepalive))
                h2o_timeout_unlink(&s->keepalive);
            if (h2o_timeout_is_linked(&s->gone_check))
                h2o_timeout_unlink(&s->gone_check);
            return;
        }
        gw_event_addref(ev);
        gw_event_release(s->inner_last);
        s->inner_last = ev;
        take_run_event(s, ev);
    }
}

static gw_event_t *stream_next(gw_event_source_t *source, const gw_event_t *prev, int *lost)
{
    gw_e2b_stream_t *s = H2O_STRUCT_FROM_MEMBER(gw_e2b_stream_t, super, source);

    /* everything up to `prev` has been taken (the writer holds its own references) */
    while (prev != NULL && !h2o_linklist_is_empty(&s->queue) &&
           H2O_STRUCT_FROM_MEMBER(gw_event_t, link, s->queue.next)->id <= prev->id)
        pop_line(s);
    refill(s, lost);
    return h2o_linklist_is_empty(&s->queue) ? NULL : H2O_STRUCT_FROM_MEMBER(gw_event_t, link, s->queue.next);
}

static int stream_is_end(gw_event_source_t *source, const gw_event_t *prev)
{
    gw_e2b_stream_t *s = H2O_STRUCT_FROM_MEMBER(gw_e2b_stream_t, super, source);

    return s->ended && (h2o_linklist_is_empty(&s->queue) || (prev != NULL && &prev->link == s->queue.prev));
}

static void stream_close(gw_event_source_t *source)
{
    gw_e2b_stream_t *s = H2O_STRUCT_FROM_MEMBER(gw_e2b_stream_t, super, source);

    stop_run(s);
    s->closed = 1;
    s->cursor.super.on_ready = NULL;
    s->cursor.super.ops->close(&s->cursor.super);
    if (h2o_timeout_is_linked(&s->keepalive))
        h2o_timeout_unlink(&s->keepalive);
    if (h2o_timeout_is_linked(&s->gone_check))
        h2o_timeout_unlink(&s->gone_check);
    h2o_linklist_unlink(&s->link);
    while (!h2o_linklist_is_empty(&s->queue))
        pop_line(s);
    gw_event_release(s->inner_last);
    s->inner_last = NULL;
    free(s->partial.p);
    s->partial.p = NULL;
}

static const gw_event_source_ops_t stream_ops = {stream_next, stream_is_end, stream_close};

static void on_run_ready(gw_event_source_t *inner)
{
    gw_e2b_stream_t *s = H2O_STRUCT_FROM_MEMBER(gw_e2b_stream_t, cursor.super, inner);
    gw_event_source_notify(&s->super);
}

/* Streams `run` as NDJSON: 200, E2B's headers, the lines as they come. */
static void stream_run(gw_e2b_t *e2b, h2o_req_t *req, gw_run_t *run)
{
    gw_e2b_stream_t *s = h2o_mem_alloc_pool(&req->pool, sizeof(*s));
    int ret;

    memset(s, 0, sizeof(*s));
    s->super.ops = &stream_ops;
    s->e2b = e2b;
    s->req = req;
    h2o_linklist_init_anchor(&s->queue);
    s->keepalive.cb = on_keepalive;
    s->gone_check.cb = on_gone_check;
    if ((ret = gw_run_cursor_open(run, &s->cursor, 0)) != 0) {
        gw_e2b_send_text(req, 500, "the run's events are gone: %s", gw_strerror(ret));
        return;
    }
    s->cursor.super.on_ready = on_run_ready;
    h2o_linklist_insert(&e2b->streams, &s->link);
    rearm_keepalive(s);
    h2o_timeout_link(e2b->host->loop, &e2b->gone_timeout, &s->gone_check);
    req->res.status = 200;
    req->res.reason = "OK";
    gw_e2b_add_headers(req);
    gw_add_common_headers(req);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/x-ndjson"));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("no-cache"));
    gw_stream_start(req, &s->super, e2b->host->config->max_reader_batch_bytes);
}

/* env_vars: an object of strings whose names are identifiers (they become code in the kernel). */
static int check_env(h2o_req_t *req, const json_t *env)
{
    const char *key;
    json_t *value;

    if (!json_is_object(env)) {
        gw_e2b_send_text(req, 400, "env_vars must be an object of strings");
        return -1;
    }
    json_object_foreach((json_t *)env, key, value)
    {
        int ok = (key[0] == '_' || (key[0] | 0x20) >= 'a') && (key[0] | 0x20) <= 'z';
        for (const char *p = key; ok && *p != '\0'; ++p)
            ok = *p == '_' || (*p >= '0' && *p <= '9') || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z');
        if (!ok || !json_is_string(value) || strlen(json_string_value(value)) != json_string_length(value)) {
            gw_e2b_send_text(req, 400,
                             "env_vars.%.100s: names are identifiers ([A-Za-z_][A-Za-z0-9_]*) and values strings without NUL", key);
            return -1;
        }
    }
    return 0;
}

/* A silent run of the door's own code (env_vars restored): its events are nobody's. */
static int submit_silent(gw_context_t *ctx, const char *code, const gw_kernel_run_options_t *like)
{
    gw_kernel_run_options_t opts = *like;
    gw_run_t *run;

    opts.code = code;
    opts.silent = 1;
    return gw_kernel_run_submit(ctx, &opts, &run);
}

/* The context of an /execute body: by id, or a language's default one (created on first use). NULL after answering. */
static gw_context_t *context_for(gw_e2b_t *e2b, h2o_req_t *req, const char *id, const char *language)
{
    const kmgr_kernelspec_t *spec;
    gw_context_t *ctx;

    if (id != NULL) {
        if ((ctx = gw_context_find(e2b->contexts, id)) == NULL)
            gw_e2b_send_text(req, 404, "Context %.64s not found", id);
        return ctx;
    }
    if ((spec = gw_e2b_spec_of(e2b, req, language)) == NULL)
        return NULL;
    if ((ctx = gw_context_find_default(e2b->contexts, spec)) == NULL) {
        gw_context_options_t opts = {.spec = spec, .is_default = 1};
        if (gw_e2b_create_context(e2b, req, &opts, &ctx) != 0)
            return NULL;
    }
    return ctx;
}

GW_E2B_HANDLER(execute)
{
    gw_e2b_t *e2b = gw_e2b_from(door);
    const gw_config_t *config = e2b->host->config;
    json_t *body = gw_parse_body(req), *jcode, *jid, *jlang, *env;
    gw_kernel_run_options_t opts = {0};
    char language[64];
    char *set_code = NULL, *restore_code = NULL;
    gw_context_t *ctx;
    gw_run_t *run;
    int ret;
    (void)params;

    if (body == NULL)
        return;
    jcode = json_object_get(body, "code");
    jid = json_object_get(body, "context_id");
    jlang = json_object_get(body, "language");
    env = json_object_get(body, "env_vars");
    if (!json_is_string(jcode) || strlen(json_string_value(jcode)) != json_string_length(jcode)) {
        gw_e2b_send_text(req, 400, "code must be a string without NUL characters");
        goto Exit;
    }
    if ((jid != NULL && !json_is_null(jid) && !json_is_string(jid)) ||
        (jlang != NULL && !json_is_null(jlang) && !json_is_string(jlang))) {
        gw_e2b_send_text(req, 400, "context_id and language must be strings");
        goto Exit;
    }
    if (json_is_string(jid) && json_is_string(jlang)) {
        gw_e2b_send_text(req, 400, "Only one of context_id or language can be provided");
        goto Exit;
    }
    if (env != NULL && !json_is_null(env) && check_env(req, env) != 0)
        goto Exit;
    gw_e2b_language(json_string_value(jlang), language, sizeof(language));
    if ((ctx = context_for(e2b, req, json_string_value(jid), language)) == NULL)
        goto Exit;
    opts.code = json_string_value(jcode);
    /* E2B's run has no timeout of its own: the client's (60 s by default) aborts the request, which interrupts it */
    opts.timeout_ms = config->max_timeout_ms;
    opts.limits.output_bytes = config->output_limit_bytes;
    opts.limits.result_bytes = config->result_limit_bytes;
    if (json_is_object(env) && json_object_size(env) != 0) {
        set_code = gw_e2b_env_code(ctx->spec->language, env, 0);
        restore_code = gw_e2b_env_code(ctx->spec->language, env, 1);
        if (set_code == NULL) {
            gw_e2b_send_text(req, 400, "env_vars are not supported in %s contexts", ctx->spec->language);
            goto Exit;
        }
        /* the run (the variables set by its silent setup) and the one that restores them are queued together, or none */
        if (gw_kernel_runs_count(ctx) + 2 > config->max_queue + 1) {
            gw_e2b_send_text(req, 429, "context %s already has %zu runs waiting (--max-queue); try again later", ctx->id,
                             gw_kernel_runs_count(ctx));
            goto Exit;
        }
        opts.setup_code = set_code;
    }
    if ((ret = gw_kernel_run_submit(ctx, &opts, &run)) != 0)
        goto Refused;
    if (restore_code != NULL) {
        opts.setup_code = NULL;
        submit_silent(ctx, restore_code, &opts);
    }
    stream_run(e2b, req, run);
    goto Exit;
Refused:
    /* a full queue is 429 as execd's QUEUE_FULL: this context is busy, kgate is not unavailable (the SDK tells any status
     * but 404 and 502 apart only by its number and reason) */
    if (ret == GW_EKERNELDEAD)
        gw_e2b_send_text(req, 500, "the kernel of context %s is dead (%s); restart it with POST /contexts/%s/restart", ctx->id,
                         gw_context_exit_reason(ctx), ctx->id);
    else
        gw_e2b_send_text(req, 429, "context %s already has %zu runs waiting (--max-queue); try again later", ctx->id,
                         gw_kernel_runs_count(ctx));
Exit:
    free(set_code);
    free(restore_code);
    json_decref(body);
}
