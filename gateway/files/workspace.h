/* gateway/workspace.h: the workspace root: every client path is resolved and confined beneath it. */
#ifndef GW_WORKSPACE_H
#define GW_WORKSPACE_H

#include "core/errors.h"

#include <stddef.h>
#include <sys/types.h>

/** Longest client path and longest resolved path (bytes, without the NUL). */
#define GW_WORKSPACE_PATH_MAX 4095

/**
 * A client path after lexical resolution. `rel` is relative to the root: "" for the root itself,
 * else components separated by single '/', none of them "", "." or "..". `abs` is root + "/" + rel
 * (the root alone for ""). `name` points at the last component inside `rel` ("" for the root).
 */
typedef struct st_gw_workspace_path_t {
    char rel[GW_WORKSPACE_PATH_MAX + 1];
    char abs[2 * GW_WORKSPACE_PATH_MAX + 2];
    const char *name;
} gw_workspace_path_t;

/**
 * Pure: resolves `path` (`len` bytes; may contain NUL bytes, which are refused) against `root` (an
 * absolute, canonical path without a trailing '/', or "/"). Relative paths are relative to the root;
 * absolute paths must lie beneath it once "." and ".." are applied ("/.." stays "/"). Returns 0, or
 * GW_EWORKSPACE_{EMPTY,NUL,TOOLONG,OUTSIDE}. Symbolic links are not looked at here: the *at
 * functions below confine them.
 */
int gw_workspace_resolve_lexical(const char *root, const char *path, size_t len, gw_workspace_path_t *out);

/** The root, held open so that every operation is relative to it (openat2 RESOLVE_BENEATH). */
typedef struct st_gw_workspace_t {
    char *root; /* canonical (realpath) */
    int root_fd;
    int allow_hardlinks; /* serve regular files that have more than one name (see gw_workspace_open) */
} gw_workspace_t;

/** Opens `dir` (must be an existing directory) as the root. 0, or -errno. */
int gw_workspace_init(gw_workspace_t *ws, const char *dir);
void gw_workspace_dispose(gw_workspace_t *ws);

/** gw_workspace_resolve_lexical against ws->root. */
int gw_workspace_resolve(const gw_workspace_t *ws, const char *path, size_t len, gw_workspace_path_t *out);

/*
 * The functions below return 0 or -errno. A symbolic link that would lead outside the root (an
 * absolute link, or one with enough "..") fails with -EXDEV and nothing is touched; with kernels
 * lacking openat2, every symbolic link in a path fails with -ELOOP instead. Only the final
 * component of the *_at operations is never followed.
 */

/**
 * openat2(root, rel, flags | O_CLOEXEC, mode) with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS. Unless
 * ws->allow_hardlinks, a regular file with more than one hard link is refused with
 * GW_EWORKSPACE_HARDLINK (nothing stays open): any code running in a context can link a file from
 * outside the root into it, and the path says nothing of where the inode lives. Unless `flags` hold
 * O_PATH, the open never waits (O_NONBLOCK, left set on the descriptor: a FIFO or a file leased by
 * a context's code would hold the loop), and what is neither a regular file nor a directory is
 * refused with GW_EWORKSPACE_SPECIAL.
 */
int gw_workspace_open(const gw_workspace_t *ws, const char *rel, int flags, mode_t mode, int *fd);

/**
 * Opens the directory holding the last component of `p` (O_PATH), for *at() calls on p->name.
 * -EINVAL for the root itself (it has no parent inside the workspace).
 */
int gw_workspace_open_parent(const gw_workspace_t *ws, const gw_workspace_path_t *p, int *dir_fd);

/** mkdir -p: creates every missing directory of `rel` with `mode` (before umask). */
int gw_workspace_mkdirs(const gw_workspace_t *ws, const char *rel, mode_t mode);

/** Files at least this big are let go off the loop when removed or replaced (gw_workspace_hold_big_file). */
#define GW_WORKSPACE_BIG_FILE_BYTES ((off_t)16 << 20)

/**
 * When `name` in `dir_fd` is a regular file of GW_WORKSPACE_BIG_FILE_BYTES or more with one link, a reference to it
 * (O_PATH) to be passed to ksys_close_detached once its name is removed or replaced; else -1. Whoever removes the last
 * name of a big file pays for freeing its pages and blocks (~200 ms per GiB here) in that call, in the loop: with the
 * reference held, the unlink or rename is quick and the freeing happens in the detached close.
 */
int gw_workspace_hold_big_file(int dir_fd, const char *name);

/** unlinkat of the file `name` in `dir_fd`, a big one's freeing off the loop (see above). 0 or -errno. */
int gw_workspace_unlink(int dir_fd, const char *name);

/**
 * rm -rf of `name` inside `dir_fd`: symbolic links are removed, never followed; at most
 * `max_depth` levels (-ELOOP beyond, after removing what it could).
 */
int gw_workspace_remove_tree(int dir_fd, const char *name, unsigned max_depth);

#endif
