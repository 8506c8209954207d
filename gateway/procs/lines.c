/* Process output -> lines ("\n", "\r" or "\r\n" terminated), keeping an incomplete line for later. */
#include "procs/lines.h"

/* The longest prefix of `s` (longer than `max` bytes) no longer than `max` that does not end inside
 * a UTF-8 character: a continuation byte at the cut belongs to a character begun before it. */
static size_t utf8_cut(const char *s, size_t max)
{
    size_t cut = max, n;

    for (n = 0; n < 3 && cut > 0 && ((unsigned char)s[cut] & 0xc0) == 0x80; ++n)
        --cut;
    return cut > 0 ? cut : max;
}

size_t gw_lines_split(const char *buf, size_t len, int final, size_t max_line, int *after_cr, gw_line_cb on_line, void *data)
{
    size_t i = 0, start = 0;

    if (len == 0)
        return 0;
    if (*after_cr && buf[0] == '\n')
        i = start = 1;
    *after_cr = 0;
    for (; i < len; ++i) {
        if (buf[i] != '\n' && buf[i] != '\r')
            continue;
        on_line(data, buf + start, i - start);
        if (buf[i] == '\r') {
            if (i + 1 == len)
                *after_cr = 1;
            else if (buf[i + 1] == '\n')
                ++i;
        }
        start = i + 1;
    }
    while (len - start > max_line) {
        size_t cut = utf8_cut(buf + start, max_line);
        on_line(data, buf + start, cut);
        start += cut;
    }
    if (final && start < len) {
        on_line(data, buf + start, len - start);
        start = len;
    }
    return start;
}
