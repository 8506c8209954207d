/* The paths an isolated session names, opened as bwrap would find them and checked where they lead. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/sandbox.h"
#include "procs/walls.h"

int gw_walls_open(const char *path, const char *what, int writable, const char *root, const char *runtime_dir, char **real,
                  char *err, size_t errlen)
{
    static const char *const private_dirs[] = {GW_WALLS_PRIVATE_DIRS};
    char link[64], where[PATH_MAX], *rt = realpath(runtime_dir, NULL), *rroot = realpath(root, NULL);
    const char *why = NULL;
    ssize_t len;
    int fd;

    /* bwrap follows every link of a source on the host: /proc/self/root + a path, /proc/<pid>/cwd and a link planted in the
     * workspace all lead to one object, which the descriptor holds from now on whatever is renamed or swapped */
    *real = NULL;
    if ((fd = open(path, O_PATH | O_CLOEXEC)) == -1) {
        snprintf(err, errlen, "%s \"%.200s\": %s", what, path, strerror(errno));
        goto Exit;
    }
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    if ((len = readlink(link, where, sizeof(where) - 1)) <= 0 || where[0] != '/') {
        snprintf(err, errlen, "%s \"%.200s\" leads nowhere kgate can name", what, path);
        goto Fail;
    }
    where[len] = '\0';
    if (rt == NULL || ksys_path_within(where, rt) || ksys_path_within(rt, where))
        why = "would expose kgate's runtime directory";
    for (size_t i = 0; why == NULL && i != sizeof(private_dirs) / sizeof(private_dirs[0]); ++i)
        if (ksys_path_within(where, private_dirs[i]))
            why = "lies in the host's /proc, /sys or /dev";
    if (why == NULL && writable && (rroot == NULL || !ksys_path_within(where, rroot)))
        why = "is outside the workspace root";
    if (why == NULL && writable && ksys_path_holds_system(where))
        why = "holds system directories, which stay read-only";
    if (why != NULL) {
        snprintf(err, errlen, "%s \"%.200s\" (resolved: %.200s) %s", what, path, where, why);
        goto Fail;
    }
    *real = wire_strdup(where);
    goto Exit;
Fail:
    close(fd);
    fd = -1;
Exit:
    free(rt);
    free(rroot);
    return fd;
}

/* Opens `*slot` into the next descriptor of `out` and replaces it by where it leads; 0 or -1. */
static int open_in_place(char **slot, const char *what, int writable, const char *root, const char *runtime_dir,
                         gw_walls_fds_t *out, char *err, size_t errlen)
{
    char *real;
    int fd = gw_walls_open(*slot, what, writable, root, runtime_dir, &real, err, errlen);

    if (fd == -1)
        return -1;
    out->fds[out->n++] = fd;
    free(*slot);
    *slot = real;
    return 0;
}

int gw_walls_open_spec(gw_iso_spec_t *spec, const char *root, const char *runtime_dir, gw_walls_fds_t *out, char *err,
                       size_t errlen)
{
    out->n = 0;
    out->fds = wire_calloc(1 + spec->num_extra_writable + spec->num_binds, sizeof(int));
    if (open_in_place(&spec->workspace, "workspace.path", spec->mode != GW_ISO_RO, root, runtime_dir, out, err, errlen) != 0)
        goto Error;
    for (size_t i = 0; i != spec->num_extra_writable; ++i)
        if (open_in_place(&spec->extra_writable[i], "extra_writable[]", 1, root, runtime_dir, out, err, errlen) != 0)
            goto Error;
    for (size_t i = 0; i != spec->num_binds; ++i)
        if (open_in_place(&spec->binds[i].source, "binds[].source", !spec->binds[i].readonly, root, runtime_dir, out, err,
                          errlen) != 0)
            goto Error;
    return 0;
Error:
    gw_walls_fds_close(out);
    return -1;
}

void gw_walls_fds_close(gw_walls_fds_t *fds)
{
    for (size_t i = 0; i != fds->n; ++i)
        close(fds->fds[i]);
    free(fds->fds);
    fds->fds = NULL;
    fds->n = 0;
}
