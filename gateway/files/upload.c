/* multipart/form-data splitting, and the page trimming that keeps large buffered request bodies out of resident memory. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <h2o.h>
#include "wire/alloc.h"
#include "ksys/detach.h"
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

/* find_delimiter's answer when its budget ran out before an answer: search again from p->search_from. */
#define NOT_YET (SIZE_MAX - 1)

/*
 * Offset of the first delimiter at or after p->search_from that is a real one (followed by "--", the
 * last, or by optional blanks and CRLF), or SIZE_MAX when there is none; NOT_YET once `*budget` bytes
 * were searched without an answer (p->search_from then says where to go on). Searches in windows of
 * GW_MULTIPART_SEARCH_WINDOW and reports progress after each.
 */
static size_t find_delimiter(gw_multipart_parser_t *p, size_t *budget)
{
    const char *body = p->body;
    size_t len = p->len, dlen = p->dlen;

    while (p->search_from < len) {
        size_t from = p->search_from;
        size_t chunk_end = len - from > GW_MULTIPART_SEARCH_WINDOW + dlen ? from + GW_MULTIPART_SEARCH_WINDOW + dlen - 1 : len;
        const char *hit = memmem(body + from, chunk_end - from, p->delim, dlen);
        if (hit != NULL) {
            size_t at = (size_t)(hit - body), q = at + dlen;
            if (len - q >= 2 && memcmp(body + q, "--", 2) == 0)
                return at;
            while (q < len && (body[q] == ' ' || body[q] == '\t'))
                ++q;
            if (len - q >= 2 && memcmp(body + q, "\r\n", 2) == 0)
                return at;
            p->search_from = at + 1; /* the boundary's text inside data: go on after it */
            continue;
        }
        if (chunk_end == len)
            break;
        p->search_from += GW_MULTIPART_SEARCH_WINDOW;
        if (p->progress != NULL)
            p->progress(p->ctx, p->search_from);
        if (*budget <= GW_MULTIPART_SEARCH_WINDOW) {
            *budget = 0;
            return NOT_YET;
        }
        *budget -= GW_MULTIPART_SEARCH_WINDOW;
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
    p->parts = parts;
    p->max_parts = max_parts;
    p->progress = progress;
    p->ctx = ctx;
    memcpy(p->delim, "\r\n--", 4);
    memcpy(p->delim + 4, boundary, blen);
    p->dlen = 4 + blen;
    /* the first delimiter may open the body without the CRLF that precedes the others */
    if (len >= p->dlen - 2 && memcmp(body, p->delim + 2, p->dlen - 2) == 0) {
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

/* ---- resident pages of large bodies ----------------------------------------------------------- */

static char body_dir[FILENAME_MAX - 16];
static int body_dir_fd = -1; /* locked while kgate lives (sweep_dead_body_dirs) */
static struct timespec body_dir_mtime;
static int body_trim_active;

/* A body file, as /proc/self/maps names it. */
typedef struct st_body_file_t {
    unsigned dev_major, dev_minor;
    unsigned long ino;
} body_file_t;

/*
 * Our own references to the body files of finished uploads (gw_body_pages_dispose), closed once h2o has unmapped them:
 * the last close of a 1 GiB unlinked file frees its page cache and blocks, ~200 ms measured here, and is done by a
 * detached thread (ksys/detach.h) instead of h2o's munmap inside the loop.
 */
static struct {
    int fd;
    body_file_t file;
    int mapped; /* scratch for release_held_files */
} * held_files;
static size_t num_held_files, cap_held_files;

/*
 * The body directories of kgates that died without removing theirs (SIGKILL). A live kgate holds a
 * lock on its own for its whole life (body_dir_fd), whatever pid namespace it runs in; a directory
 * nobody holds is a dead one's. h2o unlinks each body file as it creates it, so they are empty:
 * rmdir, never a tree walk.
 */
static void sweep_dead_body_dirs(const char *tmpdir)
{
    DIR *dir = opendir(tmpdir);
    struct dirent *de;

    if (dir == NULL)
        return;
    while ((de = readdir(dir)) != NULL) {
        int fd;
        if (strncmp(de->d_name, "kgate-bodies.", 13) != 0 ||
            (fd = openat(dirfd(dir), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
            continue;
        if (flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlinkat(dirfd(dir), de->d_name, AT_REMOVEDIR);
        close(fd);
    }
    closedir(dir);
}

int gw_body_buffers_init(const char *tmpdir, size_t threshold)
{
    if (tmpdir == NULL || tmpdir[0] == '\0')
        tmpdir = "/tmp";
    sweep_dead_body_dirs(tmpdir);
    if ((size_t)snprintf(body_dir, sizeof(body_dir), "%s/kgate-bodies.XXXXXX", tmpdir) >= sizeof(body_dir))
        return -ENAMETOOLONG;
    if (mkdtemp(body_dir) == NULL) {
        int err = errno;
        body_dir[0] = '\0';
        return -err;
    }
    if ((body_dir_fd = open(body_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) == -1 || flock(body_dir_fd, LOCK_EX) != 0) {
        int err = errno;
        gw_body_buffers_dispose();
        return -err;
    }
    snprintf(h2o_socket_buffer_mmap_settings.fn_template, sizeof(h2o_socket_buffer_mmap_settings.fn_template), "%s/b.XXXXXX",
             body_dir);
    h2o_socket_buffer_mmap_settings.threshold = threshold;
    return 0;
}

void gw_body_buffers_dispose(void)
{
    for (size_t i = 0; i != num_held_files; ++i)
        close(held_files[i].fd);
    free(held_files);
    held_files = NULL;
    num_held_files = cap_held_files = 0;
    if (body_dir[0] != '\0')
        rmdir(body_dir);
    body_dir[0] = '\0';
    if (body_dir_fd != -1)
        close(body_dir_fd);
    body_dir_fd = -1;
}

/*
 * Calls cb for every mapping of /proc/self/maps that is a shared mapping of one of our (unlinked)
 * body files. Stops early when cb returns non-zero. Returns how many matched.
 */
static size_t for_each_body_mapping(int (*cb)(void *ctx, char *start, char *end, const body_file_t *file), void *ctx)
{
    FILE *fp;
    char line[FILENAME_MAX + 256];
    size_t dir_len = strlen(body_dir), matched = 0;

    if (dir_len == 0 || (fp = fopen("/proc/self/maps", "re")) == NULL)
        return 0;
    while (fgets(line, sizeof(line), fp) != NULL) {
        uintptr_t start, end;
        body_file_t file;
        char perms[8];
        int path_at = 0;
        const char *path;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s %*s %x:%x %lu %n", &start, &end, perms, &file.dev_major, &file.dev_minor,
                   &file.ino, &path_at) < 6 ||
            path_at == 0)
            continue;
        path = line + path_at;
        if (perms[3] != 's' || strncmp(path, body_dir, dir_len) != 0 || path[dir_len] != '/')
            continue;
        ++matched;
        if (cb(ctx, (char *)start, (char *)end, &file) != 0)
            break;
    }
    fclose(fp);
    return matched;
}

static int trim_mapping(void *ctx, char *start, char *end, const body_file_t *file)
{
    (void)ctx, (void)file;
    madvise(start, (size_t)(end - start), MADV_DONTNEED);
    madvise(start, (size_t)(end - start), MADV_RANDOM);
    return 0;
}

static int same_file(const body_file_t *a, const body_file_t *b)
{
    return a->ino == b->ino && a->dev_major == b->dev_major && a->dev_minor == b->dev_minor;
}

static int mark_held_mapped(void *ctx, char *start, char *end, const body_file_t *file)
{
    (void)ctx, (void)start, (void)end;
    for (size_t i = 0; i != num_held_files; ++i)
        held_files[i].mapped |= same_file(&held_files[i].file, file);
    return 0;
}

/* Closes, off the loop, every held body file that nothing maps any more. */
static void release_held_files(void)
{
    size_t kept = 0;

    if (num_held_files == 0)
        return;
    for (size_t i = 0; i != num_held_files; ++i)
        held_files[i].mapped = 0;
    for_each_body_mapping(mark_held_mapped, NULL);
    for (size_t i = 0; i != num_held_files; ++i) {
        if (held_files[i].mapped)
            held_files[kept++] = held_files[i];
        else
            ksys_close_detached(held_files[i].fd);
    }
    num_held_files = kept;
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
    release_held_files();
    return body_trim_active || num_held_files != 0;
}

typedef struct st_find_ctx_t {
    const char *base;
    gw_body_pages_t *pages;
    body_file_t file;
} find_ctx_t;

static int find_mapping(void *ctx, char *start, char *end, const body_file_t *file)
{
    find_ctx_t *f = ctx;

    if (f->base >= start && f->base < end) {
        f->pages->map_start = start;
        f->pages->map_end = end;
        f->file = *file;
        return 1;
    }
    return 0;
}

/* A new descriptor of the body file `file` (found among h2o's open descriptors), or -1. */
static int open_body_file(const body_file_t *file)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *de;
    int found = -1;

    if (dir == NULL)
        return -1;
    while (found == -1 && (de = readdir(dir)) != NULL) {
        struct stat st;
        int fd = atoi(de->d_name);
        if (de->d_name[0] == '.' || fd == dirfd(dir) || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        body_file_t f = {major(st.st_dev), minor(st.st_dev), (unsigned long)st.st_ino};
        if (same_file(&f, file))
            found = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    }
    closedir(dir);
    return found;
}

void gw_body_pages_init(gw_body_pages_t *pages, const char *base, size_t len)
{
    find_ctx_t f = {base, pages, {0, 0, 0}};

    pages->map_start = pages->map_end = NULL;
    pages->fd = -1;
    if (base == NULL || len < h2o_socket_buffer_mmap_settings.threshold / 2)
        return;
    if (for_each_body_mapping(find_mapping, &f) != 0 && pages->map_start != NULL) {
        pages->fd = open_body_file(&f.file);
        pages->file_dev_major = f.file.dev_major;
        pages->file_dev_minor = f.file.dev_minor;
        pages->file_ino = f.file.ino;
    }
}

void gw_body_pages_dispose(gw_body_pages_t *pages)
{
    if (pages->fd == -1)
        return;
    if (num_held_files == cap_held_files) {
        cap_held_files = cap_held_files == 0 ? 4 : cap_held_files * 2;
        held_files = wire_realloc(held_files, cap_held_files * sizeof(*held_files));
    }
    held_files[num_held_files].fd = pages->fd;
    held_files[num_held_files].file = (body_file_t){pages->file_dev_major, pages->file_dev_minor, pages->file_ino};
    ++num_held_files;
    pages->fd = -1;
}

void gw_body_pages_populate(const gw_body_pages_t *pages, const char *from, const char *to)
{
#ifdef MADV_POPULATE_READ
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a, b;

    if (pages->map_start == NULL)
        return;
    if (from < pages->map_start)
        from = pages->map_start;
    if (to > pages->map_end)
        to = pages->map_end;
    a = (uintptr_t)from & ~(page - 1);
    b = ((uintptr_t)to + page - 1) & ~(page - 1);
    /* best effort: before Linux 5.14 (EINVAL) the copy faults the pages in itself. WILLNEED first: the mapping has
     * readahead off (trim_mapping), and pages the page cache dropped meanwhile come back in large reads, not page by page */
    if (b > a) {
        madvise((void *)a, b - a, MADV_WILLNEED);
        madvise((void *)a, b - a, MADV_POPULATE_READ);
    }
#else
    (void)pages;
    (void)from;
    (void)to;
#endif
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
