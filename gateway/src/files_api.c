/* Routes of /files and /directories (execd's Filesystem API) beneath the workspace root. */
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
#include "gateway/api.h"
#include "gateway/config.h"
#include "gateway/files_api.h"
#include "gateway/http.h"
#include "gateway/server.h"
#include "gateway/upload.h"

/* Values of one repeated query parameter accepted at most (?path=a&path=b...). */
#define MAX_QUERY_VALUES 256
/* Items of one JSON request (permissions, mv, replace, mkdir) and parts of one upload. */
#define MAX_ITEMS 1024
/* Bytes read and sent per step of a download, and written per step of an upload. */
#define DOWNLOAD_CHUNK (256u << 10)
#define UPLOAD_CHUNK (8u << 20)

/* ---- set-up ----------------------------------------------------------------------------------- */

static void on_trim(h2o_timeout_entry_t *entry)
{
    gw_files_t *files = H2O_STRUCT_FROM_MEMBER(gw_files_t, trim_entry, entry);

    h2o_timeout_link(files->loop, gw_body_buffers_trim() ? &files->trim_active_timeout : &files->trim_idle_timeout,
                     &files->trim_entry);
}

int gw_files_init(gw_server_t *server)
{
    const gw_config_t *config = server->config;
    const char *root = config->workspace_root != NULL ? config->workspace_root : ".";
    gw_files_t *files = wire_calloc(1, sizeof(*files));
    int ret;

    files->ws.root_fd = -1;
    server->files = files;
    if ((ret = gw_workspace_init(&files->ws, root)) != 0) {
        fprintf(stderr, "kgate: --workspace-root %s: %s\n", root, strerror(-ret));
        return -1;
    }
    files->history = gw_editor_history_create(config->max_undo_depth, config->max_undo_bytes);
    if ((ret = gw_body_buffers_init(getenv("TMPDIR"), config->body_mmap_threshold)) != 0)
        fprintf(stderr, "kgate: cannot create a directory for large request bodies (%s); they stay in memory\n", strerror(-ret));
    files->loop = server->ctx.loop;
    h2o_timeout_init(files->loop, &files->trim_active_timeout, GW_BODY_TRIM_ACTIVE_MS);
    h2o_timeout_init(files->loop, &files->trim_idle_timeout, GW_BODY_TRIM_IDLE_MS);
    files->trim_entry.cb = on_trim;
    h2o_timeout_link(files->loop, &files->trim_idle_timeout, &files->trim_entry);
    return 0;
}

void gw_files_dispose(gw_server_t *server)
{
    gw_files_t *files = server->files;

    if (files == NULL)
        return;
    if (files->loop != NULL) {
        if (h2o_timeout_is_linked(&files->trim_entry))
            h2o_timeout_unlink(&files->trim_entry);
        h2o_timeout_dispose(files->loop, &files->trim_active_timeout);
        h2o_timeout_dispose(files->loop, &files->trim_idle_timeout);
        gw_body_buffers_dispose();
    }
    gw_editor_history_destroy(files->history);
    gw_workspace_dispose(&files->ws);
    free(files);
    server->files = NULL;
}

/* ---- shared helpers --------------------------------------------------------------------------- */

int gw_files_resolve(gw_server_t *server, h2o_req_t *req, const char *what, const char *path, size_t len, gw_workspace_path_t *p)
{
    int ret = gw_workspace_resolve(&server->files->ws, path, len, p);

    switch (-ret) {
    case 0:
        return 0;
    case GW_WORKSPACE_ENUL:
    case GW_WORKSPACE_EOUTSIDE:
        gw_send_error(req, GW_ERR_PATH_OUTSIDE_WORKSPACE, "%s \"%.*s\" refused: %s (%s)", what, (int)(len > 200 ? 200 : len), path,
                      gw_workspace_strerror(ret), server->files->ws.root);
        return -1;
    default:
        gw_send_error(req, GW_ERR_INVALID_PARAMETER, "%s: %s", what, gw_workspace_strerror(ret));
        return -1;
    }
}

void gw_files_respond_errno(h2o_req_t *req, int err, const char *prefix, const char *path)
{
    gw_error_t code;
    const char *why = strerror(-err);

    switch (-err) {
    case EXDEV:
        code = GW_ERR_PATH_OUTSIDE_WORKSPACE;
        why = "a symbolic link leads outside the workspace root";
        break;
    case ENOENT:
        code = GW_ERR_FILE_NOT_FOUND;
        why = "file not found";
        break;
    case EACCES:
    case EPERM:
        code = GW_ERR_PERMISSION_DENIED;
        break;
    case ENOTDIR:
        code = GW_ERR_NOT_A_DIRECTORY;
        break;
    case EISDIR:
        code = GW_ERR_IS_A_DIRECTORY;
        break;
    case EEXIST:
    case ENOTEMPTY:
        code = GW_ERR_FILE_EXISTS;
        break;
    case EFBIG:
        code = GW_ERR_FILE_TOO_LARGE;
        why = "file larger than the configured limit";
        break;
    case ELOOP:
    case ENAMETOOLONG:
    case EINVAL:
        code = GW_ERR_INVALID_PARAMETER;
        break;
    default:
        code = GW_ERR_RUNTIME_ERROR;
        break;
    }
    gw_send_error(req, code, "%s%.300s: %s", prefix, path, why);
}

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

