/* Routes of /v1/isolated: execd's isolated sessions (docs/API.md 5.1, OSEP-0013) over procs/isolated.h; the files routes are the
 * /files handlers run in the session's view of its workspace. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "core/errors.h"
#include "core/http.h"
#include "execd/execd.h"

/* 503 NOT_SUPPORTED: the code's own status is 501 (diff/commit), this one says the host cannot isolate at all. */
static void send_unavailable(h2o_req_t *req, const gw_isolated_t *iso)
{
    gw_send_json(
        req, 503,
        json_pack("{s:s, s:s+}", "code", "NOT_SUPPORTED", "message", "isolated sessions are not available here: ", iso->message));
}

/* 1 when the routes may run; else answered. */
static int require_available(gw_execd_t *execd, h2o_req_t *req)
{
    if (execd->isolated->available)
        return 1;
    send_unavailable(req, execd->isolated);
    return 0;
}

/* The session named by the path, or NULL after answering 404 (or 503). */
static gw_isolated_session_t *session_from_params(gw_execd_t *execd, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *id;
    gw_isolated_session_t *s;

    if (!require_available(execd, req))
        return NULL;
    id = gw_path_param(req, params, 0);
    if ((s = id != NULL ? gw_isolated_find(execd->isolated, id) : NULL) == NULL)
        gw_send_error(req, GW_HTTP_SESSION_NOT_FOUND, "no isolated session with id \"%.64s\"", id != NULL ? id : "(malformed)");
    return s;
}

GW_EXECD_HANDLER(isolated_capabilities)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_isolated_t *iso = execd->isolated;
    json_t *obj;
    (void)params;

    obj = json_pack("{s:b, s:s, s:s, s:[ss], s:[sss], s:b, s:b, s:b, s:b, s:I, s:I, s:s}", "available", iso->available, "isolator",
                    "bwrap", "version", iso->version, "profiles", "strict", "balanced", "workspace_modes", "rw", "overlay", "ro",
                    "overlay_supported", iso->available && iso->unshare != NULL, "share_net_overridable", 1, "commit_supported", 0,
                    "diff_supported", 0, "max_sessions", (json_int_t)execd->host->config->max_isolated_sessions,
                    "idle_timeout_seconds_default", (json_int_t)execd->host->config->isolated_idle_seconds, "workspace_root",
                    iso->root);
    if (!iso->available)
        json_object_set_new(obj, "message", json_string(iso->message));
    gw_send_json(req, 200, obj);
}

/* A create or a delete answered once the engine reports; lives in the request's pool. */
typedef struct st_iso_waiter_t {
    h2o_req_t *req;
    gw_isolated_session_t *s; /* until the engine's callback: the client going away first abandons it */
} iso_waiter_t;

/* The client went away first: a starting session is released, a deletion goes on without us. */
static void on_waiter_dispose(void *p)
{
    iso_waiter_t *w = p;

    if (w->s != NULL)
        gw_isolated_abandon(w->s);
}

static iso_waiter_t *new_waiter(h2o_req_t *req)
{
    iso_waiter_t *w = h2o_mem_alloc_shared(&req->pool, sizeof(*w), on_waiter_dispose);

    w->req = req;
    w->s = NULL;
    return w;
}

static void on_started(gw_isolated_session_t *s, void *data, const char *error)
{
    iso_waiter_t *w = data;
    json_t *obj;

    w->s = NULL;
    if (error != NULL) {
        gw_send_error(w->req, GW_HTTP_INVALID_REQUEST_BODY, "cannot create the isolated session: %s", error);
        return;
    }
    if (gw_req_peer_gone(w->req)) {
        /* an HTTP/1.1 client that hung up while the sandbox started: nobody would learn the id, nobody would delete it */
        gw_isolated_destroy(s, NULL, NULL);
        gw_send_error(w->req, GW_HTTP_INVALID_REQUEST_BODY, "the client went away while the session started");
        return;
    }
    obj = gw_isolated_to_json(s);
    json_object_set_new(obj, "isolation", gw_iso_spec_to_json(&s->spec)); /* OSEP-0013's shape, besides docs/API.md's */
    json_object_set_new(obj, "artifacts", json_null());
    gw_send_json(w->req, 200, obj);
}

GW_EXECD_HANDLER(isolated_create)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_isolated_t *iso = execd->isolated;
    gw_iso_spec_t spec;
    iso_waiter_t *w;
    json_t *body;
    char err[600];
    int ret;
    (void)params;

    if (!require_available(execd, req) || (body = gw_parse_body(req)) == NULL)
        return;
    if (gw_iso_spec_parse(body, iso->root, iso->runtime_dir, execd->host->config->isolated_idle_seconds, &spec, err, sizeof(err)) !=
        0) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "%s", err);
        goto Exit;
    }
    w = new_waiter(req);
    if ((ret = gw_isolated_create(iso, &spec, on_started, w, &w->s, err, sizeof(err))) != 0) {
        w->s = NULL;
        gw_iso_spec_dispose(&spec);
        if (ret == GW_ETOOMANYISOLATED)
            gw_send_error(req, GW_HTTP_TOO_MANY_SESSIONS, "%s", err);
        else
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "cannot create the isolated session: %s", err);
    }
