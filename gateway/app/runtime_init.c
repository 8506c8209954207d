/* execd's runtime initialisation: /ready, POST /internal/init, and the token hash it may set. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sodium.h>
#include "wire/alloc.h"
#include "core/auth.h"
#include "core/http.h"
#include "ksys/log.h"
#include "app/runtime_init.h"
#include "ksys/log.h"

/* Upstream's bounds on the init's telemetry attributes (its runtime_init.go). */
#define INIT_MAX_TELEMETRY_ATTRS 64
#define INIT_MAX_TELEMETRY_KEY 128
#define INIT_MAX_TELEMETRY_VALUE 1024

void gw_runtime_init_init(gw_runtime_init_t *rt, int runtime_init, gw_shells_t *shells, const gw_lifecycle_t *template_lc,
                          const char *status_file)
{
    memset(rt, 0, sizeof(*rt));
    rt->super.name = "runtime-init";
    rt->initialized = !runtime_init;
    rt->shells = shells, rt->template_lc = template_lc, rt->status_file = status_file;
    rt->control_fd = -1;
}

/* One message to the launcher, whole (a pipe: blocking, it reads within its 0.1 s tick); 0 or -errno. */
static int tell_launcher(gw_runtime_init_t *rt, const char *head, const char *payload, size_t payload_len)
{
    for (int part = 0; part != 2; ++part) {
        const char *p = part == 0 ? head : payload;
        size_t left = part == 0 ? strlen(head) : payload_len;
        while (left != 0) {
            ssize_t n = write(rt->control_fd, p, left);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return n < 0 ? -errno : -EIO;
            p += n, left -= (size_t)n;
        }
    }
    return 0;
}

void gw_runtime_init_dispose(gw_runtime_init_t *rt)
{
    gw_lifecycle_dispose(&rt->init_lc);
    json_decref(rt->warnings);
    rt->warnings = NULL;
    free(rt->entry_envs);
    free(rt->sandbox_id);
    sodium_memzero(rt->token_hash, sizeof(rt->token_hash));
}

static gw_runtime_init_t *rt_from(gw_door_t *door)
{
    return H2O_STRUCT_FROM_MEMBER(gw_runtime_init_t, super, door);
}

static void on_ready(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_runtime_init_t *rt = rt_from(door);
    json_t *body = json_pack("{s:b}", "initialized", rt->initialized && !rt->starting);
    (void)params;

    if (rt->sandbox_id != NULL) {
        json_object_set_new(body, "sandboxId", json_string(rt->sandbox_id));
        json_object_set_new(body, "generation", json_integer(rt->generation));
    }
    gw_send_json(req, rt->initialized && !rt->starting ? 200 : 503, body);
}

/* "sha256:<64 hex>" into 32 bytes; -1 when malformed. */
static int parse_hash(const char *s, unsigned char *out)
{
    size_t len;

    if (strncmp(s, "sha256:", 7) != 0 || strlen(s + 7) != 64)
        return -1;
    return sodium_hex2bin(out, 32, s + 7, 64, NULL, &len, NULL) == 0 && len == 32 ? 0 : -1;
}

/* Upstream's telemetry check: at most 64 attributes, keys non-blank up to 128 bytes, string values up to 1024; sandbox_id and
 * generation are kgate's to say, so they are dropped with a warning. NULL, or why the request is refused. */
static const char *check_telemetry(json_t *telemetry, json_t *warnings)
{
    json_t *attrs = json_object_get(telemetry, "attributes"), *value;
    const char *key;

    if (!json_is_object(telemetry))
        return "telemetry must be an object";
    if (attrs != NULL && !json_is_null(attrs) && !json_is_object(attrs))
        return "telemetry.attributes must be an object of strings";
    if (json_object_size(attrs) > INIT_MAX_TELEMETRY_ATTRS)
        return "telemetry attributes must not exceed 64 entries";
    json_object_foreach(json_is_object(attrs) ? attrs : NULL, key, value)
    {
        if (strspn(key, " \t\r\n") == strlen(key))
            return "telemetry attributes must not contain blank keys";
        if (strlen(key) > INIT_MAX_TELEMETRY_KEY)
            return "a telemetry attribute key must not exceed 128 characters";
        if (!json_is_string(value) || json_string_length(value) > INIT_MAX_TELEMETRY_VALUE)
            return "a telemetry attribute value must be a string of at most 1024 bytes";
        if (strcmp(key, "sandbox_id") == 0 || strcmp(key, "generation") == 0)
            json_array_append_new(warnings, json_sprintf("telemetry attribute %s is reserved and was dropped", key));
    }
    json_array_append_new(warnings, json_string("telemetry accepted but not exported: kgate has no OpenTelemetry (OTLP) "
                                                "exporter (docs/execd.md)"));
    return NULL;
}

/* The init's request is gone (client closed): its answer has nowhere to go. */
static void on_pending_disposed(void *p)
{
    gw_runtime_init_t *rt = *(gw_runtime_init_t **)p;
    rt->pending = NULL;
}

