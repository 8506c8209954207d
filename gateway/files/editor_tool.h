/* files/editor_tool.h: the text-editor tool's commands (view, create, str_replace, insert, undo_edit) on the workspace, for any
 * front door. */
#ifndef GW_EDITOR_TOOL_H
#define GW_EDITOR_TOOL_H

#include <stddef.h>
#include <jansson.h>
#include "files/files.h"

/** How a command ended; each front door maps the failures to its own protocol's errors. */
typedef enum {
    GW_EDITOR_OK,
    GW_EDITOR_BAD_REQUEST,       /* `command` or `path` missing or not a string */
    GW_EDITOR_INVALID_PARAMETER, /* an argument is missing, malformed or out of range; an unknown command */
    GW_EDITOR_PATH_OUTSIDE,      /* the path escapes the workspace root (or holds a NUL byte) */
    GW_EDITOR_FILE_NOT_FOUND,
    GW_EDITOR_PERMISSION_DENIED,
    GW_EDITOR_NO_MATCH,
    GW_EDITOR_MULTIPLE_MATCHES,
    GW_EDITOR_NO_EDIT_HISTORY,
    GW_EDITOR_FILE_TOO_LARGE,
    GW_EDITOR_NOT_A_DIRECTORY,
    GW_EDITOR_IS_A_DIRECTORY,
    GW_EDITOR_FILE_EXISTS,
    GW_EDITOR_FILE_BUSY, /* another process holds a lease on the file (the open never waits for its break) */
    GW_EDITOR_RUNTIME_ERROR
} gw_editor_status_t;

/** What a command produced: on GW_EDITOR_OK its output, else the error message (the tool's own phrasing). */
typedef struct st_gw_editor_result_t {
    gw_editor_status_t status;
    char *text; /* NUL-terminated valid UTF-8 (bytes that are not become U+FFFD); owned: gw_editor_result_dispose */
    size_t len;
    int truncated; /* view: the output was cut at max_characters, or a directory listing at max_list_entries */
} gw_editor_result_t;

/**
 * Runs one editor command on `files`' workspace. `args` (borrowed) is the tool's input: `command`,
 * `path` (relative paths resolve against the workspace root; strings may hold NUL bytes, which the
 * path refuses), and the command's own fields: `view_range`, `max_characters` (view), `file_text`
 * (create), `old_str`/`new_str` (str_replace), `insert_line`/`new_str` or `insert_text` (insert).
 * Bounds come from the host's configuration (max_edit_file_bytes, max_list_entries) and undo_edit
 * uses files->history. Always fills `res` (dispose it afterwards).
 */
void gw_editor_tool_run(gw_files_t *files, json_t *args, gw_editor_result_t *res);

/** Frees the result's text. */
void gw_editor_result_dispose(gw_editor_result_t *res);

#endif
