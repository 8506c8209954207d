/* gateway/files_api.h: state and helpers shared by the files, directories and editor routes. */
#ifndef GW_FILES_API_H
#define GW_FILES_API_H

#include <h2o.h>
#include <jansson.h>
#include "gateway/editor.h"
#include "gateway/workspace.h"

typedef struct st_gw_server_t gw_server_t;

/*
 * How often received request bodies have their resident pages dropped (upload.h): while one is
 * being received, and when none is (then only a stat says whether one began: idle wake-ups stay few).
 */
#define GW_BODY_TRIM_ACTIVE_MS 5
#define GW_BODY_TRIM_IDLE_MS 50

/* Directory levels that recursive operations descend at most (rm -rf, search, list). */
#define GW_FILES_MAX_DEPTH 64

typedef struct st_gw_files_t {
    gw_workspace_t ws;
    gw_editor_history_t *history; /* undo_edit */
    h2o_loop_t *loop;
    h2o_timeout_t trim_active_timeout, trim_idle_timeout;
    h2o_timeout_entry_t trim_entry;
} gw_files_t;

/**
 * Opens the workspace root (config->workspace_root, or the current directory), creates the editor
 * history and sets h2o's large-body buffering up (upload.h). Sets server->files. Returns 0, or -1
 * after printing why to stderr.
 */
int gw_files_init(gw_server_t *server);
/** Releases what gw_files_init made (server->files may be NULL). */
void gw_files_dispose(gw_server_t *server);

/**
 * gw_parse_body, but a \u0000 inside a string is kept (json_string_length tells), so that a path
 * holding a NUL byte reaches gw_files_resolve and is refused with 403 like any other escape, and
 * str_replace/replace work on any bytes. NULL after answering 400.
 */
json_t *gw_files_parse_body(h2o_req_t *req);

/**
 * Resolves a client path beneath the workspace root, or answers: 403 PATH_OUTSIDE_WORKSPACE (outside,
 * NUL byte), 400 INVALID_PARAMETER (empty, too long). Returns 0 or -1 (answered). `what` names the
 * field in messages.
 */
int gw_files_resolve(gw_server_t *server, h2o_req_t *req, const char *what, const char *path, size_t len, gw_workspace_path_t *p);

/**
 * Answers the error for a failed file system call (-errno `err`): EXDEV 403 PATH_OUTSIDE_WORKSPACE,
 * ENOENT 404 FILE_NOT_FOUND, EACCES/EPERM 403 PERMISSION_DENIED, ENOTDIR 400 NOT_A_DIRECTORY, EISDIR
 * 400 IS_A_DIRECTORY, EEXIST/ENOTEMPTY 409 FILE_EXISTS, EFBIG 413 FILE_TOO_LARGE, ELOOP/ENAMETOOLONG/
 * EINVAL 400 INVALID_PARAMETER, others 500 RUNTIME_ERROR. The message is "<prefix><path>: <strerror>".
 */
void gw_files_respond_errno(h2o_req_t *req, int err, const char *prefix, const char *path);

/**
 * Reads the regular file `rel` whole: 0 with *data (wire_malloc, NUL-terminated, caller frees) and
 * *len; -EISDIR, -EINVAL (not a regular file), -EFBIG (larger than `max`), or another -errno.
 */
int gw_files_read_all(const gw_workspace_t *ws, const char *rel, size_t max, char **data, size_t *len);

/**
 * Replaces the file at `p` with `data`: written to a temporary file beside it, then renamed over it,
 * keeping an existing file's mode and owner (`mode` for a new one). When `p` is a symbolic link (to
 * somewhere beneath the root) its target is rewritten in place instead. 0 or -errno.
 */
int gw_files_write_atomic(const gw_workspace_t *ws, const gw_workspace_path_t *p, const char *data, size_t len, mode_t mode);

/**
 * The FileInfo of `name` inside `dir_fd` (not following a final symbolic link; name "" is dir_fd
 * itself), reported at path `abs`: {"path","type","size","modified_at","created_at","owner","group",
 * "mode"} with RFC 3339 UTC times and mode as octal digits in a decimal integer (0644 -> 644). NULL
 * with *err = -errno on failure.
 */
json_t *gw_files_info_json(int dir_fd, const char *name, const char *abs, int *err);

#endif
