/* One run's tool calls: batches from the kernel become events, answers become one input_reply per batch. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "core/event.h"
#include "core/json_out.h"
#include "code/tool_calls.h"

void gw_tool_calls_init(gw_tool_calls_t *tc, gw_toolset_t *tools, const gw_config_t *config)
{
    memset(tc, 0, sizeof(*tc));
    tc->tools = tools;
    tc->config = config;
}

void gw_tool_calls_dispose(gw_tool_calls_t *tc, gw_run_t *run)
{
    if (tc->num_calls != 0) {
        gw_run_call_record_t *records = wire_malloc(tc->num_calls * sizeof(*records));
        for (size_t i = 0; i != tc->num_calls; ++i) {
            memcpy(records[i].id, tc->calls[i].id, sizeof(records[i].id));
            records[i].answered = tc->calls[i].state == GW_TOOL_CALL_ANSWERED;
        }
        gw_run_keep_call_records(run, records, tc->num_calls);
    }
    gw_toolset_destroy(tc->tools);
    free(tc->calls);
    json_decref(tc->answers);
    memset(tc, 0, sizeof(*tc));
}

int gw_tool_calls_waiting(const gw_tool_calls_t *tc)
{
    return tc->answers != NULL;
}

void gw_tool_calls_close(gw_tool_calls_t *tc)
{
    if (tc->answers == NULL)
        return;
    for (size_t i = tc->batch_first; i != tc->num_calls; ++i)
        if (tc->calls[i].state == GW_TOOL_CALL_WAITING)
            tc->calls[i].state = GW_TOOL_CALL_CLOSED;
    json_decref(tc->answers);
    tc->answers = NULL;
    tc->unanswered = 0;
}

static json_t *error_answer(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static json_t *error_answer(const char *fmt, ...)
{
    char msg[512];
    va_list args;

    va_start(args, fmt);
    vsnprintf(msg, sizeof(msg), fmt, args);
    va_end(args);
    /* a name quoted cut at "%.128s" may end in half a character: U+FFFD, not a NULL answer, which means "no refusal" */
    return json_pack("{s:o}", "error", gw_json_string_lossy(msg, strlen(msg)));
}

static char *render_reply(json_t *answers)
{
    json_t *reply = json_pack("{s:O}", "results", answers);
    char *text = json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    return text;
}

/* The answer a call gets at once when it cannot be made; NULL when it can. */
static json_t *refuse(gw_tool_calls_t *tc, const json_t *call, size_t slot)
{
    const char *name = json_string_value(json_object_get(call, "name"));
    const json_t *arguments = json_object_get(call, "arguments");
    size_t size;

    if (name == NULL)
        return error_answer("the call names no tool");
    if (gw_toolset_find(tc->tools, name) == NULL)
        return error_answer("this run declared no tool named \"%.128s\"", name);
    if (!json_is_object(arguments))
        return error_answer("the arguments must be a JSON object");
    if ((size = json_dumpb(arguments, NULL, 0, JSON_COMPACT)) > tc->config->max_tool_argument_bytes)
        return error_answer("the arguments take %zu bytes as JSON, more than the %zu allowed (--max-tool-argument-bytes)", size,
                            tc->config->max_tool_argument_bytes);
    if (slot >= tc->config->max_pending_tool_calls)
        return error_answer("more than %u calls were awaited at once (--max-pending-tool-calls); await fewer at a time",
                            tc->config->max_pending_tool_calls);
    if (tc->num_calls >= tc->config->max_tool_calls)
        return error_answer("the run has made the %u tool calls it may make (--max-tool-calls)", tc->config->max_tool_calls);
    return NULL;
}

char *gw_tool_calls_open_batch(gw_tool_calls_t *tc, gw_run_t *run, const json_t *calls)
{
    size_t n = json_array_size(calls);
    char *reply;

    gw_tool_calls_close(tc);
    if (calls == NULL || tc->tools == NULL) {
        json_t *answer = calls == NULL ? error_answer("kgate could not read the batch of tool calls")
                                       : error_answer("this run declared no tools (they are bound to the run that declares them)");
        reply = json_dumps(answer, JSON_COMPACT);
        json_decref(answer);
        return reply;
    }
    tc->answers = json_array();
    tc->batch_first = tc->num_calls;
    for (size_t slot = 0; slot != n; ++slot) {
        const json_t *call = json_array_get(calls, slot);
        json_t *refusal = refuse(tc, call, slot), *ev;
        gw_tool_call_t *rec;

        if (refusal != NULL) {
            json_array_append_new(tc->answers, refusal);
            continue;
        }
        json_array_append_new(tc->answers, json_null());
        if (tc->num_calls == tc->cap) {
            tc->cap = tc->cap != 0 ? tc->cap * 2 : 8;
            tc->calls = wire_realloc(tc->calls, tc->cap * sizeof(tc->calls[0]));
        }
        rec = &tc->calls[tc->num_calls++];
        wire_uuid4(rec->id);
        rec->state = GW_TOOL_CALL_WAITING;
        rec->slot = slot;
        ++tc->unanswered;
        ev = gw_event_new("tool_call");
        json_object_set_new(ev, "id", json_string(rec->id));
        json_object_set(ev, "name", json_object_get(call, "name"));
        json_object_set_new(ev, "arguments", json_deep_copy(json_object_get(call, "arguments")));
        gw_run_append(run, ev);
    }
    if (tc->unanswered != 0)
        return NULL;
    reply = render_reply(tc->answers);
    gw_tool_calls_close(tc);
    return reply;
}

int gw_tool_calls_answer(gw_tool_calls_t *tc, const char *id, const json_t *result, const char *error, char **reply)
{
    gw_tool_call_t *rec = NULL;

    *reply = NULL;
    for (size_t i = 0; i != tc->num_calls && rec == NULL; ++i)
        if (strcmp(tc->calls[i].id, id) == 0)
            rec = &tc->calls[i];
    if (rec == NULL)
        return GW_ETOOLCALLNOTFOUND;
    if (rec->state != GW_TOOL_CALL_WAITING)
        return rec->state == GW_TOOL_CALL_ANSWERED ? GW_ETOOLCALLANSWERED : GW_ETOOLCALLCLOSED;
    rec->state = GW_TOOL_CALL_ANSWERED;
    json_array_set_new(tc->answers, rec->slot,
                       error != NULL ? json_pack("{s:s}", "error", error)
                                     : json_pack("{s:O}", "result", result != NULL ? result : json_null()));
    if (--tc->unanswered == 0) {
        *reply = render_reply(tc->answers);
        json_decref(tc->answers);
        tc->answers = NULL;
    }
    return 0;
}
