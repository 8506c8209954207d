/* The page trimming that keeps large buffered request bodies out of resident memory (multipart parsing: files/multipart.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <h2o.h>
#include "wire/alloc.h"
#include "ksys/detach.h"
#include "files/upload.h"

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
