/* files/fsops.h: file system operations beneath the workspace root: whole reads, atomic writes, FileInfo. */
#ifndef GW_FSOPS_H
#define GW_FSOPS_H

#include <stddef.h>
#include <sys/types.h>
#include <jansson.h>
#include "files/workspace.h"

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
 * "mode"} with RFC 3339 UTC times and mode as octal digits in a decimal integer (0644 -> 644); bytes of `abs` that are no
 * UTF-8 are U+FFFD in "path" (gw_json_text). NULL with *err = -errno on failure.
 */
json_t *gw_files_info_json(int dir_fd, const char *name, const char *abs, int *err);

/**
 * Creates a fresh temporary file (mode `mode`) in dir_fd to become `name`. Where the file system
 * allows it (O_TMPFILE) the file has no name until gw_files_commit_temp, so that a kgate killed
 * mid-write leaves nothing in the workspace; tmp_name is then "". Elsewhere it is named
 * ".<name>.kgate-<12 hex digits>" (tmp_name). 0 or -errno.
 */
int gw_files_create_temp(int dir_fd, const char *name, char *tmp_name, size_t size, mode_t mode, int *fd);
/**
 * Gives the temporary file `fd` of gw_files_create_temp the name `name` in dir_fd, replacing what
 * is there, atomically. `fd` stays open (the caller closes it). On failure no temporary name is
 * left behind. 0 or -errno; tmp_name is "" afterwards either way.
 */
int gw_files_commit_temp(int dir_fd, int fd, char *tmp_name, size_t size, const char *name);

#endif