/* The init's preStart has ended: the runtime opens, or stays closed (the slot stays consumed, as upstream's). */
static void on_init_prestart(void *data, int ok, const char *why)
{
    gw_runtime_init_t *rt = data;
    json_t *body;

    rt->starting = 0;
    rt->initialized = ok;
    gw_lifecycle_dispose(&rt->init_lc);
    if (ok && rt->restart_entry) {
        char head[48];
        int ret;
        snprintf(head, sizeof(head), "start %zu\n", rt->entry_envs_len);
        if ((ret = tell_launcher(rt, head, rt->entry_envs, rt->entry_envs_len)) != 0) {
            ksys_log_error("runtime init: cannot ask the launcher to start the entrypoint: %s", strerror(-ret));
            json_array_append_new(rt->warnings, json_sprintf("entrypointPolicy=restart: the entrypoint could not be started "
                                                             "again (%s)",
                                                             strerror(-ret)));
        } else {
            ksys_log_info("runtime init: the launcher starts the entrypoint again (entrypointPolicy=restart)");
        }
    }
    rt->restart_entry = 0;
    if (ok)
        ksys_log_info("runtime initialised: sandbox %s, generation %lld%s", rt->sandbox_id, rt->generation,
                      rt->has_hash ? ", token checked against its hash" : "");
    else
        ksys_log_error("runtime init of sandbox %s failed: %s; the routes stay closed", rt->sandbox_id, why);
    if (rt->pending != NULL) {
        if (ok) {
            body = json_pack("{s:s, s:s, s:I}", "status", "initialized", "sandboxId", rt->sandbox_id, "generation",
                             (json_int_t)rt->generation);
            if (json_array_size(rt->warnings) != 0)
                json_object_set(body, "warning", rt->warnings);
            gw_send_json(rt->pending, 200, body);
        } else {
            gw_send_error(rt->pending, GW_HTTP_RUNTIME_ERROR, "runtime init preStart: %s", why);
        }
        rt->pending = NULL;
    }
    json_decref(rt->warnings);
    rt->warnings = NULL;
}

static void on_init(gw_door_t *door, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_runtime_init_t *rt = rt_from(door);
    json_t *body = gw_parse_body(req), *sandbox, *generation, *policy, *hash, *envs, *value, *lifecycle, *telemetry;
    json_t *warnings = json_array();
    gw_lifecycle_t init_lc = {0};
    gw_runtime_init_t **guard;
    unsigned char digest[32];
    const char *key, *why = NULL;
    char lc_why[256];
    (void)params;

    if (body == NULL) {
        json_decref(warnings);
        return; /* gw_parse_body answered 400 */
    }
    sandbox = json_object_get(body, "sandboxId"), generation = json_object_get(body, "generation");
    policy = json_object_get(body, "entrypointPolicy"), hash = json_object_get(body, "accessTokenHash");
    envs = json_object_get(body, "envs"), lifecycle = json_object_get(body, "lifecycle");
    telemetry = json_object_get(body, "telemetry");
    if (!json_is_string(sandbox) || json_string_length(sandbox) == 0 ||
        strlen(json_string_value(sandbox)) != json_string_length(sandbox))
        why = "sandboxId must be a non-empty string";
    else if (json_string_length(sandbox) > 128)
        why = "sandboxId must not exceed 128 characters";
    else if (!json_is_integer(generation) || json_integer_value(generation) <= 0)
        why = "generation must be an integer above 0";
    else if (policy != NULL && !json_is_null(policy) &&
             !(json_is_string(policy) &&
               (strcmp(json_string_value(policy), "keep") == 0 || strcmp(json_string_value(policy), "restart") == 0)))
        why = "entrypointPolicy must be \"keep\" or \"restart\"";
    else if (hash != NULL && !json_is_null(hash) && (!json_is_string(hash) || parse_hash(json_string_value(hash), digest) != 0))
        why = "accessTokenHash must be \"sha256:\" followed by 64 hex digits";
    else if (envs != NULL && !json_is_null(envs) && !json_is_object(envs))
        why = "envs must be an object of strings";
    json_object_foreach(json_is_object(envs) ? envs : NULL, key, value)
    {
        if (why == NULL && (key[0] == '\0' || strchr(key, '=') != NULL || !json_is_string(value) ||
                            strlen(json_string_value(value)) != json_string_length(value)))
            why = "envs: every name must be non-empty without '=', every value a string without NUL";
    }
    if (why == NULL && lifecycle != NULL && !json_is_null(lifecycle) &&
        gw_lifecycle_parse(lifecycle, &init_lc, lc_why, sizeof(lc_why)) != 0)
        why = lc_why;
    if (why == NULL && telemetry != NULL && !json_is_null(telemetry))
        why = check_telemetry(telemetry, warnings);
    if (why != NULL) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "invalid runtime init request: %s", why);
        goto Exit;
    }
    if (rt->initialized || rt->accepted) {
        gw_send_error(req, GW_HTTP_ALREADY_INITIALIZED, "the runtime is already initialised%s%s",
                      rt->sandbox_id != NULL ? " for sandbox " : " (kgate was started without --runtime-init)",
                      rt->sandbox_id != NULL ? rt->sandbox_id : "");
        goto Exit;
    }
    /* strictly once from here (upstream): whatever becomes of this init, the next one answers 409 */
    rt->accepted = 1;
    json_object_foreach(json_is_object(envs) ? envs : NULL, key, value)
    {
        if (setenv(key, json_string_value(value), 1) != 0) {
            gw_send_error(req, GW_HTTP_RUNTIME_ERROR, "cannot set %.64s in kgate's environment", key);
            goto Exit;
        }
    }
    if (json_is_string(hash)) {
        memcpy(rt->token_hash, digest, sizeof(digest));
        rt->has_hash = 1;
    }
    rt->sandbox_id = wire_strdup(json_string_value(sandbox));
    rt->generation = (long long)json_integer_value(generation);
    /* the entrypoint is the launcher's under --init (deploy/execd/launcher.c), which retires it now, before preStart, and
     * starts it again after, as upstream's execd does with its own; bootstrap.sh's, without --init, is out of reach */
    if (json_is_string(policy) && strcmp(json_string_value(policy), "restart") == 0) {
        int ret = rt->control_fd >= 0 ? tell_launcher(rt, "retire\n", NULL, 0) : -ENOTSUP;
        if (ret == 0) {
            size_t len = 0;
            json_object_foreach(json_is_object(envs) ? envs : NULL, key, value) len +=
                strlen(key) + 1 + json_string_length(value) + 1;
            rt->entry_envs = wire_malloc(len + 1);
            rt->entry_envs_len = 0;
            json_object_foreach(json_is_object(envs) ? envs : NULL, key, value) rt->entry_envs_len +=
                (size_t)sprintf(rt->entry_envs + rt->entry_envs_len, "%s=%s", key, json_string_value(value)) + 1;
            rt->restart_entry = 1;
        } else if (ret == -ENOTSUP) {
            json_array_append_new(warnings, json_string("entrypointPolicy=restart ignored: execd does not own the entrypoint in "
                                                        "this mode"));
        } else {
            json_array_append_new(warnings,
                                  json_sprintf("entrypointPolicy=restart: the launcher cannot be asked (%s)", strerror(-ret)));
        }
    }
    /* an init's lifecycle, even empty, replaces the template's; an omitted one keeps it (upstream) */
    rt->init_lc = init_lc;
    memset(&init_lc, 0, sizeof(init_lc));
    rt->warnings = warnings;
    warnings = NULL;
    rt->pending = req;
    guard = h2o_mem_alloc_shared(&req->pool, sizeof(*guard), on_pending_disposed);
    *guard = rt;
    rt->starting = 1;
    gw_prestart_start(rt->shells, lifecycle != NULL && !json_is_null(lifecycle) ? &rt->init_lc : rt->template_lc, rt->status_file,
                      0, on_init_prestart, rt);