static int write_all(int fd, const char *data, size_t len)
{
    while (len != 0) {
        ssize_t n = write(fd, data, len > (1u << 30) ? (1u << 30) : len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Creates a fresh temporary file beside `name` in dir_fd; its name is written to tmp_name. */
static int create_temp(int dir_fd, const char *name, char *tmp_name, size_t size, mode_t mode, int *fd)
{
    unsigned char rnd[6];
    int attempt;

    for (attempt = 0; attempt < 16; ++attempt) {
        if (getentropy(rnd, sizeof(rnd)) != 0)
            return -errno;
        snprintf(tmp_name, size, ".%.200s.kgate-%02x%02x%02x%02x%02x%02x", name, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
        if ((*fd = openat(dir_fd, tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)) != -1)
            return 0;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
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
        ret = write_all(fd, data, len);
        close(fd);
        goto Exit;
    }
    if ((ret = create_temp(dir_fd, p->name, tmp_name, sizeof(tmp_name), have_old ? st.st_mode & 07777 : mode, &fd)) != 0)
        goto Exit;
    if ((ret = write_all(fd, data, len)) == 0 && have_old) {
        if (fchmod(fd, st.st_mode & 07777) != 0)
            ret = -errno;
        else if (fchown(fd, st.st_uid, st.st_gid) != 0 && errno != EPERM)
            ret = -errno;
    }
    close(fd);
    if (ret == 0 && renameat(dir_fd, tmp_name, dir_fd, p->name) != 0)
        ret = -errno;
    if (ret != 0)
        unlinkat(dir_fd, tmp_name, 0);
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
    return json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:s, s:i}", "path", abs, "type", type, "size", (json_int_t)stx.stx_size,
                     "modified_at", mtime, "created_at", ctime_, "owner", owner, "group", group, "mode",
                     mode_digits(stx.stx_mode & 07777));
}

/* ---- request parsing helpers ------------------------------------------------------------------ */

json_t *gw_files_parse_body(h2o_req_t *req)
{
    return gw_parse_body_with(req, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL);
}

typedef gw_query_value_t query_value_t;

/* Every value of `name` in the query string (pool-allocated); -1 after answering 400 on a bad escape or too many values. */
static long query_values(h2o_req_t *req, const char *name, query_value_t *values, size_t max)
{
    long n = gw_query_values(req, name, values, max);

    if (n < 0) {
        gw_send_error(req, GW_ERR_INVALID_PARAMETER, "query parameter %s has a malformed percent-escape", name);
        return -1;
    }
    if ((size_t)n > max) {
        gw_send_error(req, GW_ERR_INVALID_PARAMETER, "at most %zu %s parameters per request", max, name);
        return -1;
    }
    return n;
}

/* The single value of a query parameter, or NULL (after answering 400 MISSING_QUERY when `required`). */
static query_value_t *query_one(h2o_req_t *req, const char *name, int required, query_value_t *value, int *failed)
{
    long n = query_values(req, name, value, 1);

    *failed = 0;
    if (n < 0) {
        *failed = 1;
        return NULL;
    }
    if (n == 0 || value->len == 0) {
        if (required) {
            gw_send_error(req, GW_ERR_MISSING_QUERY, "missing query parameter '%s'", name);
            *failed = 1;
        }
        return NULL;
    }
    return value;
}

/* Parses a Permission's mode: octal digits written as a decimal integer (755), at most 7777. */
static int parse_mode(json_t *jmode, mode_t *mode)
{
    json_int_t v, m = 0, scale = 1;

    if (!json_is_integer(jmode) || (v = json_integer_value(jmode)) < 0 || v > 7777)
        return -1;
    while (v != 0) {
        if (v % 10 > 7)
            return -1;
        m += (v % 10) * scale;
        scale *= 8;
        v /= 10;
    }
    *mode = (mode_t)m;
    return 0;
}

/* owner / group names (or numeric ids) of a Permission object; -1 after answering 400. */
/* A user or group by number or name. (id_t)-1 means "unchanged" to chown, so no number names it. */
static int lookup_id(const char *name, int is_group, id_t *out)
{
    char buf[4096];
    uint64_t n;

    if (wire_parse_decimal(name, (id_t)-2, &n) == 0) {
        *out = (id_t)n;
        return 0;
    }
    if (is_group) {
        struct group gr, *res = NULL;
        if (getgrnam_r(name, &gr, buf, sizeof(buf), &res) == 0 && res != NULL) {
            *out = res->gr_gid;
            return 0;
        }
    } else {
        struct passwd pw, *res = NULL;
        if (getpwnam_r(name, &pw, buf, sizeof(buf), &res) == 0 && res != NULL) {
            *out = res->pw_uid;
            return 0;
        }
    }
    return -1;
}

static int parse_owner(h2o_req_t *req, json_t *item, uid_t *uid, gid_t *gid)
{
    static const char *const keys[2] = {"owner", "group"};
    id_t *ids[2] = {uid, gid};

    for (int i = 0; i != 2; ++i) {
        const char *name = json_string_value(json_object_get(item, keys[i]));
        *ids[i] = (id_t)-1;
        if (name != NULL && name[0] != '\0' && lookup_id(name, i, ids[i]) != 0) {
            gw_send_error(req, GW_ERR_INVALID_PARAMETER, "unknown %s \"%.100s\"", keys[i], name);
            return -1;
        }
    }
    return 0;
}

/* chmod / chown an O_PATH descriptor (fchmod refuses those; the /proc path acts on the opened inode). */
static int apply_permission(int fd, int set_mode, mode_t mode, uid_t uid, gid_t gid)
{
    char proc[64];

    if (set_mode) {
        snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
        if (chmod(proc, mode) != 0)
            return -errno;
    }
    if ((uid != (uid_t)-1 || gid != (gid_t)-1) && fchownat(fd, "", uid, gid, AT_EMPTY_PATH) != 0)
        return -errno;
    return 0;
}

/*
 * execd's bodies are maps {path: item}; kgate also takes one item with its "path" (or `path_key`)
 * inside. Fills paths/items (borrowed from body); -1 after answering 400.
 */
static long collect_items(h2o_req_t *req, json_t *body, const char *path_key, const char **paths, size_t *lens, json_t **items)
{
    const char *key;
    json_t *value;
    size_t n = 0;

    if (json_is_string(json_object_get(body, path_key))) {
        json_t *jpath = json_object_get(body, path_key);
        paths[0] = json_string_value(jpath);
        lens[0] = json_string_length(jpath);
        items[0] = body;
        return 1;
    }
    json_object_foreach(body, key, value)
    {
        if (!json_is_object(value)) {
            gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "the value for \"%.200s\" must be an object", key);
            return -1;
        }
        if (n == MAX_ITEMS) {
            gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "at most %d paths per request", MAX_ITEMS);
            return -1;
        }
        paths[n] = key;
        lens[n] = strlen(key);
        items[n] = value;
        ++n;
    }
    return (long)n;
}

