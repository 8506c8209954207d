/* A stream message's content scanned in pieces: its name, the head of its text within a budget, the rest counted (pure). */
#include <stdint.h>
#include <string.h>
#include "wire/text.h"
#include "wire/text_scan.h"

enum { S_START, S_FIRST_KEY, S_KEY, S_COLON, S_VALUE, S_STRING, S_SCALAR, S_NESTED, S_NEXT, S_AFTER };
/* what the string being read is */
enum { T_KEY, T_NAME, T_TEXT, T_OTHER };

#define P (s->_private)

void wire_text_scan_init(wire_text_scan_t *s, char *head, size_t head_max)
{
    memset(s, 0, sizeof(*s));
    s->head = head;
    s->head_max = head != NULL ? head_max : 0;
    s->head_decoded_max = SIZE_MAX;
    P.state = S_START;
    P.status = WIRE_TEXT_SCAN_MORE;
}

static int is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_hex(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

/* The characters of a number or a literal (true, false, null): a run of them is one scalar. */
static int is_scalar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '-' || c == '+' || c == '.' || c == 'E';
}

static size_t utf8_encode(unsigned cp, unsigned char *out)
{
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xc0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xe0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (unsigned char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (unsigned char)(0xf0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (unsigned char)(0x80 | (cp & 0x3f));
    return 4;
}

static void keep_small(char *buf, size_t cap, size_t *len, int *too_long, const unsigned char *dec, size_t dec_len)
{
    if (*too_long || cap - *len < dec_len) {
        *too_long = 1;
        return;
    }
    memcpy(buf + *len, dec, dec_len);
    *len += dec_len;
}

/* One whole character of the current string: `raw` as it came, `dec` decoded. The head is a prefix: once a character does not
 * fit, nothing after it goes in. */
static void character(wire_text_scan_t *s, const unsigned char *raw, size_t raw_len, const unsigned char *dec, size_t dec_len)
{
    switch (P.target) {
    case T_TEXT:
        if (!P.head_closed && s->head_max - s->head_len >= raw_len && s->head_decoded_max - s->head_decoded >= dec_len) {
            memcpy(s->head + s->head_len, raw, raw_len);
            s->head_len += raw_len;
            s->head_decoded += dec_len;
        } else {
            P.head_closed = 1;
            s->rest_decoded += dec_len;
        }
        break;
    case T_KEY:
        if (dec_len == 1 && dec[0] == '\0') { /* wire_json_parse refuses U+0000 in a key (jansson has no such keys) */
            P.status = WIRE_TEXT_SCAN_BAD;
            break;
        }
        keep_small(P.key, sizeof(P.key), &P.key_len, &P.key_long, dec, dec_len);
        break;
    case T_NAME:
        keep_small(s->name, sizeof(s->name), &s->name_len, &s->name_long, dec, dec_len);
        break;
    }
}

/* A run of plain ASCII (no quote, backslash or control byte) in the current string. */
static void plain(wire_text_scan_t *s, const unsigned char *p, size_t n)
{
    if (P.target == T_TEXT) {
        size_t take = P.head_closed ? 0 : s->head_max - s->head_len;
        if (take > s->head_decoded_max - s->head_decoded)
            take = s->head_decoded_max - s->head_decoded;
        if (take > n)
            take = n;
        if (take != 0)
            memcpy(s->head + s->head_len, p, take);
        s->head_len += take;
        s->head_decoded += take;
        if (take < n) {
            P.head_closed = 1;
            s->rest_decoded += n - take;
        }
    } else if (P.target != T_OTHER) {
        for (size_t i = 0; i != n; ++i)
            character(s, p + i, 1, p + i, 1);
    }
}

/* The next byte of an escape or a UTF-8 sequence in progress (P.unit). Returns -1 when it breaks the string's rules. */
static int unit_byte(wire_text_scan_t *s, unsigned char c)
{
    unsigned char dec[4];
    unsigned cp, lo;

    P.unit[P.unit_len++] = c;
    if (P.unit[0] != '\\') {
        int k = wire_utf8_sequence(P.unit, P.unit_len);
        if (k == 0)
            return -1;
        if (k > 0) {
            character(s, P.unit, P.unit_len, P.unit, P.unit_len);
            P.unit_len = 0;
        }
        return 0;
    }
    if (P.unit_len == 2) {
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *e = c != '\0' ? strchr(from, c) : NULL;
        if (c == 'u')
            return 0;
        if (e == NULL)
            return -1;
        dec[0] = (unsigned char)to[e - from];
        character(s, P.unit, 2, dec, 1);
        P.unit_len = 0;
        return 0;
    }
    if ((P.unit_len >= 3 && P.unit_len <= 6) || P.unit_len >= 9)
        if (!is_hex(c))
            return -1;
    if ((P.unit_len == 7 && c != '\\') || (P.unit_len == 8 && c != 'u'))
        return -1;
    if (P.unit_len != 6 && P.unit_len != 12)
        return 0;
    wire_hex4(P.unit + 2, &cp);
    if (cp >= 0xdc00 && cp <= 0xdfff)
        return -1;
    if (P.unit_len == 6 && cp >= 0xd800 && cp <= 0xdbff)
        return 0; /* the low half follows */
    if (P.unit_len == 12) {
        wire_hex4(P.unit + 8, &lo);
        if (lo < 0xdc00 || lo > 0xdfff)
            return -1;
        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    character(s, P.unit, P.unit_len, dec, utf8_encode(cp, dec));
    P.unit_len = 0;
    return 0;
}

/* Where a value of a member ends: the next member or the end at the top, the skipped value's structure inside one. */
static void value_done(wire_text_scan_t *s)
{
    P.state = P.depth == 0 ? S_NEXT : S_NESTED;
}

static void string_done(wire_text_scan_t *s)
{
    switch (P.target) {
    case T_KEY:
        P.state = S_COLON;
        return;
    case T_TEXT:
        s->have_text = 1;
        break;
    case T_NAME:
        s->have_name = 1;
        break;
    }
    value_done(s);
}

static int key_is(const wire_text_scan_t *s, const char *want)
{
    return !P.key_long && P.key_len == strlen(want) && memcmp(P.key, want, P.key_len) == 0;
}

static void open_string(wire_text_scan_t *s, int target)
{
    P.target = target;
    P.unit_len = 0;
    P.state = S_STRING;
    if (target == T_KEY) {
        P.key_len = 0;
        P.key_long = 0;
    } else if (target == T_NAME) {
        s->name_len = 0;
        s->name_long = 0;
    }
}

/* A byte of another member's value, skipped by its structure (P.state is S_VALUE at its start, S_NESTED inside it). */
static int skip_value(wire_text_scan_t *s, unsigned char c)
{
    if (c == '"') {
        open_string(s, T_OTHER);
        return 1;
    }
    if (c == '{' || c == '[') {
        if (P.depth == WIRE_TEXT_SCAN_MAX_DEPTH)
            return -1;
        P.closers[P.depth++] = c == '{' ? '}' : ']';
        P.state = S_NESTED;
        return 1;
    }
    if (P.state == S_NESTED && (c == '}' || c == ']')) {
        if (P.closers[P.depth - 1] != (char)c)
            return -1;
        --P.depth;
        value_done(s);
        return 1;
    }
    if (P.state == S_NESTED && (c == ',' || c == ':'))
        return 1;
    if (!is_scalar(c))
        return -1;
    P.state = S_SCALAR;
    return 1;
}

/* A byte outside strings. Returns the bytes it used (0: look at it again in the new state), or -1 when it breaks the rules. */
static int structure(wire_text_scan_t *s, unsigned char c)
{
    if (is_ws(c) && P.state != S_SCALAR)
        return 1;
    switch (P.state) {
    case S_START:
        if (c != '{')
            return -1;
        P.state = S_FIRST_KEY;
        return 1;
    case S_FIRST_KEY:
    case S_KEY:
        if (c == '}' && P.state == S_FIRST_KEY) {
            P.state = S_AFTER;
            return 1;
        }
        if (c != '"')
            return -1;
        open_string(s, T_KEY);
        return 1;
    case S_COLON:
        if (c != ':')
            return -1;
        P.state = S_VALUE;
        return 1;
    case S_VALUE:
        if (key_is(s, "text") || key_is(s, "name")) {
            /* a second text cannot be taken back from a head already given: refused */
            if (c != '"' || (key_is(s, "text") && s->have_text))
                return -1;
            open_string(s, key_is(s, "text") ? T_TEXT : T_NAME);
            return 1;
        }
        return skip_value(s, c);
    case S_NESTED:
        return skip_value(s, c);
    case S_SCALAR:
        if (is_scalar(c))
            return 1;
        value_done(s);
        return 0;
    case S_NEXT:
        if (c == ',') {
            P.state = S_KEY;
            return 1;
        }
        if (c != '}')
            return -1;
        P.state = S_AFTER;
        return 1;
    default: /* S_AFTER: white space only */
        return -1;
    }
}

wire_text_scan_status_t wire_text_scan_feed(wire_text_scan_t *s, const void *bytes, size_t len)
{
    const unsigned char *p = bytes, *end = p + len;

    while (P.status == WIRE_TEXT_SCAN_MORE && p < end) {
        if (P.state != S_STRING) {
            int used = structure(s, *p);
            if (used < 0)
                P.status = WIRE_TEXT_SCAN_BAD;
            p += used > 0 ? used : 0;
            continue;
        }
        if (P.unit_len != 0) {
            if (unit_byte(s, *p++) != 0)
                P.status = WIRE_TEXT_SCAN_BAD;
            continue;
        }
        size_t n = wire_json_plain_run(p, (size_t)(end - p), 0);
        if (n != 0) {
            plain(s, p, n);
            p += n;
            continue;
        }
        if (*p == '"') {
            ++p;
            string_done(s);
        } else if (*p < 0x20 || wire_utf8_sequence(p, 1) == 0) {
            P.status = WIRE_TEXT_SCAN_BAD;
        } else if (unit_byte(s, *p++) != 0) {
            P.status = WIRE_TEXT_SCAN_BAD;
        }
    }
    return (wire_text_scan_status_t)P.status;
}

wire_text_scan_status_t wire_text_scan_end(wire_text_scan_t *s)
{
    if (P.status == WIRE_TEXT_SCAN_MORE)
        P.status = P.state == S_AFTER && s->have_name && s->have_text ? WIRE_TEXT_SCAN_DONE : WIRE_TEXT_SCAN_BAD;
    return (wire_text_scan_status_t)P.status;
}

size_t wire_json_string_prefix(const char *inner, size_t len, size_t budget, size_t *decoded)
{
    const unsigned char *p = (const unsigned char *)inner;
    size_t i = 0, n = 0;

    while (i < len) {
        size_t raw = 1, dec = 1;
        unsigned cp;
        if (p[i] == '\\') {
            raw = 2;
            if (i + 1 < len && p[i + 1] == 'u' && i + 6 <= len && wire_hex4(p + i + 2, &cp) == 0) {
                raw = 6;
                dec = cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
                if (cp >= 0xd800 && cp <= 0xdbff)
                    raw = 12, dec = 4;
            }
        } else if (p[i] >= 0x80) {
            int k = wire_utf8_sequence(p + i, len - i);
            raw = dec = k > 0 ? (size_t)k : 1;
        }
        if (raw > len - i || budget - n < dec)
            break;
        i += raw;
        n += dec;
    }
    *decoded = n;
    return i;
}
