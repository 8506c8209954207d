/* Jupyter iopub/shell messages of one run -> the API's events (docs/API.md section 1, the event table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/json_in.h"
#include "core/event.h"
#include "code/translate.h"
#include "core/json_out.h"

char *gw_strip_ansi(const char *s, size_t len, size_t *out_len)
{
    char *out = wire_malloc(len + 1);
    size_t o = 0, i = 0;

    while (i < len) {
        if (s[i] != '\x1b') {
            out[o++] = s[i++];
            continue;
        }
        /* Only ASCII bytes are ever swallowed after ESC: a malformed sequence must not cut a UTF-8
         * character in half, since the result is stored as a JSON string without re-validation. */
        if (i + 1 >= len || (unsigned char)s[i + 1] < 0x20 || (unsigned char)s[i + 1] > 0x7e) {
            ++i;
        } else if (s[i + 1] == '[') {
            /* CSI: parameter and intermediate bytes (0x20-0x3f), then one final byte (0x40-0x7e) */
            for (i += 2; i < len && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x3f; ++i)
                ;
            if (i < len && (unsigned char)s[i] >= 0x40 && (unsigned char)s[i] <= 0x7e)
                ++i;
        } else if (s[i + 1] == ']') {
            /* OSC: ends with BEL or ST (ESC \) */
            for (i += 2; i < len; ++i) {
                if (s[i] == '\a') {
                    ++i;
                    break;
                }
                if (s[i] == '\x1b' && i + 1 < len && s[i + 1] == '\\') {
                    i += 2;
                    break;
                }
            }
        } else {
            /* ESC, intermediate bytes (0x20-0x2f, as in `ESC ( B` from tput sgr0), one final byte */
            for (i += 1; i < len && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] <= 0x2f; ++i)
                ;
            if (i < len && (unsigned char)s[i] >= 0x30 && (unsigned char)s[i] <= 0x7e)
                ++i;
        }
    }
    out[o] = '\0';
    if (out_len != NULL)
        *out_len = o;
    return out;
}

static json_t *clean_traceback(json_t *traceback, const gw_translate_opts_t *opts)
{
    json_t *out = json_array(), *line;
    size_t i;

    if (!json_is_array(traceback))
        return out;
    json_array_foreach(traceback, i, line)
    {
        if (!json_is_string(line))
            continue;
        if (opts->keep_ansi) {
            json_array_append(out, line);
        } else {
            size_t len;
            char *clean = gw_strip_ansi(json_string_value(line), json_string_length(line), &len);
            json_array_append_new(out, json_stringn_nocheck(clean, len));
            free(clean);
        }
    }
    return out;
}

static const char *string_or(json_t *obj, const char *key, const char *fallback)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return s != NULL ? s : fallback;
}

static json_t *error_from_content(json_t *content, const gw_translate_opts_t *opts)
{
    json_t *ev = gw_event_new("error");
    json_t *err =
        json_pack("{s:s, s:s}", "ename", string_or(content, "ename", "Error"), "evalue", string_or(content, "evalue", ""));
    json_object_set_new(err, "traceback", clean_traceback(json_object_get(content, "traceback"), opts));
    json_object_set_new(ev, "error", err);
    return ev;
}

/* A MIME value as Go's execd SDK can read it (a map of strings): its compact JSON text. */
static json_t *as_json_text(const json_t *value)
{
    size_t len = gw_json_render(value, NULL);
    char *text = wire_malloc(len + 1);
    json_t *str;

    gw_json_render(value, text);
    str = json_stringn_nocheck(text, len);
    free(text);
    return str;
}

