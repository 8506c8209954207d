/* POST /files/upload: multipart parts written to their destinations without holding the body twice. */
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
static int upload_one(gw_execd_t *execd, h2o_req_t *req, const gw_body_pages_t *pages, const upload_meta_t *meta,
                      const gw_multipart_part_t *part)
{
    const gw_workspace_t *ws = &execd->files->ws;
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
    if ((ret = gw_files_create_temp(dir_fd, meta->path.name, tmp_name, sizeof(tmp_name), 0600, &fd)) != 0) {
        close(dir_fd);
        return ret;
    }
    while (ret == 0 && done < part->data_len) {
        size_t n = part->data_len - done < UPLOAD_CHUNK ? part->data_len - done : UPLOAD_CHUNK;
        ret = gw_files_write_all(fd, data + done, n);
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

GW_EXECD_HANDLER(files_upload)
{
    gw_execd_t *execd = gw_execd_from(door);
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
        gw_send_error(req, GW_HTTP_INVALID_FILE,
                      "the body must be multipart/form-data (a metadata part, then a file part, per file)");
        goto Exit;
    }
    gw_body_pages_init(&pages, req->entity.base, req->entity.len);
    if ((ret = gw_multipart_parse(req->entity.base != NULL ? req->entity.base : "", req->entity.len, boundary, parts, 2 * MAX_ITEMS,
                                  &num_parts, on_parse_progress, progress_ctx)) != 0) {
        gw_send_error(req, GW_HTTP_INVALID_FILE, "%s", gw_strerror(ret));
        goto Exit;
    }
    for (i = 0; i != num_parts; ++i) {
        num_meta += strcmp(parts[i].name, "metadata") == 0;
        num_files += strcmp(parts[i].name, "file") == 0;
    }
    if (num_meta == 0 || num_files == 0 || num_meta != num_files) {
        gw_send_error(req,
                      num_meta == 0    ? GW_HTTP_INVALID_FILE_METADATA
                      : num_files == 0 ? GW_HTTP_INVALID_FILE_CONTENT
                                       : GW_HTTP_INVALID_FILE,
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
            gw_send_error(req, GW_HTTP_INVALID_FILE_METADATA,
                          "invalid metadata format: a JSON object {\"path\", \"mode\"?} is expected");
            goto Exit;
        }
        jpath = json_object_get(meta, "path");
        jmode = json_object_get(meta, "mode");
        metas[num_meta].mode = 0644;
        if (!json_is_string(jpath) || json_string_length(jpath) == 0) {
            json_decref(meta);
            gw_send_error(req, GW_HTTP_INVALID_FILE_METADATA, "metadata path is empty");
            goto Exit;
        }
        /* execd's Go zero value: a missing or 0 mode means the default */
        if (jmode != NULL && !json_is_null(jmode) && !(json_is_integer(jmode) && json_integer_value(jmode) == 0) &&
            gw_files_parse_mode(jmode, &metas[num_meta].mode) != 0) {
            json_decref(meta);
            gw_send_error(req, GW_HTTP_INVALID_FILE_METADATA, "metadata mode must be octal digits as an integer (e.g. 644)");
            goto Exit;
        }
        ret = gw_files_parse_owner(req, meta, &metas[num_meta].uid, &metas[num_meta].gid) != 0 ||
              gw_files_resolve(execd, req, "metadata path", json_string_value(jpath), json_string_length(jpath),
                               &metas[num_meta].path) != 0;
        json_decref(meta);
        if (ret != 0)
            goto Exit;
        if (metas[num_meta].path.rel[0] == '\0') {
            gw_send_error(req, GW_HTTP_IS_A_DIRECTORY, "metadata path is the workspace root");
            goto Exit;
        }
        ++num_meta;
    }
    /* the i-th metadata part describes the i-th file part (execd pairs them the same way) */
    num_files = 0;
    for (i = 0; i != num_parts; ++i) {
        if (strcmp(parts[i].name, "file") != 0)
            continue;
        if ((ret = upload_one(execd, req, &pages, &metas[num_files], &parts[i])) != 0) {
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
