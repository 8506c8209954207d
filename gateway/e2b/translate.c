/* A run's events as E2B's NDJSON lines; E2B's language names; the code that sets env_vars for one run. */
#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "core/json_out.h"
#include "e2b/translate.h"

/* A string literal's bytes. */
#define PUT_LIT(out, lit) put((out), (lit), sizeof(lit) - 1)

static void put(gw_e2b_lines_t *out, const char *s, size_t n)
{
    if (out->len + n + 1 > out->cap) {
        out->cap = (out->len + n + 1) * 2;
        out->p = wire_realloc(out->p, out->cap);
    }
    memcpy(out->p + out->len, s, n);
    out->len += n;
    out->p[out->len] = '\0';
}

/* One compact object (one line: compact JSON has no raw line break) and its "\n". Steals `line`. */
static void put_line(gw_e2b_lines_t *out, json_t *line)
{
    size_t n = gw_json_render(line, NULL);

    if (out->len + n + 2 > out->cap) {
        out->cap = (out->len + n + 2) * 2;
        out->p = wire_realloc(out->p, out->cap);
    }
    gw_json_render(line, out->p + out->len);
    out->len += n;
    out->p[out->len++] = '\n';
    out->p[out->len] = '\0';
    json_decref(line);
}

void gw_e2b_line_simple(gw_e2b_lines_t *out, const char *type)
{
    put(out, "{\"type\":\"", 9);
    put(out, type, strlen(type));
    put(out, "\"}\n", 3);
}

void gw_e2b_line_error(gw_e2b_xlate_t *state, gw_e2b_lines_t *out, const char *name, const char *value, const char *traceback)
{
    if (state->error_sent)
        return;
    state->error_sent = 1;
    put_line(out, json_pack("{s:s, s:s, s:s, s:s}", "type", "error", "name", name, "value", value, "traceback", traceback));
}

/* ISO 8601 in UTC with microseconds, as Jupyter's header dates are. */
static json_t *iso_time(const json_t *ms)
{
    int64_t t = json_is_integer(ms) ? (int64_t)json_integer_value(ms) : 0;
    time_t secs = (time_t)(t / 1000);
    struct tm tm;
    char buf[64];

    gmtime_r(&secs, &tm);
    snprintf(buf, sizeof(buf), "%04d-%02d-%02dT%02d:%02d:%02d.%03d000Z", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)(t % 1000));
    return json_string(buf);
}

/* E2B's field for a MIME type, or NULL for one that goes into `extra`. */
static const char *field_of(const char *mime)
{
    static const char *const map[][2] = {
        {"text/plain", "text"},        {"text/html", "html"},
        {"text/markdown", "markdown"}, {"image/svg+xml", "svg"},
        {"image/png", "png"},          {"image/jpeg", "jpeg"},
        {"application/pdf", "pdf"},    {"text/latex", "latex"},
        {"application/json", "json"},  {"application/javascript", "javascript"},
        {"e2b/data", "data"},          {"e2b/chart", "chart"},
    };
    for (size_t i = 0; i != sizeof(map) / sizeof(map[0]); ++i)
        if (strcmp(mime, map[i][0]) == 0)
            return map[i][1];
    return NULL;
}

/* text/plain without one pair of surrounding quotes ('abc' -> abc), as E2B's server gives it. */
static json_t *unquoted(const json_t *plain)
{
    const char *s = json_string_value(plain);
    size_t n = json_string_length(plain);

    if (n >= 2 && (s[0] == '\'' || s[0] == '"') && s[n - 1] == s[0])
        return json_stringn_nocheck(s + 1, n - 2);
    return json_incref((json_t *)plain);
}

static void put_result(const json_t *event, gw_e2b_lines_t *out)
{
    const json_t *bundle = json_object_get(event, "results");
    json_t *line = json_pack("{s:s}", "type", "result"), *extra = NULL, *value;
    const char *mime;

    json_object_foreach((json_t *)bundle, mime, value)
    {
        const char *field = field_of(mime);
        if (strcmp(mime, "text") == 0) /* kgate's copy of text/plain, for execd's SDKs */
            continue;
        if (field == NULL) {
            if (extra == NULL)
                extra = json_object();
            json_object_set(extra, mime, value);
        } else if (strcmp(field, "text") == 0 && json_is_string(value)) {
            json_object_set_new(line, field, unquoted(value));
        } else if (strcmp(field, "json") == 0 && json_is_string(value)) {
            /* execd's framing (--compat-execd) carries non-string values as their JSON text: E2B's is the object */
            json_t *parsed = json_loadb(json_string_value(value), json_string_length(value), JSON_DECODE_ANY, NULL);
            json_object_set_new(line, field, parsed != NULL ? parsed : json_incref(value));
        } else {
            json_object_set(line, field, value);
        }
    }
    if (extra != NULL)
        json_object_set_new(line, "extra", extra);
    json_object_set_new(line, "is_main_result", json_boolean(!json_is_true(json_object_get(event, "display"))));
    put_line(out, line);
}

