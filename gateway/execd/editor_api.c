/* POST /editor: the text-editor tool (view, create, str_replace, insert, undo_edit) beneath the workspace root. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "execd/execd.h"
#include "execd/files_request.h"
#include "files/fsops.h"
#include "core/config.h"
#include "files/editor.h"
#include "files/files.h"
#include "core/http.h"

/* Levels of a directory view (the directory's entries, and theirs). */
#define VIEW_DIR_DEPTH 2

/* Answers an error from a file system call with the tool's own phrasing where it has one. */
static void respond_fs_error(h2o_req_t *req, int err, int writing, const char *path)
{
    switch (-err) {
    case ENOENT:
        gw_send_error(req, GW_HTTP_FILE_NOT_FOUND, "Error: File not found: %.300s", path);
        break;
    case EACCES:
    case EPERM:
        gw_send_error(req, GW_HTTP_PERMISSION_DENIED,
                      writing ? "Error: Permission denied. Cannot write to file: %.300s"
                              : "Error: Permission denied. Cannot read file: %.300s",
                      path);
        break;
    default:
        gw_files_respond_errno(req, err, "Error: ", path);
        break;
    }
}

static void respond_editor_error(h2o_req_t *req, int err, size_t matches)
{
    char msg[256];

    switch (err) {
    case GW_EEDITOR_NOMATCH:
        gw_send_error(req, GW_HTTP_NO_MATCH, "%s", gw_strerror(err));
        break;
    case GW_EEDITOR_MULTIPLEMATCHES:
        gw_editor_multiple_matches_message(matches, msg, sizeof(msg));
        gw_send_error(req, GW_HTTP_MULTIPLE_MATCHES, "%s", msg);
        break;
    case GW_EEDITOR_NOHISTORY:
        gw_send_error(req, GW_HTTP_NO_EDIT_HISTORY, "%s", gw_strerror(err));
        break;
    case GW_EEDITOR_TOOLARGE:
        gw_send_error(req, GW_HTTP_FILE_TOO_LARGE, "%s", gw_strerror(err));
        break;
    default:
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "%s", gw_strerror(err));
        break;
    }
}

static void send_output(h2o_req_t *req, const char *text, size_t len, int truncated)
{
    char *clean;
    size_t clean_len;
    json_t *out;

    /* JSON strings are UTF-8: bytes that are not become U+FFFD in what is shown (files are never rewritten here) */
    wire_utf8_sanitize(text, len, 1, &clean, &clean_len);
    out = json_object();
    json_object_set_new(out, "output", json_stringn(clean, clean_len));
    if (truncated)
        json_object_set_new(out, "truncated", json_true());
    free(clean);
    gw_send_json(req, 200, out);
}

/* A string field (may hold NUL bytes); NULL when absent; *bad when present but not a string. */
static const char *string_field(json_t *body, const char *name, size_t *len, int *bad)
{
    json_t *v = json_object_get(body, name);

    *bad = v != NULL && !json_is_null(v) && !json_is_string(v);
    if (!json_is_string(v))
        return NULL;
    *len = json_string_length(v);
    return json_string_value(v);
}

/* ---- view ------------------------------------------------------------------------------------- */

typedef struct st_listing_t {
    char *buf;
    size_t len, cap, entries, max_entries;
    int truncated;
} listing_t;

