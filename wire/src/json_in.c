/* A recursive-descent JSON parser into jansson values, with bulk handling of plain string runs. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/json_in.h"
#include "wire/text.h"

typedef struct st_parser_t {
    const unsigned char *p, *end;
    unsigned depth;
} parser_t;

static json_t *parse_value(parser_t *ps);

static void skip_ws(parser_t *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ++ps->p;
}

static size_t put_utf8(char *out, unsigned cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | cp >> 6);
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | cp >> 12);
        out[1] = (char)(0x80 | (cp >> 6 & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | cp >> 18);
    out[1] = (char)(0x80 | (cp >> 12 & 0x3f));
    out[2] = (char)(0x80 | (cp >> 6 & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A parsed string: `base` and `len`, pointing into the input when it had no escape (`owned` NULL),
 * else into `owned`, a NUL-terminated buffer of the decoded bytes that the holder frees. */
typedef struct st_parsed_string_t {
    const char *base;
    size_t len;
    char *owned;
} parsed_string_t;

/*
 * Parses a string (ps->p at the opening quote) into `*out`, or returns -1. Plain runs are
 * validated in bulk and, without escapes, not copied at all; escapes are decoded into a buffer.
 */
static int parse_string_raw(parser_t *ps, parsed_string_t *out)
{
    const unsigned char *start = ++ps->p, *s = start;
    char *buf = NULL;
    size_t len = 0;

    /* first pass: find the closing quote and validate, noting whether there is any escape */
    int escaped = 0;
    while (s < ps->end && *s != '"') {
        size_t plain = wire_json_plain_run(s, (size_t)(ps->end - s), 0);
        if (plain != 0) {
            s += plain;
            continue;
        }
        if (*s == '\\') {
            escaped = 1;
            s += 2;
        } else if (*s < 0x20) {
            return -1;
        } else if (*s < 0x80) {
            ++s;
        } else {
            int n = wire_utf8_sequence(s, (size_t)(ps->end - s));
            if (n <= 0)
                return -1;
            s += n;
        }
    }
    if (s >= ps->end)
        return -1;
    if (!escaped) {
        ps->p = s + 1;
        *out = (parsed_string_t){(const char *)start, (size_t)(s - start), NULL};
        return 0;
    }
    /* the output is never longer than the input: an escape is at least as long as what it means */
    buf = wire_malloc((size_t)(s - start) + 1);
    {
        const unsigned char *q = start;
        while (q < s) {
            const unsigned char *run = q, *backslash = memchr(q, '\\', (size_t)(s - q));
            q = backslash != NULL ? backslash : s;
            memcpy(buf + len, run, (size_t)(q - run));
            len += (size_t)(q - run);
            if (q == s)
                break;
            switch (q[1]) {
            case '"':
            case '\\':
            case '/':
                buf[len++] = (char)q[1];
                q += 2;
                break;
            case 'b':
                buf[len++] = '\b', q += 2;
                break;
            case 'f':
                buf[len++] = '\f', q += 2;
                break;
            case 'n':
                buf[len++] = '\n', q += 2;
                break;
            case 'r':
                buf[len++] = '\r', q += 2;
                break;
            case 't':
                buf[len++] = '\t', q += 2;
                break;
            case 'u': {
                unsigned cp, lo;
                if (s - q < 6 || wire_hex4(q + 2, &cp) != 0)
                    goto Error;
                q += 6;
                if (cp >= 0xdc00 && cp <= 0xdfff)
                    goto Error;
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    if (s - q < 6 || q[0] != '\\' || q[1] != 'u' || wire_hex4(q + 2, &lo) != 0 || lo < 0xdc00 || lo > 0xdfff)
                        goto Error;
                    q += 6;
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                }
                len += put_utf8(buf + len, cp);
                break;
            }
            default:
                goto Error;
            }
        }
    }
    buf[len] = '\0';
    ps->p = s + 1;
    *out = (parsed_string_t){buf, len, buf};
    return 0;
Error:
    free(buf);
    return -1;
}

static json_t *parse_string(parser_t *ps)
{
    parsed_string_t str;
    json_t *v;

    if (parse_string_raw(ps, &str) != 0)
        return NULL;
    v = json_stringn_nocheck(str.base, str.len);
    free(str.owned);
    return v;
}