/* ---- GET /files/info -------------------------------------------------------------------------- */

/* Opens the directory holding p (or the root itself for "") and the name to use inside it. */
static int open_for_stat(const gw_workspace_t *ws, const gw_workspace_path_t *p, int *dir_fd, const char **name)
{
    if (p->rel[0] == '\0') {
        *name = "";
        return gw_workspace_open(ws, "", O_PATH | O_DIRECTORY, 0, dir_fd);
    }
    *name = p->name;
    return gw_workspace_open_parent(ws, p, dir_fd);
}

void gw_api_files_info(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    query_value_t values[MAX_QUERY_VALUES];
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    json_t *result;
    long n = query_values(req, "path", values, MAX_QUERY_VALUES), i;
    (void)params;

    if (n < 0)
        return;
    for (i = 0; i != n; ++i) {
        if (gw_files_resolve(server, req, "path", values[i].s, values[i].len, p) != 0)
            return;
    }
    result = json_object();
    for (i = 0; i != n; ++i) {
        const char *name;
        int dir_fd, ret;
        json_t *info;
        gw_files_resolve(server, req, "path", values[i].s, values[i].len, p);
        if ((ret = open_for_stat(&server->files->ws, p, &dir_fd, &name)) == 0) {
            info = gw_files_info_json(dir_fd, name, p->abs, &ret);
            close(dir_fd);
            if (info != NULL) {
                json_object_set_new(result, values[i].s, info);
                continue;
            }
        }
        json_decref(result);
        gw_files_respond_errno(req, ret, "", values[i].s);
        return;
    }
    gw_send_json(req, 200, result);
}

/*
 * The `path` query values of a DELETE, at least one, each resolved inside the workspace (`p` is
 * scratch) before anything is touched. Returns how many, or -1 after answering the error.
 */
static long required_paths(gw_server_t *server, h2o_req_t *req, query_value_t *values, gw_workspace_path_t *p)
{
    long n = query_values(req, "path", values, MAX_QUERY_VALUES), i;

    if (n < 0)
        return -1;
    if (n == 0) {
        gw_send_error(req, GW_ERR_MISSING_QUERY, "missing query parameter 'path'");
        return -1;
    }
    for (i = 0; i != n; ++i)
        if (gw_files_resolve(server, req, "path", values[i].s, values[i].len, p) != 0)
            return -1;
    return n;
}

/* ---- DELETE /files ---------------------------------------------------------------------------- */

