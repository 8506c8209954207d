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
#include "wire/fdio.h"
#include "wire/text.h"
#include "ksys/detach.h"
#include "core/errors.h"
#include "core/http.h"
#include "execd/execd.h"
#include "execd/files_request.h"
#include "files/fsops.h"
#include "files/multipart.h"
#include "files/upload.h"

/* ---- POST /files/upload ----------------------------------------------------------------------- */

typedef struct st_upload_meta_t {
    gw_workspace_path_t path;
    mode_t mode;
    uid_t uid;
    gid_t gid;
} upload_meta_t;

/*
 * An upload in steps: the multipart parse, a search budget (UPLOAD_PARSE_BUDGET) per loop iteration,
 * then the copy of the parts to their files, a chunk (UPLOAD_CHUNK) per loop iteration: a 1 GiB
 * upload would otherwise hold the loop for seconds, and every other stream with it. Lives in the
 * request's pool; its dispose hook (the request answered, or the client gone) releases what the
 * job holds and removes a half-written temporary file.
 */
typedef struct st_upload_job_t {
    gw_execd_t *execd;
    gw_workspace_t ws; /* a copy of the request's workspace (its own descriptor): an isolated session may go mid-upload */
    h2o_req_t *req;
    gw_multipart_parser_t parser;
    gw_multipart_part_t *parts; /* owned */
    size_t num_parts;
    upload_meta_t *metas; /* owned; the i-th describes the i-th file part */
    gw_body_pages_t pages;
    size_t next_part;                /* the next part to look at */
    size_t num_done;                 /* file parts written */
    const gw_multipart_part_t *part; /* being written; NULL between files */
    size_t written;
    int dir_fd, fd;
    char tmp_name[300];
    h2o_timeout_entry_t step;
    unsigned answered : 1;
} upload_job_t;

/* Drops the file being written (its temporary name), if any. */
static void abandon_file(upload_job_t *job)
{
    if (job->fd != -1)
        close(job->fd);
    if (job->dir_fd != -1) {
        if (job->tmp_name[0] != '\0')
            unlinkat(job->dir_fd, job->tmp_name, 0);
        close(job->dir_fd);
    }
    job->fd = job->dir_fd = -1;
    job->part = NULL;
}

static void on_job_dispose(void *p)
{
    upload_job_t *job = p;

    if (h2o_timeout_is_linked(&job->step))
        h2o_timeout_unlink(&job->step);
    abandon_file(job);
    gw_body_pages_dispose(&job->pages);
    gw_workspace_dispose(&job->ws);
    free(job->metas);
    free(job->parts);
}

/* Opens the temporary file of the next file part; 0, 1 when none is left, or -errno. */
static int begin_file(upload_job_t *job)
{
    const gw_workspace_t *ws = &job->ws;
    const upload_meta_t *meta;
    char parent[GW_WORKSPACE_PATH_MAX + 1];
    size_t plen;
    int ret;

    while (job->next_part != job->num_parts && strcmp(job->parts[job->next_part].name, "file") != 0)
        ++job->next_part;
    if (job->next_part == job->num_parts)
        return 1;
    job->part = &job->parts[job->next_part++];
    job->written = 0;
    meta = &job->metas[job->num_done];
    /* execd creates the missing parent directories (MkdirAll) */
    plen = (size_t)(meta->path.name - meta->path.rel);
    plen = plen > 0 ? plen - 1 : 0;
    memcpy(parent, meta->path.rel, plen);
    parent[plen] = '\0';
    if (plen != 0 && (ret = gw_workspace_mkdirs(ws, parent, 0755)) != 0)
        return ret;
    if ((ret = gw_workspace_open_parent(ws, &meta->path, &job->dir_fd)) != 0)
        return ret;
    return gw_files_create_temp(job->dir_fd, meta->path.name, job->tmp_name, sizeof(job->tmp_name), 0600, &job->fd);
}