_Static_assert(sizeof(json_int_t) == sizeof(long long), "jansson's json_int_t is long long (strtoll) on this platform");

/* Integers: JSON allows no leading zero, so more than 19 digits is always outside json_int_t (as in
 * jansson, whose strtoll reports "too big integer"); no copy of the text is needed. */
static json_t *make_integer(int negative, const unsigned char *digits, size_t n)
{
    const unsigned long long limit = negative ? (unsigned long long)LLONG_MAX + 1 : (unsigned long long)LLONG_MAX;
    unsigned long long v = 0;

    if (n > 19)
        return NULL;
    for (size_t i = 0; i != n; ++i)
        v = v * 10 + (unsigned)(digits[i] - '0');
    if (v > limit)
        return NULL;
    /* -(v - 1) - 1: -2^63 has no positive counterpart to negate */
    return json_integer(!negative || v == 0 ? (json_int_t)v : -(json_int_t)(v - 1) - 1);
}

/*
 * Reals are rewritten as "[-]<significant digits>e<exponent>" for strtod, whatever their length:
 * leading zeros dropped, at most REAL_DIGITS_KEPT significant digits, then a single 1 standing for
 * any nonzero digit dropped after them. Every rounding boundary of a double (a halfway point
 * between neighbours, the overflow threshold) has at most 768 significant digits, so the rewritten
 * number rounds exactly as the original does (Go's strconv keeps 800 digits and a "truncated" flag
 * for the same reason). An exponent beyond +-REAL_EXPONENT_CLAMP means overflow or zero for any
 * kept digits, so it is clamped. The text strtod sees has no '.', so LC_NUMERIC cannot change it.
 */
#define REAL_DIGITS_KEPT 800
#define REAL_EXPONENT_CLAMP 100000
#define REAL_EXPONENT_SATURATE 1000000000000000LL /* 10^15: far beyond the clamp, far from overflow */

static json_t *make_real(int negative, const unsigned char *intpart, size_t nint, const unsigned char *frac, size_t nfrac,
                         long long exponent)
{
    char buf[1 + REAL_DIGITS_KEPT + 1 + sizeof("e-18446744073709551615")], *out = buf, *end;
    size_t kept = 0, skipped = 0; /* significant digits kept; zeros before the first of them */
    int sticky = 0;

    if (negative)
        *out++ = '-';
    for (size_t i = 0; i != nint + nfrac; ++i) {
        unsigned char c = i < nint ? intpart[i] : frac[i - nint];
        if (kept == 0 && c == '0') {
            ++skipped;
        } else if (kept != REAL_DIGITS_KEPT) {
            out[kept++] = (char)c;
        } else if (c != '0') {
            sticky = 1;
            break;
        }
    }
    if (kept == 0) {
        *out++ = '0';
    } else {
        /* the value is out[0..kept) * 10^(exponent + nint - skipped - kept), plus the sticky digit */
        long long e = exponent + (long long)nint - (long long)skipped - (long long)kept;
        out += kept;
        if (sticky) {
            *out++ = '1';
            --e;
        }
        if (e > REAL_EXPONENT_CLAMP)
            e = REAL_EXPONENT_CLAMP;
        else if (e < -REAL_EXPONENT_CLAMP)
            e = -REAL_EXPONENT_CLAMP;
        out += snprintf(out, sizeof(buf) - (size_t)(out - buf), "e%lld", e);
    }
    *out = '\0';
    errno = 0;
    double d = strtod(buf, &end);
    /* jansson refuses only overflow ("real number overflow"); underflow yields zero or a subnormal */
    if ((d == HUGE_VAL || d == -HUGE_VAL) && errno == ERANGE)
        return NULL;
    return json_real(d);
}

static const unsigned char *skip_digits(const unsigned char *s, const unsigned char *end)
{
    while (s < end && *s >= '0' && *s <= '9')
        ++s;
    return s;
}

