/* Cursors: a reader's position in a run's log, served to a writer as an event source (from the tail in RAM, else from the file). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/errors.h"
#include "runs/internal.h"

static void set_piece(gw_run_cursor_t *cursor, gw_event_t *piece, uint64_t from)
{
    gw_event_release(cursor->_private.piece);
    cursor->_private.piece = piece;
    cursor->_private.piece_from = from;
}

/*
 * The log could not be read back: the reader gets one error event instead of what it missed, then
 * the end of its stream. The frame carries no id, so a client that resumes does so from the last
 * event it really got.
 */
static gw_event_t *read_failed(gw_run_cursor_t *cursor, int err)
{
    char evalue[256];
    json_t *ev;
    char *json;
    gw_event_t *frame;

    cursor->_private.read_error = err;
    snprintf(evalue, sizeof(evalue), "kgate could not read this run's event log back (%s)", gw_strerror(err));
    ev = gw_error_event("RunLogError", evalue);
    json = json_dumps(ev, JSON_COMPACT);
    json_decref(ev);
    if (cursor->run->runs->host->config->compat_execd) {
        char *framed = wire_malloc(strlen(json) + 3);
        sprintf(framed, "%s\n\n", json);
        frame = gw_event_from_bytes(framed, strlen(framed));
        free(framed);
    } else {
        char *framed = wire_malloc(strlen(json) + 9);
        sprintf(framed, "data: %s\n\n", json);
        frame = gw_event_from_bytes(framed, strlen(framed));
        free(framed);
    }
    free(json);
    set_piece(cursor, frame, 0);
    cursor->_private.error_sent = 1;
    return frame;
}

/* The next piece of the log at `pos` read from the file: a whole record's frame, or its next part. */
static gw_event_t *read_piece(gw_run_cursor_t *cursor, uint64_t pos)
{
    gw_run_t *run = cursor->run;
    uint64_t from = pos;
    gw_event_t *ev;
    size_t len;
    int ret;

    if (!(cursor->_private.rec_off < pos && pos < cursor->_private.rec_end)) {
        gw_runlog_header_t header;
        if ((ret = gw_run_read_header(run, pos, &header)) != 0)
            return read_failed(cursor, ret);
        cursor->_private.rec_off = pos;
        cursor->_private.rec_end = pos + sizeof(header) + header.len;
        cursor->_private.rec_id = header.id;
        from = pos + sizeof(header);
    }
    len = cursor->_private.rec_end - from < GW_RUNLOG_READ_BYTES ? (size_t)(cursor->_private.rec_end - from) : GW_RUNLOG_READ_BYTES;
    ev = wire_malloc(offsetof(gw_event_t, frame) + len);
    memset(ev, 0, offsetof(gw_event_t, frame));
    ev->refcnt = 1;
    ev->id = cursor->_private.rec_id;
    ev->len = len;
    ev->log_pos = from + len;
    if ((ret = gw_runstore_read(&run->runs->store, &run->file, from, ev->frame, len)) != 0) {
        gw_event_release(ev);
        return read_failed(cursor, ret);
    }
    set_piece(cursor, ev, pos);
    return ev;
}

static gw_event_t *cursor_next(gw_event_source_t *source, const gw_event_t *prev, int *lost)
{
    gw_run_cursor_t *cursor = H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, super, source);
    gw_run_t *run = cursor->run;
    gw_event_t *head;
    uint64_t pos;

    *lost = 0;
    if (run == NULL)
        return NULL;
    if (cursor->_private.error_sent)
        return prev == cursor->_private.piece ? NULL : cursor->_private.piece;
    if (prev != NULL && prev->in_log) {
        h2o_linklist_t *node = prev->link.next;
        return node == &run->tail ? NULL : H2O_STRUCT_FROM_MEMBER(gw_event_t, link, node);
    }
    pos = prev != NULL ? prev->log_pos : cursor->_private.start_off;
    if (pos < run->first_off) {
        *lost = 1;
        return NULL;
    }
    if (pos >= run->end_off)
        return NULL;
    if (cursor->_private.piece != NULL && cursor->_private.piece_from == pos)
        return cursor->_private.piece;
    /* a record boundary inside the tail: served from RAM (within a record read from the file, the rest comes from the file) */
    if ((head = gw_run_tail_first(run)) != NULL && pos >= gw_run_record_off(head)) {
        for (h2o_linklist_t *node = &head->link; node != &run->tail; node = node->next) {
            gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, node);
            if (gw_run_record_off(ev) == pos) {
                /* held, so that a writer asking again while its send is in flight does not walk again */
                gw_event_addref(ev);
                set_piece(cursor, ev, pos);
                return ev;
            }
            if (gw_run_record_off(ev) > pos)
                break;
        }
    }
    return read_piece(cursor, pos);
}

static int cursor_is_end(gw_event_source_t *source, const gw_event_t *prev)
{
    gw_run_cursor_t *cursor = H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, super, source);
    gw_run_t *run = cursor->run;

    /* a detached cursor (its run went away at exit) never ends on its own: the server is stopping */
    if (run == NULL)
        return 0;
    if (cursor->_private.error_sent)
        return prev != NULL && prev == cursor->_private.piece;
    return run->state == GW_RUN_FINISHED && (prev != NULL ? prev->log_pos : cursor->_private.start_off) >= run->end_off;
}

static void cursor_detach(gw_run_cursor_t *cursor)
{
    gw_run_t *run = cursor->run;

    if (run == NULL)
        return;
    h2o_linklist_unlink(&cursor->link);
    cursor->run = NULL;
    /* a finished run kept its tail for the readers attached when it ended (gw_run_flush_log) */
    if (run->state == GW_RUN_FINISHED && h2o_linklist_is_empty(&run->cursors))
        gw_run_release_tail(run);
}

static void cursor_close(gw_event_source_t *source)
{
    gw_run_cursor_t *cursor = H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, super, source);

    cursor_detach(cursor);
    set_piece(cursor, NULL, 0);
}

static const gw_event_source_ops_t cursor_ops = {cursor_next, cursor_is_end, cursor_close};

int gw_run_cursor_open(gw_run_t *run, gw_run_cursor_t *cursor, uint64_t after_id)
{
    int ret;

    if (after_id > run->last_event_id)
        after_id = run->last_event_id;
    if (after_id + 1 < run->first_id)
        return GW_EEVENTSGONE;
    memset(cursor, 0, sizeof(*cursor));
    cursor->super.ops = &cursor_ops;
    cursor->run = run;
    cursor->after_id = after_id;
    h2o_linklist_insert(&run->cursors, &cursor->link);
    if ((ret = gw_run_find_event(run, after_id + 1, &cursor->_private.start_off)) != 0)
        read_failed(cursor, ret);
    return 0;
}

size_t gw_run_num_cursors(const gw_run_t *run)
{
    size_t n = 0;
    for (const h2o_linklist_t *node = run->cursors.next; node != &run->cursors; node = node->next)
        ++n;
    return n;
}

void gw_run_detach_cursors(gw_run_t *run)
{
    while (!h2o_linklist_is_empty(&run->cursors))
        cursor_detach(H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, link, run->cursors.next));
}
