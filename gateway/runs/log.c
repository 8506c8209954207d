/* A run's event log: appending under the output limits, and trimming to max_run_log_bytes. */
#include <string.h>
#include "core/json_out.h"
#include "runs/internal.h"

static void trim_log(gw_run_t *run)
{
    size_t limit = run->runs->host->config->max_run_log_bytes;

    /* the newest event always stays, so a run can always be finished and read to its end;
     * cursors that still needed a dropped event find out when they are woken next */
    while (run->log_bytes > limit && run->log.next != run->log.prev) {
        gw_event_t *oldest = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next);
        h2o_linklist_unlink(&oldest->link);
        oldest->in_log = 0;
        run->log_bytes -= oldest->len;
        gw_event_release(oldest);
    }
}

static void report_truncation(gw_run_t *run)
{
    json_t *ev;

    if (run->truncation_reported)
        return;
    run->truncation_reported = 1;
    ev = gw_event_new("status");
    json_object_set_new(ev, "text", json_string("output_truncated"));
    json_object_set_new(ev, "output_limit", json_integer((json_int_t)run->limits.output_bytes));
    json_object_set_new(ev, "result_limit", json_integer((json_int_t)run->limits.result_bytes));
    gw_run_append(run, ev);
}

void gw_run_report_oversized_message(gw_run_t *run)
{
    size_t cap = run->runs->host->config->max_message_bytes;
    char size[32], reason[256];
    json_t *ev;

    if (run->state == GW_RUN_FINISHED)
        return;
    ++run->messages_dropped;
    if (run->oversized_reported)
        return;
    run->oversized_reported = 1;
    if (cap % (1u << 20) == 0)
        snprintf(size, sizeof(size), "%zu MiB", cap >> 20);
    else
        snprintf(size, sizeof(size), "%zu-byte", cap);
    snprintf(reason, sizeof(reason),
             "a kernel message larger than the %s message cap (--max-message-bytes) was dropped, with what it carried for this run",
             size);
    ev = gw_event_new("status");
    json_object_set_new(ev, "text", json_string("output_truncated"));
    json_object_set_new(ev, "message_limit", json_integer((json_int_t)cap));
    json_object_set_new(ev, "reason", json_string(reason));
    gw_run_append(run, ev);
}

/* Length of the longest prefix of `s` no longer than `max` that does not split a UTF-8 character. */
static size_t utf8_prefix(const char *s, size_t max)
{
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        --max;
    return max;
}

/* Applies the run's output limits to `event`; returns it (possibly shortened) or NULL when dropped. */
static json_t *apply_limits(gw_run_t *run, json_t *event, int *truncated)
{
    const char *type = json_string_value(json_object_get(event, "type"));

    *truncated = 0;
    if (type == NULL)
        return event;
    if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        json_t *text = json_object_get(event, "text");
        size_t len = json_string_length(text), room = run->limits.output_bytes - run->output_bytes, keep;
        if (len <= room) {
            run->output_bytes += len;
            return event;
        }
        *truncated = 1;
        keep = utf8_prefix(json_string_value(text), room);
        run->output_bytes += keep;
        run->output_dropped_bytes += len - keep;
        if (keep == 0) {
            json_decref(event);
            return NULL;
        }
        json_object_set_new(event, "text", json_stringn_nocheck(json_string_value(text), keep));
        return event;
    }
    if (strcmp(type, "result") == 0) {
        /* measured with the event writer (jansson's encoder takes tens of ms for a big image) */
        size_t size = gw_json_render(json_object_get(event, "results"), NULL);
        if (size > run->limits.result_bytes) {
            *truncated = 1;
            ++run->results_dropped;
            json_decref(event);
            return NULL;
        }
    }
    return event;
}

void gw_run_append(gw_run_t *run, json_t *event)
{
    gw_event_t *ev;
    int truncated;

    if (run->state == GW_RUN_FINISHED) {
        json_decref(event);
        return;
    }
    event = apply_limits(run, event, &truncated);
    if (event != NULL) {
        if (json_object_get(event, "timestamp") == NULL)
            json_object_set_new(event, "timestamp", json_integer(gw_unix_ms()));
        ev = gw_event_render(event, ++run->last_event_id, run->runs->host->config->compat_execd);
        json_decref(event);
        ev->in_log = 1;
        h2o_linklist_insert(&run->log, &ev->link);
        run->log_bytes += ev->len;
        trim_log(run);
        gw_run_notify_cursors(run);
    }
    if (truncated)
        report_truncation(run);
}

void gw_run_clear_log(gw_run_t *run)
{
    while (!h2o_linklist_is_empty(&run->log)) {
        gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next);
        h2o_linklist_unlink(&ev->link);
        ev->in_log = 0;
        gw_event_release(ev);
    }
    run->log_bytes = 0;
}
