/* files/files.h: the files feature's state: the workspace root, the editor's history, large-body buffering. */
#ifndef GW_FILES_H
#define GW_FILES_H

#include <h2o.h>
#include "core/host.h"
#include "files/editor.h"
#include "files/workspace.h"

/*
 * How often received request bodies have their resident pages dropped (upload.h): while one is
 * being received, and when none is (then only a stat says whether one began: idle wake-ups stay few).
 */
#define GW_BODY_TRIM_ACTIVE_MS 5
#define GW_BODY_TRIM_IDLE_MS 50

/* Directory levels that recursive operations descend at most (rm -rf, search, list). */
#define GW_FILES_MAX_DEPTH 64

typedef struct st_gw_files_t {
    gw_host_t *host;
    gw_workspace_t ws;
    gw_editor_history_t *history; /* undo_edit */
    h2o_timeout_t trim_active_timeout, trim_idle_timeout;
    h2o_timeout_entry_t trim_entry;
    unsigned timers_ready : 1;
} gw_files_t;

/**
 * Opens the workspace root (config->workspace_root, or the current directory), creates the editor
 * history and sets large-body buffering up (upload.h). Returns 0, or -errno when the root cannot
 * be opened (after printing why to stderr). gw_files_dispose is safe after a failure.
 */
int gw_files_init(gw_files_t *files, gw_host_t *host);
/** Releases what gw_files_init made. */
void gw_files_dispose(gw_files_t *files);

#endif