static void put_error(gw_e2b_xlate_t *state, const json_t *event, gw_e2b_lines_t *out)
{
    const json_t *err = json_object_get(event, "error"), *tb = json_object_get(err, "traceback"), *line;
    const char *name = json_string_value(json_object_get(err, "ename")), *value = json_string_value(json_object_get(err, "evalue"));
    gw_e2b_lines_t joined = {NULL, 0, 0};
    size_t i;

    if (state->error_sent)
        return;
    put(&joined, "", 0);
    json_array_foreach((json_t *)tb, i, line)
    {
        if (json_is_string(line))
            put(&joined, json_string_value(line), json_string_length(line));
    }
    /* a restart ends the runs it caught as E2B's server ends them */
    if (name != NULL && strcmp(name, "KernelRestarted") == 0)
        gw_e2b_line_error(state, out, "ContextRestarting", "Context was restarted", joined.p);
    else
        gw_e2b_line_error(state, out, name != NULL ? name : "Error", value != NULL ? value : "", joined.p);
    free(joined.p);
}

/* kgate's word that output was dropped (the run's limits): said once, on stderr, where a person reads it. */
static void put_truncation(gw_e2b_xlate_t *state, const json_t *event, gw_e2b_lines_t *out)
{
    const char *reason = json_string_value(json_object_get(event, "reason"));
    char text[512];

    if (state->truncation_said)
        return;
    state->truncation_said = 1;
    snprintf(text, sizeof(text), "[kgate: output truncated: %s]\n",
             reason != NULL ? reason : "the run's output went past its limit; the rest was dropped");
    put_line(out, json_pack("{s:s, s:s, s:o}", "type", "stderr", "text", text, "timestamp",
                            iso_time(json_object_get(event, "timestamp"))));
}

void gw_e2b_translate(gw_e2b_xlate_t *state, const json_t *event, gw_e2b_lines_t *out)
{
    const char *type = json_string_value(json_object_get(event, "type"));
    json_t *v;

    if (type == NULL)
        return;
    if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        if (json_is_string(v = json_object_get(event, "text")))
            put_line(out, json_pack("{s:s, s:O, s:o}", "type", type, "text", v, "timestamp",
                                    iso_time(json_object_get(event, "timestamp"))));
    } else if (strcmp(type, "execution_count") == 0) {
        if (json_is_integer(v = json_object_get(event, "execution_count")))
            put_line(out, json_pack("{s:s, s:O}", "type", "number_of_executions", "execution_count", v));
    } else if (strcmp(type, "result") == 0) {
        if (json_is_object(json_object_get(event, "results")))
            put_result(event, out);
    } else if (strcmp(type, "error") == 0) {
        put_error(state, event, out);
    } else if (strcmp(type, "status") == 0) {
        const char *text = json_string_value(json_object_get(event, "text"));
        if (text != NULL && strcmp(text, "output_truncated") == 0)
            put_truncation(state, event, out);
    }
}

const char *gw_e2b_language(const char *language, char *buf, size_t size)
{
    size_t n = 0;

    if (language == NULL)
        language = "";
    while (isspace((unsigned char)*language))
        ++language;
    while (language[n] != '\0' && n + 1 < size) {
        buf[n] = (char)tolower((unsigned char)language[n]);
        ++n;
    }
    while (n != 0 && isspace((unsigned char)buf[n - 1]))
        --n;
    buf[n] = '\0';
    if (n == 0)
        snprintf(buf, size, "python");
    else if (strcmp(buf, "js") == 0)
        snprintf(buf, size, "javascript");
    else if (strcmp(buf, "ts") == 0)
        snprintf(buf, size, "typescript");
    return buf;
}

const char *gw_e2b_kernel_language(const char *language)
{
    return strcmp(language, "typescript") == 0 ? "javascript" : language;
}

/* Bash's single-quoted form of `s`: 'it'\''s'. */
static void put_sh_quoted(gw_e2b_lines_t *out, const char *s)
{
    put(out, "'", 1);
    for (; *s != '\0'; ++s) {
        if (*s == '\'')
            put(out, "'\\''", 4);
        else
            put(out, s, 1);
    }
    put(out, "'", 1);
}

static void put_json(gw_e2b_lines_t *out, const json_t *value)
{
    size_t n = gw_json_render(value, NULL);
    char *text = wire_malloc(n + 1);

    gw_json_render(value, text);
    put(out, text, n);
    free(text);
}

/*
 * The variables are JSON text inside the code: a JSON object of strings is a Python dict and a
 * JavaScript object literal as it stands (gw_json_render escapes no '/', so every escape is one both
 * read alike). Names were checked by the caller (identifiers), so bash and R take them bare.
 */
