/* core/paths.c: lexical normalisation of a path. */
#include <string.h>
#include "core/paths.h"

/* Applies the components of s[0..n) to the normalised path in out[0..*used) ("" stands for "/"); -1 when it would not fit. */
static int apply(const char *s, size_t n, char *out, size_t size, size_t *used)
{
    size_t i = 0;

    while (i < n) {
        size_t start, clen;
        while (i < n && s[i] == '/')
            ++i;
        start = i;
        while (i < n && s[i] != '/')
            ++i;
        clen = i - start;
        if (clen == 0 || (clen == 1 && s[start] == '.'))
            continue;
        if (clen == 2 && s[start] == '.' && s[start + 1] == '.') {
            while (*used > 0 && out[*used - 1] != '/')
                --*used;
            if (*used > 0)
                --*used; /* the '/' before the popped component; popping past "/" stays at "/" */
            continue;
        }
        /* room for '/', the component and the final NUL */
        if (*used + 1 + clen >= size)
            return -1;
        out[(*used)++] = '/';
        memcpy(out + *used, s + start, clen);
        *used += clen;
    }
    return 0;
}

size_t gw_path_normalize(const char *base, const char *path, size_t len, char *out, size_t size)
{
    size_t used = 0;

    if (size < 2)
        return 0;
    if (len == 0 || path[0] != '/') {
        if (base == NULL || base[0] != '/' || apply(base, strlen(base), out, size, &used) != 0)
            return 0;
    }
    if (apply(path, len, out, size, &used) != 0)
        return 0;
    if (used == 0)
        out[used++] = '/';
    out[used] = '\0';
    return used;
}
