/* Routes of /api/sessions: a notebook's (or console's) path bound to one kernel, as Jupyter Server keeps them. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/ids.h"
#include "core/http.h"
#include "jupyter/jupyter.h"

/* The longest path, name and type a session keeps (they are labels, not files kgate opens). */
#define MAX_LABEL 4096

typedef struct st_gw_jsession_t {
    char id[WIRE_UUID_STRLEN + 1];
    char kernel_id[WIRE_UUID_STRLEN + 1];
    char *path, *name, *type;
    h2o_linklist_t link; /* in jupyter->sessions */
} gw_jsession_t;

static void session_free(gw_jupyter_t *jupyter, gw_jsession_t *s)
{
    h2o_linklist_unlink(&s->link);
    --jupyter->nsessions;
    free(s->path);
    free(s->name);
    free(s->type);
    free(s);
}

void gw_jupyter_dispose(gw_jupyter_t *jupyter)
{
    while (!h2o_linklist_is_empty(&jupyter->sessions))
        session_free(jupyter, H2O_STRUCT_FROM_MEMBER(gw_jsession_t, link, jupyter->sessions.next));
    free(jupyter->encoded);
    jupyter->encoded = NULL;
}

void gw_jupyter_forget_kernel_sessions(gw_jupyter_t *jupyter, const gw_context_t *ctx)
{
    h2o_linklist_t *node, *next;

    for (node = jupyter->sessions.next; node != &jupyter->sessions; node = next) {
        gw_jsession_t *s = H2O_STRUCT_FROM_MEMBER(gw_jsession_t, link, node);
        next = node->next;
        if (strcmp(s->kernel_id, ctx->id) == 0)
            session_free(jupyter, s);
    }
}

/* The session's kernel; a session whose kernel went away (deleted through another API, expired) goes too, as in Jupyter Server. */
static gw_context_t *session_kernel(gw_jupyter_t *jupyter, gw_jsession_t *s)
{
    gw_context_t *ctx = gw_jupyter_find_kernel(jupyter, s->kernel_id);
    if (ctx == NULL)
        session_free(jupyter, s);
    return ctx;
}

static json_t *session_model(gw_jupyter_t *jupyter, const gw_jsession_t *s, const gw_context_t *ctx)
{
    json_t *model = json_pack("{s:s, s:s, s:s, s:s, s:o}", "id", s->id, "path", s->path, "name", s->name, "type", s->type, "kernel",
                              gw_jupyter_kernel_model(jupyter, ctx));
    /* Jupyter Server 1.x still names a notebook's path and name here too */
    if (strcmp(s->type, "notebook") == 0)
        json_object_set_new(model, "notebook", json_pack("{s:s, s:s}", "path", s->path, "name", s->name));
    return model;
}

static gw_jsession_t *find_session(gw_jupyter_t *jupyter, const char *id, const char *path)
{
    for (h2o_linklist_t *node = jupyter->sessions.next; node != &jupyter->sessions; node = node->next) {
        gw_jsession_t *s = H2O_STRUCT_FROM_MEMBER(gw_jsession_t, link, node);
        if ((id != NULL && strcmp(s->id, id) == 0) || (path != NULL && strcmp(s->path, path) == 0))
            return s;
    }
    return NULL;
}

/* A label field of a body: absent or null gives `fallback`; else a string without NUL of at most MAX_LABEL bytes. */
static int label(h2o_req_t *req, json_t *body, const char *key, const char *fallback, const char **out)
{
    json_t *v = json_object_get(body, key);

    if (v == NULL || json_is_null(v)) {
        *out = fallback;
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) > MAX_LABEL || strlen(json_string_value(v)) != json_string_length(v)) {
        gw_jupyter_error(req, 400, "%s must be a string of at most %d bytes", key, MAX_LABEL);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

static json_t *parse_object_body(h2o_req_t *req)
{
    json_error_t err;
    json_t *body = json_loadb(req->entity.base, req->entity.len, JSON_REJECT_DUPLICATES, &err);

    if (body == NULL || !json_is_object(body)) {
        gw_jupyter_error(req, 400, "the body must be a JSON object: %.200s", body == NULL ? err.text : "not an object");
        json_decref(body);
        return NULL;
    }
    return body;
}

/* The `kernel` member of a session body: {"id"} names a running kernel, {"name"} (or nothing) a spec to start. */
static int kernel_member(h2o_req_t *req, json_t *body, const char **id, const char **name)
{
    json_t *kernel = json_object_get(body, "kernel"), *jid, *jname;

    *id = *name = NULL;
    if (kernel == NULL || json_is_null(kernel))
        return 0;
    jid = json_object_get(kernel, "id");
    jname = json_object_get(kernel, "name");
    if (!json_is_object(kernel) || (jid != NULL && !json_is_null(jid) && !json_is_string(jid)) ||
        (jname != NULL && !json_is_null(jname) && !json_is_string(jname))) {
        gw_jupyter_error(req, 400, "kernel must be an object with a string id or name");
        return -1;
    }
    *id = json_string_value(jid);
    *name = json_string_value(jname);
    return 0;
}

GW_JUPYTER_HANDLER(sessions_list)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    json_t *list = json_array();
    h2o_linklist_t *node, *next;
    (void)params;

    for (node = jupyter->sessions.next; node != &jupyter->sessions; node = next) {
        gw_jsession_t *s = H2O_STRUCT_FROM_MEMBER(gw_jsession_t, link, node);
        gw_context_t *ctx;
        next = node->next;
        if ((ctx = session_kernel(jupyter, s)) != NULL)
            json_array_append_new(list, session_model(jupyter, s, ctx));
    }
    gw_send_json(req, 200, list);
}