/* Mode, owner, then the rename over the destination; 0 or -errno. */
static int finish_file(upload_job_t *job)
{
    const upload_meta_t *meta = &job->metas[job->num_done];
    int ret = 0;

    if (fchmod(job->fd, meta->mode) != 0)
        ret = -errno;
    if (ret == 0 && (meta->uid != (uid_t)-1 || meta->gid != (gid_t)-1) && fchown(job->fd, meta->uid, meta->gid) != 0)
        ret = -errno;
    if (ret == 0) {
        /* a big file this one replaces is freed off the loop */
        int replaced = gw_workspace_hold_big_file(job->dir_fd, meta->path.name);
        ret = gw_files_commit_temp(job->dir_fd, job->fd, job->tmp_name, sizeof(job->tmp_name), meta->path.name);
        ksys_close_detached(replaced);
    }
    close(job->fd);
    job->fd = -1;
    if (ret != 0)
        return ret; /* abandon_file removes the temporary file */
    close(job->dir_fd);
    job->dir_fd = -1;
    job->part = NULL;
    ++job->num_done;
    return 0;
}

static void on_step(h2o_timeout_entry_t *entry)
{
    upload_job_t *job = H2O_STRUCT_FROM_MEMBER(upload_job_t, step, entry);
    h2o_req_t *req = job->req;
    int ret = 0;

    if (job->part == NULL && (ret = begin_file(job)) == 1) {
        job->answered = 1;
        gw_send_empty(req);
        return;
    }
    if (ret == 0) {
        const char *data = req->entity.base + job->part->data_off + job->written;
        size_t n = job->part->data_len - job->written < UPLOAD_CHUNK ? job->part->data_len - job->written : UPLOAD_CHUNK;
        gw_body_pages_populate(&job->pages, data, data + n);
        if ((ret = wire_write_all(job->fd, data, n)) == 0) {
            gw_body_pages_release(&job->pages, req->entity.base, data + n);
            job->written += n;
            if (job->written == job->part->data_len)
                ret = finish_file(job);
        }
    }
    if (ret != 0) {
        const char *path = job->metas[job->num_done].path.abs;
        abandon_file(job);
        job->answered = 1;
        gw_files_respond_errno(req, ret, "uploading to ", path);
        return;
    }
    /* after the next poll for I/O: other streams are served between chunks */
    h2o_timeout_link(job->execd->host->loop, &job->execd->host->yield_timeout, &job->step);
}

static void on_parse_progress(void *ctx, size_t upto)
{
    upload_job_t *job = ctx;
    gw_body_pages_release(&job->pages, job->req->entity.base, job->req->entity.base + upto);
}

/* Pairs and checks the metadata parts (before anything is written); 0, or -1 after answering. */
static int check_metadata(upload_job_t *job)
{
    h2o_req_t *req = job->req;
    upload_meta_t *metas;
    size_t i, num_meta = 0, num_files = 0;
    int ret;

    for (i = 0; i != job->num_parts; ++i) {
        num_meta += strcmp(job->parts[i].name, "metadata") == 0;
        num_files += strcmp(job->parts[i].name, "file") == 0;
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
        return -1;
    }
    /* every metadata part is checked before anything is written */
    metas = job->metas = wire_malloc(sizeof(*metas) * num_meta);
    num_meta = 0;
    for (i = 0; i != job->num_parts; ++i) {
        json_error_t error;
        json_t *meta, *jpath, *jmode;
        if (strcmp(job->parts[i].name, "metadata") != 0)
            continue;
        if ((meta = json_loadb(req->entity.base + job->parts[i].data_off, job->parts[i].data_len, JSON_ALLOW_NUL, &error)) ==
                NULL ||
            !json_is_object(meta)) {
            json_decref(meta);
            gw_send_error(req, GW_HTTP_INVALID_FILE_METADATA,
                          "invalid metadata format: a JSON object {\"path\", \"mode\"?} is expected");
            return -1;
        }
        jpath = json_object_get(meta, "path");
        jmode = json_object_get(meta, "mode");
        metas[num_meta].mode = 0644;
        if (!json_is_string(jpath) || json_string_length(jpath) == 0) {
            json_decref(meta);
            gw_send_error(req, GW_HTTP_INVALID_FILE_METADATA, "metadata path is empty");
            return -1;
        }
        /* execd's Go zero value: a missing or 0 mode means the default */
        if (jmode != NULL && !json_is_null(jmode) && !(json_is_integer(jmode) && json_integer_value(jmode) == 0) &&
            gw_files_parse_mode(jmode, &metas[num_meta].mode) != 0) {
            json_decref(meta);
            gw_send_error(req, GW_HTTP_INVALID_FILE_METADATA, "metadata mode must be octal digits as an integer (e.g. 644)");
            return -1;
        }
        ret = gw_files_parse_owner(req, meta, &metas[num_meta].uid, &metas[num_meta].gid) != 0 ||
              gw_files_resolve(&job->ws, req, "metadata path", json_string_value(jpath), json_string_length(jpath),
                               &metas[num_meta].path) != 0;
        json_decref(meta);
        if (ret != 0)
            return -1;
        if (metas[num_meta].path.rel[0] == '\0') {
            gw_send_error(req, GW_HTTP_IS_A_DIRECTORY, "metadata path is the workspace root");
            return -1;
        }
        ++num_meta;
    }
    return 0;
}

