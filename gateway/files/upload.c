/* multipart/form-data splitting, and the page trimming that keeps large buffered request bodies out of resident memory. */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <h2o.h>
#include "files/upload.h"

/* Bytes searched between two progress reports (and so at most resident at once while parsing). The
 * fuzz target (tests/fuzz/fuzz_multipart.c) builds this file again with a window of a few bytes. */
#ifndef GW_MULTIPART_SEARCH_WINDOW
#define GW_MULTIPART_SEARCH_WINDOW (8u << 20)
#endif

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

/* Offset of the first `pat` at or after `from`, or SIZE_MAX; reports progress window by window. */
static size_t find_windowed(const char *body, size_t len, size_t from, const char *pat, size_t plen,
                            gw_multipart_progress_cb progress, void *ctx)
{
    while (from < len) {
        size_t chunk_end = len - from > GW_MULTIPART_SEARCH_WINDOW + plen ? from + GW_MULTIPART_SEARCH_WINDOW + plen - 1 : len;
        const char *hit = memmem(body + from, chunk_end - from, pat, plen);
        if (hit != NULL)
            return (size_t)(hit - body);
        if (chunk_end == len)
            break;
        from += GW_MULTIPART_SEARCH_WINDOW;
        if (progress != NULL)
            progress(ctx, from);
    }
    return SIZE_MAX;
}

/* Like find_windowed, but only at a real delimiter: followed by "--" (the last) or by optional blanks and CRLF. */
static size_t find_delimiter(const char *body, size_t len, size_t from, const char *delim, size_t dlen,
                             gw_multipart_progress_cb progress, void *ctx)
{
    for (;;) {
        size_t hit = find_windowed(body, len, from, delim, dlen, progress, ctx), p;
        if (hit == SIZE_MAX)
            return SIZE_MAX;
        p = hit + dlen;
        if (len - p >= 2 && memcmp(body + p, "--", 2) == 0)
            return hit;
        while (p < len && (body[p] == ' ' || body[p] == '\t'))
            ++p;
        if (len - p >= 2 && memcmp(body + p, "\r\n", 2) == 0)
            return hit;
        from = hit + 1;
    }
}

int gw_multipart_parse(const char *body, size_t len, const char *boundary, gw_multipart_part_t *parts, size_t max_parts,
                       size_t *num_parts, gw_multipart_progress_cb progress, void *ctx)
{
    char delim[GW_MULTIPART_BOUNDARY_MAX + 5]; /* "\r\n--" boundary */
    size_t blen = strlen(boundary), dlen, pos, hit;

    *num_parts = 0;
    if (blen == 0 || blen > GW_MULTIPART_BOUNDARY_MAX)
        return GW_EMULTIPART_NOBOUNDARY;
    memcpy(delim, "\r\n--", 4);
    memcpy(delim + 4, boundary, blen);
    dlen = 4 + blen;
    /* the first delimiter may open the body without the CRLF that precedes the others */
    if (len >= dlen - 2 && memcmp(body, delim + 2, dlen - 2) == 0) {
        pos = dlen - 2;
    } else {
        if ((hit = find_delimiter(body, len, 0, delim, dlen, progress, ctx)) == SIZE_MAX)
            return GW_EMULTIPART_MALFORMED;
        pos = hit + dlen;
    }
    for (;;) {
        gw_multipart_part_t *part;
        size_t hdr_end, data_off;
        if (len - pos >= 2 && memcmp(body + pos, "--", 2) == 0)
            break; /* the close delimiter */
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
        if (*num_parts == max_parts)
            return GW_EMULTIPART_TOOMANYPARTS;
        part = &parts[(*num_parts)++];
        memset(part, 0, sizeof(*part));
        parse_part_headers(body + pos, body + hdr_end, part);
        if ((hit = find_delimiter(body, len, data_off, delim, dlen, progress, ctx)) == SIZE_MAX)
            return GW_EMULTIPART_MALFORMED;
        part->data_off = data_off;
        part->data_len = hit - data_off;
        pos = hit + dlen;
    }
    if (progress != NULL)
        progress(ctx, len);
    return 0;
}

/* ---- resident pages of large bodies ----------------------------------------------------------- */

