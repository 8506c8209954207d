/* Routes of /files and /directories that act on paths: info, delete, permissions, mv, replace, mkdir, rmdir. */
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
#include "core/json_out.h"
#include "execd/execd.h"
#include "execd/files_request.h"
#include "files/fsops.h"
#include "files/upload.h"

/* ---- GET /files/info -------------------------------------------------------------------------- */

GW_EXECD_HANDLER(files_info)
{
    gw_execd_t *execd = gw_execd_from(door);
    query_value_t values[MAX_QUERY_VALUES];
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    json_t *result;
    long n = gw_files_query_values(req, "path", values, MAX_QUERY_VALUES), i;
    (void)params;

    if (n < 0)
        return;
    for (i = 0; i != n; ++i) {
        if (gw_files_resolve(execd->files_ws, req, "path", values[i].s, values[i].len, p) != 0)
            return;
    }
    result = json_object();
    for (i = 0; i != n; ++i) {
        const char *name;
        int dir_fd, ret;
        json_t *info;
        gw_files_resolve(execd->files_ws, req, "path", values[i].s, values[i].len, p);
        if ((ret = gw_files_open_for_stat(execd->files_ws, p, &dir_fd, &name)) == 0) {
            info = gw_files_info_json(dir_fd, name, p->abs, &ret);
            close(dir_fd);
            if (info != NULL) {
                gw_json_set_text_key(result, values[i].s, values[i].len, info); /* a path's bytes need not be UTF-8 */
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
static long required_paths(gw_execd_t *execd, h2o_req_t *req, query_value_t *values, gw_workspace_path_t *p)
{
    long n = gw_files_query_values(req, "path", values, MAX_QUERY_VALUES), i;

    if (n < 0)
        return -1;
    if (n == 0) {
        gw_send_error(req, GW_HTTP_MISSING_QUERY, "missing query parameter 'path'");
        return -1;
    }
    for (i = 0; i != n; ++i)
        if (gw_files_resolve(execd->files_ws, req, "path", values[i].s, values[i].len, p) != 0)
            return -1;
    return n;
}

/* ---- DELETE /files and DELETE /directories ----------------------------------------------------- */

/*
 * DELETE /files and DELETE /directories: every path is resolved and checked first (the root is
 * never removed), then each is removed: a file or link (not a directory) for /files, a whole tree
 * for /directories, where a missing one counts as removed (execd's os.RemoveAll).
 */
static void delete_paths(gw_execd_t *execd, h2o_req_t *req, int trees)
{
    query_value_t values[MAX_QUERY_VALUES];
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    long n = required_paths(execd, req, values, p), i;

    if (n < 0)
        return;
    for (i = 0; i != n; ++i) {
        gw_files_resolve(execd->files_ws, req, "path", values[i].s, values[i].len, p);
        if (p->rel[0] != '\0')
            continue;
        if (trees)
            gw_send_error(req, GW_HTTP_PATH_OUTSIDE_WORKSPACE, "%.300s is the workspace root itself, which is never removed",
                          values[i].s);
        else
            gw_send_error(req, GW_HTTP_IS_A_DIRECTORY, "%.300s is the workspace root; DELETE /directories removes directories",
                          values[i].s);
        return;
    }
    for (i = 0; i != n; ++i) {
        struct stat st;
        int dir_fd, ret;
        gw_files_resolve(execd->files_ws, req, "path", values[i].s, values[i].len, p);
        if ((ret = gw_workspace_open_parent(execd->files_ws, p, &dir_fd)) == 0) {
            if (fstatat(dir_fd, p->name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                ret = -errno;
            else if (trees)
                ret = S_ISDIR(st.st_mode) ? gw_workspace_remove_tree(dir_fd, p->name, GW_FILES_MAX_DEPTH) : -ENOTDIR;
            else if (S_ISDIR(st.st_mode))
                ret = -EISDIR;
            else
                ret = gw_workspace_unlink(dir_fd, p->name);
            close(dir_fd);
        }
        if (ret != 0 && !(trees && ret == -ENOENT)) {
            gw_files_respond_errno(req, ret,
                                   trees            ? "removing "
                                   : ret == -EISDIR ? "DELETE /files removes files only (DELETE /directories): "
                                                    : "",
                                   values[i].s);
            return;
        }
    }
    gw_send_empty(req);
}

GW_EXECD_HANDLER(files_delete)
{
    (void)params;
    delete_paths(gw_execd_from(door), req, 0);
}

/* ---- POST /files/permissions ------------------------------------------------------------------ */

/* What applying one {path: {mode?, owner?, group?}} item does, once every item has been checked. */
typedef int (*permission_apply_t)(gw_execd_t *execd, const gw_workspace_path_t *where, int has_mode, mode_t mode, uid_t uid,
                                  gid_t gid);

/*
 * The shared body of POST /files/permissions and POST /directories: every item is parsed and
 * resolved before anything is touched, then `apply` runs for each in turn. Answers the request
 * (empty 200, or the first error, `failing` naming what failed) either way.
 */
static void apply_permission_items(gw_execd_t *execd, h2o_req_t *req, mode_t default_mode, const char *mode_example,
                                   const char *failing, permission_apply_t apply)
{
    json_t *body = gw_files_parse_body(req);
    gw_files_items_t it;
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    long i;

    if (body == NULL)
        return;
    if (gw_files_collect_items(req, body, "path", &it) != 0)
        goto Exit;
    for (i = 0; i != it.n; ++i) {
        json_t *jmode = json_object_get(it.items[i], "mode");
        mode_t mode;
        uid_t uid;
        gid_t gid;
        if (jmode != NULL && gw_files_parse_mode(jmode, &mode) != 0) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "mode of \"%.200s\" must be octal digits as an integer (e.g. %s)",
                          it.paths[i], mode_example);
            goto Exit;
        }
        if (gw_files_parse_owner(req, it.items[i], &uid, &gid) != 0 ||
            gw_files_resolve(execd->files_ws, req, "path", it.paths[i], it.lens[i], p) != 0)
            goto Exit;
    }
    /* the path buffers are large: each item is resolved again rather than kept */
    for (i = 0; i != it.n; ++i) {
        json_t *jmode = json_object_get(it.items[i], "mode");
        mode_t mode = default_mode;
        uid_t uid;
        gid_t gid;
        int ret;
        if (jmode != NULL)
            gw_files_parse_mode(jmode, &mode);
        gw_files_parse_owner(req, it.items[i], &uid, &gid);
        gw_files_resolve(execd->files_ws, req, "path", it.paths[i], it.lens[i], p);
        if ((ret = apply(execd, p, jmode != NULL, mode, uid, gid)) != 0) {
            gw_files_respond_errno(req, ret, failing, it.paths[i]);
            goto Exit;
        }
    }
    gw_send_empty(req);
Exit:
    json_decref(body);
}

/* Mode and owner of what `where` names (opened with `flags` beneath the root). 0 or -errno. */
static int apply_at(gw_execd_t *execd, const gw_workspace_path_t *where, int flags, int has_mode, mode_t mode, uid_t uid, gid_t gid)
{
    int fd, ret;

    if ((ret = gw_workspace_open(execd->files_ws, where->rel, O_PATH | flags, 0, &fd)) == 0) {
        ret = gw_files_apply_permission(fd, has_mode, mode, uid, gid);
        close(fd);
    }
    return ret;
}

static int apply_to_existing(gw_execd_t *execd, const gw_workspace_path_t *where, int has_mode, mode_t mode, uid_t uid, gid_t gid)
{
    return apply_at(execd, where, 0, has_mode, mode, uid, gid);
}

GW_EXECD_HANDLER(files_permissions)
{
    gw_execd_t *execd = gw_execd_from(door);
    (void)params;
    apply_permission_items(execd, req, 0, "644", "changing permissions of ", apply_to_existing);
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

/* mkdir -p of the directory holding `p` (nothing for a name at the root). 0 or -errno. */
static int make_parents(gw_execd_t *execd, const gw_workspace_path_t *p)
{
    const char *slash = strrchr(p->rel, '/');
    char parent[GW_WORKSPACE_PATH_MAX + 1];

    if (slash == NULL)
        return 0;
    memcpy(parent, p->rel, (size_t)(slash - p->rel));
    parent[slash - p->rel] = '\0';
    return gw_workspace_mkdirs(execd->files_ws, parent, 0755);
}

GW_EXECD_HANDLER(files_mv)
{
    gw_execd_t *execd = gw_execd_from(door);
    json_error_t error;
    json_t *body = NULL, *list = NULL, *item, *src, *dest;
    gw_workspace_path_t *ps = h2o_mem_alloc_pool(&req->pool, sizeof(*ps)), *pd = h2o_mem_alloc_pool(&req->pool, sizeof(*pd));
    size_t i;
    (void)params;

    /* execd's body is an array; gw_parse_body wants an object */
    if (req->entity.base == NULL || (body = json_loadb(req->entity.base, req->entity.len, JSON_ALLOW_NUL, &error)) == NULL) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "the body must be a JSON array of {\"src\",\"dest\"}");
        return;
    }
    if (json_is_object(body)) {
        list = json_array();
        json_array_append(list, body);
    } else if (json_is_array(body) && json_array_size(body) <= MAX_ITEMS) {
        list = json_incref(body);
    } else {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "the body must be a JSON array of at most %d {\"src\",\"dest\"}",
                      MAX_ITEMS);
        goto Exit;
    }
    json_array_foreach(list, i, item)
    {
        if (!json_is_object(item) || mv_fields(item, &src, &dest) != 0) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "item %zu needs string \"src\" and \"dest\"", i);
            goto Exit;
        }
        if (gw_files_resolve(execd->files_ws, req, "src", json_string_value(src), json_string_length(src), ps) != 0 ||
            gw_files_resolve(execd->files_ws, req, "dest", json_string_value(dest), json_string_length(dest), pd) != 0)
            goto Exit;
        if (ps->rel[0] == '\0' || pd->rel[0] == '\0') {
            gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "item %zu: the workspace root itself cannot be moved or replaced", i);
            goto Exit;
        }
    }
    json_array_foreach(list, i, item)
    {
        int sfd = -1, dfd = -1, ret;
        mv_fields(item, &src, &dest);
        gw_files_resolve(execd->files_ws, req, "src", json_string_value(src), json_string_length(src), ps);
        gw_files_resolve(execd->files_ws, req, "dest", json_string_value(dest), json_string_length(dest), pd);
        const char *failed = json_string_value(src);
        struct stat st;
        if ((ret = gw_workspace_open_parent(execd->files_ws, ps, &sfd)) == 0 &&
            fstatat(sfd, ps->name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            ret = -errno;
        if (ret == 0) {
            /* execd creates the destination's missing parents (0755) and never replaces an existing dest */
            failed = json_string_value(dest);
            if ((ret = make_parents(execd, pd)) == 0 && (ret = gw_workspace_open_parent(execd->files_ws, pd, &dfd)) == 0 &&
                renameat2(sfd, ps->name, dfd, pd->name, RENAME_NOREPLACE) != 0)
                ret = -errno;
            if (ret == -ENOENT && fstatat(sfd, ps->name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                failed = json_string_value(src); /* the source went away meanwhile */
        }
        if (sfd != -1)
            close(sfd);
        if (dfd != -1)
            close(dfd);
        if (ret != 0) {
            gw_files_respond_errno(req, ret, failed == json_string_value(src) ? "moving " : "moving to ", failed);
            goto Exit;
        }
    }
    gw_send_empty(req);
Exit:
    json_decref(list);
    json_decref(body);
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

GW_EXECD_HANDLER(files_replace)
{
    gw_execd_t *execd = gw_execd_from(door);
    json_t *body = gw_files_parse_body(req), *results = NULL;
    gw_files_items_t it;
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    query_value_t v;
    int failed, verbose = gw_files_query_one(req, "verbose", 0, &v, &failed) != NULL && strcmp(v.s, "true") == 0;
    long i;
    (void)params;

    if (body == NULL)
        return;
    if (gw_files_collect_items(req, body, "path", &it) != 0)
        goto Exit;
    for (i = 0; i != it.n; ++i) {
        json_t *old = json_object_get(it.items[i], "old"), *new_ = json_object_get(it.items[i], "new");
        if (!json_is_string(old) || json_string_length(old) == 0 || (new_ != NULL && !json_is_string(new_))) {
            gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "\"%.200s\": old must be a non-empty string, new a string",
                          it.paths[i]);
            goto Exit;
        }
        if (gw_files_resolve(execd->files_ws, req, "path", it.paths[i], it.lens[i], p) != 0)
            goto Exit;
    }
    results = json_object();
    for (i = 0; i != it.n; ++i) {
        json_t *old = json_object_get(it.items[i], "old"), *new_ = json_object_get(it.items[i], "new");
        char *data, *out;
        size_t len, out_len, count;
        int ret;
        gw_files_resolve(execd->files_ws, req, "path", it.paths[i], it.lens[i], p);
        if ((ret = gw_files_read_all(execd->files_ws, p->rel, execd->host->config->max_edit_file_bytes, &data, &len)) != 0) {
            gw_files_respond_errno(req, ret, "", it.paths[i]);
            goto Exit;
        }
        count = replace_all(data, len, json_string_value(old), json_string_length(old), new_ != NULL ? json_string_value(new_) : "",
                            new_ != NULL ? json_string_length(new_) : 0, &out, &out_len);
        free(data);
        if (out_len > execd->host->config->max_edit_file_bytes)
            ret = -EFBIG;
        else if (count != 0)
            ret = gw_files_write_atomic(execd->files_ws, p, out, out_len, 0644);
        free(out);
        if (ret != 0) {
            gw_files_respond_errno(req, ret, "", it.paths[i]);
            goto Exit;
        }
        json_object_set_new(results, it.paths[i], json_pack("{s:I}", "replacedCount", (json_int_t)count));
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

static int make_directory(gw_execd_t *execd, const gw_workspace_path_t *where, int has_mode, mode_t mode, uid_t uid, gid_t gid)
{
    int ret = gw_workspace_mkdirs(execd->files_ws, where->rel, 0755);
    (void)has_mode;

    /* mkdir's mode passes through the umask; the requested mode is applied exactly */
    return ret != 0 ? ret : apply_at(execd, where, O_DIRECTORY, 1, mode, uid, gid);
}

GW_EXECD_HANDLER(directories_create)
{
    gw_execd_t *execd = gw_execd_from(door);
    (void)params;
    apply_permission_items(execd, req, 0755, "755", "creating directory ", make_directory);
}

GW_EXECD_HANDLER(directories_delete)
{
    (void)params;
    delete_paths(gw_execd_from(door), req, 1);
}
