/* An isolated session's request parsed, its bubblewrap command line and its environment (pure). */
#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "ksys/sandbox.h"
#include "core/paths.h"
#include "procs/isolation.h"

__attribute__((format(printf, 3, 4))) static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}
#define ERR(...) fail(err, errlen, __VA_ARGS__)

static void push_all(ksys_strv_t *a, const char *const *items)
{
    for (; *items != NULL; ++items)
        ksys_strv_push(a, *items);
}

/* Lexical normalisation of an absolute path ("." and ".." applied, no trailing '/'); NULL when not absolute. */
static char *normalize(const char *path)
{
    size_t len = strlen(path);
    char *out;

    if (len == 0 || path[0] != '/' || len > 4095)
        return NULL;
    /* the result is never longer than the path, or than "/" */
    out = wire_malloc(len + 2);
    if (gw_path_normalize(NULL, path, len, out, len + 2) == 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* A JSON string holding a path: normalised, checked against root (when `writable`) and hidden; NULL after filling err. */
static char *take_path(json_t *value, const char *what, const char *root, const char *hidden, int writable, char *err,
                       size_t errlen)
{
    char *p;

    if (!json_is_string(value) || strlen(json_string_value(value)) != json_string_length(value) ||
        (p = normalize(json_string_value(value))) == NULL) {
        ERR("%s must be an absolute path", what);
        return NULL;
    }
    if (hidden != NULL && (ksys_path_within(p, hidden) || ksys_path_within(hidden, p))) {
        ERR("%s \"%.200s\" would expose kgate's runtime directory", what, p);
    } else if (writable && !ksys_path_within(p, root)) {
        ERR("%s \"%.200s\" is outside the workspace root %.200s", what, p, root);
    } else if (strcmp(p, "/") == 0) {
        ERR("%s cannot be /", what);
    } else {
        return p;
    }
    free(p);
    return NULL;
}

static int optional_id(json_t *body, const char *name, long *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(body, name);

    *out = -1;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 0x7ffffffe)
        return ERR("%s must be a non-negative integer", name);
    *out = (long)json_integer_value(v);
    return 0;
}

static int parse_binds(json_t *binds, const char *root, const char *hidden, gw_iso_spec_t *out, char *err, size_t errlen)
{
    size_t i;
    json_t *item;

    if (binds == NULL || json_is_null(binds))
        return 0;
    if (!json_is_array(binds) || json_array_size(binds) > GW_ISO_MAX_ITEMS)
        return ERR("binds must be an array of at most %d {source, dest?, readonly?}", GW_ISO_MAX_ITEMS);
    out->binds = wire_calloc(json_array_size(binds) + 1, sizeof(*out->binds));
    json_array_foreach(binds, i, item)
    {
        gw_iso_bind_t *b = &out->binds[out->num_binds];
        json_t *ro = json_object_get(item, "readonly"), *dest = json_object_get(item, "dest");
        if (!json_is_object(item) || (ro != NULL && !json_is_null(ro) && !json_is_boolean(ro)))
            return ERR("binds[%zu] must be {source, dest?, readonly?: bool}", i);
        b->readonly = json_is_true(ro);
        if ((b->source = take_path(json_object_get(item, "source"), "binds[].source", root, hidden, !b->readonly, err, errlen)) ==
            NULL)
            return -1;
        ++out->num_binds;
        if (dest == NULL || json_is_null(dest))
            b->dest = wire_strdup(b->source);
        else if ((b->dest = take_path(dest, "binds[].dest", root, hidden, 0, err, errlen)) == NULL)
            return -1;
    }
    return 0;
}

static int parse_env(json_t *env, gw_iso_spec_t *out, char *err, size_t errlen)
{
    json_t *mode, *keys, *key;
    size_t i;

    if (env == NULL || json_is_null(env))
        return 0;
    mode = json_object_get(env, "mode");
    keys = json_object_get(env, "keys");
    if (!json_is_object(env) || (mode != NULL && !json_is_null(mode) && !json_is_string(mode)) ||
        (keys != NULL && !json_is_null(keys) && (!json_is_array(keys) || json_array_size(keys) > GW_ISO_MAX_ITEMS)))
        return ERR("env_passthrough must be {mode?: \"allow\"|\"deny\", keys?: [names]}");
    if (json_is_string(mode) && strcmp(json_string_value(mode), "allow") != 0 && strcmp(json_string_value(mode), "deny") != 0)
        return ERR("env_passthrough.mode must be \"allow\" or \"deny\"");
    out->env_explicit = 1;
    out->env_allow = json_is_string(mode) && strcmp(json_string_value(mode), "allow") == 0;
    out->env_keys = wire_calloc(json_array_size(keys) + 1, sizeof(char *));
    json_array_foreach(keys, i, key)
    {
        if (!json_is_string(key) || json_string_length(key) == 0 || strchr(json_string_value(key), '=') != NULL ||
            strlen(json_string_value(key)) != json_string_length(key))
            return ERR("env_passthrough.keys[%zu] must be a variable name", i);
        out->env_keys[out->num_env_keys++] = wire_strdup(json_string_value(key));
    }
    return 0;
}

int gw_iso_spec_parse(json_t *body, const char *root, const char *hidden, unsigned default_idle, gw_iso_spec_t *out, char *err,
                      size_t errlen)
{
    json_t *iso = json_object_get(body, "isolation"), *ws, *mode, *profile, *share_net, *extra, *idle, *item;
    size_t i;
    int has_mode = 0;

    memset(out, 0, sizeof(*out));
    out->uid = out->gid = -1;
    /* OSEP-0013 nests the fields under "isolation"; docs/API.md has them at the top */
    if (json_is_object(iso))
        body = iso;
    ws = json_object_get(body, "workspace");
    profile = json_object_get(body, "profile");
    share_net = json_object_get(body, "share_net");
    extra = json_object_get(body, "extra_writable");
    idle = json_object_get(body, "idle_timeout_seconds");
    if (!json_is_object(ws)) {
        ERR("workspace must be {path, mode?: \"rw\"|\"overlay\"|\"ro\"}");
        goto Error;
    }
    if (profile != NULL && !json_is_null(profile)) {
        if (!json_is_string(profile) ||
            (strcmp(json_string_value(profile), "strict") != 0 && strcmp(json_string_value(profile), "balanced") != 0)) {
            ERR("profile must be \"strict\" or \"balanced\"");
            goto Error;
        }
        out->profile = strcmp(json_string_value(profile), "strict") == 0 ? GW_ISO_STRICT : GW_ISO_BALANCED;
    }
    mode = json_object_get(ws, "mode");
    if (mode != NULL && !json_is_null(mode)) {
        const char *m = json_is_string(mode) ? json_string_value(mode) : "";
        has_mode = 1;
        if (strcmp(m, "rw") == 0)
            out->mode = GW_ISO_RW;
        else if (strcmp(m, "overlay") == 0)
            out->mode = GW_ISO_OVERLAY;
        else if (strcmp(m, "ro") == 0)
            out->mode = GW_ISO_RO;
        else {
            ERR("workspace.mode must be \"rw\", \"overlay\" or \"ro\"");
            goto Error;
        }
    }
    if (!has_mode)
        out->mode = out->profile == GW_ISO_STRICT ? GW_ISO_OVERLAY : GW_ISO_RW;
    if ((out->workspace = take_path(json_object_get(ws, "path"), "workspace.path", root, hidden, 1, err, errlen)) == NULL)
        goto Error;
    if (share_net != NULL && !json_is_null(share_net) && !json_is_boolean(share_net)) {
        ERR("share_net must be true or false");
        goto Error;
    }
    out->share_net = json_is_true(share_net);
    if (extra != NULL && !json_is_null(extra)) {
        if (!json_is_array(extra) || json_array_size(extra) > GW_ISO_MAX_ITEMS) {
            ERR("extra_writable must be an array of at most %d paths", GW_ISO_MAX_ITEMS);
            goto Error;
        }
        out->extra_writable = wire_calloc(json_array_size(extra) + 1, sizeof(char *));
        json_array_foreach(extra, i, item)
        {
            if ((out->extra_writable[out->num_extra_writable] =
                     take_path(item, "extra_writable[]", root, hidden, 1, err, errlen)) == NULL)
                goto Error;
            ++out->num_extra_writable;
        }
    }
    if (parse_binds(json_object_get(body, "binds"), root, hidden, out, err, errlen) != 0 ||
        parse_env(json_object_get(body, "env_passthrough"), out, err, errlen) != 0 ||
        optional_id(body, "uid", &out->uid, err, errlen) != 0 || optional_id(body, "gid", &out->gid, err, errlen) != 0)
        goto Error;
    out->idle_timeout_seconds = default_idle;
    if (idle != NULL && !json_is_null(idle)) {
        if (!json_is_integer(idle) || json_integer_value(idle) < 0 || json_integer_value(idle) > 30 * 86400) {
            ERR("idle_timeout_seconds must be an integer from 0 (none) to %d", 30 * 86400);
            goto Error;
        }
        out->idle_timeout_seconds = (unsigned)json_integer_value(idle);
    }
    return 0;

Error:
    gw_iso_spec_dispose(out);
    return -1;
}

void gw_iso_spec_dispose(gw_iso_spec_t *spec)
{
    size_t i;

    free(spec->workspace);
    for (i = 0; i != spec->num_extra_writable; ++i)
        free(spec->extra_writable[i]);
    free(spec->extra_writable);
    for (i = 0; i != spec->num_binds; ++i) {
        free(spec->binds[i].source);
        free(spec->binds[i].dest);
    }
    free(spec->binds);
    for (i = 0; i != spec->num_env_keys; ++i)
        free(spec->env_keys[i]);
    free(spec->env_keys);
    memset(spec, 0, sizeof(*spec));
}

const char *gw_iso_mode_name(gw_iso_mode_t mode)
{
    return mode == GW_ISO_RW ? "rw" : mode == GW_ISO_OVERLAY ? "overlay" : "ro";
}

json_t *gw_iso_spec_to_json(const gw_iso_spec_t *spec)
{
    json_t *extra = json_array(), *binds = json_array(), *keys = json_array(), *out;
    size_t i;

    for (i = 0; i != spec->num_extra_writable; ++i)
        json_array_append_new(extra, json_string(spec->extra_writable[i]));
    for (i = 0; i != spec->num_binds; ++i)
        json_array_append_new(binds, json_pack("{s:s, s:s, s:b}", "source", spec->binds[i].source, "dest", spec->binds[i].dest,
                                               "readonly", spec->binds[i].readonly));
    for (i = 0; i != spec->num_env_keys; ++i)
        json_array_append_new(keys, json_string(spec->env_keys[i]));
    out =
        json_pack("{s:{s:s, s:s}, s:s, s:o, s:o, s:b, s:{s:s, s:o}, s:I}", "workspace", "path", spec->workspace, "mode",
                  gw_iso_mode_name(spec->mode), "profile", spec->profile == GW_ISO_STRICT ? "strict" : "balanced", "extra_writable",
                  extra, "binds", binds, "share_net", spec->share_net, "env_passthrough", "mode",
                  spec->env_allow ? "allow" : "deny", "keys", keys, "idle_timeout_seconds", (json_int_t)spec->idle_timeout_seconds);
    json_object_set_new(out, "uid", spec->uid >= 0 ? json_integer(spec->uid) : json_null());
    json_object_set_new(out, "gid", spec->gid >= 0 ? json_integer(spec->gid) : json_null());
    return out;
}

/* Single-quoted for sh. */
static void append_quoted(char **buf, size_t *len, const char *s)
{
    size_t need = *len + strlen(s) * 4 + 3;

    *buf = wire_realloc(*buf, need + 1);
    (*buf)[(*len)++] = '\'';
    for (; *s != '\0'; ++s) {
        if (*s == '\'') {
            memcpy(*buf + *len, "'\\''", 4);
            *len += 4;
        } else {
            (*buf)[(*len)++] = *s;
        }
    }
    (*buf)[(*len)++] = '\'';
    (*buf)[*len] = '\0';
}

/* One host path bound at `dest`: by the descriptor the child holds for it (bwrap closes it once bound), else by path. */
static void bind_source(ksys_strv_t *b, const gw_iso_paths_t *paths, size_t index, int readonly, const char *source,
                        const char *dest)
{
    char fd[32];

    if (paths->source_fd_base <= 0) {
        push_all(b, (const char *const[]){readonly ? "--ro-bind" : "--bind", source, dest, NULL});
        return;
    }
    snprintf(fd, sizeof(fd), "%d", paths->source_fd_base + (int)index);
    push_all(b, (const char *const[]){readonly ? "--ro-bind-fd" : "--bind-fd", fd, dest, NULL});
}

char **gw_iso_argv(const gw_iso_spec_t *spec, const gw_iso_paths_t *paths, char *const *cmd)
{
    ksys_strv_t b = {NULL, 0, 0}, out = {NULL, 0, 0};
    char idbuf[32], **walls;
    size_t i;

    /* 1-5. namespaces and hardening, the system read-only, /tmp per profile, fresh /dev (a sized /dev/shm), /proc and /run:
     * what every sandbox shares (ksys_bwrap_walls); the order of the mounts is the order of the arguments: each later one
     * lies over what an earlier one showed */
    walls = ksys_bwrap_walls(&(ksys_bwrap_walls_t){
        .share_net = spec->share_net, .host_tmp = spec->profile != GW_ISO_STRICT, .tmp_bytes = paths->tmp_bytes});
    ksys_strv_push(&b, paths->bwrap);
    for (char **p = walls; *p != NULL; ++p)
        ksys_strv_push(&b, *p);
    ksys_strv_free(walls);
    if (spec->uid >= 0) {
        snprintf(idbuf, sizeof(idbuf), "%ld", spec->uid);
        push_all(&b, (const char *const[]){"--uid", idbuf, NULL});
    }
    if (spec->gid >= 0) {
        snprintf(idbuf, sizeof(idbuf), "%ld", spec->gid);
        push_all(&b, (const char *const[]){"--gid", idbuf, NULL});
    }
    /* 6. keys, connection files, other sessions' layers: hidden; only this session's scripts come back, read-only */
    push_all(&b, (const char *const[]){"--tmpfs", paths->runtime_dir, "--ro-bind", paths->ctl_dir, GW_ISO_CTL_DIR, NULL});
    /* 7. the workspace per mode */
    if (spec->mode == GW_ISO_OVERLAY)
        push_all(&b, (const char *const[]){"--bind", paths->merged_dir, spec->workspace, NULL});
    else
        bind_source(&b, paths, GW_ISO_SOURCE_WORKSPACE, spec->mode == GW_ISO_RO, spec->workspace, spec->workspace);
    /* 8-9. extra_writable, then binds */
    for (i = 0; i != spec->num_extra_writable; ++i)
        bind_source(&b, paths, GW_ISO_SOURCE_EXTRA(i), 0, spec->extra_writable[i], spec->extra_writable[i]);
    for (i = 0; i != spec->num_binds; ++i)
        bind_source(&b, paths, GW_ISO_SOURCE_BIND(spec, i), spec->binds[i].readonly, spec->binds[i].source, spec->binds[i].dest);
    /* the runtime dir hidden again, over whatever a bind may have laid on its path; read-only: an unsized tmpfs the session
     * could write would be the host's memory (the first cover, writable while binds may go under it, lies beneath) */
    push_all(&b, (const char *const[]){"--tmpfs", paths->runtime_dir, "--remount-ro", paths->runtime_dir, NULL});
    /* 10. HOME on the private /tmp, the working directory */
    if (spec->profile == GW_ISO_STRICT)
        push_all(&b, (const char *const[]){"--dir", "/tmp/home", NULL});
    push_all(&b, (const char *const[]){"--chdir", spec->workspace, "--", NULL});
    for (char *const *p = cmd; *p != NULL; ++p)
        ksys_strv_push(&b, *p);
    if (spec->mode != GW_ISO_OVERLAY)
        return b.v;

    /* overlay: bwrap 0.8 has no --overlay; a private mount namespace holds the overlay, and bwrap's own namespace copies it */
    {
        char *script = NULL;
        size_t len = 0;
        const char *head = "mount -t overlay kgate-overlay -o ";
        char opts[3 * 4096 + 64];

        /* by descriptor, the lower layer is the working directory the wrapper entered through it (see below) */
        snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", paths->source_fd_base > 0 ? "." : spec->workspace,
                 paths->upper_dir, paths->work_dir);
        script = wire_strdup(head);
        len = strlen(script);
        append_quoted(&script, &len, opts);
        script = wire_realloc(script, len + 2);
        script[len++] = ' ';
        script[len] = '\0';
        append_quoted(&script, &len, paths->merged_dir);
        script = wire_realloc(script, len + 16);
        len += (size_t)sprintf(script + len, " && exec \"$@\"");
        if (paths->source_fd_base > 0) {
            /* enter the workspace through the descriptor that was checked, then close it: unshare carries the working
             * directory into the new mount namespace (where a descriptor of the old one cannot be mounted), and the sandbox
             * is handed no descriptor of the host's tree */
            char enter[64];
            snprintf(enter, sizeof(enter), "cd /proc/self/fd/%d && exec \"$@\" %d>&-", paths->source_fd_base,
                     paths->source_fd_base);
            push_all(&out, (const char *const[]){"/bin/sh", "-c", enter, "kgate-isolated-workspace", NULL});
        }
        ksys_strv_push(&out, paths->unshare);
        if (!paths->as_root)
            push_all(&out, (const char *const[]){"--user", "--map-root-user", NULL});
        push_all(&out, (const char *const[]){"--mount", "--propagation", "private", "--", "/bin/sh", "-c", NULL});
        ksys_strv_push(&out, script);
        ksys_strv_push(&out, "kgate-isolated");
        free(script);
        for (i = 0; i != b.n; ++i)
            ksys_strv_push(&out, b.v[i]);
        for (i = 0; i != b.n; ++i)
            free(b.v[i]);
        free(b.v);
    }
    return out.v;
}

