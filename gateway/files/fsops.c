/* File system operations beneath the workspace root: whole reads, atomic writes, FileInfo. */
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
#include "wire/fdio.h"
#include "wire/text.h"
#include "core/json_out.h"
#include "files/fsops.h"

int gw_files_read_all(const gw_workspace_t *ws, const char *rel, size_t max, char **data, size_t *len)
{
    struct stat st;
    size_t used = 0, cap;
    char *buf;
    int fd, ret;

    if ((ret = gw_workspace_open(ws, rel, O_RDONLY, 0, &fd)) != 0)
        return ret;
    if (fstat(fd, &st) != 0) {
        ret = -errno;
        goto Exit;
    }
    if (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
        ret = S_ISDIR(st.st_mode) ? -EISDIR : -EINVAL;
        goto Exit;
    }
    if ((uint64_t)st.st_size > max) {
        ret = -EFBIG;
        goto Exit;
    }
    /* the size is a hint only: the file may change while it is read, and the bound still holds */
    cap = (size_t)st.st_size + 1;
    buf = wire_malloc(cap);
    for (;;) {
        ssize_t n;
        if (used + 1 == cap) {
            if (cap - 1 >= max + 1) {
                free(buf);
                ret = -EFBIG;
                goto Exit;
            }
            cap = cap * 2 > max + 2 ? max + 2 : cap * 2;
            buf = wire_realloc(buf, cap);
        }
        if ((n = read(fd, buf + used, cap - 1 - used)) < 0) {
            if (errno == EINTR)
                continue;
            ret = -errno;
            free(buf);
            goto Exit;
        }
        if (n == 0)
            break;
        used += (size_t)n;
    }
    if (used > max) {
        free(buf);
        ret = -EFBIG;
        goto Exit;
    }
    buf[used] = '\0';
    *data = buf;
    *len = used;
    ret = 0;
Exit:
    close(fd);
    return ret;
}

