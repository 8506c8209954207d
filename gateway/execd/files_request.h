/* execd/files_request.h: what the files routes share: request parsing and answers for failed paths and calls. */
#ifndef GW_FILES_REQUEST_H
#define GW_FILES_REQUEST_H

#include <sys/types.h>
#include <h2o.h>
#include <jansson.h>
#include "core/http.h"
#include "execd/execd.h"
#include "files/workspace.h"

/* Values of one repeated query parameter accepted at most (?path=a&path=b...). */
#define MAX_QUERY_VALUES 256
/* Items of one JSON request (permissions, mv, replace, mkdir) and parts of one upload. */
#define MAX_ITEMS 1024
/* Bytes read and sent per step of a download, and written per step of an upload (a 4 MiB write took
 * up to 26 ms of the loop on a loaded 2-core VM: bench `upload-stall`). */
#define DOWNLOAD_CHUNK (256u << 10)
#define UPLOAD_CHUNK (1u << 20)
/* Bytes of an upload's body the multipart parser searches per loop iteration (a ms or two of memmem, faults included). */
#define UPLOAD_PARSE_BUDGET ((size_t)4 << 20)

typedef gw_query_value_t query_value_t;

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
int gw_files_resolve(const gw_workspace_t *ws, h2o_req_t *req, const char *what, const char *path, size_t len,
                     gw_workspace_path_t *p);

/**
 * Answers the error for a failed file system call (-errno `err`): EXDEV 403 PATH_OUTSIDE_WORKSPACE,
 * ENOENT 404 FILE_NOT_FOUND, EACCES/EPERM 403 PERMISSION_DENIED, ENOTDIR 400 NOT_A_DIRECTORY, EISDIR
 * 400 IS_A_DIRECTORY, EEXIST/ENOTEMPTY 409 FILE_EXISTS, EFBIG 413 FILE_TOO_LARGE, ELOOP/ENAMETOOLONG/
 * EINVAL 400 INVALID_PARAMETER, others 500 RUNTIME_ERROR. The message is "<prefix><path>: <strerror>".
 */
void gw_files_respond_errno(h2o_req_t *req, int err, const char *prefix, const char *path);

/** Every value of `name` in the query string (pool-allocated); -1 after answering 400 on a bad escape or too many values. */
long gw_files_query_values(h2o_req_t *req, const char *name, query_value_t *values, size_t max);
/** The single value of a query parameter, or NULL (after answering 400 MISSING_QUERY when `required`, setting *failed). */
query_value_t *gw_files_query_one(h2o_req_t *req, const char *name, int required, query_value_t *value, int *failed);
/** Parses a Permission's mode: octal digits written as a decimal integer (755), at most 7777. 0 or -1. */
int gw_files_parse_mode(json_t *jmode, mode_t *mode);
/** A user or group by number or name ((id_t)-1, "unchanged" to chown, is never a valid number). 0 or -1. */
int gw_files_lookup_id(const char *name, int is_group, id_t *out);
/** owner / group names (or numeric ids) of a Permission object; -1 after answering 400. */
int gw_files_parse_owner(h2o_req_t *req, json_t *item, uid_t *uid, gid_t *gid);
/** chmod / chown an O_PATH descriptor (through its /proc path). 0 or -errno. */
int gw_files_apply_permission(int fd, int set_mode, mode_t mode, uid_t uid, gid_t gid);
/** The items of one JSON request body, in the request's pool; the strings and objects are borrowed from the body. */
typedef struct st_gw_files_items_t {
    long n;             /* how many (at most MAX_ITEMS) */
    const char **paths; /* item i's path, lens[i] bytes (it may hold a NUL byte) */
    size_t *lens;
    json_t **items; /* item i's object */
} gw_files_items_t;

/**
 * execd's bodies are maps {path: item}; kgate also takes one item with its "path" (or `path_key`)
 * inside. Fills `out` (its arrays allocated in the request's pool); 0, or -1 after answering 400.
 */
int gw_files_collect_items(h2o_req_t *req, json_t *body, const char *path_key, gw_files_items_t *out);

/** Opens the directory holding `p` (or the root itself for "") and the name to use inside it. 0 or -errno. */
int gw_files_open_for_stat(const gw_workspace_t *ws, const gw_workspace_path_t *p, int *dir_fd, const char **name);

#endif
