/* sys/src/rmtree.c: directory trees removed without the event loop: a detached thread per tree.
 * Why a thread rather than bounded steps on the loop: the only unbounded part is the file system's own work (one readdir of a
 * directory a sandbox filled with millions of entries, an unlink on a slow disk), and no step of ours can bound a single such
 * call; the thread shares nothing with the loop but a counter, so it needs no lock and no hand-back. */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#include "ksys/detach.h"
#include "ksys/rmtree.h"
#include "ksys/log.h"

static size_t in_flight; /* __atomic_* only */

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (type == FTW_DP || type == FTW_D)
        chmod(path, 0700), rmdir(path); /* overlayfs leaves work/work mode 000 */
    else
        unlink(path);
    return 0;
}

void ksys_rmtree(const char *path)
{
    /* never following a link the sandbox may have planted in its upper layer */
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void remove_tree(void *arg)
{
    char *path = arg;

    ksys_rmtree(path);
    free(path);
    __atomic_fetch_sub(&in_flight, 1, __ATOMIC_RELEASE);
}

void ksys_rmtree_detached(char *path)
{
    int ret;

    __atomic_fetch_add(&in_flight, 1, __ATOMIC_RELAXED);
    if ((ret = ksys_detach(remove_tree, path)) != 0) {
        if (ret != EAGAIN) /* EAGAIN: the bound on such threads, not worth a line each */
            ksys_log_warn("cannot start a thread to remove %s (error %d): removing it now", path, ret);
        remove_tree(path);
    }
}

size_t ksys_rmtree_in_flight(void)
{
    return __atomic_load_n(&in_flight, __ATOMIC_ACQUIRE);
}
