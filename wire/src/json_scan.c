/* A validating scan of stream content: where its text token is and how long it decodes, without decoding anything. */
#include <string.h>
#include "wire/json_scan.h"
#include "wire/text.h"

/* The rules are wire_json_parse's (json_in.c), so that "simple" never lets through what it refuses. */

static const unsigned char *skip_ws(const unsigned char *p, const unsigned char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        ++p;
    return p;
}

/*
 * Scans the string whose opening quote is at `*pp`: on success moves `*pp` past its closing quote and
 * returns 0 with its decoded length and whether it has an escape; -1 when wire_json_parse would
 * refuse it (a control byte, invalid UTF-8, a bad escape, a lone surrogate, no closing quote).
 */
static int scan_string(const unsigned char **pp, const unsigned char *end, size_t *decoded, int *escaped)
{
    const unsigned char *s = *pp + 1;
    size_t n = 0;

    *escaped = 0;
    for (;;) {
        size_t plain = wire_json_plain_run(s, (size_t)(end - s), 0);
        s += plain;
        n += plain;
        if (s >= end)
            return -1;
        if (*s == '"')
            break;
        if (*s == '\\') {
            unsigned cp, lo;
            *escaped = 1;
            if (end - s < 2)
                return -1;
            switch (s[1]) {
            case '"':
            case '\\':
            case '/':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't':
                s += 2;
                n += 1;
                break;
            case 'u':
                /* hex digits are never a quote, so an escape that fits here fits before the closing quote */
                if (end - s < 6 || wire_hex4(s + 2, &cp) != 0)
                    return -1;
                s += 6;
                if (cp >= 0xdc00 && cp <= 0xdfff)
                    return -1;
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    if (end - s < 6 || s[0] != '\\' || s[1] != 'u' || wire_hex4(s + 2, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
                        return -1;
                    s += 6;
                    n += 4;
                } else {
                    n += cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
                }
                break;
            default:
                return -1;
            }
        } else if (*s < 0x20) {
            return -1;
        } else {
            /* not plain and not a quote, backslash or control byte: the start of a multi-byte character */
            int k = wire_utf8_sequence(s, (size_t)(end - s));
            if (k <= 0)
                return -1;
            s += k;
            n += (size_t)k;
        }
    }
    *pp = s + 1;
    *decoded = n;
    return 0;
}

static int key_is(const unsigned char *key, size_t len, const char *want, size_t want_len)
{
    return len == want_len && memcmp(key, want, len) == 0;
}

int wire_json_scan_stream(const char *json, size_t len, wire_stream_fields_t *out)
{
    const unsigned char *p = (const unsigned char *)json, *end = p + len;
    int have_name = 0, have_text = 0;

    p = skip_ws(p, end);
    if (p >= end || *p != '{')
        return 0;
    p = skip_ws(p + 1, end);
    for (;;) {
        const unsigned char *key, *value;
        size_t key_len, value_len;
        int escaped;
        if (p >= end || *p != '"')
            return 0;
        key = p + 1;
        /* an escaped key would have to be decoded to be compared: not simple (the parser decides) */
        if (scan_string(&p, end, &key_len, &escaped) != 0 || escaped)
            return 0;
        p = skip_ws(p, end);
        if (p >= end || *p != ':')
            return 0;
        p = skip_ws(p + 1, end);
        if (p >= end || *p != '"')
            return 0;
        value = p;
        if (scan_string(&p, end, &value_len, &escaped) != 0)
            return 0;
        /* later duplicates overwrite earlier ones, as json_object_set does in the parser */
        if (key_is(key, key_len, "text", 4)) {
            out->text = (const char *)value;
            out->text_len = (size_t)(p - value);
            out->text_decoded_len = value_len;
            have_text = 1;
        } else if (key_is(key, key_len, "name", 4)) {
            out->name = escaped ? NULL : (const char *)value + 1;
            out->name_len = escaped ? 0 : value_len;
            have_name = 1;
        }
        p = skip_ws(p, end);
        if (p >= end)
            return 0;
        if (*p == '}')
            break;
        if (*p != ',')
            return 0;
        p = skip_ws(p + 1, end);
    }
    return skip_ws(p + 1, end) == end && have_name && have_text;
}
