/* A run's bounds on what one event carries: its output limits (output_bytes, result_bytes) and the log's bound for one event
 * (--max-run-log-bytes less GW_RUNLOG_END_RESERVE) (runs/internal.h). log.c applies them as it appends, and says what they
 * cut in status events. */
#include <string.h>
#include "core/json_out.h"
#include "runs/internal.h"

/* The longest frame one event may have: the log's bound less GW_RUNLOG_END_RESERVE (half the bound when that leaves less). */
static size_t event_max(const gw_run_t *run)
{
    size_t limit = run->runs->host->config->max_run_log_bytes;

    return limit > 2 * GW_RUNLOG_END_RESERVE ? limit - GW_RUNLOG_END_RESERVE : limit / 2;
}

/* The longest text one stream event may carry, encoded or decoded (a decoded byte is never less than one encoded byte): its
 * frame's type, timestamp, id and quotes take less than STREAM_FRAMING. */
#define STREAM_FRAMING ((size_t)256)
size_t gw_run_log_text_max(const gw_run_t *run)
{
    size_t max = event_max(run);

    return max > 2 * STREAM_FRAMING ? max - STREAM_FRAMING : max / 2; /* a log of a few events (tests): half an event's room */
}

size_t gw_run_text_room(const gw_run_t *run)
{
    size_t room = run->limits.output_bytes - run->output_bytes, max = gw_run_log_text_max(run);

    if (run->state == GW_RUN_FINISHED)
        return 0;
    return room < max ? room : max;
}

/* Length of the longest prefix of `s` no longer than `max` that does not split a UTF-8 character. */
static size_t utf8_prefix(const char *s, size_t max)
{
    while (max > 0 && ((unsigned char)s[max] & 0xc0) == 0x80)
        --max;
    return max;
}

/* Applies the run's output limits, and the log's bound for one event, to `event`; returns it (possibly shortened) or NULL when
 * dropped; `*truncated` says the output limits did it, `*log_cut` the log's bound. */
json_t *gw_run_apply_limits(gw_run_t *run, json_t *event, int *truncated, int *log_cut)
{
    const char *type = json_string_value(json_object_get(event, "type"));

    *truncated = *log_cut = 0;
    if (type == NULL)
        return event;
    if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
        json_t *text = json_object_get(event, "text");
        size_t len = json_string_length(text), room = run->limits.output_bytes - run->output_bytes, keep;
        if (len <= room && len <= gw_run_log_text_max(run)) {
            run->output_bytes += len;
            return event;
        }
        if (len <= room || gw_run_log_text_max(run) < room) {
            room = gw_run_log_text_max(run);
            *log_cut = 1;
        } else {
            *truncated = 1;
        }
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
        if (size > run->limits.result_bytes || size > gw_run_log_text_max(run)) {
            *(size > run->limits.result_bytes ? truncated : log_cut) = 1;
            ++run->results_dropped;
            json_decref(event);
            return NULL;
        }
    }
    return event;
}

/* An event the failed log has no room for: counted where the run's `dropped` can say so. */
void gw_run_drop_for_log(gw_run_t *run, json_t *event)
{
    const char *type = json_string_value(json_object_get(event, "type"));

    if (type != NULL && (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0)) {
        size_t len = json_string_length(json_object_get(event, "text"));
        run->output_bytes -= len;
        run->output_dropped_bytes += len;
    } else if (type != NULL && strcmp(type, "result") == 0) {
        ++run->results_dropped;
    }
    json_decref(event);
}

/* A stream event whose text, as rendered (escaped), makes its frame longer than the log keeps: its text is cut by that much more
 * (a decoded byte is one encoded byte or more) and it is rendered again. Returns the event to link. */
gw_event_t *gw_run_fit_stream_event(gw_run_t *run, json_t *event, gw_event_t *ev, int *log_cut)
{
    json_t *text = json_object_get(event, "text");

    while (ev->len > event_max(run) && json_is_string(text) && json_string_length(text) != 0) {
        size_t len = json_string_length(text), over = ev->len - event_max(run);
        size_t keep = utf8_prefix(json_string_value(text), over < len ? len - over : 0);
        run->output_bytes -= len - keep;
        run->output_dropped_bytes += len - keep;
        json_object_set_new(event, "text", text = json_stringn_nocheck(json_string_value(text), keep));
        gw_event_release(ev);
        ev = gw_event_render(event, run->last_event_id, run->runs->host->config->compat_execd);
        *log_cut = 1;
    }
    return ev;
}
