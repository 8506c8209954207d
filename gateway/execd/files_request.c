/* What the files routes share: request parsing, path resolution with its answers, errno to API errors. */
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

int gw_files_resolve(const gw_workspace_t *ws, h2o_req_t *req, const char *what, const char *path, size_t len,
                     gw_workspace_path_t *p)
{
    int ret = gw_workspace_resolve(ws, path, len, p);

    switch (ret) {
    case 0:
        return 0;
    case GW_EWORKSPACE_NUL:
    case GW_EWORKSPACE_OUTSIDE:
        gw_send_error(req, GW_HTTP_PATH_OUTSIDE_WORKSPACE, "%s \"%.*s\" refused: %s (%s)", what, (int)(len > 200 ? 200 : len), path,
                      gw_strerror(ret), ws->root);
        return -1;
    default:
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "%s: %s", what, gw_strerror(ret));
        return -1;
    }
}

void gw_files_respond_errno(h2o_req_t *req, int err, const char *prefix, const char *path)
{
    gw_http_error_t code;
    const char *why = strerror(-err);

    if (err == GW_EWORKSPACE_HARDLINK) {
        gw_send_error(req, GW_HTTP_PATH_OUTSIDE_WORKSPACE, "%s%.300s: %s; kgate serves such files only with --allow-hardlinks",
                      prefix, path, gw_strerror(err));
        return;
    }
    if (err == GW_EWORKSPACE_SPECIAL) {
        gw_send_error(req, GW_HTTP_INVALID_FILE, "%s%.300s: %s", prefix, path, gw_strerror(err));
        return;
    }

    switch (-err) {
    case EXDEV:
        code = GW_HTTP_PATH_OUTSIDE_WORKSPACE;
        why = "a symbolic link leads outside the workspace root";
        break;
    case ENOENT:
        code = GW_HTTP_FILE_NOT_FOUND;
        why = "file not found";
        break;
    case EACCES:
    case EPERM:
        code = GW_HTTP_PERMISSION_DENIED;
        break;
    case EROFS:
        /* an isolated session's ro workspace, or its read-only system */
        code = GW_HTTP_PERMISSION_DENIED;
        why = "read-only file system";
        break;
    case ENOTDIR:
        code = GW_HTTP_NOT_A_DIRECTORY;
        break;
    case EISDIR:
        code = GW_HTTP_IS_A_DIRECTORY;
        break;
    case EEXIST:
    case ENOTEMPTY:
        code = GW_HTTP_FILE_EXISTS;
        break;
    case EAGAIN:
        /* the open never waits (gw_workspace_open): a process holds a lease on the file, and has just been asked to let go */
        code = GW_HTTP_FILE_BUSY;
        why = "another process holds a lease on the file; it has been asked to release it: try again";
        break;
    case EFBIG:
        code = GW_HTTP_FILE_TOO_LARGE;
        why = "file larger than the configured limit";
        break;
    case ELOOP:
    case ENAMETOOLONG:
    case EINVAL:
        code = GW_HTTP_INVALID_PARAMETER;
        break;
    default:
        code = GW_HTTP_RUNTIME_ERROR;
        break;
    }
    gw_send_error(req, code, "%s%.300s: %s", prefix, path, why);
}

json_t *gw_files_parse_body(h2o_req_t *req)
{
    return gw_parse_body_with(req, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL);
}

/* Every value of `name` in the query string (pool-allocated); -1 after answering 400 on a bad escape or too many values. */
long gw_files_query_values(h2o_req_t *req, const char *name, query_value_t *values, size_t max)
{
    long n = gw_query_values(req, name, values, max);

    if (n < 0) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "query parameter %s has a malformed percent-escape", name);
        return -1;
    }
    if ((size_t)n > max) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "at most %zu %s parameters per request", max, name);
        return -1;
    }
    return n;
}

/* The single value of a query parameter, or NULL (after answering 400 MISSING_QUERY when `required`). */
query_value_t *gw_files_query_one(h2o_req_t *req, const char *name, int required, query_value_t *value, int *failed)
{
    long n = gw_files_query_values(req, name, value, 1);

    *failed = 0;
    if (n < 0) {
        *failed = 1;
        return NULL;
    }
    if (n == 0 || value->len == 0) {
        if (required) {
            gw_send_error(req, GW_HTTP_MISSING_QUERY, "missing query parameter '%s'", name);
            *failed = 1;
        }
        return NULL;
    }
    return value;
}

/* Parses a Permission's mode: octal digits written as a decimal integer (755), at most 7777. */
int gw_files_parse_mode(json_t *jmode, mode_t *mode)
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
int gw_files_lookup_id(const char *name, int is_group, id_t *out)
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

int gw_files_parse_owner(h2o_req_t *req, json_t *item, uid_t *uid, gid_t *gid)
{
    static const char *const keys[2] = {"owner", "group"};
    id_t *ids[2] = {uid, gid};

    for (int i = 0; i != 2; ++i) {
        const char *name = json_string_value(json_object_get(item, keys[i]));
        *ids[i] = (id_t)-1;
        if (name != NULL && name[0] != '\0' && gw_files_lookup_id(name, i, ids[i]) != 0) {
            gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "unknown %s \"%.100s\"", keys[i], name);
            return -1;
        }
    }
    return 0;
}

/* chmod / chown an O_PATH descriptor (fchmod refuses those; the /proc path acts on the opened inode). */
int gw_files_apply_permission(int fd, int set_mode, mode_t mode, uid_t uid, gid_t gid)
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
 * inside. Fills `out` (borrowed from body); -1 after answering 400.
 */
int gw_files_collect_items(h2o_req_t *req, json_t *body, const char *path_key, gw_files_items_t *out)
{
    const char *key;
    json_t *value;
    long n = 0;

    out->n = 0;
    out->paths = h2o_mem_alloc_pool(&req->pool, sizeof(*out->paths) * MAX_ITEMS);
    out->lens = h2o_mem_alloc_pool(&req->pool, sizeof(*out->lens) * MAX_ITEMS);
    out->items = h2o_mem_alloc_pool(&req->pool, sizeof(*out->items) * MAX_ITEMS);
    if (json_is_string(json_object_get(body, path_key))) {
        json_t *jpath = json_object_get(body, path_key);
        out->paths[0] = json_string_value(jpath);
        out->lens[0] = json_string_length(jpath);
        out->items[0] = body;
        out->n = 1;
        return 0;
    }
    json_object_foreach(body, key, value)
    {
        if (!json_is_object(value)) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "the value for \"%.200s\" must be an object", key);
            return -1;
        }
        if (n == MAX_ITEMS) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "at most %d paths per request", MAX_ITEMS);
            return -1;
        }
        out->paths[n] = key;
        out->lens[n] = strlen(key);
        out->items[n] = value;
        ++n;
    }
    out->n = n;
    return 0;
}

/* Opens the directory holding p (or the root itself for "") and the name to use inside it. */
int gw_files_open_for_stat(const gw_workspace_t *ws, const gw_workspace_path_t *p, int *dir_fd, const char **name)
{
    if (p->rel[0] == '\0') {
        *name = "";
        return gw_workspace_open(ws, "", O_PATH | O_DIRECTORY, 0, dir_fd);
    }
    *name = p->name;
    return gw_workspace_open_parent(ws, p, dir_fd);
}
