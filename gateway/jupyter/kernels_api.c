/* Routes of /api, /api/kernelspecs, /kernelspecs/{name}/{resource} and /api/kernels (Jupyter Server's shapes). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "core/http.h"
#include "core/ws.h"
#include "jupyter/jupyter.h"

/* A kernelspec resource (a logo, kernel.js) larger than this is not served: they are icons and small scripts. */
#define MAX_RESOURCE_BYTES ((size_t)1 << 20)

/* The Jupyter Server version kgate answers GET /api with: the API it serves is 1.x's. */
#define JUPYTER_API_VERSION "1.23.3"

GW_JUPYTER_HANDLER(api_root)
{
    (void)door, (void)params;
    gw_send_json(req, 200, json_pack("{s:s}", "version", JUPYTER_API_VERSION));
}

/* ---- kernelspecs ---- */

/* A resource name kgate serves: one plain file name of the spec's directory (no path, no dot file). */
static int is_resource_name(const char *name)
{
    return name[0] != '\0' && name[0] != '.' && strchr(name, '/') == NULL && strlen(name) < 128;
}

/* {"logo-64x64": "/kernelspecs/<name>/logo-64x64.png", "kernel.js": ...}: what Jupyter Server lists. */
static json_t *spec_resources(const kmgr_kernelspec_t *spec)
{
    json_t *resources = json_object();
    DIR *dir = opendir(spec->resource_dir);
    struct dirent *de;
    char url[1024], key[256];

    if (dir == NULL)
        return resources;
    while ((de = readdir(dir)) != NULL) {
        const char *dot;
        if (!is_resource_name(de->d_name))
            continue;
        if (strncmp(de->d_name, "logo-", 5) == 0 && (dot = strrchr(de->d_name, '.')) != NULL) {
            snprintf(key, sizeof(key), "%.*s", (int)(dot - de->d_name), de->d_name);
        } else if (strcmp(de->d_name, "kernel.js") == 0 || strcmp(de->d_name, "kernel.css") == 0) {
            snprintf(key, sizeof(key), "%s", de->d_name);
        } else {
            continue;
        }
        snprintf(url, sizeof(url), "/kernelspecs/%s/%s", spec->name, de->d_name);
        json_object_set_new(resources, key, json_string(url));
    }
    closedir(dir);
    return resources;
}

static json_t *spec_model(const kmgr_kernelspec_t *spec)
{
    json_t *argv = json_array();
    const char *mode = spec->interrupt_mode == KMGR_INTERRUPT_MESSAGE ? "message" : "signal";

    for (size_t i = 0; i != spec->argc; ++i)
        json_array_append_new(argv, json_string(spec->argv[i]));
    json_t *env = spec->env != NULL ? json_deep_copy(spec->env) : json_object();
    json_t *metadata = spec->metadata != NULL ? json_deep_copy(spec->metadata) : json_object();

    return json_pack("{s:s, s:{s:o, s:s, s:s, s:s, s:o, s:o}, s:o}", "name", spec->name, "spec", "argv", argv, "display_name",
                     spec->display_name != NULL ? spec->display_name : spec->name, "language", spec->language, "interrupt_mode",
                     mode, "env", env, "metadata", metadata, "resources", spec_resources(spec));
}

GW_JUPYTER_HANDLER(kernelspecs_list)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    const kmgr_kernelspecs_t *specs = &jupyter->languages->specs;
    json_t *all = json_object();
    (void)params;

    for (size_t i = 0; i != specs->size; ++i)
        json_object_set_new(all, specs->entries[i]->name, spec_model(specs->entries[i]));
    gw_send_json(req, 200,
                 json_pack("{s:s, s:o}", "default", gw_jupyter_default_spec_name(jupyter->languages), "kernelspecs", all));
}

GW_JUPYTER_HANDLER(kernelspec_get)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    const char *name = gw_path_param(req, params, 0);
    const kmgr_kernelspec_t *spec = name != NULL ? gw_languages_find(jupyter->languages, name) : NULL;

    if (spec == NULL) {
        gw_jupyter_error(req, 404, "Kernel spec %.100s not found", name != NULL ? name : "");
        return;
    }
    gw_send_json(req, 200, spec_model(spec));
}