void gw_api_files_delete(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    query_value_t values[MAX_QUERY_VALUES];
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    long n = required_paths(server, req, values, p), i;
    (void)params;

    if (n < 0)
        return;
    for (i = 0; i != n; ++i) {
        struct stat st;
        int dir_fd, ret;
        gw_files_resolve(server, req, "path", values[i].s, values[i].len, p);
        if (p->rel[0] == '\0') {
            gw_send_error(req, GW_ERR_IS_A_DIRECTORY, "%.300s is the workspace root; DELETE /directories removes directories",
                          values[i].s);
            return;
        }
        if ((ret = gw_workspace_open_parent(&server->files->ws, p, &dir_fd)) == 0) {
            if (fstatat(dir_fd, p->name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                ret = -errno;
            else if (S_ISDIR(st.st_mode))
                ret = -EISDIR;
            else if (unlinkat(dir_fd, p->name, 0) != 0)
                ret = -errno;
            close(dir_fd);
        }
        if (ret != 0) {
            gw_files_respond_errno(req, ret, ret == -EISDIR ? "DELETE /files removes files only (DELETE /directories): " : "",
                                   values[i].s);
            return;
        }
    }
    gw_send_empty(req);
}

/* ---- POST /files/permissions ------------------------------------------------------------------ */

/* What applying one {path: {mode?, owner?, group?}} item does, once every item has been checked. */
typedef int (*permission_apply_t)(gw_server_t *server, const gw_workspace_path_t *where, int has_mode, mode_t mode, uid_t uid,
                                  gid_t gid);

/*
 * The shared body of POST /files/permissions and POST /directories: every item is parsed and
 * resolved before anything is touched, then `apply` runs for each in turn. Answers the request
 * (empty 200, or the first error, `failing` naming what failed) either way.
 */
static void apply_permission_items(gw_server_t *server, h2o_req_t *req, mode_t default_mode, const char *mode_example,
                                   const char *failing, permission_apply_t apply)
{
    json_t *body = gw_files_parse_body(req);
    const char **paths;
    size_t *lens;
    json_t **items;
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    long n, i;

    if (body == NULL)
        return;
    paths = h2o_mem_alloc_pool(&req->pool, sizeof(*paths) * MAX_ITEMS);
    lens = h2o_mem_alloc_pool(&req->pool, sizeof(*lens) * MAX_ITEMS);
    items = h2o_mem_alloc_pool(&req->pool, sizeof(*items) * MAX_ITEMS);
    if ((n = collect_items(req, body, "path", paths, lens, items)) < 0)
        goto Exit;
    for (i = 0; i != n; ++i) {
        json_t *jmode = json_object_get(items[i], "mode");
        mode_t mode;
        uid_t uid;
        gid_t gid;
        if (jmode != NULL && parse_mode(jmode, &mode) != 0) {
            gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "mode of \"%.200s\" must be octal digits as an integer (e.g. %s)",
                          paths[i], mode_example);
            goto Exit;
        }
        if (parse_owner(req, items[i], &uid, &gid) != 0 || gw_files_resolve(server, req, "path", paths[i], lens[i], p) != 0)
            goto Exit;
    }
    /* the path buffers are large: each item is resolved again rather than kept */
    for (i = 0; i != n; ++i) {
        json_t *jmode = json_object_get(items[i], "mode");
        mode_t mode = default_mode;
        uid_t uid;
        gid_t gid;
        int ret;
        if (jmode != NULL)
            parse_mode(jmode, &mode);
        parse_owner(req, items[i], &uid, &gid);
        gw_files_resolve(server, req, "path", paths[i], lens[i], p);
        if ((ret = apply(server, p, jmode != NULL, mode, uid, gid)) != 0) {
            gw_files_respond_errno(req, ret, failing, paths[i]);
            goto Exit;
        }
    }
    gw_send_empty(req);
Exit:
    json_decref(body);
}

static int apply_to_existing(gw_server_t *server, const gw_workspace_path_t *where, int has_mode, mode_t mode, uid_t uid, gid_t gid)
{
    int fd, ret;

    if ((ret = gw_workspace_open(&server->files->ws, where->rel, O_PATH, 0, &fd)) == 0) {
        ret = apply_permission(fd, has_mode, mode, uid, gid);
        close(fd);
    }
    return ret;
}

void gw_api_files_permissions(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    (void)params;
    apply_permission_items(server, req, 0, "644", "changing permissions of ", apply_to_existing);
}

/* ---- POST /files/mv --------------------------------------------------------------------------- */

static int mv_fields(json_t *item, json_t **src, json_t **dest)
{
    *src = json_object_get(item, "src");
    *dest = json_object_get(item, "dest");
    if (*src == NULL)
        *src = json_object_get(item, "source");
    if (*dest == NULL)
        *dest = json_object_get(item, "destination");
    return json_is_string(*src) && json_is_string(*dest) ? 0 : -1;
}

void gw_api_files_mv(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    json_error_t error;
    json_t *body = NULL, *list = NULL, *item, *src, *dest;
    gw_workspace_path_t *ps = h2o_mem_alloc_pool(&req->pool, sizeof(*ps)), *pd = h2o_mem_alloc_pool(&req->pool, sizeof(*pd));
    size_t i;
    (void)params;

    /* execd's body is an array; gw_parse_body wants an object */
    if (req->entity.base == NULL || (body = json_loadb(req->entity.base, req->entity.len, JSON_ALLOW_NUL, &error)) == NULL) {
        gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "the body must be a JSON array of {\"src\",\"dest\"}");
        return;
    }
    if (json_is_object(body)) {
        list = json_array();
        json_array_append(list, body);
    } else if (json_is_array(body) && json_array_size(body) <= MAX_ITEMS) {
        list = json_incref(body);
    } else {
        gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "the body must be a JSON array of at most %d {\"src\",\"dest\"}",
                      MAX_ITEMS);
        goto Exit;
    }
    json_array_foreach(list, i, item)
    {
        if (!json_is_object(item) || mv_fields(item, &src, &dest) != 0) {
            gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "item %zu needs string \"src\" and \"dest\"", i);
            goto Exit;
        }
        if (gw_files_resolve(server, req, "src", json_string_value(src), json_string_length(src), ps) != 0 ||
            gw_files_resolve(server, req, "dest", json_string_value(dest), json_string_length(dest), pd) != 0)
            goto Exit;
        if (ps->rel[0] == '\0' || pd->rel[0] == '\0') {
            gw_send_error(req, GW_ERR_INVALID_PARAMETER, "item %zu: the workspace root itself cannot be moved or replaced", i);
            goto Exit;
        }
    }
    json_array_foreach(list, i, item)
    {
        int sfd = -1, dfd = -1, ret;
        mv_fields(item, &src, &dest);
        gw_files_resolve(server, req, "src", json_string_value(src), json_string_length(src), ps);
        gw_files_resolve(server, req, "dest", json_string_value(dest), json_string_length(dest), pd);
        if ((ret = gw_workspace_open_parent(&server->files->ws, ps, &sfd)) == 0 &&
            (ret = gw_workspace_open_parent(&server->files->ws, pd, &dfd)) == 0 && renameat(sfd, ps->name, dfd, pd->name) != 0)
            ret = -errno;
        if (sfd != -1)
            close(sfd);
        if (dfd != -1)
            close(dfd);
        if (ret != 0) {
            gw_files_respond_errno(req, ret, "moving ", json_string_value(src));
            goto Exit;
        }
    }
    gw_send_empty(req);
Exit:
    json_decref(list);
    json_decref(body);
}

/* ---- GET /files/search and GET /directories/list ---------------------------------------------- */