char *gw_e2b_env_code(const char *language, const json_t *env, int restore)
{
    gw_e2b_lines_t code = {NULL, 0, 0};
    const char *key;
    json_t *value;

    if (strcasecmp(language, "python") == 0) {
        if (!restore) {
            PUT_LIT(&code, "import os as _kgate_os\n_kgate_env = ");
            put_json(&code, env);
            PUT_LIT(&code, "\n_kgate_env_saved = {k: _kgate_os.environ.get(k) for k in _kgate_env}\n"
                           "_kgate_os.environ.update(_kgate_env)\ndel _kgate_env\n");
        } else {
            const char *s = "for _kgate_k, _kgate_v in _kgate_env_saved.items():\n"
                            "    if _kgate_v is None:\n        _kgate_os.environ.pop(_kgate_k, None)\n"
                            "    else:\n        _kgate_os.environ[_kgate_k] = _kgate_v\n"
                            "del _kgate_env_saved, _kgate_os\n";
            put(&code, s, strlen(s));
        }
    } else if (strcasecmp(language, "javascript") == 0 || strcasecmp(language, "typescript") == 0) {
        const char *ops =
            "{ const e = typeof Deno !== 'undefined' ? { get: (k) => Deno.env.get(k), set: (k, v) => Deno.env.set(k, v), "
            "del: (k) => Deno.env.delete(k) } : { get: (k) => process.env[k], set: (k, v) => { process.env[k] = v; }, "
            "del: (k) => { delete process.env[k]; } };\n";
        put(&code, ops, strlen(ops));
        if (!restore) {
            PUT_LIT(&code, "const env = ");
            put_json(&code, env);
            PUT_LIT(&code, ";\nconst saved = {}; for (const k of Object.keys(env)) { saved[k] = e.get(k); e.set(k, env[k]); }\n"
                           "globalThis._kgate_env_saved = saved; }\n");
        } else {
            const char *s = "const saved = globalThis._kgate_env_saved || {}; for (const k of Object.keys(saved)) "
                            "{ if (saved[k] === undefined) e.del(k); else e.set(k, saved[k]); }\n"
                            "delete globalThis._kgate_env_saved; }\n";
            put(&code, s, strlen(s));
        }
    } else if (strcasecmp(language, "bash") == 0) {
        if (!restore) {
            PUT_LIT(&code, "_kgate_env_restore=''\n");
            json_object_foreach((json_t *)env, key, value)
            {
                size_t k = strlen(key);
                /* if [ -n "${K+x}" ]; then _kgate_env_restore+="export K=$(printf %q "$K");"; else ...+='unset K;'; fi; export
                 * K='V' */
                PUT_LIT(&code, "if [ -n \"${");
                put(&code, key, k);
                PUT_LIT(&code, "+x}\" ]; then _kgate_env_restore+=\"export ");
                put(&code, key, k);
                PUT_LIT(&code, "=$(printf %q \"$");
                put(&code, key, k);
                PUT_LIT(&code, "\");\"; else _kgate_env_restore+='unset ");
                put(&code, key, k);
                PUT_LIT(&code, ";'; fi; export ");
                put(&code, key, k);
                PUT_LIT(&code, "=");
                put_sh_quoted(&code, json_string_value(value));
                PUT_LIT(&code, "\n");
            }
        } else {
            PUT_LIT(&code, "eval \"$_kgate_env_restore\"; unset _kgate_env_restore\n");
        }
    } else if (strcasecmp(language, "r") == 0) {
        if (!restore) {
            int first = 1;
            /* base R reads no JSON: the names bare, the values as JSON strings, which R reads alike */
            PUT_LIT(&code, ".kgate_env <- c(");
            json_object_foreach((json_t *)env, key, value)
            {
                json_t *s = json_string(json_string_value(value));
                if (!first)
                    PUT_LIT(&code, ", ");
                first = 0;
                put(&code, key, strlen(key));
                PUT_LIT(&code, " = ");
                put_json(&code, s);
                json_decref(s);
            }
            PUT_LIT(&code,
                    ")\n.kgate_env_saved <- Sys.getenv(names(.kgate_env), unset = NA)\ndo.call(Sys.setenv, as.list(.kgate_env))\n"
                    "rm(.kgate_env)\n");
        } else {
            const char *s =
                "for (.kgate_k in names(.kgate_env_saved)) if (is.na(.kgate_env_saved[[.kgate_k]])) Sys.unsetenv(.kgate_k) "
                "else do.call(Sys.setenv, setNames(list(.kgate_env_saved[[.kgate_k]]), .kgate_k))\n"
                "rm(.kgate_env_saved)\n";
            put(&code, s, strlen(s));
        }
    }
    return code.p;
}

size_t gw_e2b_plain_text(char *out, size_t room, const char *in, size_t len)
{
    static const char replacement[] = "\xEF\xBF\xBD"; /* U+FFFD */
    size_t n = 0;

    if (room == 0)
        return 0;
    for (size_t i = 0; i != len;) {
        const unsigned char *c = (const unsigned char *)in + i;
        int seq = wire_utf8_sequence(c, len - i);
        const char *piece = (const char *)c;
        size_t piece_len = (size_t)seq;

        if (seq <= 0) { /* invalid, or cut short by the end of the text */
            piece = replacement;
            piece_len = sizeof(replacement) - 1;
            seq = 1;
        } else if (*c < 0x20 || *c == 0x7f) {
            piece = "?";
        }
        if (piece_len >= room - n)
            break;
        memcpy(out + n, piece, piece_len);
        n += piece_len;
        i += (size_t)seq;
    }
    out[n] = '\0';
    return n;
}
