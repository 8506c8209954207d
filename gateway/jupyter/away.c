/* jupyter/away.c: a kernel's messages kept for a client that went away, until it returns (jupyter/away.h). */
#include <stdlib.h>
#include "wire/alloc.h"
#include "ksys/log.h"
#include "jupyter/away.h"

/* The messages of a kernel kept for a client that went away: a tap of its own, so that they are kept while no socket is open. */
typedef struct st_gw_jaway_t {
    gw_context_tap_t tap; /* detached once dropped; the tick then frees the struct */
    h2o_linklist_t link;  /* in jupyter->away */
    gw_jreplay_t *replay; /* NULL once dropped */
} gw_jaway_t;

static gw_jaway_t *find_away(gw_jupyter_t *jupyter, const gw_context_t *ctx)
{
    for (h2o_linklist_t *node = jupyter->away.next; node != &jupyter->away; node = node->next) {
        gw_jaway_t *away = H2O_STRUCT_FROM_MEMBER(gw_jaway_t, link, node);
        if (away->replay != NULL && away->tap.ctx == ctx)
            return away;
    }
    return NULL;
}

int gw_jupyter_is_buffering(gw_jupyter_t *jupyter, const gw_context_t *ctx)
{
    return find_away(jupyter, ctx) != NULL;
}

/* Drops what was kept; the struct itself is freed by the tick (this may run inside the away's own tap callback). */
static void away_drop(gw_jaway_t *away, const char *why)
{
    size_t lost;

    if (away->replay == NULL)
        return;
    if (gw_jreplay_count(away->replay) != 0 || gw_jreplay_lost(away->replay, NULL) != 0) {
        lost = gw_jreplay_lost(away->replay, NULL);
        ksys_log_warn("jupyter: dropped %zu kernel messages kept for session_id %.64s (%zu more were lost): %s",
                      gw_jreplay_count(away->replay), gw_jreplay_session(away->replay), lost, why);
    }
    gw_context_tap_detach(&away->tap);
    gw_jreplay_destroy(away->replay);
    away->replay = NULL;
}

static void away_free(gw_jaway_t *away)
{
    away_drop(away, "kgate is shutting down");
    h2o_linklist_unlink(&away->link);
    free(away);
}

static void on_away_message(gw_context_tap_t *tap, wire_channel_t channel, const wire_msg_t *msg, const wire_frame_t *parts,
                            size_t nparts)
{
    gw_jaway_t *away = H2O_STRUCT_FROM_MEMBER(gw_jaway_t, tap, tap);

    gw_jreplay_offer(away->replay, channel, wire_msg_type(msg), wire_msg_parent_id(msg), parts, nparts);
}

static void on_away_dropped(gw_context_tap_t *tap, wire_channel_t channel, const char *parent, size_t parent_len)
{
    gw_jaway_t *away = H2O_STRUCT_FROM_MEMBER(gw_jaway_t, tap, tap);

    gw_jreplay_note_dropped(away->replay, channel, parent, parent_len);
}

static void on_away_state(gw_context_tap_t *tap, kmgr_kernel_state_t state)
{
    /* a restart ends every request the client awaited, and Jupyter Server drops the buffer with the old kernel's channels */
    if (state == KMGR_KERNEL_RESTARTING)
        away_drop(H2O_STRUCT_FROM_MEMBER(gw_jaway_t, tap, tap), "the kernel restarted");
}

static void on_away_kernel_gone(gw_context_tap_t *tap, gw_context_t *ctx)
{
    (void)ctx;
    away_drop(H2O_STRUCT_FROM_MEMBER(gw_jaway_t, tap, tap), "the kernel was shut down");
}

void gw_jaway_start(gw_jupyter_t *jupyter, gw_context_t *ctx, const char *session_id, gw_jasked_t *asked)
{
    const gw_config_t *config = jupyter->host->config;
    gw_jaway_t *away;

    /* one buffer per kernel: a newer absent client replaces an older one, as Jupyter Server's start_buffering does */
    if ((away = find_away(jupyter, ctx)) != NULL)
        away_drop(away, "another client of the kernel went away");
    away = wire_calloc(1, sizeof(*away));
    away->replay =
        gw_jreplay_create(session_id, config->jupyter_replay_bytes, gw_now_ms() + (int64_t)config->jupyter_replay_ms, asked);
    away->tap.on_message = on_away_message;
    away->tap.on_dropped = on_away_dropped;
    away->tap.on_state = on_away_state;
    away->tap.on_destroy = on_away_kernel_gone;
    h2o_linklist_insert(&jupyter->away, &away->link);
    gw_context_tap_attach(ctx, &away->tap);
}

void gw_jaway_end(gw_jupyter_t *jupyter, gw_context_t *ctx, const char *session_id, void (*send)(void *data, const gw_jmsg_t *msg),
                  void *data, gw_jasked_t *asked)
{
    gw_jaway_t *away = find_away(jupyter, ctx);

    if (away == NULL)
        return;
    if (gw_jreplay_is_for(away->replay, session_id))
        gw_jreplay_drain(away->replay, send, data, asked);
    away_drop(away, "a client of another session_id connected");
}

void gw_jupyter_tick(gw_jupyter_t *jupyter)
{
    int64_t now = gw_now_ms();
    h2o_linklist_t *node, *next;

    for (node = jupyter->away.next; node != &jupyter->away; node = next) {
        gw_jaway_t *away = H2O_STRUCT_FROM_MEMBER(gw_jaway_t, link, node);
        next = node->next;
        if (away->replay != NULL && gw_jreplay_is_expired(away->replay, now))
            away_drop(away, "nobody came back for them in --jupyter-replay-ms");
        if (away->replay == NULL)
            away_free(away);
    }
}

void gw_jaway_free_all(gw_jupyter_t *jupyter)
{
    while (!h2o_linklist_is_empty(&jupyter->away))
        away_free(H2O_STRUCT_FROM_MEMBER(gw_jaway_t, link, jupyter->away.next));
}
