/* mcp/mcp.h: the MCP front door: the Model Context Protocol over Streamable HTTP at /mcp (docs/API.md 5.3). */
#ifndef GW_MCP_H
#define GW_MCP_H

#include <stdint.h>
#include <h2o.h>
#include <jansson.h>
#include "core/host.h"
#include "core/router.h"
#include "code/context.h"
#include "code/languages.h"
#include "files/files.h"
#include "runs/run.h"
#include "mcp/output.h"
#include "mcp/revision.h"

/* Length of a session id: 16 random bytes from libsodium, in hex. */
#define GW_MCP_SESSION_ID_LEN 32
/*
 * Progress notifications and keep-alives of a streamed call: every tick. A tools/call without a progress token
 * answers in JSON when its run ends before the first tick; beyond, it streams (SSE).
 */
#define GW_MCP_TICK_MS 1000
/* Ended sessions remembered, newest replacing oldest, so that a request naming one hears why it is gone (404). */
#define GW_MCP_ENDED_MEMORY 64

/** Why a session ended: its 404's message, and which count of gw_mcp_stats_t it adds to. */
typedef enum { GW_MCP_END_DELETED, GW_MCP_END_EXPIRED, GW_MCP_END_EVICTED, GW_MCP_END_SHUTDOWN } gw_mcp_end_t;

/** The door's session counts, for the metrics. */
typedef struct st_gw_mcp_stats_t {
    size_t open;      /* sessions open now (<= config->mcp_max_sessions) */
    uint64_t opened;  /* sessions created since kgate started */
    uint64_t deleted; /* ended by the client (DELETE /mcp) */
    uint64_t expired; /* ended idle (--mcp-session-idle-ms, or --mcp-session-fresh-idle-ms before a second request) */
    uint64_t evicted; /* idle ones ended to make room for a new session (least recently used first) */
    uint64_t refused; /* initialize answered 429: every session had a call in flight */
} gw_mcp_stats_t;

/**
 * The door's state: the engine features it speaks for (borrowed), and its sessions. Each session
 * owns its contexts (one per language, and the bash kernel of its `bash` tool), by id: the engine
 * may delete a context on its own (idle, DELETE /code/contexts/{id}), so a session never holds one
 * by pointer.
 */
typedef struct st_gw_mcp_t {
    gw_door_t super;
    gw_host_t *host;
    gw_languages_t *languages;
    gw_contexts_t *contexts;
    gw_files_t *files;
    h2o_linklist_t sessions;    /* gw_mcp_session_t */
    size_t nsessions;           /* bounded by config->mcp_max_sessions */
    h2o_linklist_t named;       /* gw_mcp_session_t of revision 2026-07-28's named contexts, least recently used first */
    size_t nnamed;              /* bounded by config->mcp_max_named_contexts */
    h2o_timeout_t tick_timeout; /* GW_MCP_TICK_MS: progress of the calls in flight */
    gw_mcp_stats_t stats;       /* open is nsessions: the rest counts as sessions come and go */
    struct {
        char id[GW_MCP_SESSION_ID_LEN + 1];
        gw_mcp_end_t why;
    } ended[GW_MCP_ENDED_MEMORY]; /* a ring: the newest at ended_next - 1 */
    unsigned ended_next;
} gw_mcp_t;

/**
 * One MCP session (Mcp-Session-Id): created by initialize, ended by DELETE /mcp, idle expiry or shutdown. Revision
 * 2026-07-28 has no session: its state lives in named contexts (mcp/stateless.c), each one of these with a `name`
 * (and no id), which own their kernels as a session does, and end by idle expiry, eviction or shutdown.
 */
typedef struct st_gw_mcp_session_t {
    char id[GW_MCP_SESSION_ID_LEN + 1];
    char name[GW_MCP_CONTEXT_NAME_MAX + 1]; /* a named context's name; "" for a session */
    gw_mcp_t *mcp;
    h2o_linklist_t link; /* in mcp->sessions */
    char version[16];    /* the negotiated protocol revision */
    int initialized;     /* notifications/initialized arrived */
    int used;            /* a message beyond initialize and notifications/initialized came: the long idle expiry applies */
    int64_t last_activity_mono_ms;
    json_t *contexts;     /* kernelspec name -> context id (the `bash` spec's is the bash tool's) */
    h2o_linklist_t calls; /* gw_mcp_call_t in flight */
} gw_mcp_session_t;

/** Initialises the door over the engine's features (borrowed for the door's life). */
void gw_mcp_init(gw_mcp_t *mcp, gw_host_t *host, gw_languages_t *languages, gw_contexts_t *contexts, gw_files_t *files);
/** Appends the door's routes (POST, GET and DELETE /mcp) to `table`. */
void gw_mcp_add_routes(gw_mcp_t *mcp, gw_route_table_t *table);
/**
 * Ends sessions idle (no call in flight) for longer than config->mcp_session_idle_ms, or than
 * config->mcp_session_fresh_idle_ms when they never sent a message beyond initialize and
 * notifications/initialized (server tick).
 */
void gw_mcp_tick(gw_mcp_t *mcp);
/** Ends every session (server shutdown, before the contexts go). */
void gw_mcp_shutdown(gw_mcp_t *mcp);
/** Releases what is left (after the loop has stopped). */
void gw_mcp_dispose(gw_mcp_t *mcp);

