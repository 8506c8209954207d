/* The workspace root: lexical confinement of client paths, then openat2(RESOLVE_BENEATH) for symbolic links. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "core/paths.h"
#include "ksys/detach.h"
#include "files/workspace.h"

int gw_workspace_resolve_lexical(const char *root, const char *path, size_t len, gw_workspace_path_t *out)
{
    /* the normalised absolute path is built in out->abs, then checked against the root */
    char *abs = out->abs;
    size_t root_len = strlen(root), used;

    if (len == 0)
        return GW_EWORKSPACE_EMPTY;
    if (memchr(path, '\0', len) != NULL)
        return GW_EWORKSPACE_NUL;
    if (len > GW_WORKSPACE_PATH_MAX || root_len > GW_WORKSPACE_PATH_MAX)
        return GW_EWORKSPACE_TOOLONG;
    /* a relative path starts from the root */
    if ((used = gw_path_normalize(root, path, len, abs, sizeof(out->abs))) == 0)
        return GW_EWORKSPACE_TOOLONG;

    if (strcmp(root, "/") == 0) {
        snprintf(out->rel, sizeof(out->rel), "%s", abs[1] != '\0' ? abs + 1 : "");
    } else {
        if (used < root_len || memcmp(abs, root, root_len) != 0 || (used > root_len && abs[root_len] != '/'))
            return GW_EWORKSPACE_OUTSIDE;
        /* rel is what follows the root and its '/' */
        if (used > root_len && used - root_len - 1 > GW_WORKSPACE_PATH_MAX)
            return GW_EWORKSPACE_TOOLONG;
        snprintf(out->rel, sizeof(out->rel), "%s", used > root_len ? abs + root_len + 1 : "");
    }
    if (strlen(out->rel) > GW_WORKSPACE_PATH_MAX)
        return GW_EWORKSPACE_TOOLONG;
    {
        const char *slash = strrchr(out->rel, '/');
        out->name = slash != NULL ? slash + 1 : out->rel;
    }
    return 0;
}

int gw_workspace_init(gw_workspace_t *ws, const char *dir)
{
    char *real = realpath(dir, NULL);
    struct stat st;
    int fd;

    ws->root = NULL;
    ws->root_fd = -1;
    if (real == NULL)
        return -errno;
    if ((fd = open(real, O_PATH | O_DIRECTORY | O_CLOEXEC)) == -1 || fstat(fd, &st) != 0) {
        int err = errno;
        if (fd != -1)
            close(fd);
        free(real);
        return -err;
    }
    ws->root = wire_strdup(real);
    free(real);
    ws->root_fd = fd;
    return 0;
}

void gw_workspace_dispose(gw_workspace_t *ws)
{
    if (ws->root_fd != -1)
        close(ws->root_fd);
    free(ws->root);
    ws->root = NULL;
    ws->root_fd = -1;
}

int gw_workspace_resolve(const gw_workspace_t *ws, const char *path, size_t len, gw_workspace_path_t *out)
{
    return gw_workspace_resolve_lexical(ws->root, path, len, out);
}

/* Without openat2 (Linux < 5.6): walk the components with O_NOFOLLOW, so every symbolic link is refused. */
static int open_nofollow_walk(int root_fd, const char *rel, int flags, mode_t mode)
{
    char comp[NAME_MAX + 1];
    int dir = dup(root_fd), fd;
    const char *p = rel;

    if (dir == -1)
        return -errno;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t clen = slash != NULL ? (size_t)(slash - p) : strlen(p);
        if (clen > NAME_MAX) {
            close(dir);
            return -ENAMETOOLONG;
        }
        memcpy(comp, p, clen);
        comp[clen] = '\0';
        if (slash == NULL) {
            fd = openat(dir, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
            close(dir);
            return fd == -1 ? -errno : fd;
        }
        fd = openat(dir, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dir);
        if (fd == -1)
            return -errno;
        dir = fd;
        p = slash + 1;
    }
}

