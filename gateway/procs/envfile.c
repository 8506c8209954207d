/* The EXECD_ENVS parser: upstream execd's line rules and Go's os.ExpandEnv, with kgate's bounds. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "procs/envfile.h"

typedef struct st_outbuf_t {
    char *base;
    size_t len, cap, max;
    int over;
} outbuf_t;

static void out_append(outbuf_t *out, const char *s, size_t n)
{
    if (out->over || n == 0)
        return;
    if (n > out->max - out->len) {
        out->over = 1;
        return;
    }
    if (out->len + n + 1 > out->cap) {
        out->cap = (out->len + n + 1) * 2 < out->max + 1 ? (out->len + n + 1) * 2 : out->max + 1;
        out->base = wire_realloc(out->base, out->cap);
    }
    memcpy(out->base + out->len, s, n);
    out->len += n;
    out->base[out->len] = '\0';
}

/* Go's isShellSpecialVar: the one-character names a shell gives meaning to. */
static int is_special(char c)
{
    return strchr("*#$@!?-0123456789", c) != NULL && c != '\0';
}

static int is_alnum(char c)
{
    return c == '_' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/*
 * Go's getShellName on `s` (non-empty): the name after a '$' (at *name, *name_len bytes) and how many bytes the
 * reference takes (*width). A zero-length name with a non-zero width is bad syntax whose bytes are dropped; with a zero
 * width, the '$' stands for itself.
 */
static void shell_name(const char *s, size_t len, const char **name, size_t *name_len, size_t *width)
{
    size_t i;

    *name = s, *name_len = 0;
    if (s[0] == '{') {
        if (len > 2 && is_special(s[1]) && s[2] == '}') {
            *name = s + 1, *name_len = 1, *width = 3;
            return;
        }
        for (i = 1; i < len; ++i) {
            if (s[i] == '}') {
                if (i == 1) {
                    *width = 2; /* "${}" */
                    return;
                }
                *name = s + 1, *name_len = i - 1, *width = i + 1;
                return;
            }
        }
        *width = 1; /* "${" never closed: the brace goes with the dollar */
        return;
    }
    if (is_special(s[0])) {
        *name_len = 1, *width = 1;
        return;
    }
    for (i = 0; i < len && is_alnum(s[i]); ++i)
        ;
    *name_len = i, *width = i;
}

char *gw_envfile_expand(const char *value, gw_envfile_lookup_cb lookup, void *ctx, size_t max)
{
    size_t len = strlen(value), i = 0, j;
    outbuf_t out = {.max = max};

    out.base = wire_malloc(1), out.cap = 1, out.base[0] = '\0';
    for (j = 0; j < len; ++j) {
        const char *name;
        size_t name_len, width;
        if (value[j] != '$' || j + 1 >= len)
            continue;
        out_append(&out, value + i, j - i);
        shell_name(value + j + 1, len - j - 1, &name, &name_len, &width);
        if (name_len == 0 && width == 0) {
            out_append(&out, "$", 1);
        } else if (name_len != 0) {
            char *key = wire_strndup(name, name_len);
            const char *found = lookup(key, ctx);
            if (found != NULL)
                out_append(&out, found, strlen(found));
            free(key);
        }
        j += width;
        i = j + 1;
    }
    if (i < len)
        out_append(&out, value + i, len - i);
    if (out.over) {
        free(out.base);
        return NULL;
    }
    return out.base;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

static void skip(gw_envfile_skip_cb on_skip, void *ctx, size_t lineno, const char *why)
{
    if (on_skip != NULL)
        on_skip(lineno, why, ctx);
}

json_t *gw_envfile_parse(const char *text, size_t len, gw_envfile_lookup_cb lookup, void *lookup_ctx, gw_envfile_skip_cb on_skip,
                         void *skip_ctx)
{
    json_t *vars = json_object();
    size_t pos = 0, lineno = 0;

    while (pos < len) {
        const char *line = text + pos, *nl = memchr(line, '\n', len - pos), *end = nl != NULL ? nl : text + len, *eq;
        char *name, *raw, *value;
        pos = (size_t)(end - text) + 1;
        ++lineno;
        while (line < end && is_blank(*line))
            ++line;
        while (end > line && is_blank(end[-1]))
            --end;
        if (line == end || *line == '#')
            continue;
        if (memchr(line, '\0', (size_t)(end - line)) != NULL) {
            skip(on_skip, skip_ctx, lineno, "a NUL byte: no environment variable can hold one");
            continue;
        }
        if ((eq = memchr(line, '=', (size_t)(end - line))) == NULL) {
            skip(on_skip, skip_ctx, lineno, "no '=': not NAME=value");
            continue;
        }
        if (eq == line) {
            skip(on_skip, skip_ctx, lineno, "an empty name");
            continue;
        }
        if ((size_t)(eq - line) >= GW_ENVFILE_MAX_VAR_BYTES) {
            skip(on_skip, skip_ctx, lineno, "longer than an environment variable may be (128 KiB)");
            continue;
        }
        name = wire_strndup(line, (size_t)(eq - line));
        raw = wire_strndup(eq + 1, (size_t)(end - eq - 1));
        value = gw_envfile_expand(raw, lookup, lookup_ctx, GW_ENVFILE_MAX_VAR_BYTES - 1 - strlen(name));
        if (value == NULL)
            skip(on_skip, skip_ctx, lineno, "longer than an environment variable may be (128 KiB) once expanded");
        else
            json_object_set_new_nocheck(vars, name, json_string_nocheck(value)); /* bytes, as the environment */
        free(name);
        free(raw);
        free(value);
    }
    return vars;
}