static void listing_append(listing_t *l, const char *s)
{
    size_t n = strlen(s);

    if (l->len + n + 2 > l->cap) {
        l->cap = (l->len + n + 2) * 2;
        l->buf = wire_realloc(l->buf, l->cap);
    }
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    l->buf[l->len++] = '\n';
    l->buf[l->len] = '\0';
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists `fd` (shown as `shown`) down to VIEW_DIR_DEPTH levels, hidden entries left out, directories with a trailing '/'. */
static void list_dir(listing_t *l, int fd, const char *shown, unsigned level)
{
    DIR *dir;
    struct dirent *ent;
    char **names = NULL;
    size_t n = 0, cap = 0, i;
    int dfd = dup(fd);

    if (dfd == -1 || (dir = fdopendir(dfd)) == NULL) {
        if (dfd != -1)
            close(dfd);
        return;
    }
    while ((ent = readdir(dir)) != NULL) {
        if (ent->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap != 0 ? cap * 2 : 32;
            names = wire_realloc(names, sizeof(*names) * cap);
        }
        names[n++] = wire_strdup(ent->d_name);
    }
    closedir(dir);
    if (n != 0)
        qsort(names, n, sizeof(*names), cmp_str);
    for (i = 0; i != n; ++i) {
        struct stat st;
        char line[2 * GW_WORKSPACE_PATH_MAX + 2];
        int is_dir = fstatat(fd, names[i], &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
        if (l->entries == l->max_entries) {
            l->truncated = 1;
            break;
        }
        ++l->entries;
        snprintf(line, sizeof(line), "%s%s%s%s", shown, shown[strlen(shown) - 1] == '/' ? "" : "/", names[i], is_dir ? "/" : "");
        listing_append(l, line);
        if (is_dir && level + 1 < VIEW_DIR_DEPTH) {
            int sub = openat(fd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub != -1) {
                line[strlen(line) - 1] = '\0';
                list_dir(l, sub, line, level + 1);
                close(sub);
            }
        }
    }
    for (i = 0; i != n; ++i)
        free(names[i]);
    free(names);
}

static void do_view(gw_execd_t *execd, h2o_req_t *req, json_t *body, const gw_workspace_path_t *p, const char *shown)
{
    json_t *range = json_object_get(body, "view_range"), *jmax = json_object_get(body, "max_characters");
    long start = 1, end = -1;
    size_t max_chars = 0, len, out_len;
    char *data, *out;
    struct stat st;
    int fd, ret, truncated;

    if (jmax != NULL && !json_is_null(jmax)) {
        if (!json_is_integer(jmax) || json_integer_value(jmax) < 1) {
            gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "Error: max_characters must be a positive integer.");
            return;
        }
        max_chars = (size_t)json_integer_value(jmax);
    }
    if ((ret = gw_workspace_open(&execd->files->ws, p->rel, O_RDONLY, 0, &fd)) != 0) {
        respond_fs_error(req, ret, 0, shown);
        return;
    }
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        listing_t l = {NULL, 0, 0, 0, execd->host->config->max_list_entries, 0};
        if (range != NULL && !json_is_null(range)) {
            close(fd);
            gw_send_error(req, GW_HTTP_INVALID_PARAMETER,
                          "Error: The view_range parameter is not allowed when path points to a directory.");
            return;
        }
        listing_append(&l, "");
        l.len = 0;
        list_dir(&l, fd, p->abs, 0);
        close(fd);
        send_output(req, l.buf, l.len != 0 ? l.len - 1 : 0, l.truncated);
        free(l.buf);
        return;
    }
    close(fd);
    if (range != NULL && !json_is_null(range)) {
        if (!json_is_array(range) || json_array_size(range) != 2 || !json_is_integer(json_array_get(range, 0)) ||
            !json_is_integer(json_array_get(range, 1))) {
            gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "Error: view_range must be an array of two integers [start, end].");
            return;
        }
        start = (long)json_integer_value(json_array_get(range, 0));
        end = (long)json_integer_value(json_array_get(range, 1));
    }
    if ((ret = gw_files_read_all(&execd->files->ws, p->rel, execd->host->config->max_edit_file_bytes, &data, &len)) != 0) {
        respond_fs_error(req, ret, 0, shown);
        return;
    }
    if ((ret = gw_editor_view(data, len, start, end, max_chars, &out, &out_len, &truncated)) != 0) {
        size_t n = gw_editor_count_lines(data, len);
        free(data);
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER,
                      "Error: Invalid view_range [%ld, %ld]: the file has %zu lines; start must be within 1..%zu and end "
                      "-1 or not below start.",
                      start, end, n, n != 0 ? n : 1);
        return;
    }
    free(data);
    send_output(req, out, out_len, truncated);
    free(out);
}

/* ---- edits ------------------------------------------------------------------------------------ */

/* Reads the current contents for an edit: 0, or -1 after answering. */
static int load_for_edit(gw_execd_t *execd, h2o_req_t *req, const gw_workspace_path_t *p, const char *shown, char **data,
                         size_t *len)
{
    int ret = gw_files_read_all(&execd->files->ws, p->rel, execd->host->config->max_edit_file_bytes, data, len);

    if (ret != 0) {
        respond_fs_error(req, ret, 0, shown);
        return -1;
    }
    return 0;
}

