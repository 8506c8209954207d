/* support/jframe.c: Jupyter's v1 kernel WebSocket framing as a client writes it (support/jframe.h). */
#include <string.h>
#include "support/base.h"
#include "support/jframe.h"

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i != 8; ++i)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t ts_jframe_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
        v = v << 8 | p[i];
    return v;
}

uint8_t *ts_jframe_v1(const char *const *parts, size_t nparts, size_t *len)
{
    size_t off = 8 * (nparts + 2), total = off;
    uint8_t *frame;

    for (size_t i = 0; i != nparts; ++i)
        total += strlen(parts[i]);
    frame = ts_malloc(total);
    put_le64(frame, nparts + 1);
    put_le64(frame + 8, off);
    for (size_t i = 0; i != nparts; ++i) {
        size_t n = strlen(parts[i]);
        memcpy(frame + off, parts[i], n);
        off += n;
        put_le64(frame + 16 + 8 * i, off);
    }
    *len = total;
    return frame;
}