Exit:
    json_decref(body);
}

GW_EXECD_HANDLER(isolated_list)
{
    gw_execd_t *execd = gw_execd_from(door);
    json_t *list;
    (void)params;

    if (!require_available(execd, req))
        return;
    list = json_array();
    for (h2o_linklist_t *node = execd->isolated->sessions.next; node != &execd->isolated->sessions; node = node->next)
        json_array_append_new(list, gw_isolated_to_json(H2O_STRUCT_FROM_MEMBER(gw_isolated_session_t, link, node)));
    gw_send_json(req, 200, json_pack("{s:o}", "sessions", list));
}

GW_EXECD_HANDLER(isolated_get)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_isolated_session_t *s = session_from_params(execd, req, params);

    if (s != NULL)
        gw_send_json(req, 200, gw_isolated_to_json(s));
}

/* DELETE answers once the sandbox is gone (docs/API.md: after the answer the id is gone), which the loop learns by polling. */
static void on_released(void *data)
{
    iso_waiter_t *w = data;

    w->s = NULL;
    gw_send_empty(w->req);
}

GW_EXECD_HANDLER(isolated_delete)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_isolated_session_t *s = session_from_params(execd, req, params);

    iso_waiter_t *w;

    if (s == NULL)
        return;
    w = new_waiter(req);
    w->s = s;
    gw_isolated_destroy(s, on_released, w);
}

/* A name bash can export: [A-Za-z_][A-Za-z0-9_]* (anything else would be shell syntax in the run's script). */
static int is_identifier(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return 0;
    for (++s; *s != '\0'; ++s)
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

static int is_c_string(json_t *v)
{
    return json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v);
}

GW_EXECD_HANDLER(isolated_run)
{
    gw_execd_t *execd = gw_execd_from(door);
    const gw_config_t *config = execd->host->config;
    gw_isolated_session_t *s = session_from_params(execd, req, params);
    json_t *body, *code, *envs, *cwd, *timeout, *value;
    gw_run_limits_t limits = {config->output_limit_bytes, config->result_limit_bytes};
    unsigned timeout_ms = config->isolated_run_timeout_seconds * 1000u;
    const char *key;
    gw_run_t *run;
    int ret;

    if (s == NULL || (body = gw_parse_body(req)) == NULL)
        return;
    if ((code = json_object_get(body, "code")) == NULL)
        code = json_object_get(body, "command");
    envs = json_object_get(body, "envs");
    cwd = json_object_get(body, "cwd");
    timeout = json_object_get(body, "timeout_seconds");
    if (!is_c_string(code) || json_string_length(code) == 0) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "code must be a non-empty string without NUL characters");
        goto Exit;
    }
    if (cwd != NULL && !json_is_null(cwd) && (!is_c_string(cwd) || json_string_length(cwd) == 0)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "cwd must be a non-empty string");
        goto Exit;
    }
    if (envs != NULL && !json_is_null(envs)) {
        if (!json_is_object(envs)) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "envs must be an object of strings");
            goto Exit;
        }
        json_object_foreach(envs, key, value)
        {
            if (!is_identifier(key) || !is_c_string(value)) {
                gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY,
                              "envs: \"%.64s\" must be a shell variable name with a string value", key);
                goto Exit;
            }
        }
    }
    if (timeout != NULL && !json_is_null(timeout)) {
        if (!json_is_integer(timeout) || json_integer_value(timeout) < 0 ||
            json_integer_value(timeout) > (json_int_t)(config->max_timeout_ms / 1000)) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "timeout_seconds must be an integer from 0 (none) to %u",
                          config->max_timeout_ms / 1000);
            goto Exit;
        }
        timeout_ms = (unsigned)json_integer_value(timeout) * 1000u;
    }
    ret = gw_isolated_run(s, json_string_value(code), json_is_object(envs) ? envs : NULL,
                          json_is_string(cwd) ? json_string_value(cwd) : NULL, timeout_ms, &limits, &run);
    if (ret == GW_EKERNELDEAD)
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "isolated session %s is destroyed: %s", s->id, s->reason);
    else if (ret == GW_EISOBUSY)
        gw_send_error(req, GW_HTTP_QUEUE_FULL, "isolated session %s is running another command (one run at a time)", s->id);
    else if (ret != 0)
        gw_send_error(req, GW_HTTP_RUNTIME_ERROR, "cannot start the run in isolated session %s: %s", s->id, gw_strerror(ret));
    else
        gw_execd_stream_run(execd, req, run, 0);
