/* GET /files/download: a file streamed in chunks, with ranges and line selections. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "core/errors.h"
#include "core/http.h"
#include "execd/execd.h"
#include "execd/files_request.h"
#include "files/fsops.h"
#include "files/upload.h"

/* ---- GET /files/download ---------------------------------------------------------------------- */

typedef struct st_download_t {
    h2o_generator_t super;
    int fd;
    uint64_t off, remaining; /* bytes still to send (byte mode) */
    int lines;               /* line mode: lines first..last (1-based, inclusive) */
    uint64_t line_no, first_line, last_line;
    int at_line_start, emitted_partial;
    char *buf;
} download_t;

static void on_download_dispose(void *p)
{
    download_t *d = p;
    if (d->fd != -1)
        close(d->fd);
    d->fd = -1;
}

/* Filters buf[0..n) in place down to the bytes of the wanted lines; returns the new length and sets *done past the last one. */
static size_t filter_lines(download_t *d, size_t n, int *done)
{
    size_t i, o = 0;

    for (i = 0; i != n; ++i) {
        char c = d->buf[i];
        if (d->line_no > d->last_line) {
            *done = 1;
            break;
        }
        if (d->line_no >= d->first_line) {
            d->buf[o++] = c;
            d->emitted_partial = c != '\n';
        }
        if (c == '\n')
            ++d->line_no;
    }
    if (d->line_no > d->last_line)
        *done = 1;
    return o;
}