int gw_iso_is_secret(const char *name)
{
    static const char *const patterns[] = {GW_ISO_SECRET_PATTERNS};

    for (size_t i = 0; i != sizeof(patterns) / sizeof(patterns[0]); ++i)
        if (fnmatch(patterns[i], name, FNM_CASEFOLD) == 0)
            return 1;
    return 0;
}

static int listed(const gw_iso_spec_t *spec, const char *name)
{
    for (size_t i = 0; i != spec->num_env_keys; ++i)
        if (strcmp(spec->env_keys[i], name) == 0)
            return 1;
    return 0;
}

char **gw_iso_env(const gw_iso_spec_t *spec, char *const *environ_, const char *mark)
{
    ksys_strv_t e = {NULL, 0, 0};
    char name[256];
    size_t mark_name = mark != NULL ? strcspn(mark, "=") : 0;

    e.v = wire_calloc(1, sizeof(char *)); /* never NULL, even when empty */
    e.cap = 1;
    for (char *const *p = environ_; p != NULL && *p != NULL; ++p) {
        size_t n = strcspn(*p, "=");
        int pass;
        if (n == 0 || n >= sizeof(name) || (*p)[n] != '=')
            continue;
        memcpy(name, *p, n);
        name[n] = '\0';
        if (strcmp(name, "KGATE_ACCESS_TOKEN") == 0 || (mark != NULL && n == mark_name && strncmp(*p, mark, n) == 0))
            continue;
        if (spec->profile == GW_ISO_STRICT && strcmp(name, "HOME") == 0)
            continue;
        if (strcmp(name, "PATH") == 0)
            pass = 1;
        else if (spec->env_explicit && spec->env_allow)
            pass = listed(spec, name);
        else
            pass = !listed(spec, name) && !(spec->profile == GW_ISO_STRICT && gw_iso_is_secret(name));
        if (pass)
            ksys_strv_push(&e, *p);
    }
    if (spec->profile == GW_ISO_STRICT)
        ksys_strv_push(&e, "HOME=/tmp/home");
    if (mark != NULL)
        ksys_strv_push(&e, mark);
    return e.v;
}
