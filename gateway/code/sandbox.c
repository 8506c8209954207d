/* A context's sandbox and limits from a request body, bounded by the server's maxima. */
#include <stdio.h>
#include <string.h>
#include "code/sandbox.h"

#define MIB ((uint64_t)1 << 20)

/* One limit: its body key, its --max-* value, its unit in bytes, where it goes. */
typedef struct st_limit_field_t {
    const char *key, *option;
    uint64_t max, unit;
    uint64_t *dst;
} limit_field_t;

void gw_context_sandbox_defaults(const gw_config_t *config, gw_context_sandbox_t *out)
{
    memset(out, 0, sizeof(*out));
    out->limits.memory_bytes = (uint64_t)config->max_memory_mb * MIB;
    out->limits.pids = config->max_pids;
    out->limits.cpu_seconds = config->max_cpu_seconds;
    out->limits.open_files = config->max_open_files;
    out->limits.file_size_bytes = (uint64_t)config->max_file_size_mb * MIB;
    out->tmp_bytes = gw_config_tmp_bytes(config, out->limits.memory_bytes);
}

int gw_context_sandbox_parse(json_t *body, const gw_config_t *config, gw_context_sandbox_t *out, char *err, size_t errlen)
{
    json_t *sandbox = json_object_get(body, "sandbox"), *limits = json_object_get(body, "limits"), *value;
    const char *key;

    gw_context_sandbox_defaults(config, out);
    if (sandbox != NULL && !json_is_null(sandbox)) {
        if (!json_is_object(sandbox)) {
            snprintf(err, errlen, "sandbox must be an object such as {\"share_net\": true}");
            return -1;
        }
        json_object_foreach(sandbox, key, value)
        {
            if (strcmp(key, "share_net") != 0) {
                snprintf(err, errlen, "sandbox.%.64s is not a sandbox option (known: share_net)", key);
                return -1;
            }
            if (!json_is_boolean(value)) {
                snprintf(err, errlen, "sandbox.share_net must be true or false");
                return -1;
            }
            out->share_net = json_is_true(value);
        }
    }
    if (limits != NULL && !json_is_null(limits)) {
        limit_field_t fields[] = {
            {"memory_mb", "max-memory-mb", config->max_memory_mb, MIB, &out->limits.memory_bytes},
            {"pids", "max-pids", config->max_pids, 1, &out->limits.pids},
            {"cpu_seconds", "max-cpu-seconds", config->max_cpu_seconds, 1, &out->limits.cpu_seconds},
            {"open_files", "max-open-files", config->max_open_files, 1, &out->limits.open_files},
            {"file_size_mb", "max-file-size-mb", config->max_file_size_mb, MIB, &out->limits.file_size_bytes},
        };
        if (!json_is_object(limits)) {
            snprintf(err, errlen, "limits must be an object such as {\"memory_mb\": 256, \"pids\": 64}");
            return -1;
        }
        json_object_foreach(limits, key, value)
        {
            limit_field_t *f = NULL;
            json_int_t n;
            for (size_t i = 0; i != sizeof(fields) / sizeof(fields[0]); ++i)
                if (strcmp(fields[i].key, key) == 0)
                    f = &fields[i];
            if (f == NULL) {
                snprintf(err, errlen, "limits.%.64s is not a limit (known: memory_mb, pids, cpu_seconds, open_files, file_size_mb)",
                         key);
                return -1;
            }
            /* a float such as 1e9 or 0.5 is refused as well: json_is_integer */
            if (!json_is_integer(value) || (n = json_integer_value(value)) <= 0 || (uint64_t)n > UINT64_MAX / f->unit) {
                snprintf(err, errlen, "limits.%s must be a positive integer", key);
                return -1;
            }
            if (f->max != 0 && (uint64_t)n > f->max) {
                snprintf(err, errlen, "limits.%s is %lld, above this server's maximum of %llu (--%s)", key, (long long)n,
                         (unsigned long long)f->max, f->option);
                return -1;
            }
            *f->dst = (uint64_t)n * f->unit;
        }
        /* half of this context's own memory cap, unless --max-tmp-mb says */
        out->tmp_bytes = gw_config_tmp_bytes(config, out->limits.memory_bytes);
    }
    return 0;
}

json_t *gw_context_sandbox_to_json(const gw_context_sandbox_t *sb, int profile_bwrap)
{
    json_t *obj =
        json_pack("{s:s, s:b}", "profile", profile_bwrap ? "bwrap" : "none", "share_net", profile_bwrap ? sb->share_net : 1);

    if (profile_bwrap && sb->tmp_bytes != 0)
        json_object_set_new(obj, "tmp_mb", json_integer((json_int_t)(sb->tmp_bytes / MIB)));
    return obj;
}

json_t *gw_context_limits_to_json(const ksys_limits_t *l)
{
    json_t *obj = json_object();

    if (l->memory_bytes != 0)
        json_object_set_new(obj, "memory_mb", json_integer((json_int_t)(l->memory_bytes / MIB)));
    if (l->pids != 0)
        json_object_set_new(obj, "pids", json_integer((json_int_t)l->pids));
    if (l->cpu_seconds != 0)
        json_object_set_new(obj, "cpu_seconds", json_integer((json_int_t)l->cpu_seconds));
    if (l->open_files != 0)
        json_object_set_new(obj, "open_files", json_integer((json_int_t)l->open_files));
    if (l->file_size_bytes != 0)
        json_object_set_new(obj, "file_size_mb", json_integer((json_int_t)(l->file_size_bytes / MIB)));
    return obj;
}