typedef struct st_walk_t {
    h2o_req_t *req;
    json_t *out;
    size_t max_entries;
    int truncated;
    /* search */
    const char *pattern;
    int match_path; /* the pattern has a '/': match it against the path below the search root */
    /* list */
    unsigned depth;
    int error; /* -errno of a failure that ends the walk */
    char rel[GW_WORKSPACE_PATH_MAX * 2 + 2];
    size_t rel_len;
    char abs[GW_WORKSPACE_PATH_MAX * 3 + 3];
    size_t abs_len;
} walk_t;

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in a directory, sorted (caller frees each and the array); NULL on error (*err). */
static char **read_names(int fd, size_t *n, int *err)
{
    DIR *dir;
    struct dirent *ent;
    char **names = NULL;
    size_t cap = 0;
    int dup_fd = dup(fd);

    *n = 0;
    if (dup_fd == -1 || (dir = fdopendir(dup_fd)) == NULL) {
        *err = -errno;
        if (dup_fd != -1)
            close(dup_fd);
        return NULL;
    }
    while ((ent = readdir(dir)) != NULL) {
        if (strcmp(ent->d_name, ".") == 0 || strcmp(ent->d_name, "..") == 0)
            continue;
        if (*n == cap) {
            cap = cap != 0 ? cap * 2 : 32;
            names = wire_realloc(names, sizeof(*names) * cap);
        }
        names[(*n)++] = wire_strdup(ent->d_name);
    }
    closedir(dir);
    if (*n != 0)
        qsort(names, *n, sizeof(*names), cmp_names);
    else if (names == NULL)
        names = wire_malloc(sizeof(*names));
    return names;
}

/* Walks `fd` (a directory at walk->abs); `search`: report matching non-directories at every level, else list `depth` levels. */
static void walk_dir(walk_t *walk, int fd, unsigned level, int search)
{
    size_t n, i, rel_len = walk->rel_len, abs_len = walk->abs_len;
    int err = 0;
    char **names = read_names(fd, &n, &err);

    if (names == NULL) {
        walk->error = err;
        return;
    }
    for (i = 0; i != n && walk->error == 0 && !walk->truncated; ++i) {
        struct stat st;
        const char *name = names[i];
        int is_dir;
        if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue; /* removed meanwhile */
        is_dir = S_ISDIR(st.st_mode);
        walk->rel_len =
            rel_len + (size_t)snprintf(walk->rel + rel_len, sizeof(walk->rel) - rel_len, "%s%s", rel_len ? "/" : "", name);
        walk->abs_len = abs_len + (size_t)snprintf(walk->abs + abs_len, sizeof(walk->abs) - abs_len, "%s%s",
                                                   abs_len != 0 && walk->abs[abs_len - 1] == '/' ? "" : "/", name);
        if (walk->rel_len >= sizeof(walk->rel) || walk->abs_len >= sizeof(walk->abs))
            break;
        if (!search || (!is_dir && fnmatch(walk->pattern, walk->match_path ? walk->rel : name, 0) == 0)) {
            int e;
            json_t *info;
            if (json_array_size(walk->out) == walk->max_entries) {
                walk->truncated = 1;
                break;
            }
            if ((info = gw_files_info_json(fd, name, walk->abs, &e)) != NULL)
                json_array_append_new(walk->out, info);
        }
        if (is_dir && (search ? level < GW_FILES_MAX_DEPTH : level + 1 < walk->depth)) {
            int sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub != -1) {
                walk_dir(walk, sub, level + 1, search);
                close(sub);
            }
        }
        walk->rel_len = rel_len;
        walk->rel[rel_len] = '\0';
        walk->abs_len = abs_len;
        walk->abs[abs_len] = '\0';
    }
    for (i = 0; i != n; ++i)
        free(names[i]);
    free(names);
}

/* Opens the directory named by the `path` query for a walk; -1 after answering. */
static int open_walk_root(gw_server_t *server, h2o_req_t *req, gw_workspace_path_t *p, int refuse_symlink, int *fd)
{
    query_value_t v;
    int failed, ret, dir_fd;
    struct stat st;
    const char *name;

    if (query_one(req, "path", 1, &v, &failed) == NULL || gw_files_resolve(server, req, "path", v.s, v.len, p) != 0)
        return -1;
    if ((ret = open_for_stat(&server->files->ws, p, &dir_fd, &name)) == 0) {
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW | (name[0] == '\0' ? AT_EMPTY_PATH : 0)) != 0)
            ret = -errno;
        close(dir_fd);
    }
    if (ret == 0 && S_ISLNK(st.st_mode) && refuse_symlink) {
        gw_send_error(req, GW_ERR_INVALID_PARAMETER, "%.300s is a symbolic link; list the directory it points to", v.s);
        return -1;
    }
    if (ret == 0)
        ret = gw_workspace_open(&server->files->ws, p->rel, O_RDONLY | O_DIRECTORY, 0, fd);
    if (ret != 0) {
        gw_files_respond_errno(req, ret, "", v.s);
        return -1;
    }
    return 0;
}

static void send_walk(h2o_req_t *req, walk_t *walk)
{
    if (walk->truncated)
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-kgate-truncated"), 0, NULL, H2O_STRLIT("true"));
    gw_send_json(req, 200, walk->out);
}

void gw_api_files_search(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    walk_t *walk = h2o_mem_alloc_pool(&req->pool, sizeof(*walk));
    query_value_t v;
    char *pattern;
    int fd, failed;
    size_t i;
    (void)params;

    if (open_walk_root(server, req, p, 0, &fd) != 0)
        return;
    if (query_one(req, "pattern", 0, &v, &failed) == NULL) {
        if (failed) {
            close(fd);
            return;
        }
        v.s = "**";
        v.len = 2;
    }
    if (memchr(v.s, '\0', v.len) != NULL) {
        close(fd);
        gw_send_error(req, GW_ERR_INVALID_PARAMETER, "pattern contains a NUL byte");
        return;
    }
    /* fnmatch without FNM_PATHNAME lets '*' cross '/', so "**" needs no special case */
    pattern = h2o_mem_alloc_pool(&req->pool, v.len + 1);
    memcpy(pattern, v.s, v.len + 1);
    memset(walk, 0, sizeof(*walk));
    walk->req = req;
    walk->out = json_array();
    walk->max_entries = server->config->max_list_entries;
    walk->pattern = pattern;
    for (i = 0; pattern[i] != '\0'; ++i)
        walk->match_path |= pattern[i] == '/';
    walk->abs_len = (size_t)snprintf(walk->abs, sizeof(walk->abs), "%s", p->abs);
    walk_dir(walk, fd, 0, 1);
    close(fd);
    if (walk->error != 0) {
        json_decref(walk->out);
        gw_files_respond_errno(req, walk->error, "searching ", p->abs);
        return;
    }
    send_walk(req, walk);
}