static void on_parse_step(h2o_timeout_entry_t *entry)
{
    upload_job_t *job = H2O_STRUCT_FROM_MEMBER(upload_job_t, step, entry);
    int ret = gw_multipart_parser_step(&job->parser, UPLOAD_PARSE_BUDGET);

    if (ret == 1) {
        /* after the next poll for I/O: other streams are served between searches */
        h2o_timeout_link(job->execd->host->loop, &job->execd->host->yield_timeout, &job->step);
        return;
    }
    if (ret != 0) {
        job->answered = 1;
        gw_send_error(job->req, GW_HTTP_INVALID_FILE, "%s", gw_strerror(ret));
        return;
    }
    job->num_parts = job->parser.num_parts;
    if (check_metadata(job) != 0) {
        job->answered = 1;
        return;
    }
    /* the i-th metadata part describes the i-th file part (execd pairs them the same way) */
    job->step.cb = on_step;
    on_step(&job->step);
}

GW_EXECD_HANDLER(files_upload)
{
    gw_execd_t *execd = gw_execd_from(door);
    char boundary[GW_MULTIPART_BOUNDARY_MAX + 1];
    ssize_t ct = h2o_find_header(&req->headers, H2O_TOKEN_CONTENT_TYPE, -1);
    upload_job_t *job;
    int ret;
    (void)params;

    if (ct == -1 || gw_multipart_boundary(req->headers.entries[ct].value.base, req->headers.entries[ct].value.len, boundary) != 0) {
        gw_send_error(req, GW_HTTP_INVALID_FILE,
                      "the body must be multipart/form-data (a metadata part, then a file part, per file)");
        return;
    }
    job = h2o_mem_alloc_shared(&req->pool, sizeof(*job), on_job_dispose);
    memset(job, 0, sizeof(*job));
    job->execd = execd;
    job->req = req;
    job->ws = (gw_workspace_t){wire_strdup(execd->files_ws->root), fcntl(execd->files_ws->root_fd, F_DUPFD_CLOEXEC, 0),
                               execd->files_ws->allow_hardlinks};
    job->parts = wire_malloc(sizeof(*job->parts) * 2 * MAX_ITEMS);
    job->dir_fd = job->fd = job->pages.fd = -1;
    job->step.cb = on_parse_step;
    gw_body_pages_init(&job->pages, req->entity.base, req->entity.len);
    if ((ret = gw_multipart_parser_init(&job->parser, req->entity.base != NULL ? req->entity.base : "", req->entity.len, boundary,
                                        job->parts, 2 * MAX_ITEMS, on_parse_progress, job)) != 0) {
        job->answered = 1;
        gw_send_error(req, GW_HTTP_INVALID_FILE, "%s", gw_strerror(ret));
        return;
    }
    on_parse_step(&job->step);
}
