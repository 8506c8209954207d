/* multipart/form-data splitting (files/multipart.h): pure, over a body already received whole. */
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include "files/multipart.h"

/* Reads a parameter value (token or quoted-string) starting at *p; copies at most size - 1 bytes. */
static void read_param_value(const char **p, const char *end, char *out, size_t size)
{
    const char *s = *p;
    size_t used = 0;

    if (s < end && *s == '"') {
        ++s;
        while (s < end && *s != '"') {
            if (*s == '\\' && s + 1 < end)
                ++s;
            if (used + 1 < size)
                out[used++] = *s;
            ++s;
        }
        if (s < end)
            ++s;
    } else {
        while (s < end && *s != ';' && *s != ' ' && *s != '\t') {
            if (used + 1 < size)
                out[used++] = *s;
            ++s;
        }
    }
    out[used] = '\0';
    *p = s;
}

int gw_multipart_boundary(const char *content_type, size_t len, char *out)
{
    const char *p = content_type, *end = content_type + len;
    static const char prefix[] = "multipart/form-data";

    if (len < sizeof(prefix) - 1 || strncasecmp(p, prefix, sizeof(prefix) - 1) != 0)
        return GW_EMULTIPART_NOBOUNDARY;
    p += sizeof(prefix) - 1;
    while (p < end) {
        while (p < end && (*p == ';' || *p == ' ' || *p == '\t'))
            ++p;
        if ((size_t)(end - p) > 9 && strncasecmp(p, "boundary=", 9) == 0) {
            p += 9;
            read_param_value(&p, end, out, GW_MULTIPART_BOUNDARY_MAX + 1);
            return out[0] != '\0' ? 0 : GW_EMULTIPART_NOBOUNDARY;
        }
        while (p < end && *p != ';')
            ++p;
    }
    return GW_EMULTIPART_NOBOUNDARY;
}

/* Parses one part's header block [p, end): the Content-Disposition's name and filename. */
static void parse_part_headers(const char *p, const char *end, gw_multipart_part_t *part)
{
    static const char cd[] = "content-disposition:";

    while (p < end) {
        const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        const char *line_end = eol != NULL ? eol : end;
        if ((size_t)(line_end - p) >= sizeof(cd) - 1 && strncasecmp(p, cd, sizeof(cd) - 1) == 0) {
            const char *q = p + sizeof(cd) - 1;
            while (q < line_end) {
                while (q < line_end && (*q == ';' || *q == ' ' || *q == '\t'))
                    ++q;
                if ((size_t)(line_end - q) > 5 && strncasecmp(q, "name=", 5) == 0) {
                    q += 5;
                    read_param_value(&q, line_end, part->name, sizeof(part->name));
                } else if ((size_t)(line_end - q) > 9 && strncasecmp(q, "filename=", 9) == 0) {
                    q += 9;
                    read_param_value(&q, line_end, part->filename, sizeof(part->filename));
                    part->has_filename = 1;
                } else {
                    while (q < line_end && *q != ';')
                        ++q;
                }
            }
        }
        p = line_end + 2;
    }
}

/* Whether the bytes of body from q on end a delimiter whose "--boundary" ends at q: "--" (the close delimiter), or
 * optional blanks and CRLF (RFC 2046 5.1.1). Anything else makes it the boundary's text inside data or the preamble. */
static int ends_delimiter(const char *body, size_t len, size_t q)
{
    if (len - q >= 2 && memcmp(body + q, "--", 2) == 0)
        return 1;
    while (q < len && (body[q] == ' ' || body[q] == '\t'))
        ++q;
    return len - q >= 2 && memcmp(body + q, "\r\n", 2) == 0;
}

/* find_delimiter's answer when its budget ran out before an answer: search again from p->search_from. */
#define NOT_YET (SIZE_MAX - 1)

/*
 * Offset of the first delimiter at or after p->search_from that is a real one (followed by "--", the
 * last, or by optional blanks and CRLF), or SIZE_MAX when there is none; NOT_YET once `*budget` bytes
 * were searched without an answer (p->search_from then says where to go on). Searches in windows of
 * p->window and reports progress after each.
 */
static size_t find_delimiter(gw_multipart_parser_t *p, size_t *budget)
{
    const char *body = p->body;
    size_t len = p->len, dlen = p->dlen;

    while (p->search_from < len) {
        size_t from = p->search_from;
        size_t chunk_end = len - from > p->window + dlen ? from + p->window + dlen - 1 : len;
        const char *hit = memmem(body + from, chunk_end - from, p->delim, dlen);
        if (hit != NULL) {
            size_t at = (size_t)(hit - body);
            if (ends_delimiter(body, len, at + dlen))
                return at;
            p->search_from = at + 1; /* the boundary's text inside data: go on after it */
            continue;
        }
        if (chunk_end == len)
            break;
        p->search_from += p->window;
        if (p->progress != NULL)
            p->progress(p->ctx, p->search_from);
        if (*budget <= p->window) {
            *budget = 0;
            return NOT_YET;
        }
        *budget -= p->window;
    }
    return SIZE_MAX;
}

