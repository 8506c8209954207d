/* Cursors: a reader's position in a run's log, served to a writer as an event source. */
#include <string.h>
#include "core/errors.h"
#include "runs/internal.h"

static gw_event_t *cursor_next(gw_event_source_t *source, const gw_event_t *prev, int *lost)
{
    gw_run_cursor_t *cursor = H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, super, source);
    gw_run_t *run = cursor->run;
    uint64_t wanted = prev != NULL ? prev->id + 1 : cursor->after_id + 1;
    gw_event_t *head;
    h2o_linklist_t *node;

    *lost = 0;
    if (run == NULL)
        return NULL;
    if (prev != NULL && prev->in_log) {
        node = prev->link.next;
        return node == &run->log ? NULL : H2O_STRUCT_FROM_MEMBER(gw_event_t, link, node);
    }
    if (h2o_linklist_is_empty(&run->log))
        return NULL;
    head = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next);
    if (head->id > wanted) {
        *lost = 1;
        return NULL;
    }
    /* a resume point inside the log: walk to it once; later calls continue from `prev` */
    for (node = run->log.next; node != &run->log; node = node->next) {
        gw_event_t *ev = H2O_STRUCT_FROM_MEMBER(gw_event_t, link, node);
        if (ev->id >= wanted)
            return ev;
    }
    return NULL;
}

static int cursor_is_end(gw_event_source_t *source, const gw_event_t *prev)
{
    gw_run_cursor_t *cursor = H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, super, source);
    gw_run_t *run = cursor->run;
    uint64_t seen = prev != NULL ? prev->id : cursor->after_id;

    /* a detached cursor (its run went away at exit) never ends on its own: the server is stopping */
    return run != NULL && run->state == GW_RUN_FINISHED && seen >= run->last_event_id;
}

static void cursor_detach(gw_run_cursor_t *cursor)
{
    if (cursor->run == NULL)
        return;
    h2o_linklist_unlink(&cursor->link);
    cursor->run = NULL;
}

static void cursor_close(gw_event_source_t *source)
{
    cursor_detach(H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, super, source));
}

static const gw_event_source_ops_t cursor_ops = {cursor_next, cursor_is_end, cursor_close};

int gw_run_cursor_open(gw_run_t *run, gw_run_cursor_t *cursor, uint64_t after_id)
{
    if (after_id > run->last_event_id)
        after_id = run->last_event_id;
    if (!h2o_linklist_is_empty(&run->log) && H2O_STRUCT_FROM_MEMBER(gw_event_t, link, run->log.next)->id > after_id + 1)
        return GW_EEVENTSGONE;
    memset(cursor, 0, sizeof(*cursor));
    cursor->super.ops = &cursor_ops;
    cursor->run = run;
    cursor->after_id = after_id;
    h2o_linklist_insert(&run->cursors, &cursor->link);
    return 0;
}

size_t gw_run_num_cursors(const gw_run_t *run)
{
    size_t n = 0;
    for (const h2o_linklist_t *node = run->cursors.next; node != &run->cursors; node = node->next)
        ++n;
    return n;
}

void gw_run_notify_cursors(gw_run_t *run)
{
    h2o_linklist_t *node, *next;

    for (node = run->cursors.next; node != &run->cursors; node = next) {
        next = node->next; /* a writer may close (detach) its cursor */
        gw_event_source_notify(&H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, link, node)->super);
    }
}

void gw_run_detach_cursors(gw_run_t *run)
{
    while (!h2o_linklist_is_empty(&run->cursors))
        cursor_detach(H2O_STRUCT_FROM_MEMBER(gw_run_cursor_t, link, run->cursors.next));
}
