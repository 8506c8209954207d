/* The paths an isolated session names, resolved as bwrap will and checked against kgate's private places. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kmgr/sandbox.h"
#include "procs/walls.h"

char *gw_walls_resolve(const char *path, const char *what, int writable, const char *root, const char *runtime_dir, char *err,
                       size_t errlen)
{
    static const char *const private_dirs[] = {GW_WALLS_PRIVATE_DIRS};
    char *real, *rt = realpath(runtime_dir, NULL), *rroot = realpath(root, NULL);
    const char *why = NULL;

    /* bwrap follows every link of a source on the host: /proc/self/root/<dir>, /proc/<pid>/cwd and a link planted in the
     * workspace all lead where realpath says */
    if ((real = realpath(path, NULL)) == NULL) {
        snprintf(err, errlen, "%s \"%.200s\": %s", what, path, strerror(errno));
        goto Exit;
    }
    if (rt == NULL || kmgr_path_within(real, rt) || kmgr_path_within(rt, real))
        why = "would expose kgate's runtime directory";
    for (size_t i = 0; why == NULL && i != sizeof(private_dirs) / sizeof(private_dirs[0]); ++i)
        if (kmgr_path_within(real, private_dirs[i]))
            why = "lies in the host's /proc, /sys or /dev";
    if (why == NULL && writable && (rroot == NULL || !kmgr_path_within(real, rroot)))
        why = "is outside the workspace root";
    if (why == NULL && writable && kmgr_path_holds_system(real))
        why = "holds system directories, which stay read-only";
    if (why != NULL) {
        snprintf(err, errlen, "%s \"%.200s\" (resolved: %.200s) %s", what, path, real, why);
        free(real);
        real = NULL;
    }
Exit:
    free(rt);
    free(rroot);
    return real;
}

/* Replaces `*slot` by its resolved path; 0 or -1. */
static int resolve_in_place(char **slot, const char *what, int writable, const char *root, const char *runtime_dir, char *err,
                            size_t errlen)
{
    char *real = gw_walls_resolve(*slot, what, writable, root, runtime_dir, err, errlen);

    if (real == NULL)
        return -1;
    free(*slot);
    *slot = real;
    return 0;
}

int gw_walls_resolve_spec(gw_iso_spec_t *spec, const char *root, const char *runtime_dir, char *err, size_t errlen)
{
    if (resolve_in_place(&spec->workspace, "workspace.path", spec->mode != GW_ISO_RO, root, runtime_dir, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i != spec->num_extra_writable; ++i)
        if (resolve_in_place(&spec->extra_writable[i], "extra_writable[]", 1, root, runtime_dir, err, errlen) != 0)
            return -1;
    for (size_t i = 0; i != spec->num_binds; ++i)
        if (resolve_in_place(&spec->binds[i].source, "binds[].source", !spec->binds[i].readonly, root, runtime_dir, err, errlen) !=
            0)
            return -1;
    return 0;
}