void gw_api_directories_list(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    walk_t *walk = h2o_mem_alloc_pool(&req->pool, sizeof(*walk));
    query_value_t v;
    uint64_t depth = 1;
    int fd, failed;
    (void)params;

    if (query_one(req, "depth", 0, &v, &failed) != NULL) {
        if (wire_parse_decimal(v.s, GW_FILES_MAX_DEPTH, &depth) != 0) {
            gw_send_error(req, GW_ERR_INVALID_PARAMETER, "depth must be an integer from 0 to %d", GW_FILES_MAX_DEPTH);
            return;
        }
    } else if (failed) {
        return;
    }
    if (open_walk_root(server, req, p, 1, &fd) != 0)
        return;
    memset(walk, 0, sizeof(*walk));
    walk->req = req;
    walk->out = json_array();
    walk->max_entries = server->config->max_list_entries;
    walk->depth = (unsigned)depth;
    walk->abs_len = (size_t)snprintf(walk->abs, sizeof(walk->abs), "%s", p->abs);
    if (depth != 0)
        walk_dir(walk, fd, 0, 0);
    close(fd);
    if (walk->error != 0) {
        json_decref(walk->out);
        gw_files_respond_errno(req, walk->error, "listing ", p->abs);
        return;
    }
    send_walk(req, walk);
}

/* ---- POST /files/replace ---------------------------------------------------------------------- */

/* Replaces every non-overlapping `old` in `s` (execd: strings.ReplaceAll); returns the count, *out owned by the caller. */
static size_t replace_all(const char *s, size_t len, const char *old, size_t old_len, const char *new_, size_t new_len, char **out,
                          size_t *out_len)
{
    size_t count = 0, used = 0, cap;
    const char *p = s, *end = s + len, *hit;
    char *buf;

    while ((size_t)(end - p) >= old_len && (hit = memmem(p, (size_t)(end - p), old, old_len)) != NULL) {
        ++count;
        p = hit + old_len;
    }
    cap = len - count * old_len + count * new_len;
    buf = wire_malloc(cap + 1);
    for (p = s; (size_t)(end - p) >= old_len && (hit = memmem(p, (size_t)(end - p), old, old_len)) != NULL; p = hit + old_len) {
        memcpy(buf + used, p, (size_t)(hit - p));
        used += (size_t)(hit - p);
        memcpy(buf + used, new_, new_len);
        used += new_len;
    }
    memcpy(buf + used, p, (size_t)(end - p));
    used += (size_t)(end - p);
    buf[used] = '\0';
    *out = buf;
    *out_len = used;
    return count;
}

void gw_api_files_replace(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    json_t *body = gw_files_parse_body(req), *results = NULL;
    const char **paths;
    size_t *lens;
    json_t **items;
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    query_value_t v;
    int failed, verbose = query_one(req, "verbose", 0, &v, &failed) != NULL && strcmp(v.s, "true") == 0;
    long n, i;
    (void)params;

    if (body == NULL)
        return;
    paths = h2o_mem_alloc_pool(&req->pool, sizeof(*paths) * MAX_ITEMS);
    lens = h2o_mem_alloc_pool(&req->pool, sizeof(*lens) * MAX_ITEMS);
    items = h2o_mem_alloc_pool(&req->pool, sizeof(*items) * MAX_ITEMS);
    if ((n = collect_items(req, body, "path", paths, lens, items)) < 0)
        goto Exit;
    for (i = 0; i != n; ++i) {
        json_t *old = json_object_get(items[i], "old"), *new_ = json_object_get(items[i], "new");
        if (!json_is_string(old) || json_string_length(old) == 0 || (new_ != NULL && !json_is_string(new_))) {
            gw_send_error(req, GW_ERR_INVALID_REQUEST_BODY, "\"%.200s\": old must be a non-empty string, new a string", paths[i]);
            goto Exit;
        }
        if (gw_files_resolve(server, req, "path", paths[i], lens[i], p) != 0)
            goto Exit;
    }
    results = json_object();
    for (i = 0; i != n; ++i) {
        json_t *old = json_object_get(items[i], "old"), *new_ = json_object_get(items[i], "new");
        char *data, *out;
        size_t len, out_len, count;
        int ret;
        gw_files_resolve(server, req, "path", paths[i], lens[i], p);
        if ((ret = gw_files_read_all(&server->files->ws, p->rel, server->config->max_edit_file_bytes, &data, &len)) != 0) {
            gw_files_respond_errno(req, ret, "", paths[i]);
            goto Exit;
        }
        count = replace_all(data, len, json_string_value(old), json_string_length(old), new_ != NULL ? json_string_value(new_) : "",
                            new_ != NULL ? json_string_length(new_) : 0, &out, &out_len);
        free(data);
        if (out_len > server->config->max_edit_file_bytes)
            ret = -EFBIG;
        else if (count != 0)
            ret = gw_files_write_atomic(&server->files->ws, p, out, out_len, 0644);
        free(out);
        if (ret != 0) {
            gw_files_respond_errno(req, ret, "", paths[i]);
            goto Exit;
        }
        json_object_set_new(results, paths[i], json_pack("{s:I}", "replacedCount", (json_int_t)count));
    }
    if (verbose) {
        gw_send_json(req, 200, results);
        results = NULL;
    } else {
        gw_send_empty(req);
    }
Exit:
    json_decref(results);
    json_decref(body);
}

