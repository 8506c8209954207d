/*
 * The MCP door's session table: creation, lookup, idle expiry, eviction of the least recently used idle session when
 * the table is full, and the memory of ended sessions that lets a 404 say why.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/ids.h"
#include "core/stats.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp.h"

gw_mcp_session_t *gw_mcp_session_create(gw_mcp_t *mcp, const char *version)
{
    gw_mcp_session_t *session = wire_malloc(sizeof(*session));

    memset(session, 0, sizeof(*session));
    /* 128 bits from libsodium's CSPRNG: the id is a bearer of the session's kernels, next to the access token */
    wire_random_hex(session->id, GW_MCP_SESSION_ID_LEN / 2);
    session->mcp = mcp;
    snprintf(session->version, sizeof(session->version), "%s", version);
    session->last_activity_mono_ms = gw_now_ms();
    session->contexts = json_object();
    h2o_linklist_init_anchor(&session->calls);
    h2o_linklist_insert(&mcp->sessions, &session->link);
    ++mcp->nsessions;
    ++mcp->stats.opened;
    return session;
}

gw_mcp_session_t *gw_mcp_session_find(gw_mcp_t *mcp, const char *id, size_t len)
{
    if (!gw_mcp_session_id_valid(id, len))
        return NULL;
    for (h2o_linklist_t *node = mcp->sessions.next; node != &mcp->sessions; node = node->next) {
        gw_mcp_session_t *session = H2O_STRUCT_FROM_MEMBER(gw_mcp_session_t, link, node);
        if (memcmp(session->id, id, len) == 0)
            return session;
    }
    return NULL;
}

static void remember_end(gw_mcp_t *mcp, const gw_mcp_session_t *session, gw_mcp_end_t why)
{
    unsigned i = mcp->ended_next++ % GW_MCP_ENDED_MEMORY;

    memcpy(mcp->ended[i].id, session->id, sizeof(mcp->ended[i].id));
    mcp->ended[i].why = why;
    switch (why) {
    case GW_MCP_END_DELETED:
        ++mcp->stats.deleted;
        break;
    case GW_MCP_END_EXPIRED:
        ++mcp->stats.expired;
        break;
    case GW_MCP_END_EVICTED:
        ++mcp->stats.evicted;
        break;
    case GW_MCP_END_SHUTDOWN:
        break;
    }
}

const char *gw_mcp_session_gone(gw_mcp_t *mcp, const char *id, size_t len)
{
    if (gw_mcp_session_id_valid(id, len)) {
        for (unsigned i = 0; i != GW_MCP_ENDED_MEMORY; ++i) {
            if (memcmp(mcp->ended[i].id, id, len) != 0)
                continue;
            switch (mcp->ended[i].why) {
            case GW_MCP_END_DELETED:
                return "Session not found: the client ended it (DELETE /mcp); initialize a new one";
            case GW_MCP_END_EXPIRED:
                return "Session not found: it idled out (--mcp-session-idle-ms, or --mcp-session-fresh-idle-ms before its first "
                       "request) and its kernels were shut down; initialize a new one";
            case GW_MCP_END_EVICTED:
                return "Session not found: it was idle, the least recently used, and was evicted (its kernels shut down) to make "
                       "room for a new session (--mcp-max-sessions); initialize a new one";
            case GW_MCP_END_SHUTDOWN:
                break;
            }
        }
    }
    return "Session not found: it ended (DELETE or idle) or never existed; initialize a new one";
}

void gw_mcp_session_end(gw_mcp_session_t *session, gw_mcp_end_t why)
{
    gw_mcp_t *mcp = session->mcp;

    remember_end(mcp, session, why);
    /* an evicted session's kernels are killed, not shut down politely: the new session's kernels start now, and the two
     * sessions' are never alive together (nobody will read the state a polite shutdown would save) */
    gw_mcp_session_release(session, why == GW_MCP_END_EVICTED);
    h2o_linklist_unlink(&session->link);
    --mcp->nsessions;
    free(session);
}