static json_t *result_from_content(json_t *content, const gw_translate_opts_t *opts)
{
    json_t *data = json_object_get(content, "data"), *plain, *results, *value;
    const char *mime;
    json_t *ev;

    if (!json_is_object(data))
        return NULL;
    ev = gw_event_new("result");
    /* every SDK finds the plain text: Python and Kotlin read results.text, Go text/plain (docs/API.md
     * Part 1). A shallow copy: the values are shared with the kernel's message, never copied. */
    results = json_copy(data);
    if (json_is_string(plain = json_object_get(data, "text/plain"))) {
        if (!opts->keep_ansi && memchr(json_string_value(plain), '\x1b', json_string_length(plain)) != NULL) {
            size_t len;
            char *clean = gw_strip_ansi(json_string_value(plain), json_string_length(plain), &len);
            plain = json_stringn_nocheck(clean, len);
            free(clean);
            json_object_set_new(results, "text/plain", plain);
        }
        json_object_set(results, "text", plain);
    }
    if (opts->compat_execd) {
        json_object_foreach(data, mime, value)
        {
            if (!json_is_string(value))
                json_object_set_new(results, mime, as_json_text(value));
        }
    }
    json_object_set_new(ev, "results", results);
    return ev;
}

/* A growing buffer of JSON text. */
typedef struct st_jtext_t {
    char *p;
    size_t len, cap;
} jtext_t;