/* ---- POST /directories and DELETE /directories ------------------------------------------------ */

static int make_directory(gw_server_t *server, const gw_workspace_path_t *where, int has_mode, mode_t mode, uid_t uid, gid_t gid)
{
    int fd, ret;
    (void)has_mode;

    if ((ret = gw_workspace_mkdirs(&server->files->ws, where->rel, 0755)) == 0 &&
        (ret = gw_workspace_open(&server->files->ws, where->rel, O_PATH | O_DIRECTORY, 0, &fd)) == 0) {
        /* mkdir's mode passes through the umask; the requested mode is applied exactly */
        ret = apply_permission(fd, 1, mode, uid, gid);
        close(fd);
    }
    return ret;
}

void gw_api_directories_create(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    (void)params;
    apply_permission_items(server, req, 0755, "755", "creating directory ", make_directory);
}

void gw_api_directories_delete(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    query_value_t values[MAX_QUERY_VALUES];
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    long n = required_paths(server, req, values, p), i;
    (void)params;

    if (n < 0)
        return;
    for (i = 0; i != n; ++i) {
        gw_files_resolve(server, req, "path", values[i].s, values[i].len, p);
        if (p->rel[0] == '\0') {
            gw_send_error(req, GW_ERR_PATH_OUTSIDE_WORKSPACE, "%.300s is the workspace root itself, which is never removed",
                          values[i].s);
            return;
        }
    }
    for (i = 0; i != n; ++i) {
        struct stat st;
        int dir_fd, ret;
        gw_files_resolve(server, req, "path", values[i].s, values[i].len, p);
        if ((ret = gw_workspace_open_parent(&server->files->ws, p, &dir_fd)) == 0) {
            if (fstatat(dir_fd, p->name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                ret = -errno;
            else if (!S_ISDIR(st.st_mode))
                ret = -ENOTDIR;
            else
                ret = gw_workspace_remove_tree(dir_fd, p->name, GW_FILES_MAX_DEPTH);
            close(dir_fd);
        }
        /* execd (os.RemoveAll) treats a missing directory as removed */
        if (ret != 0 && ret != -ENOENT) {
            gw_files_respond_errno(req, ret, "removing ", values[i].s);
            return;
        }
    }
    gw_send_empty(req);
}

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

void gw_api_files_download(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    query_value_t v, vo, vl;
    int failed, fd, ret;
    struct stat st;
    download_t *d;
    uint64_t offset = 1, limit = UINT64_MAX;
    int has_offset, has_limit;
    ssize_t range_at;
    (void)params;

    if (query_one(req, "path", 1, &v, &failed) == NULL || gw_files_resolve(server, req, "path", v.s, v.len, p) != 0)
        return;
    has_offset = query_one(req, "offset", 0, &vo, &failed) != NULL;
    if (failed)
        return;
    has_limit = query_one(req, "limit", 0, &vl, &failed) != NULL;
    if (failed)
        return;
    if (has_offset && parse_positive(&vo, &offset) != 0) {
        gw_send_error(req, GW_ERR_INVALID_PARAMETER, "offset must be a positive integer (1-based)");
        return;
    }
    if (has_limit && parse_positive(&vl, &limit) != 0) {
        gw_send_error(req, GW_ERR_INVALID_PARAMETER, "limit must be a positive integer");
        return;
    }
    range_at = h2o_find_header(&req->headers, H2O_TOKEN_RANGE, -1);
    if ((has_offset || has_limit) && range_at != -1) {
        gw_send_error(req, GW_ERR_INVALID_PARAMETER, "offset/limit (lines) and a Range header (bytes) are mutually exclusive");
        return;
    }
    if ((ret = gw_workspace_open(&server->files->ws, p->rel, O_RDONLY, 0, &fd)) != 0) {
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
                gw_send_error(req, GW_ERR_RANGE_NOT_SATISFIABLE,
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

/* ---- POST /files/upload ----------------------------------------------------------------------- */

typedef struct st_upload_meta_t {
    gw_workspace_path_t path;
    mode_t mode;
    uid_t uid;
    gid_t gid;
} upload_meta_t;

static void on_parse_progress(void *ctx, size_t upto)
{
    h2o_req_t *req = ((void **)ctx)[0];
    gw_body_pages_t *pages = ((void **)ctx)[1];
    gw_body_pages_release(pages, req->entity.base, req->entity.base + upto);
}

/* Writes one file part to its destination through a temporary file, releasing body pages as it goes. */
static int upload_one(gw_server_t *server, h2o_req_t *req, const gw_body_pages_t *pages, const upload_meta_t *meta,
                      const gw_multipart_part_t *part)
{
    const gw_workspace_t *ws = &server->files->ws;
    const char *data = req->entity.base + part->data_off;
    char tmp_name[300], parent[GW_WORKSPACE_PATH_MAX + 1];
    size_t done = 0, plen = (size_t)(meta->path.name - meta->path.rel);
    int dir_fd, fd, ret;

    /* execd creates the missing parent directories (MkdirAll) */
    plen = plen > 0 ? plen - 1 : 0;
    memcpy(parent, meta->path.rel, plen);
    parent[plen] = '\0';
    if (plen != 0 && (ret = gw_workspace_mkdirs(ws, parent, 0755)) != 0)
        return ret;
    if ((ret = gw_workspace_open_parent(ws, &meta->path, &dir_fd)) != 0)
        return ret;
    if ((ret = create_temp(dir_fd, meta->path.name, tmp_name, sizeof(tmp_name), 0600, &fd)) != 0) {
        close(dir_fd);
        return ret;
    }
    while (ret == 0 && done < part->data_len) {
        size_t n = part->data_len - done < UPLOAD_CHUNK ? part->data_len - done : UPLOAD_CHUNK;
        ret = write_all(fd, data + done, n);
        gw_body_pages_release(pages, req->entity.base, data + done + n);
        done += n;
    }
    if (ret == 0 && fchmod(fd, meta->mode) != 0)
        ret = -errno;
    if (ret == 0 && (meta->uid != (uid_t)-1 || meta->gid != (gid_t)-1) && fchown(fd, meta->uid, meta->gid) != 0)
        ret = -errno;
    close(fd);
    if (ret == 0 && renameat(dir_fd, tmp_name, dir_fd, meta->path.name) != 0)
        ret = -errno;
    if (ret != 0)
        unlinkat(dir_fd, tmp_name, 0);
    close(dir_fd);
    return ret;
}

void gw_api_files_upload(gw_server_t *server, h2o_req_t *req, const gw_route_params_t *params)
{
    char boundary[GW_MULTIPART_BOUNDARY_MAX + 1];
    ssize_t ct = h2o_find_header(&req->headers, H2O_TOKEN_CONTENT_TYPE, -1);
    gw_multipart_part_t *parts = wire_malloc(sizeof(*parts) * 2 * MAX_ITEMS);
    upload_meta_t *metas = NULL;
    size_t num_parts, i, num_meta = 0, num_files = 0;
    gw_body_pages_t pages;
    void *progress_ctx[2] = {req, &pages};
    int ret;
    (void)params;

    if (ct == -1 || gw_multipart_boundary(req->headers.entries[ct].value.base, req->headers.entries[ct].value.len, boundary) != 0) {
        gw_send_error(req, GW_ERR_INVALID_FILE,
                      "the body must be multipart/form-data (a metadata part, then a file part, per file)");
        goto Exit;
    }
    gw_body_pages_init(&pages, req->entity.base, req->entity.len);
    if ((ret = gw_multipart_parse(req->entity.base != NULL ? req->entity.base : "", req->entity.len, boundary, parts, 2 * MAX_ITEMS,
                                  &num_parts, on_parse_progress, progress_ctx)) != 0) {
        gw_send_error(req, GW_ERR_INVALID_FILE, "%s", gw_multipart_strerror(ret));
        goto Exit;
    }
    for (i = 0; i != num_parts; ++i) {
        num_meta += strcmp(parts[i].name, "metadata") == 0;
        num_files += strcmp(parts[i].name, "file") == 0;
    }
    if (num_meta == 0 || num_files == 0 || num_meta != num_files) {
        gw_send_error(req,
                      num_meta == 0    ? GW_ERR_INVALID_FILE_METADATA
                      : num_files == 0 ? GW_ERR_INVALID_FILE_CONTENT
                                       : GW_ERR_INVALID_FILE,
                      num_meta == 0    ? "metadata part is missing"
                      : num_files == 0 ? "file part is missing"
                                       : "metadata and file count mismatch: %zu vs %zu",
                      num_meta, num_files);
        goto Exit;
    }
    /* every metadata part is checked before anything is written */
    metas = wire_malloc(sizeof(*metas) * num_meta);
    num_meta = 0;
    for (i = 0; i != num_parts; ++i) {
        json_error_t error;
        json_t *meta, *jpath, *jmode;
        if (strcmp(parts[i].name, "metadata") != 0)
            continue;
        if ((meta = json_loadb(req->entity.base + parts[i].data_off, parts[i].data_len, JSON_ALLOW_NUL, &error)) == NULL ||
            !json_is_object(meta)) {
            json_decref(meta);
            gw_send_error(req, GW_ERR_INVALID_FILE_METADATA,
                          "invalid metadata format: a JSON object {\"path\", \"mode\"?} is expected");
            goto Exit;
        }
        jpath = json_object_get(meta, "path");
        jmode = json_object_get(meta, "mode");
        metas[num_meta].mode = 0644;
        if (!json_is_string(jpath) || json_string_length(jpath) == 0) {
            json_decref(meta);
            gw_send_error(req, GW_ERR_INVALID_FILE_METADATA, "metadata path is empty");
            goto Exit;
        }
        /* execd's Go zero value: a missing or 0 mode means the default */
        if (jmode != NULL && !json_is_null(jmode) && !(json_is_integer(jmode) && json_integer_value(jmode) == 0) &&
            parse_mode(jmode, &metas[num_meta].mode) != 0) {
            json_decref(meta);
            gw_send_error(req, GW_ERR_INVALID_FILE_METADATA, "metadata mode must be octal digits as an integer (e.g. 644)");
            goto Exit;
        }
        ret = parse_owner(req, meta, &metas[num_meta].uid, &metas[num_meta].gid) != 0 ||
              gw_files_resolve(server, req, "metadata path", json_string_value(jpath), json_string_length(jpath),
                               &metas[num_meta].path) != 0;
        json_decref(meta);
        if (ret != 0)
            goto Exit;
        if (metas[num_meta].path.rel[0] == '\0') {
            gw_send_error(req, GW_ERR_IS_A_DIRECTORY, "metadata path is the workspace root");
            goto Exit;
        }
        ++num_meta;
    }
    /* the i-th metadata part describes the i-th file part (execd pairs them the same way) */
    num_files = 0;
    for (i = 0; i != num_parts; ++i) {
        if (strcmp(parts[i].name, "file") != 0)
            continue;
        if ((ret = upload_one(server, req, &pages, &metas[num_files], &parts[i])) != 0) {
            gw_files_respond_errno(req, ret, "uploading to ", metas[num_files].path.abs);
            goto Exit;
        }
        ++num_files;
    }
    gw_send_empty(req);
Exit:
    free(metas);
    free(parts);
}