int gw_multipart_parser_init(gw_multipart_parser_t *p, const char *body, size_t len, const char *boundary,
                             gw_multipart_part_t *parts, size_t max_parts, gw_multipart_progress_cb progress, void *ctx)
{
    size_t blen = strlen(boundary);

    memset(p, 0, sizeof(*p));
    if (blen == 0 || blen > GW_MULTIPART_BOUNDARY_MAX)
        return GW_EMULTIPART_NOBOUNDARY;
    p->body = body;
    p->len = len;
    p->window = GW_MULTIPART_SEARCH_WINDOW;
    p->parts = parts;
    p->max_parts = max_parts;
    p->progress = progress;
    p->ctx = ctx;
    memcpy(p->delim, "\r\n--", 4);
    memcpy(p->delim + 4, boundary, blen);
    p->dlen = 4 + blen;
    /* the first delimiter may open the body without the CRLF that precedes the others (a preamble line that only
     * starts with its text, "--boundaryX", is not one) */
    if (len >= p->dlen - 2 && memcmp(body, p->delim + 2, p->dlen - 2) == 0 && ends_delimiter(body, len, p->dlen - 2)) {
        p->pos = p->dlen - 2;
        p->state = GW_MULTIPART_AT_DELIMITER;
    } else {
        p->state = GW_MULTIPART_FIRST_DELIMITER;
    }
    return 0;
}

/* The part that starts after the delimiter ending at p->pos: its headers, and where its data begins. 0, 1 at the close delimiter,
 * or an error. */
static int begin_part(gw_multipart_parser_t *p)
{
    const char *body = p->body;
    size_t len = p->len, pos = p->pos, hdr_end, data_off;
    gw_multipart_part_t *part;

    if (len - pos >= 2 && memcmp(body + pos, "--", 2) == 0)
        return 1; /* the close delimiter */
    while (pos < len && (body[pos] == ' ' || body[pos] == '\t'))
        ++pos;
    if (len - pos < 2 || memcmp(body + pos, "\r\n", 2) != 0)
        return GW_EMULTIPART_MALFORMED;
    pos += 2;
    if (len - pos >= 2 && memcmp(body + pos, "\r\n", 2) == 0) {
        hdr_end = pos;
        data_off = pos + 2;
    } else {
        size_t window = len - pos < GW_MULTIPART_HEADERS_MAX ? len - pos : GW_MULTIPART_HEADERS_MAX;
        const char *end = memmem(body + pos, window, "\r\n\r\n", 4);
        if (end == NULL)
            return GW_EMULTIPART_MALFORMED;
        hdr_end = (size_t)(end - body) + 2;
        data_off = hdr_end + 2;
    }
    if (p->num_parts == p->max_parts)
        return GW_EMULTIPART_TOOMANYPARTS;
    part = &p->parts[p->num_parts++];
    memset(part, 0, sizeof(*part));
    parse_part_headers(body + pos, body + hdr_end, part);
    part->data_off = data_off;
    p->search_from = data_off;
    return 0;
}

int gw_multipart_parser_step(gw_multipart_parser_t *p, size_t budget)
{
    size_t hit;
    int ret;

    for (;;) {
        switch (p->state) {
        case GW_MULTIPART_FIRST_DELIMITER:
            if ((hit = find_delimiter(p, &budget)) == NOT_YET)
                return 1;
            if (hit == SIZE_MAX)
                return GW_EMULTIPART_MALFORMED;
            p->pos = hit + p->dlen;
            p->state = GW_MULTIPART_AT_DELIMITER;
            break;
        case GW_MULTIPART_AT_DELIMITER:
            if ((ret = begin_part(p)) < 0)
                return ret;
            if (ret == 1) {
                p->state = GW_MULTIPART_DONE;
                if (p->progress != NULL)
                    p->progress(p->ctx, p->len);
                return 0;
            }
            p->state = GW_MULTIPART_IN_DATA;
            break;
        case GW_MULTIPART_IN_DATA:
            if ((hit = find_delimiter(p, &budget)) == NOT_YET)
                return 1;
            if (hit == SIZE_MAX)
                return GW_EMULTIPART_MALFORMED;
            p->parts[p->num_parts - 1].data_len = hit - p->parts[p->num_parts - 1].data_off;
            p->pos = hit + p->dlen;
            p->state = GW_MULTIPART_AT_DELIMITER;
            break;
        case GW_MULTIPART_DONE:
            return 0;
        }
    }
}

int gw_multipart_parse(const char *body, size_t len, const char *boundary, gw_multipart_part_t *parts, size_t max_parts,
                       size_t *num_parts, gw_multipart_progress_cb progress, void *ctx)
{
    gw_multipart_parser_t p;
    int ret;

    *num_parts = 0;
    if ((ret = gw_multipart_parser_init(&p, body, len, boundary, parts, max_parts, progress, ctx)) != 0)
        return ret;
    if ((ret = gw_multipart_parser_step(&p, SIZE_MAX)) != 0)
        return ret;
    *num_parts = p.num_parts;
    return 0;
}
