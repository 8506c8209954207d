/* Sandboxes that outlived their SIGKILL's grace: kept as pids and a directory, checked from the tick until they are gone. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include "procs/proctree.h"
#include "procs/reaper.h"
#include "ksys/rmtree.h"
#include "ksys/log.h"

void gw_reaper_init(gw_reaper_t *r)
{
    memset(r, 0, sizeof(*r));
    r->interval_ms = GW_REAPER_INTERVAL_MS;
}

void gw_reaper_adopt(gw_reaper_t *r, pid_t child, pid_t other, char *dir)
{
    if (r->count == GW_REAPER_MAX) {
        ksys_log_warn("%d sandboxes that outlived SIGKILL are being reaped already: pid %d (pid 1 %d) stays a zombie once it "
                      "dies, its directory %s stays",
                      GW_REAPER_MAX, (int)child, (int)other, dir != NULL ? dir : "(none)");
        free(dir);
        return;
    }
    r->entries[r->count++] = (gw_reaper_entry_t){child, other, dir};
}

/* 1 once both processes are gone; SIGKILL again meanwhile: it costs nothing and a process may leave D state any time. */
static int check(gw_reaper_entry_t *e)
{
    pid_t ret;

    if (e->child > 0 && ((ret = waitpid(e->child, NULL, WNOHANG)) == e->child || (ret == -1 && errno == ECHILD)))
        e->child = 0;
    if (e->other > 0 && gw_proctree_gone(e->other))
        e->other = 0;
    if (e->child > 0)
        kill(e->child, SIGKILL);
    if (e->other > 0)
        kill(e->other, SIGKILL);
    return e->child == 0 && e->other == 0;
}

void gw_reaper_tick(gw_reaper_t *r, int64_t now)
{
    if (r->count == 0 || now < r->next_ms)
        return;
    r->next_ms = now + r->interval_ms;
    for (size_t i = 0; i < r->count;) {
        gw_reaper_entry_t *e = r->entries + i;
        if (!check(e)) {
            ++i;
            continue;
        }
        if (e->dir != NULL)
            ksys_rmtree_detached(e->dir); /* an upper layer may hold any number of files: never on the loop */
        r->entries[i] = r->entries[--r->count];
    }
}

size_t gw_reaper_count(const gw_reaper_t *r)
{
    return r->count;
}

void gw_reaper_dispose(gw_reaper_t *r)
{
    for (size_t i = 0; i != r->count; ++i) {
        gw_reaper_entry_t *e = r->entries + i;
        if (!check(e))
            ksys_log_warn("exiting with a sandbox that outlived SIGKILL (pid %d, pid 1 %d): its directory goes now", (int)e->child,
                          (int)e->other);
        if (e->dir != NULL) {
            ksys_rmtree(e->dir);
            free(e->dir);
        }
    }
    r->count = 0;
}
