/* Byte-level text: UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above
 * U+10FFFF) and strict decimal numbers. */
#include "wire/alloc.h"
#include "wire/text.h"

int wire_utf8_sequence(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xbf;
    size_t need, i;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        need = 2;
    else if (c >= 0xe0 && c <= 0xef)
        need = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4)
        need = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else
        return 0;
    for (i = 1; i < need; ++i) {
        if (i >= avail)
            return -1;
        if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xbf))
            return 0;
    }
    return (int)need;
}

size_t wire_utf8_sanitize(const char *in, size_t len, int final, char **out, size_t *out_len)
{
    const unsigned char *s = (const unsigned char *)in;
    char *buf = wire_malloc(len * 3 + 1); /* worst case: every byte becomes the 3-byte U+FFFD */
    size_t i = 0, o = 0;

    while (i < len) {
        int n = wire_utf8_sequence(s + i, len - i);
        if (n > 0) {
            memcpy(buf + o, s + i, (size_t)n);
            o += (size_t)n;
            i += (size_t)n;
        } else if (n < 0 && !final) {
            break;
        } else {
            memcpy(buf + o, "\xef\xbf\xbd", 3);
            o += 3;
            ++i;
        }
    }
    buf[o] = '\0';
    *out = buf;
    *out_len = o;
    return i;
}

int wire_parse_decimal(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t n = 0;

    if (*s == '\0')
        return -1;
    for (; *s != '\0'; ++s) {
        unsigned digit = (unsigned char)*s - '0';
        if (digit > 9 || digit > max || n > (max - digit) / 10)
            return -1;
        n = n * 10 + digit;
    }
    *out = n;
    return 0;
}

int wire_hex4(const unsigned char *s, unsigned *out)
{
    unsigned v = 0;

    for (int i = 0; i != 4; ++i) {
        unsigned char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    *out = v;
    return 0;
}
