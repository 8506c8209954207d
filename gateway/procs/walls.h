/* procs/walls.h: what no sandbox may be handed, checked where a path leads (symbolic links, /proc/<pid>/root and
 * /proc/<pid>/cwd, "..") rather than how a request spells it, and handed to bwrap as the very object that was checked. */
#ifndef GW_WALLS_H
#define GW_WALLS_H

#include <stddef.h>
#include "procs/isolation.h"

/** Where a bind source may not lead: the host's /proc (every process's root, cwd, descriptors and environment), /sys, /dev. */
#define GW_WALLS_PRIVATE_DIRS "/proc", "/sys", "/dev"

/**
 * Opens `path` (absolute) as bwrap would find it (O_PATH, every link followed) and checks where the descriptor leads
 * (its /proc/self/fd link): it must neither be nor hold `runtime_dir` (kgate's keys, kernels' sockets and connection
 * files, other sessions' layers; resolved itself), nor lie in one of GW_WALLS_PRIVATE_DIRS; when `writable`, it must lie
 * beneath `root` (the files root, resolved) and hold no system directory (ksys_path_holds_system: `/` and the parents of
 * /usr, /etc, /opt ... stay read-only). Returns the descriptor (O_CLOEXEC; the caller closes it) with the resolved path
 * in `*real` (the caller frees it), or -1 with a message for the client in `err` naming `what`.
 */
int gw_walls_open(const char *path, const char *what, int writable, const char *root, const char *runtime_dir, char **real,
                  char *err, size_t errlen);

/** The descriptors of a spec's host paths (gw_walls_open_spec), in GW_ISO_SOURCE order. */
typedef struct st_gw_walls_fds_t {
    int *fds;
    size_t n;
} gw_walls_fds_t;

/**
 * gw_walls_open on every host path of `spec`, in GW_ISO_SOURCE order (the workspace, writable unless its mode is ro; each
 * extra_writable; each bind's source, writable unless readonly), into `out`; each path in `spec` is replaced by where it
 * leads. bwrap is then given the descriptors (gw_iso_paths_t.source_fd_base), so that what it binds is what was checked
 * however the paths change meanwhile. Returns 0, or -1 with a message for the client in `err` (`out` then holds nothing).
 */
int gw_walls_open_spec(gw_iso_spec_t *spec, const char *root, const char *runtime_dir, gw_walls_fds_t *out, char *err,
                       size_t errlen);
/** Closes and frees what gw_walls_open_spec opened; accepts a zeroed set. */
void gw_walls_fds_close(gw_walls_fds_t *fds);

#endif