static const char *resource_type(const char *name)
{
    const char *dot = strrchr(name, '.');

    if (dot == NULL)
        return "application/octet-stream";
    if (strcmp(dot, ".png") == 0)
        return "image/png";
    if (strcmp(dot, ".svg") == 0)
        return "image/svg+xml";
    if (strcmp(dot, ".js") == 0)
        return "application/javascript";
    if (strcmp(dot, ".css") == 0)
        return "text/css";
    if (strcmp(dot, ".json") == 0)
        return "application/json";
    return "application/octet-stream";
}

GW_JUPYTER_HANDLER(kernelspec_resource)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    const char *name = gw_path_param(req, params, 0), *file = gw_path_param(req, params, 1);
    const kmgr_kernelspec_t *spec = name != NULL ? gw_languages_find(jupyter->languages, name) : NULL;
    char path[4096];
    struct stat st;
    int fd = -1;

    if (spec == NULL || file == NULL || !is_resource_name(file)) {
        gw_jupyter_error(req, 404, "Kernel spec resource not found");
        return;
    }
    snprintf(path, sizeof(path), "%s/%s", spec->resource_dir, file);
    /* O_NOFOLLOW: the spec's own files, not what a link in its directory points at */
    if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK)) < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
        (size_t)st.st_size > MAX_RESOURCE_BYTES) {
        gw_jupyter_error(req, 404, "Kernel spec resource %.100s not found", file);
        goto Exit;
    }
    char *body = h2o_mem_alloc_pool(&req->pool, (size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t n = read(fd, body + got, (size_t)st.st_size - got);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            break;
        }
        got += (size_t)n;
    }
    req->res.status = 200;
    req->res.reason = "OK";
    gw_add_common_headers(req);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, resource_type(file), strlen(resource_type(file)));
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CACHE_CONTROL, NULL, H2O_STRLIT("max-age=3600"));
    req->res.content_length = got;
    h2o_send_inline(req, body, got);
Exit:
    if (fd >= 0)
        close(fd);
}

/* ---- kernels ---- */

/* The kernel named by path parameter 0, or NULL after answering 404. */
static gw_context_t *kernel_from_params(gw_jupyter_t *jupyter, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *id = gw_path_param(req, params, 0);
    gw_context_t *ctx = gw_jupyter_find_kernel(jupyter, id);

    if (ctx == NULL)
        gw_jupyter_error(req, 404, "Kernel does not exist: %.64s", id != NULL ? id : "");
    return ctx;
}

/* What the walk over the listed contexts carries. */
typedef struct st_kernels_walk_t {
    gw_jupyter_t *jupyter;
    json_t *list;
} kernels_walk_t;

static void list_kernel(gw_context_t *ctx, void *arg)
{
    kernels_walk_t *walk = arg;
    json_array_append_new(walk->list, gw_jupyter_kernel_model(walk->jupyter, ctx));
}

GW_JUPYTER_HANDLER(kernels_list)
{
    kernels_walk_t walk = {gw_jupyter_from(door), json_array()};
    (void)params;

    gw_contexts_each_listed(walk.jupyter->contexts, list_kernel, &walk);
    gw_send_json(req, 200, walk.list);
}

GW_JUPYTER_HANDLER(kernel_start)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    json_t *body = NULL, *name;
    gw_context_t *ctx;
    char location[128];
    (void)params;

    /* Jupyter Server takes an empty body as {} (the default kernel) */
    if (req->entity.len != 0) {
        json_error_t err;
        if ((body = json_loadb(req->entity.base, req->entity.len, JSON_REJECT_DUPLICATES, &err)) == NULL || !json_is_object(body)) {
            gw_jupyter_error(req, 400, "the body must be a JSON object: %.200s", body == NULL ? err.text : "not an object");
            goto Exit;
        }
    }
    name = json_object_get(body, "name");
    if (name != NULL && !json_is_null(name) && !json_is_string(name)) {
        gw_jupyter_error(req, 400, "name must be a string");
        goto Exit;
    }
    if ((ctx = gw_jupyter_start_kernel(jupyter, req, json_string_value(name), json_object_get(body, "env"))) == NULL)
        goto Exit;
    snprintf(location, sizeof(location), "/api/kernels/%s", ctx->id);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_LOCATION, NULL, location, strlen(location));
    gw_send_json(req, 201, gw_jupyter_kernel_model(jupyter, ctx));
