/* POST /editor: the text-editor tool (files/editor_tool.h) beneath the workspace root, its outcomes as execd's errors. */
#include "execd/execd.h"
#include "execd/files_request.h"
#include "files/editor_tool.h"
#include "core/http.h"

static gw_http_error_t http_error(gw_editor_status_t status)
{
    switch (status) {
    case GW_EDITOR_BAD_REQUEST:
        return GW_HTTP_INVALID_REQUEST_BODY;
    case GW_EDITOR_PATH_OUTSIDE:
        return GW_HTTP_PATH_OUTSIDE_WORKSPACE;
    case GW_EDITOR_FILE_NOT_FOUND:
        return GW_HTTP_FILE_NOT_FOUND;
    case GW_EDITOR_PERMISSION_DENIED:
        return GW_HTTP_PERMISSION_DENIED;
    case GW_EDITOR_NO_MATCH:
        return GW_HTTP_NO_MATCH;
    case GW_EDITOR_MULTIPLE_MATCHES:
        return GW_HTTP_MULTIPLE_MATCHES;
    case GW_EDITOR_NO_EDIT_HISTORY:
        return GW_HTTP_NO_EDIT_HISTORY;
    case GW_EDITOR_FILE_TOO_LARGE:
        return GW_HTTP_FILE_TOO_LARGE;
    case GW_EDITOR_NOT_A_DIRECTORY:
        return GW_HTTP_NOT_A_DIRECTORY;
    case GW_EDITOR_IS_A_DIRECTORY:
        return GW_HTTP_IS_A_DIRECTORY;
    case GW_EDITOR_FILE_EXISTS:
        return GW_HTTP_FILE_EXISTS;
    case GW_EDITOR_FILE_BUSY:
        return GW_HTTP_FILE_BUSY;
    case GW_EDITOR_RUNTIME_ERROR:
        return GW_HTTP_RUNTIME_ERROR;
    case GW_EDITOR_OK:
    case GW_EDITOR_INVALID_PARAMETER:
        break;
    }
    return GW_HTTP_INVALID_PARAMETER;
}

GW_EXECD_HANDLER(editor)
{
    gw_execd_t *execd = gw_execd_from(door);
    json_t *body = gw_files_parse_body(req), *out;
    gw_editor_result_t res;
    (void)params;

    if (body == NULL)
        return;
    gw_editor_tool_run(execd->files, body, &res);
    if (res.status == GW_EDITOR_OK) {
        out = json_object();
        json_object_set_new(out, "output", json_stringn(res.text, res.len));
        if (res.truncated)
            json_object_set_new(out, "truncated", json_true());
        gw_send_json(req, 200, out);
    } else {
        gw_send_error(req, http_error(res.status), "%s", res.text);
    }
    gw_editor_result_dispose(&res);
    json_decref(body);
}
