/* GET /files/search and GET /directories/list: bounded walks beneath the workspace root. */
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
static int open_walk_root(gw_execd_t *execd, h2o_req_t *req, gw_workspace_path_t *p, int refuse_symlink, int *fd)
{
    query_value_t v;
    int failed, ret, dir_fd;
    struct stat st;
    const char *name;

    if (gw_files_query_one(req, "path", 1, &v, &failed) == NULL ||
        gw_files_resolve(execd->files_ws, req, "path", v.s, v.len, p) != 0)
        return -1;
    if ((ret = gw_files_open_for_stat(execd->files_ws, p, &dir_fd, &name)) == 0) {
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW | (name[0] == '\0' ? AT_EMPTY_PATH : 0)) != 0)
            ret = -errno;
        close(dir_fd);
    }
    if (ret == 0 && S_ISLNK(st.st_mode) && refuse_symlink) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "%.300s is a symbolic link; list the directory it points to", v.s);
        return -1;
    }
    if (ret == 0)
        ret = gw_workspace_open(execd->files_ws, p->rel, O_RDONLY | O_DIRECTORY, 0, fd);
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

GW_EXECD_HANDLER(files_search)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    walk_t *walk = h2o_mem_alloc_pool(&req->pool, sizeof(*walk));
    query_value_t v;
    char *pattern;
    int fd, failed;
    size_t i;
    (void)params;

    if (open_walk_root(execd, req, p, 0, &fd) != 0)
        return;
    if (gw_files_query_one(req, "pattern", 0, &v, &failed) == NULL) {
        if (failed) {
            close(fd);
            return;
        }
        v.s = "**";
        v.len = 2;
    }
    if (memchr(v.s, '\0', v.len) != NULL) {
        close(fd);
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "pattern contains a NUL byte");
        return;
    }
    /* fnmatch without FNM_PATHNAME lets '*' cross '/', so "**" needs no special case */
    pattern = h2o_mem_alloc_pool(&req->pool, v.len + 1);
    memcpy(pattern, v.s, v.len + 1);
    memset(walk, 0, sizeof(*walk));
    walk->req = req;
    walk->out = json_array();
    walk->max_entries = execd->host->config->max_list_entries;
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

GW_EXECD_HANDLER(directories_list)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    walk_t *walk = h2o_mem_alloc_pool(&req->pool, sizeof(*walk));
    query_value_t v;
    uint64_t depth = 1;
    int fd, failed;
    (void)params;

    if (gw_files_query_one(req, "depth", 0, &v, &failed) != NULL) {
        if (wire_parse_decimal(v.s, GW_FILES_MAX_DEPTH, &depth) != 0) {
            gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "depth must be an integer from 0 to %d", GW_FILES_MAX_DEPTH);
            return;
        }
    } else if (failed) {
        return;
    }
    if (open_walk_root(execd, req, p, 1, &fd) != 0)
        return;
    memset(walk, 0, sizeof(*walk));
    walk->req = req;
    walk->out = json_array();
    walk->max_entries = execd->host->config->max_list_entries;
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
