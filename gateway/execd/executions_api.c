/* Routes of /code/executions/{id}: state, resumable event stream, cancel, stdin answers and tool results; and the run stream
 * every execution route answers with (gw_execd_stream_run). */
#include <stdlib.h>
#include <string.h>
#include "wire/text.h"
#include "execd/execd.h"
#include "core/errors.h"
#include "core/http.h"
#include "core/stream.h"
#include "runs/run.h"

/* The run named by the path parameter, or NULL after answering 404. */
static gw_run_t *run_from_params(gw_execd_t *execd, h2o_req_t *req, const gw_route_params_t *params)
{
    const char *id = gw_path_param(req, params, 0);
    gw_run_t *run = id != NULL ? gw_run_find(execd->runs, id) : NULL;

    if (run == NULL)
        gw_send_error(req, GW_HTTP_EXECUTION_NOT_FOUND, "no execution with id \"%.*s\" (finished ones are kept for %u ms)",
                      (int)(params->values[0].len > 64 ? 64 : params->values[0].len), params->values[0].base,
                      execd->host->config->run_retention_ms);
    return run;
}

GW_EXECD_HANDLER(execution_get)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_run_t *run = run_from_params(execd, req, params);
    if (run != NULL)
        gw_send_json(req, 200, gw_run_to_json(run));
}

/* SSE's Last-Event-ID header, else ?last_event_id=; 0 when neither. -1 when malformed. */
static long long resume_point(h2o_req_t *req)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("last-event-id"), -1);
    char buf[32];
    const char *value = NULL;
    uint64_t id;

    if (i != -1) {
        h2o_iovec_t v = req->headers.entries[i].value;
        if (v.len == 0 || v.len >= sizeof(buf))
            return v.len == 0 ? 0 : -1;
        memcpy(buf, v.base, v.len);
        buf[v.len] = '\0';
        value = buf;
    } else if ((value = gw_query_param(req, "last_event_id")) == NULL || value[0] == '\0') {
        return 0;
    }
    return wire_parse_decimal(value, INT64_MAX, &id) == 0 ? (long long)id : -1;
}

GW_EXECD_HANDLER(execution_events)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_run_t *run = run_from_params(execd, req, params);
    long long after;

    if (run == NULL)
        return;
    if ((after = resume_point(req)) < 0) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "Last-Event-ID (or last_event_id) must be a non-negative integer");
        return;
    }
    if (gw_execd_stream_run(execd, req, run, (uint64_t)after) != 0)
        gw_send_error(req, GW_HTTP_EVENTS_GONE,
                      "events after %lld are no longer retained (the run's log holds --max-run-log-bytes); GET the execution for "
                      "first_retained_event_id",
                      after);
}

GW_EXECD_HANDLER(execution_cancel)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_run_t *run = run_from_params(execd, req, params);

    if (run == NULL)
        return;
    gw_run_stop(run);
    gw_send_empty(req);
}

GW_EXECD_HANDLER(execution_input)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_run_t *run = run_from_params(execd, req, params);
    json_t *body, *value;

    if (run == NULL)
        return;
    if ((body = gw_parse_body(req)) == NULL)
        return;
    value = json_object_get(body, "value");
    if (!json_is_string(value) || strlen(json_string_value(value)) != json_string_length(value)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "value must be a string (without NUL characters)");
    } else if (gw_run_input(run, json_string_value(value)) != 0) {
        gw_send_error(req, GW_HTTP_NO_INPUT_PENDING, "execution %s is not waiting for input", gw_run_id(run));
    } else {
        gw_send_empty(req);
    }
    json_decref(body);
}

GW_EXECD_HANDLER(execution_tool_result)
{
    gw_execd_t *execd = gw_execd_from(door);
    gw_run_t *run = run_from_params(execd, req, params);
    const size_t max = execd->host->config->max_tool_result_bytes;
    json_t *body, *id, *result, *error;
    size_t size;
    int ret;

    if (run == NULL)
        return;
    if ((body = gw_parse_body(req)) == NULL)
        return;
    id = json_object_get(body, "id");
    result = json_object_get(body, "result");
    error = json_object_get(body, "error");
    if (!json_is_string(id) || json_string_length(id) == 0) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "id must be the call's id (the `id` of its tool_call event)");
        goto Exit;
    }
    if ((result == NULL) == (error == NULL)) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "give exactly one of result (any JSON) and error (a message)");
        goto Exit;
    }
    if (error != NULL && (!json_is_string(error) || strlen(json_string_value(error)) != json_string_length(error))) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "error must be a string (the message raised in the code), without NUL");
        goto Exit;
    }
    if ((size = json_dumpb(result != NULL ? result : error, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY)) > max) {
        gw_send_error(req, GW_HTTP_PAYLOAD_TOO_LARGE,
                      "the answer takes %zu bytes as JSON, more than the %zu allowed (--max-tool-result-bytes)", size, max);
        goto Exit;
    }
    ret = gw_run_tool_result(run, json_string_value(id), result, json_string_value(error));
    switch (ret) {
    case 0:
        gw_send_empty(req);
        break;
    case GW_ETOOLCALLNOTFOUND:
        gw_send_error(req, GW_HTTP_TOOL_CALL_NOT_FOUND, "execution %s has no tool call with id \"%.64s\"", gw_run_id(run),
                      json_string_value(id));
        break;
    case GW_ETOOLCALLANSWERED:
        gw_send_error(req, GW_HTTP_TOOL_CALL_ANSWERED, "tool call %.64s of execution %s has been answered already",
                      json_string_value(id), gw_run_id(run));
        break;
    default:
        gw_send_error(req, GW_HTTP_TOOL_CALL_CLOSED,
                      "tool call %.64s of execution %s is no longer awaited: the run was interrupted, timed out or has finished",
                      json_string_value(id), gw_run_id(run));
        break;
    }
Exit:
    json_decref(body);
}

/* A run stream: the run's cursor lives in the request's pool; the writer closes it. */
int gw_execd_stream_run(gw_execd_t *execd, h2o_req_t *req, gw_run_t *run, uint64_t after_id)
{
    gw_run_cursor_t *cursor = h2o_mem_alloc_pool(&req->pool, sizeof(*cursor));
    int ret;

    if ((ret = gw_run_cursor_open(run, cursor, after_id)) != 0)
        return ret;
    gw_sse_stream_start(req, &cursor->super, execd->host->config->max_reader_batch_bytes, "x-kgate-execution-id", gw_run_id(run));
    return 0;
}
