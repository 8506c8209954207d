/* Compact JSON rendering with run-length copies of unescaped bytes (the relay's hot path). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/text.h"
#include "core/json_out.h"

/* 0: copy as is; otherwise the character after the backslash ('u' for \u00XX). */
static const char escape_table[256] = {
    ['\b'] = 'b', ['\f'] = 'f', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't', ['"'] = '"',  ['\\'] = '\\', [0x00] = 'u', [0x01] = 'u',
    [0x02] = 'u', [0x03] = 'u', [0x04] = 'u', [0x05] = 'u', [0x06] = 'u', [0x07] = 'u', [0x0b] = 'u',  [0x0e] = 'u', [0x0f] = 'u',
    [0x10] = 'u', [0x11] = 'u', [0x12] = 'u', [0x13] = 'u', [0x14] = 'u', [0x15] = 'u', [0x16] = 'u',  [0x17] = 'u', [0x18] = 'u',
    [0x19] = 'u', [0x1a] = 'u', [0x1b] = 'u', [0x1c] = 'u', [0x1d] = 'u', [0x1e] = 'u', [0x1f] = 'u',
};

static size_t put(char *out, size_t at, const void *src, size_t len)
{
    if (out != NULL)
        memcpy(out + at, src, len);
    return len;
}

static size_t render_string(const char *s, size_t len, char *out)
{
    size_t n = 0, i = 0, run;

    n += put(out, n, "\"", 1);
    while (i < len) {
        run = i + wire_json_plain_run((const unsigned char *)s + i, len - i, 1);
        n += put(out, n, s + i, run - i);
        if ((i = run) == len)
            break;
        char esc = escape_table[(unsigned char)s[i]], buf[8];
        if (esc == 'u') {
            snprintf(buf, sizeof(buf), "\\u%04X", (unsigned char)s[i]);
            n += put(out, n, buf, 6);
        } else {
            buf[0] = '\\';
            buf[1] = esc;
            n += put(out, n, buf, 2);
        }
        ++i;
    }
    n += put(out, n, "\"", 1);
    return n;
}

size_t gw_json_render(const json_t *value, char *out)
{
    char buf[64];
    size_t n = 0;

    switch (json_typeof(value)) {
    case JSON_OBJECT: {
        const char *key;
        json_t *member;
        int first = 1;
        n += put(out, n, "{", 1);
        json_object_foreach((json_t *)value, key, member)
        {
            if (!first)
                n += put(out, n, ",", 1);
            first = 0;
            n += render_string(key, strlen(key), out != NULL ? out + n : NULL);
            n += put(out, n, ":", 1);
            n += gw_json_render(member, out != NULL ? out + n : NULL);
        }
        n += put(out, n, "}", 1);
        return n;
    }
    case JSON_ARRAY: {
        size_t i;
        n += put(out, n, "[", 1);
        for (i = 0; i != json_array_size(value); ++i) {
            if (i != 0)
                n += put(out, n, ",", 1);
            n += gw_json_render(json_array_get(value, i), out != NULL ? out + n : NULL);
        }
        n += put(out, n, "]", 1);
        return n;
    }
    case JSON_STRING:
        return render_string(json_string_value(value), json_string_length(value), out);
    case JSON_INTEGER:
        return put(out, 0, buf, (size_t)snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(value)));
    case JSON_TRUE:
        return put(out, 0, "true", 4);
    case JSON_FALSE:
        return put(out, 0, "false", 5);
    case JSON_NULL:
        return put(out, 0, "null", 4);
    case JSON_REAL:
    default:
        /* reals are rare in events: jansson's own formatting keeps the output identical */
        return json_dumpb(value, out, out != NULL ? sizeof(buf) * 4 : 0, JSON_COMPACT | JSON_ENCODE_ANY);
    }
}

json_t *gw_json_string_lossy(const char *text, size_t len)
{
    json_t *s = json_stringn(text, len);
    char *valid;
    size_t n;

    if (s != NULL)
        return s;
    wire_utf8_sanitize(text, len, 1, &valid, &n);
    s = json_stringn_nocheck(valid, n);
    free(valid);
    return s;
}