static void send_created(gw_jupyter_t *jupyter, h2o_req_t *req, const gw_jsession_t *s, const gw_context_t *ctx)
{
    char location[128];

    snprintf(location, sizeof(location), "/api/sessions/%s", s->id);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_LOCATION, NULL, location, strlen(location));
    gw_send_json(req, 201, session_model(jupyter, s, ctx));
}

GW_JUPYTER_HANDLER(session_create)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    json_t *body = parse_object_body(req);
    const char *path, *name, *type, *kernel_id, *kernel_name;
    gw_jsession_t *s;
    gw_context_t *ctx;
    (void)params;

    if (body == NULL)
        return;
    if (label(req, body, "path", NULL, &path) != 0 || label(req, body, "name", "", &name) != 0 ||
        label(req, body, "type", "", &type) != 0 || kernel_member(req, body, &kernel_id, &kernel_name) != 0)
        goto Exit;
    if (path == NULL) {
        gw_jupyter_error(req, 400, "Missing field in JSON data: path");
        goto Exit;
    }
    /* one session per path: asking again returns the one there is */
    if ((s = find_session(jupyter, NULL, path)) != NULL && (ctx = session_kernel(jupyter, s)) != NULL) {
        send_created(jupyter, req, s, ctx);
        goto Exit;
    }
    if (jupyter->nsessions >= GW_JUPYTER_MAX_SESSIONS) {
        gw_jupyter_error(req, 429, "%d sessions are open, the maximum; delete one first", GW_JUPYTER_MAX_SESSIONS);
        goto Exit;
    }
    if (kernel_id != NULL && (ctx = gw_jupyter_find_kernel(jupyter, kernel_id)) != NULL) {
        /* an existing kernel joins the session */
    } else if ((ctx = gw_jupyter_start_kernel(jupyter, req, kernel_name,
                                              json_object_get(json_object_get(body, "kernel"), "env"))) == NULL) {
        goto Exit;
    }
    s = wire_calloc(1, sizeof(*s));
    wire_uuid4(s->id);
    memcpy(s->kernel_id, ctx->id, sizeof(s->kernel_id));
    s->path = wire_strdup(path);
    s->name = wire_strdup(name);
    s->type = wire_strdup(type);
    h2o_linklist_insert(&jupyter->sessions, &s->link);
    ++jupyter->nsessions;
    send_created(jupyter, req, s, ctx);
Exit:
    json_decref(body);
}

/* The session named by path parameter 0 and its kernel, or NULL after answering 404. */
static gw_jsession_t *session_from_params(gw_jupyter_t *jupyter, h2o_req_t *req, const gw_route_params_t *params,
                                          gw_context_t **ctx)
{
    const char *id = gw_path_param(req, params, 0);
    gw_jsession_t *s = id != NULL ? find_session(jupyter, id, NULL) : NULL;

    if (s == NULL || (*ctx = session_kernel(jupyter, s)) == NULL) {
        gw_jupyter_error(req, 404, "Session not found: session_id='%.64s'", id != NULL ? id : "");
        return NULL;
    }
    return s;
}

GW_JUPYTER_HANDLER(session_get)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    gw_context_t *ctx;
    gw_jsession_t *s = session_from_params(jupyter, req, params, &ctx);

    if (s != NULL)
        gw_send_json(req, 200, session_model(jupyter, s, ctx));
}

static void replace(char **field, const char *value)
{
    if (value == NULL)
        return;
    free(*field);
    *field = wire_strdup(value);
}

GW_JUPYTER_HANDLER(session_patch)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    gw_context_t *ctx, *old;
    gw_jsession_t *s = session_from_params(jupyter, req, params, &ctx);
    const char *path, *name, *type, *kernel_id, *kernel_name;
    json_t *body;

    if (s == NULL || (body = parse_object_body(req)) == NULL)
        return;
    if (label(req, body, "path", NULL, &path) != 0 || label(req, body, "name", NULL, &name) != 0 ||
        label(req, body, "type", NULL, &type) != 0 || kernel_member(req, body, &kernel_id, &kernel_name) != 0)
        goto Exit;
    old = ctx;
    if (kernel_id != NULL) {
        if ((ctx = gw_jupyter_find_kernel(jupyter, kernel_id)) == NULL) {
            gw_jupyter_error(req, 400, "No such kernel: %.64s", kernel_id);
            goto Exit;
        }
    } else if (kernel_name != NULL) {
        /* a new kernel of that spec; the old one is shut down, as Jupyter Server does */
        if ((ctx = gw_jupyter_start_kernel(jupyter, req, kernel_name, NULL)) == NULL)
            goto Exit;
    }
    replace(&s->path, path);
    replace(&s->name, name);
    replace(&s->type, type);
    if (ctx != old) {
        memcpy(s->kernel_id, ctx->id, sizeof(s->kernel_id));
        if (kernel_id == NULL) {
            /* only this session held the old kernel if it was started for it; others lose it too, as in Jupyter Server */
            gw_jupyter_forget_kernel_sessions(jupyter, old);
            gw_context_destroy(old);
        }
    }
    gw_send_json(req, 200, session_model(jupyter, s, ctx));
Exit:
    json_decref(body);
}

GW_JUPYTER_HANDLER(session_delete)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    gw_context_t *ctx;
    gw_jsession_t *s = session_from_params(jupyter, req, params, &ctx);

    if (s == NULL)
        return;
    /* deleting a session shuts its kernel down (and ends every session on it) */
    gw_jupyter_forget_kernel_sessions(jupyter, ctx);
    gw_context_destroy(ctx);
    req->res.status = 204;
    req->res.reason = "No Content";
    gw_add_common_headers(req);
    h2o_send_inline(req, NULL, 0);
}
