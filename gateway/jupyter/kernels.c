/* jupyter/kernels.c: what the door's files share: errors in Jupyter Server's form, the engine's contexts as kernels (found,
 * modelled, started). Below the handlers (kernels_api.c, sessions.c); above the kernel WebSocket (channels.c). */
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "ksys/errors.h"
#include "core/errors.h"
#include "core/http.h"
#include "core/json_out.h"
#include "jupyter/jupyter.h"

void gw_jupyter_error(h2o_req_t *req, int status, const char *fmt, ...)
{
    char message[1024];
    const char *reason;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(message, sizeof(message), fmt, ap);
    va_end(ap);
    switch (status) {
    case 400:
        reason = "Bad Request";
        break;
    case 404:
        reason = "Not Found";
        break;
    case 409:
        reason = "Conflict";
        break;
    case 413:
        reason = "Payload Too Large";
        break;
    case 429:
        reason = "Too Many Requests";
        break;
    case 503:
        reason = "Service Unavailable";
        break;
    default:
        reason = "Internal Server Error";
        break;
    }
    /* a kernel id or a spec name from the path is percent-decoded to any bytes: those that are no UTF-8 become U+FFFD */
    gw_send_json(req, status, json_pack("{s:o, s:s}", "message", gw_json_string_lossy(message, strlen(message)), "reason", reason));
}

/* Jupyter Server's ISO 8601 form, microseconds and a Z: what its clients parse. */
static json_t *iso_time(int64_t unix_ms)
{
    time_t secs = (time_t)(unix_ms / 1000);
    struct tm tm;
    char buf[64];

    gmtime_r(&secs, &tm);
    snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%06dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)(unix_ms % 1000) * 1000);
    return json_string(buf);
}

json_t *gw_jupyter_kernel_model(gw_jupyter_t *jupyter, const gw_context_t *ctx)
{
    const char *state = "dead";

    if (ctx->kernel != NULL) {
        switch (kmgr_kernel_state(ctx->kernel)) {
        case KMGR_KERNEL_STARTING:
        case KMGR_KERNEL_RESTARTING:
            state = "starting";
            break;
        case KMGR_KERNEL_IDLE:
            state = "idle";
            break;
        case KMGR_KERNEL_BUSY:
            state = "busy";
            break;
        case KMGR_KERNEL_DEAD:
            break;
        }
    }
    return json_pack("{s:s, s:s, s:o, s:s, s:i}", "id", ctx->id, "name", ctx->spec->name, "last_activity",
                     iso_time(ctx->last_activity_ms), "execution_state", state, "connections",
                     (int)ctx->ntaps - gw_jupyter_is_buffering(jupyter, ctx));
}

gw_context_t *gw_jupyter_find_kernel(gw_jupyter_t *jupyter, const char *id)
{
    return id != NULL ? gw_context_find_listed(jupyter->contexts, id) : NULL;
}

static int is_kernel_env_name(const char *name)
{
    if (strncmp(name, "KERNEL_", 7) != 0)
        return 0;
    for (const char *p = name; *p != '\0'; ++p)
        if (!(isupper((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_'))
            return 0;
    return 1;
}

json_t *gw_jupyter_filter_env(json_t *env)
{
    json_t *out = json_object(), *value;
    const char *name;

    if (!json_is_object(env))
        return out;
    json_object_foreach(env, name, value)
    {
        if (json_object_size(out) == GW_JUPYTER_MAX_ENV)
            break;
        if (!is_kernel_env_name(name) || !json_is_string(value) || json_string_length(value) > GW_JUPYTER_MAX_ENV_VALUE ||
            strlen(json_string_value(value)) != json_string_length(value))
            continue;
        json_object_set(out, name, value);
    }
    return out;
}

/* The spec a kernel starts with when the client names none: python3 if there is one, else the first. */
static const kmgr_kernelspec_t *default_spec(const gw_languages_t *languages)
{
    const kmgr_kernelspec_t *spec = gw_languages_find(languages, "python3");
    return spec != NULL || languages->specs.size == 0 ? spec : languages->specs.entries[0];
}

const char *gw_jupyter_default_spec_name(const gw_languages_t *languages)
{
    const kmgr_kernelspec_t *spec = default_spec(languages);
    return spec != NULL ? spec->name : "";
}

gw_context_t *gw_jupyter_start_kernel(gw_jupyter_t *jupyter, h2o_req_t *req, const char *name, json_t *env)
{
    gw_context_options_t opts = {0};
    gw_context_t *ctx = NULL;
    json_t *kernel_env;
    int ret;

    opts.spec = name == NULL || name[0] == '\0' ? default_spec(jupyter->languages) : gw_languages_find(jupyter->languages, name);
    if (opts.spec == NULL) {
        gw_jupyter_error(req, 404, "No such kernel spec %.100s", name != NULL ? name : "(default)");
        return NULL;
    }
    opts.env = kernel_env = gw_jupyter_filter_env(env);
    ret = gw_context_create(jupyter->contexts, &opts, &ctx);
    json_decref(kernel_env);
    switch (ret) {
    case 0:
        return ctx;
    case GW_ESHUTTINGDOWN:
        gw_jupyter_error(req, 503, "kgate is shutting down");
        break;
    case GW_ETOOMANYCONTEXTS:
        gw_jupyter_error(req, 429, "%zu kernels are alive, the maximum (--max-contexts); shut one down first",
                         jupyter->contexts->count);
        break;
    case KSYS_ESTARTQUEUE:
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_RETRY_AFTER, NULL, H2O_STRLIT("2"));
        gw_jupyter_error(req, 429, "%u kernels are waiting to start (--max-start-queue); retry later",
                         jupyter->host->config->max_start_queue);
        break;
    default:
        gw_jupyter_error(req, 500, "cannot start the %s kernel: %s", opts.spec->name, gw_strerror(ret));
        break;
    }
    return NULL;
}