/* A fresh name for a temporary file beside `name` into tmp_name; 0 or -errno. */
static int temp_name(const char *name, char *tmp_name, size_t size)
{
    unsigned char rnd[6];

    if (getentropy(rnd, sizeof(rnd)) != 0)
        return -errno;
    snprintf(tmp_name, size, ".%.200s.kgate-%02x%02x%02x%02x%02x%02x", name, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
    return 0;
}

int gw_files_create_temp(int dir_fd, const char *name, char *tmp_name, size_t size, mode_t mode, int *fd)
{
    int ret;

    if ((*fd = openat(dir_fd, ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, mode)) != -1) {
        tmp_name[0] = '\0';
        return 0;
    }
    /* a file system without unnamed files (EOPNOTSUPP; EISDIR or EINVAL from older kernels) gets a named one */
    if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
        return -errno;
    for (int attempt = 0; attempt < 16; ++attempt) {
        if ((ret = temp_name(name, tmp_name, size)) != 0)
            return ret;
        if ((*fd = openat(dir_fd, tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)) != -1)
            return 0;
        if (errno != EEXIST)
            return -errno;
    }
    tmp_name[0] = '\0';
    return -EEXIST;
}

/* Links the unnamed file `fd` into dir_fd under a fresh temporary name (tmp_name); 0 or -errno. */
static int link_unnamed(int dir_fd, int fd, const char *name, char *tmp_name, size_t size)
{
    char proc[64];
    int ret;

    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    for (int attempt = 0; attempt < 16; ++attempt) {
        if ((ret = temp_name(name, tmp_name, size)) != 0)
            break;
        /* linkat(fd, "", AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH; the /proc link does not */
        if (linkat(AT_FDCWD, proc, dir_fd, tmp_name, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        if ((ret = -errno) != -EEXIST)
            break;
    }
    tmp_name[0] = '\0';
    return ret;
}

int gw_files_commit_temp(int dir_fd, int fd, char *tmp_name, size_t size, const char *name)
{
    int ret = 0;

    /* a name is needed only for the rename, which replaces `name` atomically (linkat cannot) */
    if (tmp_name[0] == '\0' && (ret = link_unnamed(dir_fd, fd, name, tmp_name, size)) != 0)
        return ret;
    if (renameat(dir_fd, tmp_name, dir_fd, name) != 0) {
        ret = -errno;
        unlinkat(dir_fd, tmp_name, 0);
    }
    tmp_name[0] = '\0';
    return ret;
}

int gw_files_write_atomic(const gw_workspace_t *ws, const gw_workspace_path_t *p, const char *data, size_t len, mode_t mode)
{
    char tmp_name[300];
    struct stat st;
    int dir_fd, fd, ret, have_old;

    if ((ret = gw_workspace_open_parent(ws, p, &dir_fd)) != 0)
        return ret;
    have_old = fstatat(dir_fd, p->name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    if (have_old && S_ISDIR(st.st_mode)) {
        ret = -EISDIR;
        goto Exit;
    }
    if (have_old && S_ISLNK(st.st_mode)) {
        /* keep the link: rewrite its target, which openat2 confines beneath the root */
        if ((ret = gw_workspace_open(ws, p->rel, O_WRONLY | O_TRUNC, 0, &fd)) != 0)
            goto Exit;
        ret = wire_write_all(fd, data, len);
        close(fd);
        goto Exit;
    }
    if ((ret = gw_files_create_temp(dir_fd, p->name, tmp_name, sizeof(tmp_name), have_old ? st.st_mode & 07777 : mode, &fd)) != 0)
        goto Exit;
    if ((ret = wire_write_all(fd, data, len)) == 0 && have_old) {
        if (fchmod(fd, st.st_mode & 07777) != 0)
            ret = -errno;
        else if (fchown(fd, st.st_uid, st.st_gid) != 0 && errno != EPERM)
            ret = -errno;
    }
    if (ret == 0)
        ret = gw_files_commit_temp(dir_fd, fd, tmp_name, sizeof(tmp_name), p->name);
    else if (tmp_name[0] != '\0')
        unlinkat(dir_fd, tmp_name, 0);
    close(fd);
Exit:
    close(dir_fd);
    return ret;
}

static void format_time(char *buf, size_t size, const struct statx_timestamp *ts)
{
    time_t t = (time_t)ts->tv_sec;
    struct tm tm;
    size_t n;

    gmtime_r(&t, &tm);
    n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    if (ts->tv_nsec != 0) {
        /* Go's RFC 3339 with nanoseconds, trailing zeros trimmed (what execd emits) */
        char frac[16];
        int len = snprintf(frac, sizeof(frac), "%09u", (unsigned)ts->tv_nsec);
        while (len > 0 && frac[len - 1] == '0')
            frac[--len] = '\0';
        n += (size_t)snprintf(buf + n, size - n, ".%s", frac);
    }
    snprintf(buf + n, size - n, "Z");
}

static void lookup_owner(uid_t uid, gid_t gid, char *owner, size_t osize, char *group, size_t gsize)
{
    /* one cache entry each: listings repeat the same owner */
    static uid_t cached_uid = (uid_t)-1;
    static gid_t cached_gid = (gid_t)-1;
    static char cached_owner[64], cached_group[64];
    char buf[4096];

    if (uid != cached_uid) {
        struct passwd pw, *res = NULL;
        if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res != NULL)
            snprintf(cached_owner, sizeof(cached_owner), "%s", res->pw_name);
        else
            snprintf(cached_owner, sizeof(cached_owner), "%u", (unsigned)uid);
        cached_uid = uid;
    }
    if (gid != cached_gid) {
        struct group gr, *res = NULL;
        if (getgrgid_r(gid, &gr, buf, sizeof(buf), &res) == 0 && res != NULL)
            snprintf(cached_group, sizeof(cached_group), "%s", res->gr_name);
        else
            snprintf(cached_group, sizeof(cached_group), "%u", (unsigned)gid);
        cached_gid = gid;
    }
    snprintf(owner, osize, "%s", cached_owner);
    snprintf(group, gsize, "%s", cached_group);
}

static int mode_digits(unsigned mode)
{
    return (int)(((mode >> 9) & 7) * 1000 + ((mode >> 6) & 7) * 100 + ((mode >> 3) & 7) * 10 + (mode & 7));
}

json_t *gw_files_info_json(int dir_fd, const char *name, const char *abs, int *err)
{
    struct statx stx;
    char mtime[64], ctime_[64], owner[64], group[64];
    const char *type;

    if (statx(dir_fd, name, AT_SYMLINK_NOFOLLOW | (name[0] == '\0' ? AT_EMPTY_PATH : 0), STATX_BASIC_STATS | STATX_BTIME, &stx) !=
        0) {
        *err = -errno;
        return NULL;
    }
    switch (stx.stx_mode & S_IFMT) {
    case S_IFREG:
        type = "file";
        break;
    case S_IFDIR:
        type = "directory";
        break;
    case S_IFLNK:
        type = "symlink";
        break;
    default:
        type = "other";
        break;
    }
    format_time(mtime, sizeof(mtime), &stx.stx_mtime);
    format_time(ctime_, sizeof(ctime_), (stx.stx_mask & STATX_BTIME) != 0 ? &stx.stx_btime : &stx.stx_ctime);
    lookup_owner(stx.stx_uid, stx.stx_gid, owner, sizeof(owner), group, sizeof(group));
    /* a file name need not be UTF-8 (any byte but '/' and NUL): such bytes are U+FFFD in the path shown, as execd's Go
     * encoder writes them; before, the entry was left out of listings and its info answered 500 */
    return json_pack("{s:o, s:s, s:I, s:s, s:s, s:o, s:o, s:i}", "path", gw_json_text(abs, strlen(abs)), "type", type, "size",
                     (json_int_t)stx.stx_size, "modified_at", mtime, "created_at", ctime_, "owner",
                     gw_json_text(owner, strlen(owner)), "group", gw_json_text(group, strlen(group)), "mode",
                     mode_digits(stx.stx_mode & 07777));
}