static char body_dir[FILENAME_MAX - 16];
static struct timespec body_dir_mtime;
static int body_trim_active;

int gw_body_buffers_init(const char *tmpdir, size_t threshold)
{
    if (tmpdir == NULL || tmpdir[0] == '\0')
        tmpdir = "/tmp";
    if ((size_t)snprintf(body_dir, sizeof(body_dir), "%s/kgate-bodies.XXXXXX", tmpdir) >= sizeof(body_dir))
        return -ENAMETOOLONG;
    if (mkdtemp(body_dir) == NULL) {
        int err = errno;
        body_dir[0] = '\0';
        return -err;
    }
    snprintf(h2o_socket_buffer_mmap_settings.fn_template, sizeof(h2o_socket_buffer_mmap_settings.fn_template), "%s/b.XXXXXX",
             body_dir);
    h2o_socket_buffer_mmap_settings.threshold = threshold;
    return 0;
}

void gw_body_buffers_dispose(void)
{
    if (body_dir[0] != '\0')
        rmdir(body_dir);
    body_dir[0] = '\0';
}

/*
 * Calls cb for every mapping of /proc/self/maps that is a shared mapping of one of our (unlinked)
 * body files. Stops early when cb returns non-zero. Returns how many matched.
 */
static size_t for_each_body_mapping(int (*cb)(void *ctx, char *start, char *end), void *ctx)
{
    FILE *fp;
    char line[FILENAME_MAX + 256];
    size_t dir_len = strlen(body_dir), matched = 0;

    if (dir_len == 0 || (fp = fopen("/proc/self/maps", "re")) == NULL)
        return 0;
    while (fgets(line, sizeof(line), fp) != NULL) {
        uintptr_t start, end;
        char perms[8];
        int path_at = 0;
        const char *path;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %*s %*s %*s %n", &start, &end, perms, &path_at) < 3 || path_at == 0)
            continue;
        path = line + path_at;
        if (perms[3] != 's' || strncmp(path, body_dir, dir_len) != 0 || path[dir_len] != '/')
            continue;
        ++matched;
        if (cb(ctx, (char *)start, (char *)end) != 0)
            break;
    }
    fclose(fp);
    return matched;
}

static int trim_mapping(void *ctx, char *start, char *end)
{
    (void)ctx;
    madvise(start, (size_t)(end - start), MADV_DONTNEED);
    return 0;
}

int gw_body_buffers_trim(void)
{
    struct stat st;

    if (body_dir[0] == '\0' || stat(body_dir, &st) != 0)
        return 0;
    /* h2o creates and unlinks each body file at once: the directory's mtime says a new one began */
    if (st.st_mtim.tv_sec != body_dir_mtime.tv_sec || st.st_mtim.tv_nsec != body_dir_mtime.tv_nsec) {
        body_dir_mtime = st.st_mtim;
        body_trim_active = 1;
    }
    if (body_trim_active && for_each_body_mapping(trim_mapping, NULL) == 0)
        body_trim_active = 0;
    return body_trim_active;
}

typedef struct st_find_ctx_t {
    const char *base;
    gw_body_pages_t *pages;
} find_ctx_t;

static int find_mapping(void *ctx, char *start, char *end)
{
    find_ctx_t *f = ctx;

    if (f->base >= start && f->base < end) {
        f->pages->map_start = start;
        f->pages->map_end = end;
        return 1;
    }
    return 0;
}

void gw_body_pages_init(gw_body_pages_t *pages, const char *base, size_t len)
{
    find_ctx_t f = {base, pages};

    pages->map_start = pages->map_end = NULL;
    if (base == NULL || len < h2o_socket_buffer_mmap_settings.threshold / 2)
        return;
    for_each_body_mapping(find_mapping, &f);
}

void gw_body_pages_release(const gw_body_pages_t *pages, const char *from, const char *to)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a, b;

    if (pages->map_start == NULL)
        return;
    if (from < pages->map_start)
        from = pages->map_start;
    if (to > pages->map_end)
        to = pages->map_end;
    a = ((uintptr_t)from + page - 1) & ~(page - 1);
    b = (uintptr_t)to & ~(page - 1);
    if (b > a)
        madvise((void *)a, b - a, MADV_DONTNEED);
}