int gw_mcp_session_admit(gw_mcp_t *mcp, unsigned *retry_after_s)
{
    gw_mcp_session_t *lru = NULL;
    int64_t now = gw_now_ms(), first_deadline = INT64_MAX;

    if (mcp->nsessions < mcp->host->config->mcp_max_sessions)
        return 0;
    for (h2o_linklist_t *node = mcp->sessions.next; node != &mcp->sessions; node = node->next) {
        gw_mcp_session_t *session = H2O_STRUCT_FROM_MEMBER(gw_mcp_session_t, link, node);
        if (h2o_linklist_is_empty(&session->calls)) {
            if (lru == NULL || session->last_activity_mono_ms < lru->last_activity_mono_ms)
                lru = session;
            continue;
        }
        for (h2o_linklist_t *c = session->calls.next; c != &session->calls; c = c->next) {
            int64_t deadline = gw_mcp_call_deadline_ms(c);
            if (deadline < first_deadline)
                first_deadline = deadline;
        }
    }
    if (lru != NULL) {
        /* abandoned sessions (clients that never send DELETE) must not lock new clients out: the idle one used longest ago
         * goes, and its kernels with it */
        gw_mcp_session_end(lru, GW_MCP_END_EVICTED);
        return 0;
    }
    ++mcp->stats.refused;
    *retry_after_s = first_deadline <= now ? 1 : (unsigned)((first_deadline - now + 999) / 1000);
    return -1;
}

void gw_mcp_stats(const gw_mcp_t *mcp, gw_mcp_stats_t *out)
{
    *out = mcp->stats;
    out->open = mcp->nsessions;
}

/* The figures of /kgate/metrics, read from the counts above when a scrape renders them. */
static double read_open(void *arg)
{
    return (double)((gw_mcp_t *)arg)->nsessions;
}

static double read_named(void *arg)
{
    return (double)((gw_mcp_t *)arg)->nnamed;
}

static double read_opened(void *arg)
{
    return (double)((gw_mcp_t *)arg)->stats.opened;
}

static double read_deleted(void *arg)
{
    return (double)((gw_mcp_t *)arg)->stats.deleted;
}

static double read_expired(void *arg)
{
    return (double)((gw_mcp_t *)arg)->stats.expired;
}

static double read_evicted(void *arg)
{
    return (double)((gw_mcp_t *)arg)->stats.evicted;
}

static double read_refused(void *arg)
{
    return (double)((gw_mcp_t *)arg)->stats.refused;
}

void gw_mcp_figures_register(gw_mcp_t *mcp)
{
    gw_stats_t *stats = &mcp->host->stats;

    gw_stats_gauge_fn(stats, "kgate_mcp_sessions", "MCP sessions open (revisions 2025-06-18 and 2025-11-25)", NULL, NULL, read_open,
                      mcp);
    gw_stats_gauge_fn(stats, "kgate_mcp_named_contexts", "MCP 2026-07-28 named contexts alive", NULL, NULL, read_named, mcp);
    gw_stats_counter_fn(stats, "kgate_mcp_sessions_opened_total", "MCP sessions created by initialize", NULL, NULL, read_opened,
                        mcp);
    gw_stats_counter_fn(stats, "kgate_mcp_sessions_ended_total", "MCP sessions ended, by why", "reason", "deleted", read_deleted,
                        mcp);
    gw_stats_counter_fn(stats, "kgate_mcp_sessions_ended_total", "MCP sessions ended, by why", "reason", "expired", read_expired,
                        mcp);
    gw_stats_counter_fn(stats, "kgate_mcp_sessions_ended_total", "MCP sessions ended, by why", "reason", "evicted", read_evicted,
                        mcp);
    gw_stats_counter_fn(stats, "kgate_mcp_sessions_refused_total",
                        "MCP initialize answered 429: every session had a call in flight", NULL, NULL, read_refused, mcp);
}

void gw_mcp_tick(gw_mcp_t *mcp)
{
    const gw_config_t *config = mcp->host->config;
    int64_t now = gw_now_ms();
    h2o_linklist_t *node, *next;

    for (node = mcp->sessions.next; node != &mcp->sessions; node = next) {
        gw_mcp_session_t *session = H2O_STRUCT_FROM_MEMBER(gw_mcp_session_t, link, node);
        unsigned idle_ms = config->mcp_session_idle_ms;
        next = node->next;
        /* a session that only said hello (a client that connects, then crashes or forgets it) holds a place and no
         * state: it goes sooner */
        if (!session->used && config->mcp_session_fresh_idle_ms < idle_ms)
            idle_ms = config->mcp_session_fresh_idle_ms;
        /* a call in flight is activity, however long its run takes */
        if (!h2o_linklist_is_empty(&session->calls))
            session->last_activity_mono_ms = now;
        else if (now - session->last_activity_mono_ms >= (int64_t)idle_ms)
            gw_mcp_session_end(session, GW_MCP_END_EXPIRED);
    }
    gw_mcp_named_tick(mcp);
}
