/* The files feature: the workspace root, the editor's history, and large request bodies kept off the heap. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <grp.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "files/files.h"
#include "files/upload.h"
#include "ksys/log.h"

static void on_trim(h2o_timeout_entry_t *entry)
{
    gw_files_t *files = H2O_STRUCT_FROM_MEMBER(gw_files_t, trim_entry, entry);

    h2o_timeout_link(files->host->loop, gw_body_buffers_trim() ? &files->trim_active_timeout : &files->trim_idle_timeout,
                     &files->trim_entry);
}

int gw_files_init(gw_files_t *files, gw_host_t *host)
{
    const gw_config_t *config = host->config;
    const char *root = config->workspace_root != NULL ? config->workspace_root : ".";
    int ret;

    memset(files, 0, sizeof(*files));
    files->host = host;
    files->ws.root_fd = -1;
    if ((ret = gw_workspace_init(&files->ws, root)) != 0) {
        ksys_log_error("--workspace-root %s: %s", root, strerror(-ret));
        return ret;
    }
    files->ws.allow_hardlinks = config->allow_hardlinks;
    files->history = gw_editor_history_create(config->max_undo_depth, config->max_undo_bytes);
    if ((ret = gw_body_buffers_init(getenv("TMPDIR"), config->body_mmap_threshold)) != 0)
        ksys_log_warn("cannot create a directory for large request bodies (%s); they stay in memory", strerror(-ret));
    h2o_timeout_init(host->loop, &files->trim_active_timeout, GW_BODY_TRIM_ACTIVE_MS);
    h2o_timeout_init(host->loop, &files->trim_idle_timeout, GW_BODY_TRIM_IDLE_MS);
    files->timers_ready = 1;
    files->trim_entry.cb = on_trim;
    h2o_timeout_link(host->loop, &files->trim_idle_timeout, &files->trim_entry);
    return 0;
}

void gw_files_dispose(gw_files_t *files)
{
    if (files->host == NULL)
        return; /* never initialised */
    if (files->timers_ready) {
        if (h2o_timeout_is_linked(&files->trim_entry))
            h2o_timeout_unlink(&files->trim_entry);
        h2o_timeout_dispose(files->host->loop, &files->trim_active_timeout);
        h2o_timeout_dispose(files->host->loop, &files->trim_idle_timeout);
        gw_body_buffers_dispose();
        files->timers_ready = 0;
    }
    gw_editor_history_destroy(files->history);
    files->history = NULL;
    gw_workspace_dispose(&files->ws);
}
