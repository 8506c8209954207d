/* A validating scan of stream content: where its text token is and how long it decodes, without decoding anything. */
#include <string.h>
#include "wire/json_scan.h"
#include "wire/json_in.h"
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
        /* a second text is not simple: the parser decides (it keeps the later one), as wire_text_scan refuses it, whose
         * head would be the first's; a later name overwrites an earlier one, as json_object_set does in the parser */
        if (key_is(key, key_len, "text", 4)) {
            if (have_text)
                return 0;
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

/* ---- MIME bundles: any JSON value, validated without building it ---- */

typedef struct st_vscan_t {
    const unsigned char *end;
    unsigned depth;
    int newline; /* a line break was seen in white space */
} vscan_t;

static const unsigned char *skip_ws_nl(vscan_t *vs, const unsigned char *p)
{
    for (; p < vs->end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'); ++p)
        if (*p == '\n' || *p == '\r')
            vs->newline = 1;
    return p;
}

static const unsigned char *scan_digits(const unsigned char *p, const unsigned char *end)
{
    const unsigned char *start = p;
    while (p < end && *p >= '0' && *p <= '9')
        ++p;
    return p != start ? p : NULL;
}

/* The RFC 8259 number grammar, digits unbounded: the kernel's encoder decides what a number is. */
static const unsigned char *scan_number(const unsigned char *p, const unsigned char *end)
{
    if (p < end && *p == '-')
        ++p;
    if (p < end && *p == '0')
        ++p;
    else if ((p = scan_digits(p, end)) == NULL)
        return NULL;
    if (p < end && *p == '.' && (p = scan_digits(p + 1, end)) == NULL)
        return NULL;
    if (p < end && (*p == 'e' || *p == 'E')) {
        ++p;
        if (p < end && (*p == '+' || *p == '-'))
            ++p;
        if ((p = scan_digits(p, end)) == NULL)
            return NULL;
    }
    return p;
}

/* Scans one value at `p` (white space skipped before it); returns the end of it, or NULL. */
static const unsigned char *scan_value(vscan_t *vs, const unsigned char *p)
{
    size_t decoded;
    int escaped;

    p = skip_ws_nl(vs, p);
    if (p >= vs->end)
        return NULL;
    switch (*p) {
    case '"':
        return scan_string(&p, vs->end, &decoded, &escaped) == 0 ? p : NULL;
    case '{':
    case '[': {
        unsigned char close = *p == '{' ? '}' : ']';
        int is_object = *p == '{';
        if (vs->depth == WIRE_JSON_MAX_DEPTH)
            return NULL;
        ++vs->depth;
        p = skip_ws_nl(vs, p + 1);
        if (p < vs->end && *p == close) {
            --vs->depth;
            return p + 1;
        }
        for (;;) {
            if (is_object) {
                p = skip_ws_nl(vs, p);
                /* a key with "\u0000" is refused by wire_json_parse: escaped keys are checked by decoding nothing, so
                 * any escape passes here; the relay copies them as they are, which a JSON reader accepts */
                if (p >= vs->end || *p != '"' || scan_string(&p, vs->end, &decoded, &escaped) != 0)
                    return NULL;
                p = skip_ws_nl(vs, p);
                if (p >= vs->end || *p != ':')
                    return NULL;
                ++p;
            }
            if ((p = scan_value(vs, p)) == NULL)
                return NULL;
            p = skip_ws_nl(vs, p);
            if (p >= vs->end)
                return NULL;
            if (*p == close)
                break;
            if (*p != ',')
                return NULL;
            ++p;
        }
        --vs->depth;
        return p + 1;
    }
    case 't':
        return vs->end - p >= 4 && memcmp(p, "true", 4) == 0 ? p + 4 : NULL;
    case 'f':
        return vs->end - p >= 5 && memcmp(p, "false", 5) == 0 ? p + 5 : NULL;
    case 'n':
        return vs->end - p >= 4 && memcmp(p, "null", 4) == 0 ? p + 4 : NULL;
    default:
        return scan_number(p, vs->end);
    }
}

/* Scans the "data" object at `p` into `out`; returns its end, or NULL when it is not a simple bundle. */
static const unsigned char *scan_data(vscan_t *vs, const unsigned char *p, wire_bundle_fields_t *out)
{
    out->count = 0;
    if (p >= vs->end || *p != '{')
        return NULL;
    ++vs->depth;
    p = skip_ws_nl(vs, p + 1);
    if (p < vs->end && *p == '}') {
        --vs->depth;
        return p + 1;
    }
    for (;;) {
        wire_bundle_entry_t *e;
        const unsigned char *key, *value;
        size_t key_len;
        int escaped, outer_newline = vs->newline;
        p = skip_ws_nl(vs, p);
        if (p >= vs->end || *p != '"' || out->count == WIRE_BUNDLE_MAX_ENTRIES)
            return NULL;
        key = p + 1;
        if (scan_string(&p, vs->end, &key_len, &escaped) != 0 || escaped)
            return NULL;
        for (size_t i = 0; i != out->count; ++i)
            if (key_is(key, key_len, out->entries[i].key, out->entries[i].key_len))
                return NULL;
        p = skip_ws_nl(vs, p);
        if (p >= vs->end || *p != ':')
            return NULL;
        value = skip_ws_nl(vs, p + 1);
        vs->newline = 0;
        if ((p = scan_value(vs, value)) == NULL)
            return NULL;
        e = &out->entries[out->count++];
        *e =
            (wire_bundle_entry_t){(const char *)key, key_len, (const char *)value, (size_t)(p - value), *value == '"', vs->newline};
        vs->newline = outer_newline;
        p = skip_ws_nl(vs, p);
        if (p >= vs->end)
            return NULL;
        if (*p == '}')
            break;
        if (*p != ',')
            return NULL;
        ++p;
    }
    --vs->depth;
    return p + 1;
}

int wire_json_scan_bundle(const char *json, size_t len, wire_bundle_fields_t *out)
{
    vscan_t vs = {(const unsigned char *)json + len, 1, 0};
    const unsigned char *p = skip_ws_nl(&vs, (const unsigned char *)json);
    int have_data = 0;

    if (p >= vs.end || *p != '{')
        return 0;
    p = skip_ws_nl(&vs, p + 1);
    if (p < vs.end && *p == '}')
        return 0;
    for (;;) {
        const unsigned char *key;
        size_t key_len;
        int escaped;
        if (p >= vs.end || *p != '"')
            return 0;
        key = p + 1;
        if (scan_string(&p, vs.end, &key_len, &escaped) != 0)
            return 0;
        p = skip_ws_nl(&vs, p);
        if (p >= vs.end || *p != ':')
            return 0;
        p = skip_ws_nl(&vs, p + 1);
        /* an escaped key may decode to "data": the parser decides such a bundle */
        if (escaped)
            return 0;
        if (!escaped && key_is(key, key_len, "data", 4)) {
            if ((p = scan_data(&vs, p, out)) == NULL)
                return 0;
            have_data = 1;
        } else if ((p = scan_value(&vs, p)) == NULL) {
            return 0;
        }
        p = skip_ws_nl(&vs, p);
        if (p >= vs.end)
            return 0;
        if (*p == '}')
            break;
        if (*p != ',')
            return 0;
        p = skip_ws_nl(&vs, p + 1);
    }
    return skip_ws_nl(&vs, p + 1) == vs.end && have_data;
}

size_t wire_json_compact(char *dst, const char *src, size_t len)
{
    size_t n = 0;
    int in_string = 0;

    for (size_t i = 0; i != len; ++i) {
        char c = src[i];
        if (in_string) {
            if (c == '\\' && i + 1 < len) {
                if (dst != NULL) {
                    dst[n] = c;
                    dst[n + 1] = src[i + 1];
                }
                n += 2;
                ++i;
                continue;
            }
            in_string = c != '"';
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        } else if (c == '"') {
            in_string = 1;
        }
        if (dst != NULL)
            dst[n] = c;
        ++n;
    }
    return n;
}
