/* The end-of-run marker's scan (procs/endmark.h). */
#include <string.h>
#include "procs/endmark.h"

void gw_endmark_init(gw_endmark_t *m, const char *nonce, int with_status)
{
    size_t n = strnlen(nonce, GW_ENDMARK_NONCE_MAX);

    memcpy(m->prefix, "\036KGATE:", 7);
    memcpy(m->prefix + 7, nonce, n);
    m->plen = 7 + n;
    m->prefix[m->plen] = '\0';
    m->with_status = with_status;
}

typedef enum { NO_MARKER, PARTIAL, MARKER } match_t;

/* Whether buf[0, len) begins with the marker (MARKER: *mlen and *status set), or is a proper prefix of one (PARTIAL). */
static match_t match(const gw_endmark_t *m, const char *buf, size_t len, size_t *mlen, int *status)
{
    size_t p = m->plen, digits = 0;
    int code = 0;

    if (memcmp(buf, m->prefix, len < m->plen ? len : m->plen) != 0)
        return NO_MARKER;
    if (len < m->plen)
        return PARTIAL;
    if (m->with_status) {
        if (p == len)
            return PARTIAL;
        if (buf[p++] != ':')
            return NO_MARKER;
        for (; p != len && buf[p] >= '0' && buf[p] <= '9'; ++p) {
            if (++digits > GW_ENDMARK_STATUS_DIGITS)
                return NO_MARKER;
            code = code * 10 + (buf[p] - '0');
        }
        if (p == len)
            return PARTIAL;
        if (digits == 0)
            return NO_MARKER;
    }
    if (p == len)
        return PARTIAL;
    if (buf[p] != '\036')
        return NO_MARKER;
    *mlen = p + 1;
    *status = code;
    return MARKER;
}

void gw_endmark_scan(const gw_endmark_t *m, const char *buf, size_t len, int final, gw_endmark_hit_t *hit)
{
    const char *at = buf, *end = buf + len;

    *hit = (gw_endmark_hit_t){len, 0, 0, 0};
    /* every marker begins with \036: try each one in turn */
    while ((at = memchr(at, '\036', (size_t)(end - at))) != NULL) {
        switch (match(m, at, (size_t)(end - at), &hit->marker_len, &hit->status)) {
        case MARKER:
            hit->data_len = (size_t)(at - buf);
            hit->found = 1;
            return;
        case PARTIAL:
            /* the rest may become a marker: kept back, unless nothing follows */
            if (!final)
                hit->data_len = (size_t)(at - buf);
            return;
        case NO_MARKER:
            ++at;
            break;
        }
    }
}
