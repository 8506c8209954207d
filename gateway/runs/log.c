/* A run's event log: appending under the output limits (and waking the readers), the tail in RAM and the records in the
 * store, trimming to max_run_log_bytes. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/text_scan.h"
#include "core/errors.h"
#include "core/json_out.h"
#include "runs/internal.h"

#define HEADER_LEN sizeof(gw_runlog_header_t)
/* A text cut to the run's output room this short is copied into its event rather than held in the kernel's buffer. */
#define CUT_COPY_MAX_BYTES ((size_t)1 << 20)

gw_event_t *gw_run_tail_first(gw_run_t *run)
{
    return h2o_linklist_is_empty(&run->tail) ? NULL : H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->tail.next);
}

int gw_run_read_header(gw_run_t *run, uint64_t off, gw_runlog_header_t *header)
{
    int ret = gw_runstore_read(&run->runs->store, &run->file, off, header, sizeof(*header));

    if (ret == 0 && header->magic != GW_RUNLOG_MAGIC)
        ret = -EIO;
    return ret;
}

static void tail_remove(gw_run_t *run, gw_event_t *ev)
{
    h2o_linklist_unlink(&ev->link);
    ev->in_log = 0;
    run->tail_bytes -= ev->len;
    gw_event_release(ev);
}

/* Drops the marks of events no longer retained. */
static void index_trim(gw_run_t *run)
{
    size_t n = 0;

    while (n < run->index.size && run->index.entries[n].id < run->first_id)
        ++n;
    if (n == 0)
        return;
    memmove(run->index.entries, run->index.entries + n, (run->index.size - n) * sizeof(run->index.entries[0]));
    run->index.size -= n;
}

/* What is only in the file cannot be read any more: the log keeps its tail. */
static void drop_file_part(gw_run_t *run)
{
    gw_event_t *head = gw_run_tail_first(run);

    run->first_id = head != NULL ? head->id : run->last_event_id + 1;
    run->first_off = head != NULL ? gw_run_record_off(head) : run->end_off;
    run->log_bytes = run->tail_bytes;
}

static void drop_oldest(gw_run_t *run)
{
    gw_event_t *head = gw_run_tail_first(run);
    gw_runlog_header_t header;

    if (head != NULL && gw_run_record_off(head) == run->first_off) {
        run->first_off = head->log_pos;
        run->log_bytes -= head->len;
        tail_remove(run, head);
    } else if (gw_run_read_header(run, run->first_off, &header) == 0 && header.id == run->first_id) {
        run->first_off += HEADER_LEN + header.len;
        run->log_bytes -= header.len;
    } else {
        drop_file_part(run);
        return;
    }
    ++run->first_id;
}

/*
 * Whether a reader is in the middle of the oldest record: the last piece its writer asked for lies inside it, read back from
 * the file. (A writer with a send in flight asks for the piece after the one it sends, so this holds until it asks for a
 * position past the record. A record taken from RAM is handed out whole; a cursor's record marks stay from its last read
 * back, and a position asked for since lies past them.)
 */
static int oldest_is_being_read(gw_run_t *run)
{
    for (h2o_linklist_t *node = run->cursors.next; node != &run->cursors; node = node->next) {
        gw_run_cursor_t *cursor = H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, link, node);
        if (cursor->_private.piece != NULL && !cursor->_private.error_sent && cursor->_private.rec_off == run->first_off &&
            cursor->_private.piece_from < cursor->_private.rec_end)
            return 1;
    }
    return 0;
}

static void trim_log(gw_run_t *run)
{
    size_t limit = run->runs->host->config->max_run_log_bytes;

    /* the newest event always stays, so a run can always be finished and read to its end;
     * cursors that still needed a dropped event find out when they are woken next. The oldest event stays while a
     * reader is in the middle of it, up to twice the bound: one event may take nearly the whole bound, and a reader
     * sending it at full speed was cut off by the next 64 KiB of output; a reader stuck in it is cut off at twice. */
    while (run->log_bytes > limit && run->first_id < run->last_event_id &&
           (run->log_bytes > 2 * limit || !oldest_is_being_read(run)))
        drop_oldest(run);
    if (run->written_off < run->first_off)
        run->written_off = run->first_off;
    gw_runstore_release_before(&run->runs->store, &run->file, run->first_off);
    index_trim(run);
}