static int open_beneath(const gw_workspace_t *ws, const char *rel, int flags, mode_t mode, int *fd)
{
    struct open_how how;
    long ret;

    memset(&how, 0, sizeof(how));
    how.flags = (unsigned long long)(flags | O_CLOEXEC);
    /* O_TMPFILE contains O_DIRECTORY's bit: test it whole, or every directory open would pass a mode (EINVAL) */
    how.mode = (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE ? mode : 0;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    ret = syscall(SYS_openat2, ws->root_fd, rel[0] != '\0' ? rel : ".", &how, sizeof(how));
    if (ret == -1 && errno == ENOSYS) {
        if (rel[0] != '\0') {
            int r = open_nofollow_walk(ws->root_fd, rel, flags, mode);
            if (r < 0)
                return r;
            *fd = r;
            return 0;
        }
        ret = openat(ws->root_fd, ".", flags | O_CLOEXEC);
    }
    if (ret == -1)
        return -errno;
    *fd = (int)ret;
    return 0;
}

int gw_workspace_open(const gw_workspace_t *ws, const char *rel, int flags, mode_t mode, int *fd)
{
    struct stat st;
    int ret, path_only = (flags & O_PATH) != 0;

    /* code in a context may put a FIFO where a file was, or hold a lease on one: an open that waits for a writer or for the
     * lease's break would hold kgate's loop with it (O_NONBLOCK does not change reads and writes of a regular file) */
    if ((ret = open_beneath(ws, rel, path_only ? flags : flags | O_NONBLOCK, mode, fd)) != 0 || (path_only && ws->allow_hardlinks))
        return ret;
    if (fstat(*fd, &st) != 0) {
        ret = -errno;
        close(*fd);
        return ret;
    }
    if (!path_only && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        close(*fd);
        return GW_EWORKSPACE_SPECIAL;
    }
    /* a second name of a file outside the root is still the outside file: confinement by path
     * cannot see it, so a regular file with several names is not served (--allow-hardlinks) */
    if (!ws->allow_hardlinks && S_ISREG(st.st_mode) && st.st_nlink > 1) {
        close(*fd);
        return GW_EWORKSPACE_HARDLINK;
    }
    return 0;
}

int gw_workspace_open_parent(const gw_workspace_t *ws, const gw_workspace_path_t *p, int *dir_fd)
{
    char parent[GW_WORKSPACE_PATH_MAX + 1];
    size_t plen;

    if (p->rel[0] == '\0')
        return -EINVAL;
    plen = (size_t)(p->name - p->rel);
    plen = plen > 0 ? plen - 1 : 0; /* without the '/' before the name */
    memcpy(parent, p->rel, plen);
    parent[plen] = '\0';
    return gw_workspace_open(ws, parent, O_PATH | O_DIRECTORY, 0, dir_fd);
}

int gw_workspace_mkdirs(const gw_workspace_t *ws, const char *rel, mode_t mode)
{
    char prefix[GW_WORKSPACE_PATH_MAX + 1];
    size_t len = strlen(rel), i;
    int ret = 0, fd;

    if (len > GW_WORKSPACE_PATH_MAX)
        return -ENAMETOOLONG;
    /* each prefix's parent is opened beneath the root, then the prefix is created inside that fd */
    for (i = 0; i <= len; ++i) {
        if (i != len && rel[i] != '/')
            continue;
        if (i == 0)
            continue;
        memcpy(prefix, rel, i);
        prefix[i] = '\0';
        if ((ret = gw_workspace_open(ws, prefix, O_PATH | O_DIRECTORY, 0, &fd)) == 0) {
            close(fd);
            continue;
        }
        if (ret != -ENOENT)
            return ret;
        {
            gw_workspace_path_t p;
            int dir_fd;
            if ((ret = gw_workspace_resolve_lexical("/", prefix, i, &p)) != 0)
                return -EINVAL;
            if ((ret = gw_workspace_open_parent(ws, &p, &dir_fd)) != 0)
                return ret;
            ret = mkdirat(dir_fd, p.name, mode) == 0 || errno == EEXIST ? 0 : -errno;
            close(dir_fd);
            if (ret != 0)
                return ret;
        }
    }
    /* the last component may exist as something else than a directory */
    if ((ret = gw_workspace_open(ws, rel, O_PATH | O_DIRECTORY, 0, &fd)) != 0)
        return ret;
    close(fd);
    return 0;
}

int gw_workspace_hold_big_file(int dir_fd, const char *name)
{
    struct stat st;
    int fd;

    if ((fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC)) == -1)
        return -1;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || st.st_size < GW_WORKSPACE_BIG_FILE_BYTES) {
        close(fd);
        return -1;
    }
    return fd;
}

int gw_workspace_unlink(int dir_fd, const char *name)
{
    int held = gw_workspace_hold_big_file(dir_fd, name), ret = unlinkat(dir_fd, name, 0) == 0 ? 0 : -errno;

    ksys_close_detached(held);
    return ret;
}

int gw_workspace_remove_tree(int dir_fd, const char *name, unsigned max_depth)
{
    struct stat st;
    DIR *dir;
    struct dirent *ent;
    int fd, ret = 0;

    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        return -errno;
    if (!S_ISDIR(st.st_mode))
        return gw_workspace_unlink(dir_fd, name);
    if (max_depth == 0)
        return -ELOOP;
    if ((fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) == -1)
        return -errno;
    if ((dir = fdopendir(fd)) == NULL) {
        ret = -errno;
        close(fd);
        return ret;
    }
    while ((ent = readdir(dir)) != NULL) {
        int r;
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
            continue;
        if ((r = gw_workspace_remove_tree(dirfd(dir), ent->d_name, max_depth - 1)) != 0 && r != -ENOENT && ret == 0)
            ret = r;
    }
    closedir(dir);
    if (ret != 0)
        return ret;
    return unlinkat(dir_fd, name, AT_REMOVEDIR) == 0 ? 0 : -errno;
}