static json_t *parse_number(parser_t *ps)
{
    const unsigned char *s = ps->p, *intpart, *frac = NULL;
    size_t nint, nfrac = 0;
    long long exponent = 0;
    int negative = 0, is_real = 0;

    if (s < ps->end && *s == '-') {
        negative = 1;
        ++s;
    }
    if (s >= ps->end || *s < '0' || *s > '9')
        return NULL;
    intpart = s;
    s = *s == '0' ? s + 1 : skip_digits(s, ps->end);
    nint = (size_t)(s - intpart);
    if (s < ps->end && *s == '.') {
        is_real = 1;
        frac = ++s;
        if (s >= ps->end || *s < '0' || *s > '9')
            return NULL;
        s = skip_digits(s, ps->end);
        nfrac = (size_t)(s - frac);
    }
    if (s < ps->end && (*s == 'e' || *s == 'E')) {
        int exponent_negative = 0;
        is_real = 1;
        ++s;
        if (s < ps->end && (*s == '+' || *s == '-'))
            exponent_negative = *s++ == '-';
        if (s >= ps->end || *s < '0' || *s > '9')
            return NULL;
        for (; s < ps->end && *s >= '0' && *s <= '9'; ++s)
            if (exponent < REAL_EXPONENT_SATURATE)
                exponent = exponent * 10 + (*s - '0');
        if (exponent_negative)
            exponent = -exponent;
    }
    ps->p = s;
    return is_real ? make_real(negative, intpart, nint, frac, nfrac, exponent) : make_integer(negative, intpart, nint);
}

static int literal(parser_t *ps, const char *word, size_t len)
{
    if ((size_t)(ps->end - ps->p) < len || memcmp(ps->p, word, len) != 0)
        return -1;
    ps->p += len;
    return 0;
}

static json_t *parse_array(parser_t *ps)
{
    json_t *array = json_array(), *item;

    ++ps->p;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ++ps->p;
        return array;
    }
    for (;;) {
        if ((item = parse_value(ps)) == NULL)
            goto Error;
        json_array_append_new(array, item);
        skip_ws(ps);
        if (ps->p >= ps->end)
            goto Error;
        if (*ps->p == ']') {
            ++ps->p;
            return array;
        }
        if (*ps->p++ != ',')
            goto Error;
    }
Error:
    json_decref(array);
    return NULL;
}

static json_t *parse_object(parser_t *ps)
{
    json_t *object = json_object(), *value;
    parsed_string_t key;

    ++ps->p;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ++ps->p;
        return object;
    }
    for (;;) {
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != '"' || parse_string_raw(ps, &key) != 0)
            goto Error;
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p++ != ':' || (value = parse_value(ps)) == NULL) {
            free(key.owned);
            goto Error;
        }
        /* a key with "\u0000" inside is refused, as jansson's own parser does (only an escape can
         * put one there: raw control bytes are invalid) */
        if (key.owned != NULL && memchr(key.base, '\0', key.len) != NULL) {
            free(key.owned);
            json_decref(value);
            goto Error;
        }
        json_object_setn_new_nocheck(object, key.base, key.len, value);
        free(key.owned);
        skip_ws(ps);
        if (ps->p >= ps->end)
            goto Error;
        if (*ps->p == '}') {
            ++ps->p;
            return object;
        }
        if (*ps->p++ != ',')
            goto Error;
    }
Error:
    json_decref(object);
    return NULL;
}

static json_t *parse_value(parser_t *ps)
{
    json_t *v = NULL;

    skip_ws(ps);
    if (ps->p >= ps->end)
        return NULL;
    switch (*ps->p) {
    case '{':
    case '[':
        if (ps->depth == WIRE_JSON_MAX_DEPTH)
            return NULL;
        ++ps->depth;
        v = *ps->p == '{' ? parse_object(ps) : parse_array(ps);
        --ps->depth;
        return v;
    case '"':
        return parse_string(ps);
    case 't':
        return literal(ps, "true", 4) == 0 ? json_true() : NULL;
    case 'f':
        return literal(ps, "false", 5) == 0 ? json_false() : NULL;
    case 'n':
        return literal(ps, "null", 4) == 0 ? json_null() : NULL;
    default:
        return parse_number(ps);
    }
}

json_t *wire_json_parse(const char *text, size_t len)
{
    parser_t ps = {(const unsigned char *)text, (const unsigned char *)text + len, 0};
    json_t *v = parse_value(&ps);

    if (v == NULL)
        return NULL;
    skip_ws(&ps);
    if (ps.p != ps.end) {
        json_decref(v);
        return NULL;
    }
    return v;
}