/* Writes the tail's records that are not in the file yet. Returns 0 or -errno. */
static int write_tail(gw_run_t *run)
{
    enum { BATCH = 64 };
    gw_runlog_header_t headers[BATCH];
    struct iovec iov[(1 + GW_EVENT_MAX_PIECES) * BATCH];
    size_t niov = 0;
    uint64_t batch_off = run->written_off, batch_end = run->written_off;
    size_t n = 0;
    int ret;

    for (h2o_linklist_t *node = run->tail.next; node != &run->tail; node = node->next) {
        gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, node);
        if (gw_run_record_off(ev) < run->written_off)
            continue;
        h2o_iovec_t pieces[GW_EVENT_MAX_PIECES];
        size_t npieces = gw_event_pieces(ev, pieces);
        headers[n] = (gw_runlog_header_t){ev->id, (uint32_t)ev->len, GW_RUNLOG_MAGIC};
        iov[niov++] = (struct iovec){&headers[n], HEADER_LEN};
        for (size_t i = 0; i != npieces; ++i)
            iov[niov++] = (struct iovec){pieces[i].base, pieces[i].len};
        batch_end = ev->log_pos;
        if (++n == BATCH || node->next == &run->tail) {
            if ((ret = gw_runstore_write(&run->runs->store, &run->file, batch_off, iov, niov)) != 0)
                return ret;
            run->written_off = batch_off = batch_end;
            n = niov = 0;
        }
    }
    return 0;
}

static void insert(gw_run_t *run, json_t *event, int last);

/* The file cannot take the log any more: say so in the run's own stream, which from now on only keeps what fits the tail. */
static void log_failed(gw_run_t *run, int err)
{
    char evalue[256];

    run->log_error = err;
    run->log_error_reported = 1;
    snprintf(evalue, sizeof(evalue),
             "kgate could not write this run's event log to its runtime dir (%s): the run's further output is dropped",
             gw_strerror(err));
    insert(run, gw_error_event("RunLogError", evalue), 0);
}

/* Keeps the tail within its bound: its records go to the file, the oldest leave RAM (down to half, so that writes come in
 * batches). The newest event stays whatever its size: the readers that keep up, woken for it next, take it from RAM
 * (dropping it here made every reader of a run printing 1 MB at a time read each event back from the file). */
static void spill(gw_run_t *run)
{
    gw_event_t *head;
    int ret;

    if (run->tail_bytes <= GW_RUNLOG_TAIL_BYTES || run->log_error != 0)
        return;
    if ((ret = write_tail(run)) != 0) {
        log_failed(run, ret);
        return;
    }
    while (run->tail_bytes > GW_RUNLOG_TAIL_BYTES / 2 && (head = gw_run_tail_first(run)) != NULL && head->link.next != &run->tail)
        tail_remove(run, head);
}

/* Links `ev` (rendered as event number ++last_event_id; the log takes its reference) into the log: the one place
 * both ways of rendering an event end; the `last` one is flushed by gw_run_finish. */
static void link_event(gw_run_t *run, gw_event_t *ev, int last)
{
    uint64_t off = run->end_off;

    ev->log_pos = off + HEADER_LEN + ev->len;
    ev->in_log = 1;
    h2o_linklist_insert(&run->tail, &ev->link);
    run->end_off = ev->log_pos;
    run->tail_bytes += ev->len;
    run->log_bytes += ev->len;
    if ((ev->id - 1) % GW_RUNLOG_INDEX_STRIDE == 0) {
        h2o_vector_reserve(NULL, &run->index, run->index.size + 1);
        run->index.entries[run->index.size++] = (gw_runlog_mark_t){ev->id, off};
    }
    trim_log(run);
    if (!last)
        spill(run);
    gw_run_notify_cursors(run);
}