static void jtext_put(jtext_t *t, const char *s, size_t n)
{
    if (t->len + n > t->cap) {
        t->cap = (t->len + n) * 2;
        t->p = wire_realloc(t->p, t->cap);
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
}

static void jtext_put_value(jtext_t *t, const json_t *value)
{
    size_t n = gw_json_render(value, NULL);
    if (t->len + n > t->cap) {
        t->cap = (t->len + n) * 2;
        t->p = wire_realloc(t->p, t->cap);
    }
    gw_json_render(value, t->p + t->len);
    t->len += n;
}

/* A JSON string token may hold an ESC only as an escape (JSON strings have no raw control bytes). */
static int token_may_have_esc(const char *tok, size_t len)
{
    for (const char *p = tok; (p = memchr(p, '\\', len - (size_t)(p - tok))) != NULL && len - (size_t)(p - tok) >= 6; ++p)
        if (p[1] == 'u' && p[2] == '0' && p[3] == '0' && p[4] == '1' && (p[5] == 'b' || p[5] == 'B'))
            return 1;
    return 0;
}

/* Puts the text/plain token, without ANSI escapes unless asked. */
static void put_plain(jtext_t *t, const wire_bundle_entry_t *e, const gw_translate_opts_t *opts)
{
    json_t *v;

    if (opts->keep_ansi || !token_may_have_esc(e->value, e->value_len) || (v = wire_json_parse(e->value, e->value_len)) == NULL) {
        jtext_put(t, e->value, e->value_len);
        return;
    }
    size_t len;
    char *clean = gw_strip_ansi(json_string_value(v), json_string_length(v), &len);
    json_t *s = json_stringn_nocheck(clean, len);
    jtext_put_value(t, s);
    json_decref(s);
    json_decref(v);
    free(clean);
}

/* A non-string value as it came, on one line (compacted only when it holds a line break). */
static void put_raw_value(jtext_t *t, const wire_bundle_entry_t *e, int as_string)
{
    char *compact = NULL;
    const char *text = e->value;
    size_t len = e->value_len;

    if (e->has_newline) {
        compact = wire_malloc(len != 0 ? len : 1);
        len = wire_json_compact(compact, e->value, e->value_len);
        text = compact;
    }
    if (as_string) {
        /* Go's execd SDK reads a map of strings: the value's JSON text, as a string */
        json_t *s = json_stringn_nocheck(text, len);
        jtext_put_value(t, s);
        json_decref(s);
    } else {
        jtext_put(t, text, len);
    }
    free(compact);
}

char *gw_translate_raw_bundle(const wire_bundle_fields_t *bundle, const gw_translate_opts_t *opts, size_t *len)
{
    jtext_t t = {NULL, 0, 0};
    const wire_bundle_entry_t *plain = NULL;
    int first = 1;

    for (size_t i = 0; i != bundle->count; ++i)
        if (bundle->entries[i].is_string && bundle->entries[i].key_len == 10 &&
            memcmp(bundle->entries[i].key, "text/plain", 10) == 0)
            plain = &bundle->entries[i];
    jtext_put(&t, "{", 1);
    for (size_t i = 0; i != bundle->count; ++i) {
        const wire_bundle_entry_t *e = &bundle->entries[i];
        if (plain != NULL && e->key_len == 4 && memcmp(e->key, "text", 4) == 0)
            continue;
        if (!first)
            jtext_put(&t, ",", 1);
        first = 0;
        jtext_put(&t, "\"", 1);
        jtext_put(&t, e->key, e->key_len);
        jtext_put(&t, "\":", 2);
        if (e == plain)
            put_plain(&t, e, opts);
        else if (e->is_string)
            jtext_put(&t, e->value, e->value_len);
        else
            put_raw_value(&t, e, opts->compat_execd);
    }
    if (plain != NULL) {
        jtext_put(&t, first ? "\"text\":" : ",\"text\":", first ? 7 : 8);
        put_plain(&t, plain, opts);
    }
    jtext_put(&t, "}", 1);
    *len = t.len;
    return t.p;
}

/* What kgate could not decode of a kernel's message is said, never dropped silently. */
static json_t *undecodable_notice(const char *type)
{
    json_t *ev = gw_event_new("status");
    json_object_set_new(ev, "text", json_string("message_undecodable"));
    json_object_set_new(ev, "msg_type", json_string(type));
    json_object_set_new(ev, "reason",
                        json_string("the kernel sent content that cannot be decoded (malformed JSON, or a number "
                                    "JSON parsers cannot represent, such as an integer beyond 64 bits); it was "
                                    "dropped"));
    return ev;
}

json_t *gw_translate_iopub(const wire_msg_t *msg, const gw_translate_opts_t *opts)
{
    const char *type = wire_msg_type(msg);
    json_t *content = msg->content, *ev;

    if (msg->content_undecodable)
        return strcmp(type, "status") == 0 || strcmp(type, "execute_input") == 0 ? NULL : undecodable_notice(type);

    if (strcmp(type, "stream") == 0) {
        json_t *text = json_object_get(content, "text");
        if (!json_is_string(text))
            return NULL;
        ev = gw_event_new(strcmp(string_or(content, "name", "stdout"), "stderr") == 0 ? "stderr" : "stdout");
        json_object_set(ev, "text", text); /* shares the kernel's string: large output is not copied */
        return ev;
    }
    if (strcmp(type, "execute_result") == 0)
        return result_from_content(content, opts);
    if (strcmp(type, "display_data") == 0) {
        /* what the code displayed, not its value: E2B's door tells them apart (is_main_result) */
        if ((ev = result_from_content(content, opts)) != NULL)
            json_object_set_new(ev, "display", json_true());
        return ev;
    }
    if (strcmp(type, "error") == 0)
        return error_from_content(content, opts);
    if (strcmp(type, "execute_input") == 0) {
        json_t *count = json_object_get(content, "execution_count");
        if (!json_is_integer(count))
            return NULL;
        ev = gw_event_new("execution_count");
        json_object_set(ev, "execution_count", count);
        return ev;
    }
    return NULL;
}

json_t *gw_translate_execute_reply(const wire_msg_t *msg, int saw_error, const gw_translate_opts_t *opts, int *execution_count)
{
    json_t *content = msg->content;
    const char *status = string_or(content, "status", "");
    json_t *count = json_object_get(content, "execution_count");

    if (json_is_integer(count) && execution_count != NULL)
        *execution_count = (int)json_integer_value(count);
    if (msg->content_undecodable)
        return saw_error ? NULL
                         : gw_error_event("ExecutionFailed", "the kernel's reply could not be decoded; the outcome is unknown");
    if (strcmp(status, "ok") == 0 || saw_error)
        return NULL;
    if (strcmp(status, "error") == 0)
        return error_from_content(content, opts);
    /* "aborted" (ipykernel), "abort" (tslab) or anything else: never a silent success */
    if (strncmp(status, "abort", 5) == 0)
        return gw_error_event("ExecutionAborted", "the kernel aborted this execution after an earlier error");
    char evalue[96];
    snprintf(evalue, sizeof(evalue), "the kernel replied with status \"%.40s\"", status);
    return gw_error_event("ExecutionFailed", evalue);
}
