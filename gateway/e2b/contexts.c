/* E2B's contexts (create, list, restart, delete) over the engine's, and GET /health. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ksys/errors.h"
#include "core/errors.h"
#include "core/http.h"
#include "e2b/e2b.h"
#include "e2b/translate.h"

void gw_e2b_add_headers(h2o_req_t *req)
{
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-origin"), 0, NULL, H2O_STRLIT("*"));
}

void gw_e2b_send_text(h2o_req_t *req, int status, const char *fmt, ...)
{
    static h2o_generator_t generator = {NULL, NULL};
    char message[2048];
    va_list args;
    int n;
    h2o_iovec_t buf;

    va_start(args, fmt);
    n = vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);
    if (n < 0)
        n = 0;
    /* a message may quote what the caller sent (an id): the body says it is UTF-8, and a terminal shows it */
    buf.base = h2o_mem_alloc_pool(&req->pool, sizeof(message) * 3);
    buf.len =
        gw_e2b_plain_text(buf.base, sizeof(message) * 3, message, (size_t)n < sizeof(message) ? (size_t)n : sizeof(message) - 1);
    req->res.status = status;
    req->res.reason = status == 404   ? "Not Found"
                      : status == 400 ? "Bad Request"
                      : status == 429 ? "Too Many Requests"
                      : status == 503 ? "Service Unavailable"
                                      : "Error";
    req->res.content_length = buf.len;
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/plain; charset=utf-8"));
    gw_e2b_add_headers(req);
    gw_add_common_headers(req);
    h2o_start_response(req, &generator);
    h2o_send(req, &buf, 1, H2O_SEND_STATE_FINAL);
}

/* The language E2B named for a context it created ("javascript" on Deno's "typescript" kernel), else the kernel's. */
static const char *language_of(const gw_context_t *ctx)
{
    return ctx->language_named != NULL ? ctx->language_named : ctx->spec->language;
}

json_t *gw_e2b_context_json(const gw_context_t *ctx)
{
    char cwd[4096];
    const char *dir = ctx->cwd;

    if (dir == NULL)
        dir = getcwd(cwd, sizeof(cwd)) != NULL ? cwd : "";
    return json_pack("{s:s, s:s, s:s}", "id", ctx->id, "language", language_of(ctx), "cwd", dir);
}

const kmgr_kernelspec_t *gw_e2b_spec_of(gw_e2b_t *e2b, h2o_req_t *req, const char *language)
{
    const kmgr_kernelspec_t *spec = gw_languages_resolve(e2b->languages, language);
    char available[1024];

    if (spec == NULL)
        spec = gw_languages_resolve(e2b->languages, gw_e2b_kernel_language(language));
    if (spec == NULL) {
        gw_languages_describe(e2b->languages, available, sizeof(available));
        gw_e2b_send_text(req, 400, "Unsupported language %.100s; available: %s", language, available);
    }
    return spec;
}

int gw_e2b_create_context(gw_e2b_t *e2b, h2o_req_t *req, const gw_context_options_t *opts, gw_context_t **out)
{
    int ret = gw_context_create(e2b->contexts, opts, out);

    switch (ret) {
    case 0:
        return 0;
    case GW_ESHUTTINGDOWN:
        gw_e2b_send_text(req, 503, "kgate is shutting down");
        break;
    case KSYS_ESTARTQUEUE:
        /* as the execd and Jupyter doors: the SDK reports any status but 404 and 502 alike (SandboxError "<status>
         * <statusText>"), so 429 with Retry-After tells it, and any other client, the truth: come back shortly */
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("2"));
        gw_e2b_send_text(req, 429, "%u kernels are waiting to start (--max-start-queue); retry later",
                         e2b->host->config->max_start_queue);
        break;
    case GW_ETOOMANYCONTEXTS:
        gw_e2b_send_text(req, 429, "%zu contexts are alive, the maximum (--max-contexts); delete one first", e2b->contexts->count);
        break;
    default:
        gw_e2b_send_text(req, 500, "cannot start the %s kernel: %s", opts->spec->name, gw_strerror(ret));
        break;
    }
    return -1;
}

/* A request waiting for its context's kernel (create, restart); lives in the request's pool. */
typedef struct st_ready_waiter_t {
    gw_context_waiter_t super;
    gw_e2b_t *e2b;
    h2o_req_t *req;
    int restart; /* answer null, as E2B's server does after a restart */
} ready_waiter_t;

static void on_ready(gw_context_waiter_t *waiter, gw_context_t *ctx, const char *failure)
{
    ready_waiter_t *w = H2O_STRUCT_FROM_MEMBER(ready_waiter_t, super, waiter);

    if (failure == NULL) {
        gw_e2b_add_headers(w->req);
        gw_send_json(w->req, 200, w->restart ? json_null() : gw_e2b_context_json(ctx));
    } else if (gw_context_is_deleted(ctx)) {
        gw_e2b_send_text(w->req, 404, "Context %s not found", ctx->id); /* deleted while its kernel started or restarted */
    } else {
        gw_e2b_send_text(w->req, 500, "the %s kernel failed to start: %s", ctx->spec->name, failure);
    }
}

