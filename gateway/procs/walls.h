/* procs/walls.h: what no sandbox may be handed, checked on paths as bwrap will resolve them (symbolic links, /proc/<pid>/root
 * and /proc/<pid>/cwd, "..") rather than as a request spells them. */
#ifndef GW_WALLS_H
#define GW_WALLS_H

#include <stddef.h>
#include "procs/isolation.h"

/** Where a bind source may not lead: the host's /proc (every process's root, cwd, descriptors and environment), /sys, /dev. */
#define GW_WALLS_PRIVATE_DIRS "/proc", "/sys", "/dev"

/**
 * Resolves `path` (absolute) as bwrap will, and checks the result: it must exist, neither be nor hold `runtime_dir`
 * (kgate's keys, kernels' sockets and connection files, other sessions' layers; resolved itself), nor lie in one of
 * GW_WALLS_PRIVATE_DIRS; when `writable`, lie beneath `root` (the files root, resolved) and hold no system directory
 * (kmgr_path_holds_system: `/` and its parents of /usr, /etc, /opt ... stay read-only). Returns the resolved path
 * (the caller frees it), or NULL with a message for the client in `err` naming `what`.
 */
char *gw_walls_resolve(const char *path, const char *what, int writable, const char *root, const char *runtime_dir, char *err,
                       size_t errlen);

/**
 * Resolves every host path of `spec` with gw_walls_resolve (the workspace, writable unless its mode is ro; extra_writable;
 * each bind's source, writable unless readonly) and puts the resolved path in its place, so that bwrap binds what was
 * checked. The workspace must exist. Returns 0, or -1 with a message for the client in `err` (`spec` then holds a mix).
 */
int gw_walls_resolve_spec(gw_iso_spec_t *spec, const char *root, const char *runtime_dir, char *err, size_t errlen);

#endif