/* Renders `event` (stolen) as the next event and links it into the log. */
static void insert(gw_run_t *run, json_t *event, int last)
{
    gw_event_t *ev = gw_event_render(event, ++run->last_event_id, run->runs->host->config->compat_execd);

    json_decref(event);
    link_event(run, ev, last);
}

/* An event too big for the log was cut (stream text) or dropped (a result): said once, with the bound that did it. */
static void report_log_cut(gw_run_t *run)
{
    size_t limit = run->runs->host->config->max_run_log_bytes;
    json_t *ev;

    if (run->log_cut_reported)
        return;
    run->log_cut_reported = 1;
    ev = gw_event_new("status");
    json_object_set_new(ev, "text", json_string("output_truncated"));
    json_object_set_new(ev, "log_limit", json_integer((json_int_t)limit));
    json_object_set_new(ev, "reason",
                        json_string("an event was larger than this run's event log keeps (--max-run-log-bytes, less 64 KiB for "
                                    "the events that end the run): its text was cut, or its result dropped, and counted"));
    gw_run_append(run, ev);
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

/* "64 MiB" or "1000000-byte": the cap as the reasons say it. */
static void message_cap_size(size_t cap, char *size, size_t len)
{
    if (cap % (1u << 20) == 0)
        snprintf(size, len, "%zu MiB", cap >> 20);
    else
        snprintf(size, len, "%zu-byte", cap);
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
    message_cap_size(cap, size, sizeof(size));
    snprintf(reason, sizeof(reason),
             "a kernel message larger than the %s message cap (--max-message-bytes) was dropped, with what it carried for this run",
             size);
    ev = gw_event_new("status");
    json_object_set_new(ev, "text", json_string("output_truncated"));
    json_object_set_new(ev, "message_limit", json_integer((json_int_t)cap));
    json_object_set_new(ev, "reason", json_string(reason));
    gw_run_append(run, ev);
}

void gw_run_report_cut_message(gw_run_t *run, uint64_t dropped_bytes)
{
    char size[32], reason[320];
    size_t cap = run->runs->host->config->max_message_bytes;
    json_t *ev;

    if (run->state == GW_RUN_FINISHED)
        return;
    run->output_dropped_bytes += dropped_bytes;
    if (run->cut_reported)
        return;
    run->cut_reported = 1;
    message_cap_size(cap, size, sizeof(size));
    snprintf(reason, sizeof(reason),
             "a kernel message larger than the %s message cap (--max-message-bytes) was cut to the head of its text: the "
             "%llu bytes of output after it were dropped",
             size, (unsigned long long)dropped_bytes);
    ev = gw_event_new("status");
    json_object_set_new(ev, "text", json_string("output_truncated"));
    json_object_set_new(ev, "message_limit", json_integer((json_int_t)cap));
    json_object_set_new(ev, "dropped_bytes", json_integer((json_int_t)dropped_bytes));
    json_object_set_new(ev, "reason", json_string(reason));
    gw_run_append(run, ev);
}

void gw_run_append(gw_run_t *run, json_t *event)
{
    int truncated, log_cut;

    if (run->state == GW_RUN_FINISHED) {
        json_decref(event);
        return;
    }
    event = gw_run_apply_limits(run, event, &truncated, &log_cut);
    if (event != NULL) {
        if (json_object_get(event, "timestamp") == NULL)
            json_object_set_new(event, "timestamp", json_integer(gw_unix_ms()));
        if (run->log_error != 0 && run->tail_bytes > GW_RUNLOG_TAIL_BYTES) {
            gw_run_drop_for_log(run, event);
        } else {
            gw_event_t *ev = gw_event_render(event, ++run->last_event_id, run->runs->host->config->compat_execd);
            const char *type = json_string_value(json_object_get(event, "type"));
            if (type != NULL && (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0))
                ev = gw_run_fit_stream_event(run, event, ev, &log_cut);
            json_decref(event);
            link_event(run, ev, 0);
        }
    }
    if (truncated)
        report_truncation(run);
    if (log_cut)
        report_log_cut(run);
}

void gw_run_append_stream(gw_run_t *run, int is_stderr, const char *text_token, size_t token_len, size_t decoded_len,
                          wire_buf_t *storage)
{
    const char *inner = text_token + 1;
    size_t inner_len = token_len - 2, room = run->limits.output_bytes - run->output_bytes, text_max = gw_run_log_text_max(run);
    int out_cut = decoded_len > room, log_cut = 0;
    gw_event_t *ev;

    if (run->state == GW_RUN_FINISHED)
        return;
    /* what apply_limits does, on the encoded text: the longest prefix of whole characters that fits the output room, then, as
     * escaped, one event of the log */
    if (out_cut || inner_len > text_max) {
        size_t keep, full = inner_len;
        inner_len = wire_json_string_prefix(inner, full, room, &keep);
        if (inner_len > text_max) {
            /* scaled to what the text takes escaped, then less what is still over (a decoded byte is one encoded byte or more) */
            inner_len = wire_json_string_prefix(inner, full, (size_t)((double)keep * (double)text_max / (double)inner_len), &keep);
            while (inner_len > text_max) {
                size_t over = inner_len - text_max;
                inner_len = wire_json_string_prefix(inner, full, over < keep ? keep - over : 0, &keep);
            }
            log_cut = 1;
        }
        run->output_dropped_bytes += decoded_len - keep;
        decoded_len = keep;
        /* a small head of a big text is copied, so that the kernel's buffer (up to the message cap) goes now */
        if (inner_len <= CUT_COPY_MAX_BYTES)
            storage = NULL;
    }
    if (decoded_len != 0 || !(out_cut || log_cut)) {
        run->output_bytes += decoded_len;
        if (run->log_error != 0 && run->tail_bytes > GW_RUNLOG_TAIL_BYTES) {
            /* drop_for_log */
            run->output_bytes -= decoded_len;
            run->output_dropped_bytes += decoded_len;
        } else {
            ev = gw_event_render_text(is_stderr, gw_unix_ms(), inner, inner_len, storage, ++run->last_event_id,
                                      run->runs->host->config->compat_execd);
            link_event(run, ev, 0);
        }
    }
    if (out_cut)
        report_truncation(run);
    if (log_cut)
        report_log_cut(run);
}

void gw_run_append_result_json(gw_run_t *run, const char *results_json, size_t len, int is_display)
{
    static const char display[] = "true,\"results\":";
    gw_event_t *ev;
    char *value;

    if (run->state == GW_RUN_FINISHED)
        return;
    if (len > run->limits.result_bytes || len > gw_run_log_text_max(run) ||
        (run->log_error != 0 && run->tail_bytes > GW_RUNLOG_TAIL_BYTES)) {
        ++run->results_dropped;
        if (len > run->limits.result_bytes)
            report_truncation(run);
        else if (len > gw_run_log_text_max(run))
            report_log_cut(run);
        return;
    }
    if (!is_display) {
        ev = gw_event_render_member("result", gw_unix_ms(), "results", results_json, len, ++run->last_event_id,
                                    run->runs->host->config->compat_execd);
    } else {
        /* {"type","timestamp","display":true,"results":{...}}: the member's value text carries the next member */
        value = wire_malloc(sizeof(display) - 1 + len);
        memcpy(value, display, sizeof(display) - 1);
        memcpy(value + sizeof(display) - 1, results_json, len);
        ev = gw_event_render_member("result", gw_unix_ms(), "display", value, sizeof(display) - 1 + len, ++run->last_event_id,
                                    run->runs->host->config->compat_execd);
        free(value);
    }
    link_event(run, ev, 0);
}

void gw_run_append_last(gw_run_t *run, json_t *event)
{
    insert(run, event, 1);
}

/* A small run's whole log, into a block shared with other small runs. */
static int write_packed(gw_run_t *run)
{
    size_t len = (size_t)(run->end_off - run->written_off), at = 0;
    char *buf = wire_malloc(len);
    int ret;

    for (h2o_linklist_t *node = run->tail.next; node != &run->tail; node = node->next) {
        gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, node);
        gw_runlog_header_t header = {ev->id, (uint32_t)ev->len, GW_RUNLOG_MAGIC};
        if (gw_run_record_off(ev) < run->written_off)
            continue;
        memcpy(buf + at, &header, HEADER_LEN);
        gw_event_copy(ev, buf + at + HEADER_LEN);
        at += HEADER_LEN + ev->len;
    }
    if ((ret = gw_runstore_write_packed(&run->runs->store, &run->file, run->written_off, buf, len)) == 0)
        run->written_off = run->end_off;
    free(buf);
    return ret;
}

