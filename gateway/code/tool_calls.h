/* code/tool_calls.h: one run's tool calls: each batch the kernel sends becomes tool_call events, and the answers one reply. */
#ifndef GW_TOOL_CALLS_H
#define GW_TOOL_CALLS_H

#include <stddef.h>
#include <jansson.h>
#include "wire/ids.h"
#include "core/config.h"
#include "code/tools.h"
#include "runs/run.h"

typedef enum {
    GW_TOOL_CALL_WAITING,  /* in the batch the kernel waits on, not answered yet */
    GW_TOOL_CALL_ANSWERED, /* answered (the answer may still wait for its batch's other calls) */
    GW_TOOL_CALL_CLOSED,   /* the kernel stopped waiting before it was answered */
} gw_tool_call_state_t;

typedef struct st_gw_tool_call_t {
    char id[WIRE_UUID_STRLEN + 1];
    gw_tool_call_state_t state;
    size_t slot; /* its place in the batch it came in */
} gw_tool_call_t;

/**
 * A run's tool calls. Every call that became an event is remembered for the run's life, and then by the run for as
 * long as it is retained (bounded by max_tool_calls), so that a second answer is told apart from an unknown id. At most one batch
 * is open: the kernel blocks on it.
 */
typedef struct st_gw_tool_calls_t {
    gw_toolset_t *tools; /* owned; NULL: the run declared none */
    const gw_config_t *config;
    gw_tool_call_t *calls;
    size_t num_calls, cap;
    json_t *answers;    /* the open batch's answers, one slot per call the kernel sent; NULL when none is open */
    size_t batch_first; /* calls[batch_first..num_calls) belong to the open batch */
    size_t unanswered;  /* of the open batch */
} gw_tool_calls_t;

/** Initialises with `tools` (taken; may be NULL). */
void gw_tool_calls_init(gw_tool_calls_t *tc, gw_toolset_t *tools, const gw_config_t *config);
/**
 * Releases everything; the calls made so far (at most max_tool_calls: an id and whether it was answered each) go to `run`
 * (gw_run_keep_call_records), which answers late answers from them once finished: a second answer stays "answered".
 */
void gw_tool_calls_dispose(gw_tool_calls_t *tc, gw_run_t *run);

/**
 * The kernel sent a batch of calls (`calls`, borrowed; NULL when the batch was malformed). A batch
 * still open is closed first (the kernel has stopped waiting on it). Each valid call becomes a
 * `tool_call` event `{id, name, arguments}` appended to `run`; calls that cannot be made (an
 * undeclared tool, arguments that are not an object or exceed max_tool_argument_bytes, beyond
 * max_pending_tool_calls in this batch or max_tool_calls in the run) are answered with an error at
 * once, without an event. Returns the reply to send now (a new string) when nothing in the batch
 * waits for an answer, else NULL: gw_tool_calls_answer gives the reply once all are answered.
 */
char *gw_tool_calls_open_batch(gw_tool_calls_t *tc, gw_run_t *run, const json_t *calls);

/**
 * Answers call `id` with `result` (borrowed; any JSON, null included) or, when `error` is not NULL,
 * with that error (raised in the code). Returns 0 and, when it was the batch's last unanswered
 * call, the reply to send in `*reply` (a new string; NULL otherwise); or GW_ETOOLCALLNOTFOUND,
 * GW_ETOOLCALLANSWERED, GW_ETOOLCALLCLOSED.
 */
int gw_tool_calls_answer(gw_tool_calls_t *tc, const char *id, const json_t *result, const char *error, char **reply);

/** The kernel no longer waits (interrupted, timed out, done): the open batch's unanswered calls are closed. */
void gw_tool_calls_close(gw_tool_calls_t *tc);

/** Whether a batch is open (the kernel waits for answers). */
int gw_tool_calls_waiting(const gw_tool_calls_t *tc);

#endif