Exit:
    json_decref(body);
}

GW_EXECD_HANDLER(isolated_diff)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_isolated_session_t *s = session_from_params(execd, req, params);

    if (s != NULL)
        gw_send_json(req, 501,
                     json_pack("{s:s, s:s, s:b, s:b}", "code", "NOT_SUPPORTED", "message",
                               "kgate does not export or commit an overlay's upper layer (diff_supported and commit_supported are "
                               "false in /v1/isolated/capabilities)",
                               "diff_supported", 0, "commit_supported", 0));
}

/* The /files handler `handler` in the session's view: its workspace through /proc/<sandbox pid 1>/root. */
static void with_session_files(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params, gw_route_handler_t handler)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_isolated_session_t *s = session_from_params(execd, req, params);
    gw_route_params_t none = {.size = 0};
    gw_workspace_t ws = {NULL, -1, execd->files->ws.allow_hardlinks};
    int ret;

    if (s == NULL)
        return;
    /* opened per request: nothing of ours keeps the sandbox's mounts alive, and a handler that goes on later copies it */
    if ((ret = gw_isolated_open_view(s, &ws.root_fd)) == GW_EKERNELDEAD) {
        gw_send_error(req, GW_HTTP_KERNEL_UNAVAILABLE, "isolated session %s is destroyed: %s", s->id, s->reason);
        return;
    }
    if (ret == -EXDEV) {
        gw_send_error(req, GW_HTTP_PATH_OUTSIDE_WORKSPACE, "isolated session %s's workspace path no longer leads to its workspace",
                      s->id);
        return;
    }
    if (ret != 0) {
        gw_send_error(req, GW_HTTP_RUNTIME_ERROR, "cannot reach isolated session %s's workspace: %s", s->id, gw_strerror(ret));
        return;
    }
    ws.root = s->spec.workspace; /* client paths are the sandbox's: the workspace's own path */
    execd->files_ws = &ws;
    handler(door, req, &none);
    execd->files_ws = &execd->files->ws;
    close(ws.root_fd);
}

#define ISOLATED_FILES(name)                                                                                                       \
    static void isolated_##name(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)                                  \
    {                                                                                                                              \
        with_session_files(door, req, params, gw_execd_##name);                                                                    \
    }
ISOLATED_FILES(files_info)
ISOLATED_FILES(files_delete)
ISOLATED_FILES(files_permissions)
ISOLATED_FILES(files_mv)
ISOLATED_FILES(files_search)
ISOLATED_FILES(files_replace)
ISOLATED_FILES(files_upload)
ISOLATED_FILES(files_download)
ISOLATED_FILES(directories_list)
ISOLATED_FILES(directories_create)
ISOLATED_FILES(directories_delete)

const gw_execd_route_row_t gw_execd_isolated_rows[] = {
    {"GET", "/v1/isolated/capabilities", gw_execd_isolated_capabilities, 0},
    {"POST", "/v1/isolated/session", gw_execd_isolated_create, 0},
    {"GET", "/v1/isolated/sessions", gw_execd_isolated_list, 0},
    {"GET", "/v1/isolated/session/{}", gw_execd_isolated_get, 0},
    {"DELETE", "/v1/isolated/session/{}", gw_execd_isolated_delete, 0},
    {"POST", "/v1/isolated/session/{}/run", gw_execd_isolated_run, 0},
    {"GET", "/v1/isolated/session/{}/diff", gw_execd_isolated_diff, 0},
    {"POST", "/v1/isolated/session/{}/commit", gw_execd_isolated_diff, 0},
    {"GET", "/v1/isolated/session/{}/files/info", isolated_files_info, 0},
    {"DELETE", "/v1/isolated/session/{}/files", isolated_files_delete, 0},
    {"POST", "/v1/isolated/session/{}/files/permissions", isolated_files_permissions, 0},
    {"POST", "/v1/isolated/session/{}/files/mv", isolated_files_mv, 0},
    {"GET", "/v1/isolated/session/{}/files/search", isolated_files_search, 0},
    {"POST", "/v1/isolated/session/{}/files/replace", isolated_files_replace, 0},
    {"POST", "/v1/isolated/session/{}/files/upload", isolated_files_upload, 1},
    {"GET", "/v1/isolated/session/{}/files/download", isolated_files_download, 0},
    {"GET", "/v1/isolated/session/{}/directories/list", isolated_directories_list, 0},
    {"POST", "/v1/isolated/session/{}/directories", isolated_directories_create, 0},
    {"DELETE", "/v1/isolated/session/{}/directories", isolated_directories_delete, 0},
};

const size_t gw_execd_num_isolated_rows = sizeof(gw_execd_isolated_rows) / sizeof(gw_execd_isolated_rows[0]);
