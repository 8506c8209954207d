/* kernels/bash/src/utf8.c: code point counts and offsets (sanitising is wire_utf8_sanitize). */
#include <string.h>
#include "utf8.h"

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