/* Writes the edited contents after recording the previous version for undo_edit; 0, or -1 after answering. */
static int commit_edit(gw_execd_t *execd, h2o_req_t *req, const gw_workspace_path_t *p, const char *shown, const char *old,
                       size_t old_len, int existed, const char *data, size_t len)
{
    int ret = gw_files_write_atomic(&execd->files->ws, p, data, len, 0644);

    if (ret != 0) {
        respond_fs_error(req, ret, 1, shown);
        return -1;
    }
    gw_editor_history_push(execd->files->history, p->rel, old, old_len, existed);
    return 0;
}

static void do_create(gw_execd_t *execd, h2o_req_t *req, json_t *body, const gw_workspace_path_t *p, const char *shown)
{
    size_t text_len = 0, old_len = 0, plen;
    int bad, ret, existed;
    const char *text = string_field(body, "file_text", &text_len, &bad);
    char *old = NULL, msg[2 * GW_WORKSPACE_PATH_MAX + 64], parent[GW_WORKSPACE_PATH_MAX + 1];

    if (text == NULL) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER, "Error: Parameter `file_text` is required for command: create.");
        return;
    }
    if (text_len > execd->host->config->max_edit_file_bytes) {
        gw_send_error(req, GW_HTTP_FILE_TOO_LARGE, "%s", gw_strerror(GW_EEDITOR_TOOLARGE));
        return;
    }
    /* an existing file is replaced; its contents go to the undo history first */
    ret = gw_files_read_all(&execd->files->ws, p->rel, execd->host->config->max_edit_file_bytes, &old, &old_len);
    if (ret != 0 && ret != -ENOENT) {
        respond_fs_error(req, ret, 1, shown);
        return;
    }
    existed = ret == 0;
    plen = (size_t)(p->name - p->rel);
    plen = plen > 0 ? plen - 1 : 0;
    memcpy(parent, p->rel, plen);
    parent[plen] = '\0';
    if (!existed && plen != 0 && (ret = gw_workspace_mkdirs(&execd->files->ws, parent, 0755)) != 0) {
        respond_fs_error(req, ret, 1, shown);
        return;
    }
    if (commit_edit(execd, req, p, shown, old, old_len, existed, text, text_len) == 0) {
        snprintf(msg, sizeof(msg), "File created successfully at: %s", p->abs);
        send_output(req, msg, strlen(msg), 0);
    }
    free(old);
}

static void do_str_replace(gw_execd_t *execd, h2o_req_t *req, json_t *body, const gw_workspace_path_t *p, const char *shown)
{
    size_t old_len = 0, new_len = 0, len, out_len, matches;
    int bad_old, bad_new, ret;
    const char *old_str = string_field(body, "old_str", &old_len, &bad_old);
    const char *new_str = string_field(body, "new_str", &new_len, &bad_new);
    char *data, *out;

    if (old_str == NULL || bad_new) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER,
                      "Error: Parameter `old_str` (and `new_str`, a string) is required for command: str_replace.");
        return;
    }
    if (new_str == NULL)
        new_str = "", new_len = 0;
    if (load_for_edit(execd, req, p, shown, &data, &len) != 0)
        return;
    ret = gw_editor_str_replace(data, len, old_str, old_len, new_str, new_len, execd->host->config->max_edit_file_bytes, &out,
                                &out_len, &matches);
    if (ret != 0) {
        free(data);
        respond_editor_error(req, ret, matches);
        return;
    }
    if (commit_edit(execd, req, p, shown, data, len, 1, out, out_len) == 0)
        send_output(req, H2O_STRLIT("Successfully replaced text at exactly one location."), 0);
    free(out);
    free(data);
}