Exit:
    gw_lifecycle_dispose(&init_lc);
    json_decref(warnings);
    sodium_memzero(digest, sizeof(digest));
    json_decref(body);
}

void gw_runtime_init_add_routes(gw_runtime_init_t *rt, gw_route_table_t *table, size_t max_body)
{
    gw_route_t ready = {.method = "GET",
                        .pattern = "/ready",
                        .handler = on_ready,
                        .is_public = 1,
                        .max_body_bytes = max_body,
                        .door = &rt->super},
               init = {.method = "POST",
                       .pattern = "/internal/init",
                       .handler = on_init,
                       .is_public = 1,
                       .max_body_bytes = max_body,
                       .door = &rt->super};
    gw_route_table_add(table, &ready);
    gw_route_table_add(table, &init);
}

static int hash_matches(const gw_runtime_init_t *rt, const char *presented, size_t len)
{
    unsigned char digest[32];
    int ok;

    crypto_hash_sha256(digest, (const unsigned char *)presented, len);
    ok = sodium_memcmp(digest, rt->token_hash, sizeof(digest)) == 0;
    sodium_memzero(digest, sizeof(digest));
    return ok;
}

int gw_runtime_init_check_token(const gw_runtime_init_t *rt, h2o_req_t *req, const char *token)
{
    ssize_t i;

    if (!rt->has_hash)
        return gw_auth_check(req, token);
    for (i = -1; (i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-execd-access-token"), i)) != -1;)
        if (hash_matches(rt, req->headers.entries[i].value.base, req->headers.entries[i].value.len))
            return 1;
    for (i = -1; (i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, i)) != -1;) {
        h2o_iovec_t v = req->headers.entries[i].value;
        size_t skip = v.len > 7 && h2o_lcstris(v.base, 7, H2O_STRLIT("bearer "))  ? 7
                      : v.len > 6 && h2o_lcstris(v.base, 6, H2O_STRLIT("token ")) ? 6
                                                                                  : 0;
        while (skip != 0 && skip < v.len && v.base[skip] == ' ')
            ++skip;
        if (skip != 0 && hash_matches(rt, v.base + skip, v.len - skip))
            return 1;
    }
    return 0;
}