/* The client went away before its kernel was ready: the context stays, the answer is dropped. */
static void on_waiter_dispose(void *p)
{
    gw_context_waiter_cancel(&((ready_waiter_t *)p)->super);
}

static void respond_when_ready(gw_e2b_t *e2b, gw_context_t *ctx, h2o_req_t *req, int restart)
{
    ready_waiter_t *w = h2o_mem_alloc_shared(&req->pool, sizeof(*w), on_waiter_dispose);

    memset(w, 0, sizeof(*w));
    w->super.cb = on_ready;
    w->e2b = e2b;
    w->req = req;
    w->restart = restart;
    gw_context_wait_ready(ctx, &w->super);
}

GW_E2B_HANDLER(context_create)
{
    gw_e2b_t *e2b = gw_e2b_from(door);
    json_t *body = gw_parse_body(req), *jlang, *jcwd;
    gw_context_options_t opts = {0};
    char language[64];
    struct stat st;
    gw_context_t *ctx;
    (void)params;

    if (body == NULL)
        return;
    jlang = json_object_get(body, "language");
    jcwd = json_object_get(body, "cwd");
    if ((jlang != NULL && !json_is_null(jlang) && !json_is_string(jlang)) ||
        (jcwd != NULL && !json_is_null(jcwd) && !json_is_string(jcwd))) {
        gw_e2b_send_text(req, 400, "language and cwd must be strings");
        goto Exit;
    }
    gw_e2b_language(json_string_value(jlang), language, sizeof(language));
    if ((opts.spec = gw_e2b_spec_of(e2b, req, language)) == NULL)
        goto Exit;
    if (json_is_string(jcwd) && json_string_length(jcwd) != 0) {
        opts.cwd = json_string_value(jcwd);
        if (strlen(opts.cwd) != json_string_length(jcwd) || stat(opts.cwd, &st) != 0 || !S_ISDIR(st.st_mode)) {
            gw_e2b_send_text(req, 500, "cwd %.200s is not an existing directory", opts.cwd);
            goto Exit;
        }
    }
    opts.forget_failed_start = 1;
    if (strcasecmp(language, opts.spec->language) != 0)
        opts.language_named = language;
    if (gw_e2b_create_context(e2b, req, &opts, &ctx) != 0)
        goto Exit;
    respond_when_ready(e2b, ctx, req, 0);
Exit:
    json_decref(body);
}

GW_E2B_HANDLER(context_list)
{
    gw_e2b_t *e2b = gw_e2b_from(door);
    json_t *list = json_array();
    (void)params;

    for (h2o_linklist_t *node = e2b->contexts->list.next; node != &e2b->contexts->list; node = node->next) {
        gw_context_t *ctx = H2O_STRUCT_FROM_MEMBER(gw_context_t, link, node);
        if (!ctx->is_ephemeral)
            json_array_append_new(list, gw_e2b_context_json(ctx));
    }
    gw_e2b_add_headers(req);
    gw_send_json(req, 200, list);
}

/* The context of the path, or NULL after answering 404 as E2B's server does. */
static gw_context_t *context_of(gw_e2b_t *e2b, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *id = gw_path_param(req, params, 0);
    gw_context_t *ctx = id != NULL ? gw_context_find(e2b->contexts, id) : NULL;

    if (ctx == NULL)
        gw_e2b_send_text(req, 404, "Context %.*s not found", (int)(params->values[0].len > 64 ? 64 : params->values[0].len),
                         params->values[0].base);
    return ctx;
}

GW_E2B_HANDLER(context_restart)
{
    gw_e2b_t *e2b = gw_e2b_from(door);
    gw_context_t *ctx = context_of(e2b, req, params);
    int ret;

    if (ctx == NULL)
        return;
    if ((ret = gw_context_restart(ctx)) != 0) {
        gw_e2b_send_text(req, 500, "cannot restart the %s kernel: %s", ctx->spec->name, gw_strerror(ret));
        return;
    }
    respond_when_ready(e2b, ctx, req, 1);
}

GW_E2B_HANDLER(context_delete)
{
    gw_e2b_t *e2b = gw_e2b_from(door);
    gw_context_t *ctx = context_of(e2b, req, params);

    if (ctx == NULL)
        return;
    gw_context_destroy(ctx);
    gw_e2b_add_headers(req);
    gw_send_empty(req);
}

GW_E2B_HANDLER(health)
{
    (void)door, (void)params;
    gw_e2b_add_headers(req);
    gw_send_json(req, 200, json_string("OK"));
}

/* A browser's CORS preflight: what E2B's server allows (any method, any header). */
GW_E2B_HANDLER(preflight)
{
    (void)door, (void)params;
    gw_e2b_add_headers(req);
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-methods"), 0, NULL,
                          H2O_STRLIT("GET, POST, DELETE, OPTIONS"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-allow-headers"), 0, NULL, H2O_STRLIT("*"));
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("access-control-max-age"), 0, NULL, H2O_STRLIT("600"));
    gw_send_empty_status(req, 204);
}
