/* core/paths.h: lexical normalisation of a path (pure: no file system access), for the workspace and isolated sessions. */
#ifndef GW_PATHS_H
#define GW_PATHS_H

#include <stddef.h>

/**
 * Normalises the `len` bytes of `path` lexically, as a shell's `cd -L` would, without looking at the
 * file system (symbolic links are the caller's to resolve or refuse): repeated '/' and "." components
 * are dropped, ".." removes the component before it and never climbs above "/" ("/.." is "/"), and
 * the result has no trailing '/'. A relative `path` (the empty one too) is taken from `base`, an
 * absolute path normalised the same way first; with `base` NULL a relative path is refused. NUL bytes
 * in `path` are the caller's to refuse.
 *
 * Writes the absolute result, NUL-terminated, into `out` (`size` bytes; "/" for the root) and returns
 * its length; returns 0 when `path` is relative and `base` NULL or not absolute, or when the result
 * does not fit in `size` bytes with its NUL at some point of its making (a component that a later ".."
 * removes counts too: `out` then holds nothing usable).
 */
size_t gw_path_normalize(const char *base, const char *path, size_t len, char *out, size_t size);

#endif