void gw_run_flush_log(gw_run_t *run)
{
    int ret;

    if (run->log_error != 0)
        return;
    /* nothing is lost when this fails: the tail stays in RAM with every event the file lacks */
    if (run->end_off == run->written_off)
        ret = 0;
    else if (run->file.blocks.size == 0 && run->end_off - run->written_off <= GW_RUNSTORE_PACK_MAX)
        ret = write_packed(run);
    else
        ret = write_tail(run);
    if (ret != 0) {
        run->log_error = ret;
        return;
    }
    /* A reader still attached is about to send the last events (it is woken after this): from the
     * tail, not read back from the file; the tail goes when the last reader does. */
    if (h2o_linklist_is_empty(&run->cursors))
        gw_run_release_tail(run);
}

void gw_run_release_tail(gw_run_t *run)
{
    gw_event_t *head;

    if (run->written_off != run->end_off)
        return; /* the file lacks some of it (a failed write): the tail is all there is */
    while ((head = gw_run_tail_first(run)) != NULL)
        tail_remove(run, head);
}

int gw_run_find_event(gw_run_t *run, uint64_t id, uint64_t *off)
{
    gw_event_t *head = gw_run_tail_first(run);
    gw_runlog_header_t header;
    uint64_t cur_id = run->first_id, cur_off = run->first_off;
    size_t lo = 0, hi = run->index.size;
    int ret;

    if (id > run->last_event_id) {
        *off = run->end_off;
        return 0;
    }
    if (id < run->first_id)
        return GW_EEVENTSGONE;
    if (head != NULL && id >= head->id) {
        for (h2o_linklist_t *node = run->tail.prev; node != &run->tail; node = node->prev) {
            gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, node);
            if (ev->id == id) {
                *off = gw_run_record_off(ev);
                return 0;
            }
        }
    }
    /* the last mark at or before `id`, then record by record */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (run->index.entries[mid].id <= id)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo != 0 && run->index.entries[lo - 1].id >= cur_id) {
        cur_id = run->index.entries[lo - 1].id;
        cur_off = run->index.entries[lo - 1].off;
    }
    for (; cur_id < id; ++cur_id) {
        if ((ret = gw_run_read_header(run, cur_off, &header)) != 0)
            return ret;
        if (header.id != cur_id)
            return -EIO;
        cur_off += HEADER_LEN + header.len;
    }
    *off = cur_off;
    return 0;
}

void gw_run_clear_log(gw_run_t *run)
{
    gw_event_t *head;

    while ((head = gw_run_tail_first(run)) != NULL)
        tail_remove(run, head);
    gw_runstore_release(&run->runs->store, &run->file);
    free(run->index.entries);
    memset(&run->index, 0, sizeof(run->index));
    run->log_bytes = 0;
    run->first_id = run->last_event_id + 1;
    run->first_off = run->written_off = run->end_off;
}

void gw_run_notify_cursors(gw_run_t *run)
{
    h2o_linklist_t *node, *next;

    for (node = run->cursors.next; node != &run->cursors; node = next) {
        next = node->next; /* a writer may close (detach) its cursor */
        gw_event_source_notify(&H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, link, node)->super);
    }
}