static void do_insert(gw_execd_t *execd, h2o_req_t *req, json_t *body, const gw_workspace_path_t *p, const char *shown)
{
    json_t *jline = json_object_get(body, "insert_line");
    size_t text_len = 0, alias_len = 0, len, out_len;
    int bad, bad_alias, ret;
    const char *text = string_field(body, "new_str", &text_len, &bad);
    const char *alias = string_field(body, "insert_text", &alias_len, &bad_alias);
    char *data, *out, msg[128];
    long line;

    /* the tool's parameter is new_str; insert_text is accepted as another name for it */
    if (text == NULL && alias != NULL)
        text = alias, text_len = alias_len;
    if (!json_is_integer(jline) || text == NULL || bad || bad_alias) {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER,
                      "Error: Parameters `insert_line` (an integer) and `new_str` are required for command: insert.");
        return;
    }
    line = (long)json_integer_value(jline);
    if (load_for_edit(execd, req, p, shown, &data, &len) != 0)
        return;
    if ((ret = gw_editor_insert(data, len, line, text, text_len, execd->host->config->max_edit_file_bytes, &out, &out_len)) != 0) {
        size_t n = gw_editor_count_lines(data, len);
        free(data);
        if (ret == GW_EEDITOR_INVALIDLINE)
            gw_send_error(req, GW_HTTP_INVALID_PARAMETER,
                          "Error: Invalid insert_line %ld: it must be within 0..%zu (the file has %zu lines).", line, n, n);
        else
            respond_editor_error(req, ret, 0);
        return;
    }
    if (commit_edit(execd, req, p, shown, data, len, 1, out, out_len) == 0) {
        snprintf(msg, sizeof(msg), "Successfully inserted text after line %ld.", line);
        send_output(req, msg, strlen(msg), 0);
    }
    free(out);
    free(data);
}

static void do_undo(gw_execd_t *execd, h2o_req_t *req, const gw_workspace_path_t *p, const char *shown)
{
    char *content, msg[2 * GW_WORKSPACE_PATH_MAX + 64];
    size_t len;
    int existed, ret;

    if (gw_editor_history_pop(execd->files->history, p->rel, &content, &len, &existed) != 0) {
        gw_send_error(req, GW_HTTP_NO_EDIT_HISTORY, "Error: No edit history found for %.300s.", shown);
        return;
    }
    if (existed) {
        ret = gw_files_write_atomic(&execd->files->ws, p, content, len, 0644);
    } else {
        /* the undone edit created the file */
        int dir_fd;
        if ((ret = gw_workspace_open_parent(&execd->files->ws, p, &dir_fd)) == 0) {
            ret = unlinkat(dir_fd, p->name, 0) == 0 || errno == ENOENT ? 0 : -errno;
            close(dir_fd);
        }
    }
    if (ret != 0) {
        /* the version goes back so that a retry can still restore it */
        gw_editor_history_push(execd->files->history, p->rel, content, len, existed);
        free(content);
        respond_fs_error(req, ret, 1, shown);
        return;
    }
    free(content);
    snprintf(msg, sizeof(msg), "Last edit to %s undone successfully.", p->abs);
    send_output(req, msg, strlen(msg), 0);
}

GW_EXECD_HANDLER(editor)
{
    gw_execd_t *execd = gw_execd_from(door);
    json_t *body = gw_files_parse_body(req);
    gw_workspace_path_t *p = h2o_mem_alloc_pool(&req->pool, sizeof(*p));
    const char *command, *path;
    size_t path_len = 0;
    int bad;
    (void)params;

    if (body == NULL)
        return;
    command = json_string_value(json_object_get(body, "command"));
    path = string_field(body, "path", &path_len, &bad);
    if (command == NULL || path == NULL) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "Error: `command` and `path` (strings) are required.");
        goto Exit;
    }
    if (gw_files_resolve(execd, req, "Error: path", path, path_len, p) != 0)
        goto Exit;
    if (strcmp(command, "view") == 0) {
        do_view(execd, req, body, p, path);
    } else if (strcmp(command, "create") == 0) {
        do_create(execd, req, body, p, path);
    } else if (strcmp(command, "str_replace") == 0) {
        do_str_replace(execd, req, body, p, path);
    } else if (strcmp(command, "insert") == 0) {
        do_insert(execd, req, body, p, path);
    } else if (strcmp(command, "undo_edit") == 0) {
        do_undo(execd, req, p, path);
    } else {
        gw_send_error(req, GW_HTTP_INVALID_PARAMETER,
                      "Error: Unknown command \"%.50s\"; allowed: view, create, str_replace, insert, undo_edit.", command);
    }
Exit:
    json_decref(body);
}
