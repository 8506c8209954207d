/* Jupyter iopub/shell messages of one run -> the API's events (docs/API.md section 1, the event table). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
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
    if (json_is_string(plain = json_object_get(data, "text/plain")))
        json_object_set(results, "text", plain);
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
    if (strcmp(type, "execute_result") == 0 || strcmp(type, "display_data") == 0)
        return result_from_content(content, opts);
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
