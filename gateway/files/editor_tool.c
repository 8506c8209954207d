/* The text-editor tool's commands on the workspace, with the tool's own messages: front doors only map the outcome. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "core/config.h"
#include "core/errors.h"
#include "files/editor.h"
#include "files/editor_tool.h"
#include "files/fsops.h"

/* Levels of a directory view (the directory's entries, and theirs). */
#define VIEW_DIR_DEPTH 2

static void set_text(gw_editor_result_t *res, const char *text, size_t len)
{
    /* JSON strings are UTF-8: bytes that are not become U+FFFD in what is shown (files are never rewritten here) */
    free(res->text);
    wire_utf8_sanitize(text, len, 1, &res->text, &res->len);
}

static void fail(gw_editor_result_t *res, gw_editor_status_t status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static void fail(gw_editor_result_t *res, gw_editor_status_t status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    res->status = status;
    set_text(res, msg, n < 0 ? 0 : (size_t)n >= sizeof(msg) ? sizeof(msg) - 1 : (size_t)n);
}

/* A failed file system call (-errno `err`), in the tool's phrasing where it has one. */
static void fail_fs(gw_editor_result_t *res, int err, int writing, const char *path)
{
    gw_editor_status_t status;
    const char *why = strerror(-err);

    if (err == GW_EWORKSPACE_HARDLINK) {
        fail(res, GW_EDITOR_PATH_OUTSIDE, "Error: %.300s: %s; kgate serves such files only with --allow-hardlinks", path,
             gw_strerror(err));
        return;
    }
    if (err == GW_EWORKSPACE_SPECIAL) {
        fail(res, GW_EDITOR_INVALID_PARAMETER, "Error: %.300s: %s", path, gw_strerror(err));
        return;
    }
    switch (-err) {
    case ENOENT:
        fail(res, GW_EDITOR_FILE_NOT_FOUND, "Error: File not found: %.300s", path);
        return;
    case EACCES:
    case EPERM:
        fail(res, GW_EDITOR_PERMISSION_DENIED,
             writing ? "Error: Permission denied. Cannot write to file: %.300s"
                     : "Error: Permission denied. Cannot read file: %.300s",
             path);
        return;
    case EXDEV:
        status = GW_EDITOR_PATH_OUTSIDE;
        why = "a symbolic link leads outside the workspace root";
        break;
    case ENOTDIR:
        status = GW_EDITOR_NOT_A_DIRECTORY;
        break;
    case EISDIR:
        status = GW_EDITOR_IS_A_DIRECTORY;
        break;
    case EEXIST:
    case ENOTEMPTY:
        status = GW_EDITOR_FILE_EXISTS;
        break;
    case EAGAIN:
        status = GW_EDITOR_FILE_BUSY;
        why = "another process holds a lease on the file; it has been asked to release it: try again";
        break;
    case EFBIG:
        status = GW_EDITOR_FILE_TOO_LARGE;
        why = "file larger than the configured limit";
        break;
    case ELOOP:
    case ENAMETOOLONG:
    case EINVAL:
        status = GW_EDITOR_INVALID_PARAMETER;
        break;
    default:
        status = GW_EDITOR_RUNTIME_ERROR;
        break;
    }
    fail(res, status, "Error: %.300s: %s", path, why);
}

static void fail_editor(gw_editor_result_t *res, int err, size_t matches)
{
    char msg[256];

    switch (err) {
    case GW_EEDITOR_NOMATCH:
        fail(res, GW_EDITOR_NO_MATCH, "%s", gw_strerror(err));
        break;
    case GW_EEDITOR_MULTIPLEMATCHES:
        gw_editor_multiple_matches_message(matches, msg, sizeof(msg));
        fail(res, GW_EDITOR_MULTIPLE_MATCHES, "%s", msg);
        break;
    case GW_EEDITOR_NOHISTORY:
        fail(res, GW_EDITOR_NO_EDIT_HISTORY, "%s", gw_strerror(err));
        break;
    case GW_EEDITOR_TOOLARGE:
        fail(res, GW_EDITOR_FILE_TOO_LARGE, "%s", gw_strerror(err));
        break;
    default:
        fail(res, GW_EDITOR_INVALID_PARAMETER, "%s", gw_strerror(err));
        break;
    }
}

static void succeed(gw_editor_result_t *res, const char *text, size_t len, int truncated)
{
    res->status = GW_EDITOR_OK;
    res->truncated = truncated;
    set_text(res, text, len);
}

/* A string field (may hold NUL bytes); NULL when absent; *bad when present but not a string. */
static const char *string_field(json_t *args, const char *name, size_t *len, int *bad)
{
    json_t *v = json_object_get(args, name);

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

static void do_view(gw_files_t *files, json_t *args, const gw_workspace_path_t *p, const char *shown, gw_editor_result_t *res)
{
    const gw_config_t *config = files->host->config;
    json_t *range = json_object_get(args, "view_range"), *jmax = json_object_get(args, "max_characters");
    long start = 1, end = -1;
    size_t max_chars = 0, len, out_len;
    char *data, *out;
    struct stat st;
    int fd, ret, truncated;

    if (jmax != NULL && !json_is_null(jmax)) {
        if (!json_is_integer(jmax) || json_integer_value(jmax) < 1) {
            fail(res, GW_EDITOR_INVALID_PARAMETER, "Error: max_characters must be a positive integer.");
            return;
        }
        max_chars = (size_t)json_integer_value(jmax);
    }
    if ((ret = gw_workspace_open(&files->ws, p->rel, O_RDONLY, 0, &fd)) != 0) {
        fail_fs(res, ret, 0, shown);
        return;
    }
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        listing_t l = {NULL, 0, 0, 0, config->max_list_entries, 0};
        if (range != NULL && !json_is_null(range)) {
            close(fd);
            fail(res, GW_EDITOR_INVALID_PARAMETER,
                 "Error: The view_range parameter is not allowed when path points to a directory.");
            return;
        }
        listing_append(&l, "");
        l.len = 0;
        list_dir(&l, fd, p->abs, 0);
        close(fd);
        succeed(res, l.buf, l.len != 0 ? l.len - 1 : 0, l.truncated);
        free(l.buf);
        return;
    }
    close(fd);
    if (range != NULL && !json_is_null(range)) {
        if (!json_is_array(range) || json_array_size(range) != 2 || !json_is_integer(json_array_get(range, 0)) ||
            !json_is_integer(json_array_get(range, 1))) {
            fail(res, GW_EDITOR_INVALID_PARAMETER, "Error: view_range must be an array of two integers [start, end].");
            return;
        }
        start = (long)json_integer_value(json_array_get(range, 0));
        end = (long)json_integer_value(json_array_get(range, 1));
    }
    if ((ret = gw_files_read_all(&files->ws, p->rel, config->max_edit_file_bytes, &data, &len)) != 0) {
        fail_fs(res, ret, 0, shown);
        return;
    }
    if ((ret = gw_editor_view(data, len, start, end, max_chars, &out, &out_len, &truncated)) != 0) {
        size_t n = gw_editor_count_lines(data, len);
        free(data);
        fail(res, GW_EDITOR_INVALID_PARAMETER,
             "Error: Invalid view_range [%ld, %ld]: the file has %zu lines; start must be within 1..%zu and end -1 or not below "
             "start.",
             start, end, n, n != 0 ? n : 1);
        return;
    }
    free(data);
    succeed(res, out, out_len, truncated);
    free(out);
}

/* ---- edits ------------------------------------------------------------------------------------ */

/* Writes the edited contents after recording the previous version for undo_edit; 0, or -1 after failing `res`. */
static int commit_edit(gw_files_t *files, const gw_workspace_path_t *p, const char *shown, const char *old, size_t old_len,
                       int existed, const char *data, size_t len, gw_editor_result_t *res)
{
    int ret = gw_files_write_atomic(&files->ws, p, data, len, 0644);

    if (ret != 0) {
        fail_fs(res, ret, 1, shown);
        return -1;
    }
    gw_editor_history_push(files->history, p->rel, old, old_len, existed);
    return 0;
}

static void do_create(gw_files_t *files, json_t *args, const gw_workspace_path_t *p, const char *shown, gw_editor_result_t *res)
{
    size_t max = files->host->config->max_edit_file_bytes, text_len = 0, old_len = 0, plen;
    int bad, ret, existed;
    const char *text = string_field(args, "file_text", &text_len, &bad);
    char *old = NULL, msg[2 * GW_WORKSPACE_PATH_MAX + 64], parent[GW_WORKSPACE_PATH_MAX + 1];

    if (text == NULL) {
        fail(res, GW_EDITOR_INVALID_PARAMETER, "Error: Parameter `file_text` is required for command: create.");
        return;
    }
    if (text_len > max) {
        fail(res, GW_EDITOR_FILE_TOO_LARGE, "%s", gw_strerror(GW_EEDITOR_TOOLARGE));
        return;
    }
    /* an existing file is replaced; its contents go to the undo history first */
    ret = gw_files_read_all(&files->ws, p->rel, max, &old, &old_len);
    if (ret != 0 && ret != -ENOENT) {
        fail_fs(res, ret, 1, shown);
        return;
    }
    existed = ret == 0;
    plen = (size_t)(p->name - p->rel);
    plen = plen > 0 ? plen - 1 : 0;
    memcpy(parent, p->rel, plen);
    parent[plen] = '\0';
    if (!existed && plen != 0 && (ret = gw_workspace_mkdirs(&files->ws, parent, 0755)) != 0) {
        fail_fs(res, ret, 1, shown);
        return;
    }
    if (commit_edit(files, p, shown, old, old_len, existed, text, text_len, res) == 0) {
        snprintf(msg, sizeof(msg), "File created successfully at: %s", p->abs);
        succeed(res, msg, strlen(msg), 0);
    }
    free(old);
}

static void do_str_replace(gw_files_t *files, json_t *args, const gw_workspace_path_t *p, const char *shown,
                           gw_editor_result_t *res)
{
    size_t max = files->host->config->max_edit_file_bytes, old_len = 0, new_len = 0, len, out_len, matches;
    int bad_old, bad_new, ret;
    const char *old_str = string_field(args, "old_str", &old_len, &bad_old);
    const char *new_str = string_field(args, "new_str", &new_len, &bad_new);
    char *data, *out;

    if (old_str == NULL || bad_new) {
        fail(res, GW_EDITOR_INVALID_PARAMETER,
             "Error: Parameter `old_str` (and `new_str`, a string) is required for command: str_replace.");
        return;
    }
    if (new_str == NULL)
        new_str = "", new_len = 0;
    if ((ret = gw_files_read_all(&files->ws, p->rel, max, &data, &len)) != 0) {
        fail_fs(res, ret, 0, shown);
        return;
    }
    if ((ret = gw_editor_str_replace(data, len, old_str, old_len, new_str, new_len, max, &out, &out_len, &matches)) != 0) {
        free(data);
        fail_editor(res, ret, matches);
        return;
    }
    if (commit_edit(files, p, shown, data, len, 1, out, out_len, res) == 0)
        succeed(res, H2O_STRLIT("Successfully replaced text at exactly one location."), 0);
    free(out);
    free(data);
}

static void do_insert(gw_files_t *files, json_t *args, const gw_workspace_path_t *p, const char *shown, gw_editor_result_t *res)
{
    json_t *jline = json_object_get(args, "insert_line");
    size_t max = files->host->config->max_edit_file_bytes, text_len = 0, alias_len = 0, len, out_len;
    int bad, bad_alias, ret;
    const char *text = string_field(args, "new_str", &text_len, &bad);
    const char *alias = string_field(args, "insert_text", &alias_len, &bad_alias);
    char *data, *out, msg[128];
    long line;

    /* the tool's parameter is new_str; insert_text is accepted as another name for it */
    if (text == NULL && alias != NULL)
        text = alias, text_len = alias_len;
    if (!json_is_integer(jline) || text == NULL || bad || bad_alias) {
        fail(res, GW_EDITOR_INVALID_PARAMETER,
             "Error: Parameters `insert_line` (an integer) and `new_str` are required for command: insert.");
        return;
    }
    line = (long)json_integer_value(jline);
    if ((ret = gw_files_read_all(&files->ws, p->rel, max, &data, &len)) != 0) {
        fail_fs(res, ret, 0, shown);
        return;
    }
    if ((ret = gw_editor_insert(data, len, line, text, text_len, max, &out, &out_len)) != 0) {
        size_t n = gw_editor_count_lines(data, len);
        free(data);
        if (ret == GW_EEDITOR_INVALIDLINE)
            fail(res, GW_EDITOR_INVALID_PARAMETER,
                 "Error: Invalid insert_line %ld: it must be within 0..%zu (the file has %zu lines).", line, n, n);
        else
            fail_editor(res, ret, 0);
        return;
    }
    if (commit_edit(files, p, shown, data, len, 1, out, out_len, res) == 0) {
        snprintf(msg, sizeof(msg), "Successfully inserted text after line %ld.", line);
        succeed(res, msg, strlen(msg), 0);
    }
    free(out);
    free(data);
}

static void do_undo(gw_files_t *files, const gw_workspace_path_t *p, const char *shown, gw_editor_result_t *res)
{
    char *content, msg[2 * GW_WORKSPACE_PATH_MAX + 64];
    size_t len;
    int existed, ret;

    if (gw_editor_history_pop(files->history, p->rel, &content, &len, &existed) != 0) {
        fail(res, GW_EDITOR_NO_EDIT_HISTORY, "Error: No edit history found for %.300s.", shown);
        return;
    }
    if (existed) {
        ret = gw_files_write_atomic(&files->ws, p, content, len, 0644);
    } else {
        /* the undone edit created the file */
        int dir_fd;
        if ((ret = gw_workspace_open_parent(&files->ws, p, &dir_fd)) == 0) {
            ret = unlinkat(dir_fd, p->name, 0) == 0 || errno == ENOENT ? 0 : -errno;
            close(dir_fd);
        }
    }
    if (ret != 0) {
        /* the version goes back so that a retry can still restore it */
        gw_editor_history_push(files->history, p->rel, content, len, existed);
        free(content);
        fail_fs(res, ret, 1, shown);
        return;
    }
    free(content);
    snprintf(msg, sizeof(msg), "Last edit to %s undone successfully.", p->abs);
    succeed(res, msg, strlen(msg), 0);
}

void gw_editor_tool_run(gw_files_t *files, json_t *args, gw_editor_result_t *res)
{
    gw_workspace_path_t *p = wire_malloc(sizeof(*p));
    const char *command = json_string_value(json_object_get(args, "command")), *path;
    size_t path_len = 0;
    int bad, ret;

    memset(res, 0, sizeof(*res));
    path = string_field(args, "path", &path_len, &bad);
    if (command == NULL || path == NULL) {
        fail(res, GW_EDITOR_BAD_REQUEST, "Error: `command` and `path` (strings) are required.");
        goto Exit;
    }
    switch (ret = gw_workspace_resolve(&files->ws, path, path_len, p)) {
    case 0:
        break;
    case GW_EWORKSPACE_NUL:
    case GW_EWORKSPACE_OUTSIDE:
        fail(res, GW_EDITOR_PATH_OUTSIDE, "Error: path \"%.*s\" refused: %s (%s)", (int)(path_len > 200 ? 200 : path_len), path,
             gw_strerror(ret), files->ws.root);
        goto Exit;
    default:
        fail(res, GW_EDITOR_INVALID_PARAMETER, "Error: path: %s", gw_strerror(ret));
        goto Exit;
    }
    if (strcmp(command, "view") == 0) {
        do_view(files, args, p, path, res);
    } else if (strcmp(command, "create") == 0) {
        do_create(files, args, p, path, res);
    } else if (strcmp(command, "str_replace") == 0) {
        do_str_replace(files, args, p, path, res);
    } else if (strcmp(command, "insert") == 0) {
        do_insert(files, args, p, path, res);
    } else if (strcmp(command, "undo_edit") == 0) {
        do_undo(files, p, path, res);
    } else {
        fail(res, GW_EDITOR_INVALID_PARAMETER,
             "Error: Unknown command \"%.50s\"; allowed: view, create, str_replace, insert, undo_edit.", command);
    }
Exit:
    free(p);
}

void gw_editor_result_dispose(gw_editor_result_t *res)
{
    free(res->text);
    res->text = NULL;
    res->len = 0;
}