Exit:
    json_decref(body);
}

GW_JUPYTER_HANDLER(kernel_get)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    gw_context_t *ctx = kernel_from_params(jupyter, req, params);
    if (ctx != NULL)
        gw_send_json(req, 200, gw_jupyter_kernel_model(jupyter, ctx));
}

static void send_no_content(h2o_req_t *req)
{
    req->res.status = 204;
    req->res.reason = "No Content";
    gw_add_common_headers(req);
    h2o_send_inline(req, NULL, 0);
}

GW_JUPYTER_HANDLER(kernel_delete)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    gw_context_t *ctx = kernel_from_params(jupyter, req, params);

    if (ctx == NULL)
        return;
    gw_jupyter_forget_kernel_sessions(jupyter, ctx);
    gw_context_destroy(ctx);
    send_no_content(req);
}

GW_JUPYTER_HANDLER(kernel_interrupt)
{
    gw_context_t *ctx = kernel_from_params(gw_jupyter_from(door), req, params);
    int ret;

    if (ctx == NULL)
        return;
    if ((ret = gw_context_interrupt(ctx)) != 0) {
        gw_jupyter_error(req, 500, "cannot interrupt the kernel: %s", gw_strerror(ret));
        return;
    }
    send_no_content(req);
}

/* A restart answered once the new kernel is ready, as Jupyter Server does; lives in the request's pool. */
typedef struct st_restart_waiter_t {
    gw_context_waiter_t super;
    h2o_req_t *req;
    gw_jupyter_t *jupyter;
} restart_waiter_t;

static void on_restarted(gw_context_waiter_t *waiter, gw_context_t *ctx, const char *failure)
{
    restart_waiter_t *self = H2O_STRUCT_FROM_MEMBER(restart_waiter_t, super, waiter);
    h2o_req_t *req = self->req;

    if (failure == NULL)
        gw_send_json(req, 200, gw_jupyter_kernel_model(self->jupyter, ctx));
    else if (gw_context_is_deleted(ctx))
        gw_jupyter_error(req, 404, "Kernel does not exist: %s", ctx->id); /* shut down while it restarted */
    else
        gw_jupyter_error(req, 500, "Exception restarting kernel: %s", failure);
}

static void on_restart_waiter_dispose(void *p)
{
    gw_context_waiter_cancel(&((restart_waiter_t *)p)->super);
}

GW_JUPYTER_HANDLER(kernel_restart)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    gw_context_t *ctx = kernel_from_params(jupyter, req, params);
    restart_waiter_t *waiter;
    int ret;

    if (ctx == NULL)
        return;
    if ((ret = gw_context_restart(ctx)) != 0) {
        gw_jupyter_error(req, 500, "Exception restarting kernel: %s", gw_strerror(ret));
        return;
    }
    waiter = h2o_mem_alloc_shared(&req->pool, sizeof(*waiter), on_restart_waiter_dispose);
    memset(waiter, 0, sizeof(*waiter));
    waiter->super.cb = on_restarted;
    waiter->jupyter = jupyter;
    waiter->req = req;
    gw_context_wait_ready(ctx, &waiter->super);
}

GW_JUPYTER_HANDLER(kernel_channels)
{
    gw_jupyter_t *jupyter = gw_jupyter_from(door);
    const char *id = gw_path_param(req, params, 0);
    gw_context_t *ctx = gw_jupyter_find_kernel(jupyter, id);

    /* refused before the upgrade, as Jupyter Server does: the client sees the status */
    if (ctx == NULL) {
        gw_jupyter_error(req, 404, "Kernel does not exist: %.64s", id != NULL ? id : "");
        return;
    }
    if (!gw_ws_is_upgrade(req)) {
        gw_jupyter_error(req, 400, "this route takes a WebSocket upgrade (GET with Upgrade: websocket over HTTP/1.1)");
        return;
    }
    gw_jupyter_channels_open(jupyter, req, ctx);
}