/* ---- shared by the door's files ---- */

/** The session with `id`, or NULL. */
gw_mcp_session_t *gw_mcp_session_find(gw_mcp_t *mcp, const char *id, size_t len);
/**
 * Makes room for one more session: nothing when fewer than config->mcp_max_sessions are open, else the least
 * recently used session without a call in flight is ended (GW_MCP_END_EVICTED: its kernels are shut down). Returns
 * 0 when a session may be created, or -1 when every session has a call in flight, with `*retry_after_s` the seconds
 * until the first of those calls reaches its timeout (its session is idle by then at the latest; at least 1).
 */
int gw_mcp_session_admit(gw_mcp_t *mcp, unsigned *retry_after_s);
/** A new session speaking `version` (gw_mcp_session_admit said there is room). */
gw_mcp_session_t *gw_mcp_session_create(gw_mcp_t *mcp, const char *version);
/** Why the session `id` (`len` bytes) is gone, for its 404: a sentence, static; a generic one when it is not remembered. */
const char *gw_mcp_session_gone(gw_mcp_t *mcp, const char *id, size_t len);
/**
 * Ends `session` for `why` (counted, and remembered for gw_mcp_session_gone): its calls lose it (their runs end with
 * its contexts), its contexts are destroyed, it is freed.
 */
void gw_mcp_session_end(gw_mcp_session_t *session, gw_mcp_end_t why);
/** The session counts (open is the number open now). */
void gw_mcp_stats(const gw_mcp_t *mcp, gw_mcp_stats_t *out);
/** Registers the door's figures (sessions open, opened, ended by why, refused; named contexts) in the host's stats. */
void gw_mcp_figures_register(gw_mcp_t *mcp);
/**
 * What ending a session or a named context releases: its calls lose it, its contexts are destroyed (it stays linked);
 * with `discard`, killed at once (gw_context_discard: an eviction, whose successor's kernels start now).
 */
void gw_mcp_session_release(gw_mcp_session_t *session, int discard);

/**
 * Runs tools/call `params` (an object, borrowed) of request `id` (borrowed) for `session` and
 * answers `req` (a JSON-RPC response in JSON or in an SSE stream, as `accepts` allows: see
 * gw_mcp_accepts), now or when the run ends.
 */
void gw_mcp_tools_call(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, json_t *params, unsigned accepts);
/** The session of the call linked at `link` (in session->calls, already unlinked) has ended: the call goes on without it. */
void gw_mcp_call_forget_session(h2o_linklist_t *link);
/** When the call linked at `link` (in session->calls) reaches its run's timeout, on the gw_now_ms clock. */
int64_t gw_mcp_call_deadline_ms(h2o_linklist_t *link);
/** The interrupt tool: interrupts the cell running in the session's kernel of `args`' language (state kept). */
void gw_mcp_tool_interrupt(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, unsigned accepts, json_t *args);
/** The restart tool: restarts the session's kernel of `args`' language (state lost) and answers once it is ready again. */
void gw_mcp_tool_restart(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, unsigned accepts, json_t *args);
/** The list_contexts tool: the session's kernels, their language, state, execution_count and idle time. */
void gw_mcp_tool_list_contexts(gw_mcp_session_t *session, h2o_req_t *req, json_t *id, unsigned accepts);
/** notifications/cancelled: interrupts the run of request `request_id` of `session` (state kept); no-op when unknown. */
void gw_mcp_cancel(gw_mcp_session_t *session, json_t *request_id);
/*
 * A bit beside gw_mcp_accepts' in the `accepts` a call is answered by: the request is of revision 2026-07-28, so
 * its result carries `resultType` and the server's `_meta` (gw_mcp_stateless_stamp, mcp/revision.h), and its client closing the
 * response (the revision's cancellation) interrupts its run.
 */
#define GW_MCP_ANSWER_STATELESS 4u

/**
 * Answers a request at once with a JSON-RPC message (reference stolen): JSON, or a one-message SSE stream for
 * a client whose Accept (`accepts`, gw_mcp_accepts) takes only SSE.
 */
void gw_mcp_respond(h2o_req_t *req, unsigned accepts, json_t *message);
/** Sends a JSON-RPC message (reference stolen) as the JSON response to `req` with `status`. */
void gw_mcp_send(h2o_req_t *req, int status, json_t *message);

/* ---- revision 2026-07-28 (mcp/stateless.c) ---- */

/** True when the POSTed `msg` (parsed) belongs to revision 2026-07-28 (gw_mcp_is_stateless over `req`'s headers). */
int gw_mcp_stateless_claims(h2o_req_t *req, const gw_mcp_message_t *msg);
/** Answers `msg` (borrowed) of revision 2026-07-28: its checks, server/discover, tools/list, tools/call. */
void gw_mcp_stateless_post(gw_mcp_t *mcp, h2o_req_t *req, gw_mcp_message_t *msg, unsigned accepts);
/** Ends named contexts idle for longer than config->mcp_context_idle_ms (server tick). */
void gw_mcp_named_tick(gw_mcp_t *mcp);
/** Ends every named context (shutdown). */
void gw_mcp_named_shutdown(gw_mcp_t *mcp);

static inline gw_mcp_t *gw_mcp_from(gw_door_t *door)
{
    return H2O_STRUCT_FROM_MEMBER(gw_mcp_t, super, door);
}

#endif
