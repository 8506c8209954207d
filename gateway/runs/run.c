/* A run's life: creation with its init event, keep-alive pings, its producer, and its end. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "runs/internal.h"

static void on_ping(h2o_timeout_entry_t *entry)
{
    gw_run_t *run = H2O_STRUCT_FROM_MEMBER(gw_run_t, ping, entry);
    json_t *ev = gw_event_new("ping");

    json_object_set_new(ev, "text", json_string("pong"));
    gw_run_append(run, ev);
    if (run->state != GW_RUN_FINISHED)
        h2o_timeout_link(run->runs->host->loop, &run->runs->host->ping_timeout, &run->ping);
}

gw_run_t *gw_run_create(gw_runs_t *runs, const char *context_id, const char *init_text, const gw_run_limits_t *limits)
{
    gw_run_t *run = wire_calloc(1, sizeof(*run));
    json_t *ev;

    wire_uuid4(run->id);
    if (context_id != NULL)
        snprintf(run->context_id, sizeof(run->context_id), "%s", context_id);
    run->runs = runs;
    run->state = GW_RUN_QUEUED;
    run->limits = *limits;
    h2o_linklist_init_anchor(&run->tail);
    run->first_id = 1;
    h2o_linklist_init_anchor(&run->cursors);
    h2o_linklist_insert(&runs->live, &run->link);
    gw_idmap_insert(&runs->by_id, &run->by_id, run->id);
    run->created_at_ms = run->started_at_ms = gw_unix_ms();
    run->started_mono_ms = gw_now_ms();
    run->ping.cb = on_ping;

    ev = gw_event_new("init");
    json_object_set_new(ev, "text", json_string(init_text != NULL ? init_text : run->id));
    json_object_set_new(ev, "execution_id", json_string(run->id));
    gw_run_append(run, ev);
    on_ping(&run->ping); /* docs/API.md: a ping right after init, then every ping interval */
    return run;
}

const char *gw_run_id(const gw_run_t *run)
{
    return run->id;
}

gw_run_state_t gw_run_state(const gw_run_t *run)
{
    return run->state;
}

void gw_run_mark_started(gw_run_t *run)
{
    if (run->state == GW_RUN_QUEUED) {
        run->state = GW_RUN_RUNNING;
        run->started_at_ms = gw_unix_ms();
        run->started_mono_ms = gw_now_ms();
    }
}

void gw_run_set_producer(gw_run_t *run, const gw_run_producer_t *producer, void *data)
{
    run->producer = producer;
    run->producer_data = data;
}

void gw_run_stop(gw_run_t *run)
{
    if (run->producer != NULL)
        run->producer->stop(run, run->producer_data);
}

int gw_run_input(gw_run_t *run, const char *value)
{
    if (run->producer == NULL)
        return GW_ENOINPUT;
    return run->producer->input(run, run->producer_data, value);
}

void gw_run_keep_call_records(gw_run_t *run, gw_run_call_record_t *records, size_t n)
{
    /* handed once the run has finished (its producer is done): its part of the retained budget changes with them */
    if (run->state == GW_RUN_FINISHED)
        run->runs->retained_bytes -= gw_run_retained_bytes(run);
    free(run->call_records);
    run->call_records = records;
    run->num_call_records = n;
    if (run->state == GW_RUN_FINISHED)
        run->runs->retained_bytes += gw_run_retained_bytes(run);
}

/* A finished run's answer to an answer: from what its producer left of its calls. */
static int recorded_tool_result(const gw_run_t *run, const char *call_id)
{
    for (size_t i = 0; i != run->num_call_records; ++i)
        if (strcmp(run->call_records[i].id, call_id) == 0)
            return run->call_records[i].answered ? GW_ETOOLCALLANSWERED : GW_ETOOLCALLCLOSED;
    return GW_ETOOLCALLNOTFOUND;
}

int gw_run_tool_result(gw_run_t *run, const char *call_id, const json_t *result, const char *error)
{
    if (run->producer == NULL)
        return recorded_tool_result(run, call_id);
    if (run->producer->tool_result == NULL)
        return GW_ETOOLCALLNOTFOUND;
    return run->producer->tool_result(run, run->producer_data, call_id, result, error);
}

static json_t *dropped_json(const gw_run_t *run)
{
    return json_pack("{s:I, s:I, s:I}", "output_bytes", (json_int_t)run->output_dropped_bytes, "results",
                     (json_int_t)run->results_dropped, "messages", (json_int_t)run->messages_dropped);
}

void gw_run_finish(gw_run_t *run, int execution_count, const char *outcome)
{
    gw_runs_t *runs = run->runs;
    json_t *ev;

    if (run->state == GW_RUN_FINISHED)
        return;
    ev = gw_event_new("execution_complete");
    json_object_set_new(ev, "execution_time", json_integer(gw_now_ms() - run->started_mono_ms));
    if (execution_count >= 0)
        json_object_set_new(ev, "execution_count", json_integer(execution_count));
    if (run->output_dropped_bytes != 0 || run->results_dropped != 0 || run->messages_dropped != 0)
        json_object_set_new(ev, "dropped", dropped_json(run));
    gw_run_append_last(run, ev);
    run->state = GW_RUN_FINISHED;
    run->outcome = run->log_error_reported ? "error" : outcome;
    run->finished_at_ms = gw_unix_ms();
    run->finished_mono_ms = gw_now_ms();
    run->producer = NULL;
    run->producer_data = NULL;
    if (h2o_timeout_is_linked(&run->ping))
        h2o_timeout_unlink(&run->ping);
    h2o_linklist_unlink(&run->link);
    h2o_linklist_insert(&runs->finished, &run->link);
    runs->retained_bytes += gw_run_retained_bytes(run);
    gw_run_flush_log(run);
    /* readers that were waiting for more now see the end */
    gw_run_notify_cursors(run);
}

int gw_run_report_late(gw_run_t *run, uint64_t text_bytes)
{
    if (run->state != GW_RUN_FINISHED)
        return 0;
    ++run->messages_dropped;
    run->output_dropped_bytes += text_bytes;
    return 1;
}

json_t *gw_run_to_json(gw_run_t *run)
{
    static const char *const states[] = {"queued", "running", "finished"};
    json_t *obj = json_pack("{s:s, s:s, s:I, s:I, s:I}", "id", run->id, "state", states[run->state], "created_at",
                            (json_int_t)run->created_at_ms, "last_event_id", (json_int_t)run->last_event_id, "output_bytes",
                            (json_int_t)run->output_bytes);
    json_object_set_new(obj, "context_id", run->context_id[0] != '\0' ? json_string(run->context_id) : json_null());
    if (run->state != GW_RUN_QUEUED)
        json_object_set_new(obj, "started_at", json_integer(run->started_at_ms));
    if (run->state == GW_RUN_FINISHED) {
        json_object_set_new(obj, "finished_at", json_integer(run->finished_at_ms));
        json_object_set_new(obj, "outcome", json_string(run->outcome));
    }
    if (run->first_id <= run->last_event_id)
        json_object_set_new(obj, "first_retained_event_id", json_integer((json_int_t)run->first_id));
    json_object_set_new(obj, "dropped", dropped_json(run));
    return obj;
}