static void on_download_proceed(h2o_generator_t *generator, h2o_req_t *req)
{
    download_t *d = H2O_STRUCT_FROM_MEMBER(download_t, super, generator);
    h2o_iovec_t buf;
    int final = 0;

    for (;;) {
        size_t want = d->lines ? DOWNLOAD_CHUNK : (d->remaining < DOWNLOAD_CHUNK ? (size_t)d->remaining : DOWNLOAD_CHUNK);
        ssize_t n = want != 0 ? pread(d->fd, d->buf, want, (off_t)d->off) : 0;
        if (n < 0) {
            if (errno == EINTR)
                continue;
            h2o_send(req, NULL, 0, H2O_SEND_STATE_ERROR);
            return;
        }
        d->off += (uint64_t)n;
        if (!d->lines) {
            d->remaining -= (uint64_t)n;
            /* a file that shrank meanwhile ends the response early: the client sees a short body */
            final = d->remaining == 0 || n == 0;
            buf = h2o_iovec_init(d->buf, (size_t)n);
            if (n == 0 && d->remaining != 0) {
                h2o_send(req, NULL, 0, H2O_SEND_STATE_ERROR);
                return;
            }
            break;
        }
        buf = h2o_iovec_init(d->buf, filter_lines(d, (size_t)n, &final));
        if (n == 0) {
            final = 1;
            /* execd ends every returned line with '\n', the last one too */
            if (d->emitted_partial)
                d->buf[buf.len++] = '\n';
        }
        if (buf.len != 0 || final)
            break;
    }
    h2o_send(req, &buf, buf.len != 0 ? 1 : 0, final ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

static void on_download_stop(h2o_generator_t *generator, h2o_req_t *req)
{
    (void)generator, (void)req;
}

/*
 * Parses a single-range "bytes=a-b" / "bytes=a-" / "bytes=-n" against `size`. 0 with the range,
 * -1 when unsatisfiable or malformed (416). Only the first range of a list is served (as execd does).
 */
static int parse_range(const char *s, size_t len, uint64_t size, uint64_t *start, uint64_t *count)
{
    const char *p = s, *end = s + len;
    uint64_t a = 0, b = 0;
    int has_a = 0, has_b = 0;

    while (p < end && (*p == ' ' || *p == '\t'))
        ++p;
    if ((size_t)(end - p) < 6 || strncasecmp(p, "bytes=", 6) != 0)
        return -1;
    p += 6;
    while (p < end && *p == ' ')
        ++p;
    for (; p < end && *p >= '0' && *p <= '9'; ++p, has_a = 1) {
        if (a > (UINT64_MAX - 9) / 10)
            return -1;
        a = a * 10 + (uint64_t)(*p - '0');
    }
    if (p == end || *p != '-')
        return -1;
    ++p;
    for (; p < end && *p >= '0' && *p <= '9'; ++p, has_b = 1) {
        if (b > (UINT64_MAX - 9) / 10)
            return -1;
        b = b * 10 + (uint64_t)(*p - '0');
    }
    while (p < end && *p == ' ')
        ++p;
    if (p != end && *p != ',')
        return -1;
    if (!has_a) {
        if (!has_b || b == 0 || size == 0)
            return -1;
        *count = b < size ? b : size;
        *start = size - *count;
        return 0;
    }
    if (a >= size || (has_b && b < a))
        return -1;
    *start = a;
    *count = (has_b && b < size - 1 ? b : size - 1) - a + 1;
    return 0;
}

static void add_header(h2o_req_t *req, const char *name, const char *value)
{
    h2o_add_header_by_str(&req->pool, &req->res.headers, name, strlen(name), 0, NULL, value, strlen(value));
}

/* Content-Disposition with the file name quoted, and RFC 5987 encoded when it is not plain ASCII. */
static const char *content_disposition(h2o_req_t *req, const char *name)
{
    size_t len = strlen(name), i, o = 0;
    int plain = 1;
    char *out = h2o_mem_alloc_pool(&req->pool, len * 6 + 64);

    for (i = 0; i != len; ++i)
        plain &= (unsigned char)name[i] >= 0x20 && (unsigned char)name[i] < 0x7f && name[i] != '"' && name[i] != '\\';
    o += (size_t)sprintf(out, "attachment; filename=\"");
    for (i = 0; i != len; ++i)
        out[o++] =
            (unsigned char)name[i] >= 0x20 && (unsigned char)name[i] < 0x7f && name[i] != '"' && name[i] != '\\' ? name[i] : '_';
    out[o++] = '"';
    if (!plain) {
        o += (size_t)sprintf(out + o, "; filename*=UTF-8''");
        for (i = 0; i != len; ++i) {
            unsigned char c = (unsigned char)name[i];
            if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~", c) != NULL)
                out[o++] = (char)c;
            else
                o += (size_t)sprintf(out + o, "%%%02X", c);
        }
    }
    out[o] = '\0';
    return out;
}

static int parse_positive(const query_value_t *v, uint64_t *out)
{
    return wire_parse_decimal(v->s, UINT64_MAX, out) == 0 && *out != 0 ? 0 : -1;
}

GW_EXECD_HANDLER(files_download)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    query_value_t v, vo, vl;
    int failed, fd, ret;
    struct stat st;
    download_t *d;
    uint64_t offset = 1, limit = UINT64_MAX;
    int has_offset, has_limit;
    ssize_t range_at;
    (void)params;

    if (gw_files_query_one(req, "path", 1, &v, &failed) == NULL ||
        gw_files_resolve(execd->files_ws, req, "path", v.s, v.len, p) != 0)
        return;
    has_offset = gw_files_query_one(req, "offset", 0, &vo, &failed) != NULL;
    if (failed)
        return;
    has_limit = gw_files_query_one(req, "limit", 0, &vl, &failed) != NULL;
    if (failed)
        return;
    if (has_offset && parse_positive(&vo, &offset) != 0) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "offset must be a positive integer (1-based)");
        return;
    }
    if (has_limit && parse_positive(&vl, &limit) != 0) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "limit must be a positive integer");
        return;
    }
    range_at = h2o_find_header(&req->headers, H2O_TOKEN_RANGE, -1);
    if ((has_offset || has_limit) && range_at != -1) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "offset/limit (lines) and a Range header (bytes) are mutually exclusive");
        return;
    }
    if ((ret = gw_workspace_open(execd->files_ws, p->rel, O_RDONLY, 0, &fd)) != 0) {
        gw_files_respond_errno(req, ret, "", v.s);
        return;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ret = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        close(fd);
        gw_files_respond_errno(req, ret, "only regular files can be downloaded: ", v.s);
        return;
    }
    d = h2o_mem_alloc_shared(&req->pool, sizeof(*d), on_download_dispose);
    memset(d, 0, sizeof(*d));
    d->fd = fd;
    d->super.proceed = on_download_proceed;
    d->super.stop = on_download_stop;
    d->buf = h2o_mem_alloc_pool(&req->pool, DOWNLOAD_CHUNK + 1);
    req->res.status = 200;
    req->res.reason = "OK";
    if (has_offset || has_limit) {
        d->lines = 1;
        d->line_no = 1;
        d->first_line = offset;
        d->last_line = limit > UINT64_MAX - offset ? UINT64_MAX : offset + limit - 1;
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("text/plain; charset=utf-8"));
    } else {
        uint64_t start = 0, count = (uint64_t)st.st_size;
        if (range_at != -1) {
            const h2o_iovec_t *r = &req->headers.entries[range_at].value;
            char *cr = h2o_mem_alloc_pool(&req->pool, 96);
            if (parse_range(r->base, r->len, (uint64_t)st.st_size, &start, &count) != 0) {
                snprintf(cr, 96, "bytes */%" PRIu64, (uint64_t)st.st_size);
                add_header(req, "content-range", cr);
                gw_send_error(req, GW_HTTP_RANGE_NOT_SATISFIABLE,
                              "range \"%.*s\" is not satisfiable for a file of %" PRIu64 " bytes",
                              (int)(r->len > 100 ? 100 : r->len), r->base, (uint64_t)st.st_size);
                return; /* the fd is closed by the pool's dispose */
            }
            snprintf(cr, 96, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, start, start + count - 1, (uint64_t)st.st_size);
            add_header(req, "content-range", cr);
            req->res.status = 206;
            req->res.reason = "Partial Content";
        }
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, H2O_STRLIT("application/octet-stream"));
        add_header(req, "content-disposition", content_disposition(req, p->rel[0] != '\0' ? p->name : "workspace"));
        add_header(req, "accept-ranges", "bytes");
        d->off = start;
        d->remaining = count;
        req->res.content_length = count;
    }
    gw_add_common_headers(req);
    h2o_start_response(req, &d->super);
    on_download_proceed(&d->super, req);
}
