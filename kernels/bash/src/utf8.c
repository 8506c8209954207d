/* kernels/bash/src/utf8.c: UTF-8 sanitising for stream output, and code point offsets. */
#include <string.h>
#include "utf8.h"

/*
 * Length of the well-formed sequence starting at in[0] (Unicode 15, table 3-7), 0 if it is not one,
 * or -(bytes seen) when `avail` ends inside a sequence that is well formed so far.
 */
static int sequence_length(const unsigned char *in, size_t avail)
{
    unsigned char c = in[0], lo = 0x80, hi = 0xbf;
    int need;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 3;
        if (c == 0xe0)
            lo = 0xa0; /* overlong */
        else if (c == 0xed)
            hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 4;
        if (c == 0xf0)
            lo = 0x90; /* overlong */
        else if (c == 0xf4)
            hi = 0x8f; /* above U+10FFFF */
    } else {
        return 0;
    }
    for (int i = 1; i < need; ++i) {
        if ((size_t)i >= avail)
            return -i;
        unsigned char b = in[i];
        if (i == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf))
            return 0;
    }
    return need;
}

size_t bk_utf8_sanitize(const unsigned char *in, size_t len, int final, char *out, size_t *out_len)
{
    size_t i = 0, o = 0;

    while (i < len) {
        int n = sequence_length(in + i, len - i);
        if (n < 0 && !final)
            break;
        if (n <= 0) {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i += 1;
            continue;
        }
        memcpy(out + o, in + i, (size_t)n);
        o += (size_t)n;
        i += (size_t)n;
    }
    *out_len = o;
    return i;
}

size_t bk_utf8_count(const char *s, size_t nbytes)
{
    size_t n = 0;
    for (size_t i = 0; i != nbytes; ++i)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            ++n;
    return n;
}

size_t bk_utf8_offset(const char *s, size_t len, size_t cp)
{
    size_t i = 0;
    for (; i < len; ++i) {
        if (((unsigned char)s[i] & 0xc0) != 0x80) {
            if (cp == 0)
                return i;
            --cp;
        }
    }
    return len;
}
