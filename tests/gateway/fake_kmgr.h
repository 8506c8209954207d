/* tests/gateway/fake_kmgr.h: a fake kernel manager: the kmgr_* functions gateway/code calls, with kernels a test scripts. */
#ifndef KGATE_TESTS_FAKE_KMGR_H
#define KGATE_TESTS_FAKE_KMGR_H

#include <stddef.h>
#include <h2o.h>
#include <jansson.h>
#include "kmgr/kernel.h"
#include "kmgr/manager.h"

/*
 * fake_kmgr.c defines kmgr_kernel_start, _destroy, _restart, _interrupt, _execute, _state,
 * _state_name, _info, _exit_reason, _last_death, _auto_restarts, _answering, _set_restart_limit,
 * _set_tap, _set_tap_text_room, _send_parts, kmgr_request_cancel, kmgr_request_set_late_sink, kmgr_request_sent_at (a request made
 * while its kernel is starting or restarting is sent when fake_kernel_set_state makes it IDLE or BUSY) and
 * kmgr_request_input_reply. A test binary that compiles it links gateway/code against it instead of kernelmgr's kernel.c, request.c
 * and manager.c: no process, no socket. The calls keep kernelmgr's contract (kmgr/kernel.h): a request's callback is never called
 * from inside the call that made it; a restart fails the pending requests (KSYS_ESHUTDOWN) and announces RESTARTING later, from the
 * loop; a death fails them (KSYS_EDIED) before announcing DEAD; nothing is called back after kmgr_kernel_destroy.
 *
 * What the real one frees, the fake keeps until fake_kmgr_destroy (destroyed kernels, finished
 * requests), so that a call on a handle that is no longer valid is reported as a misuse (see
 * fake_kmgr_misuse) instead of going unnoticed.
 */

/** Creates the fake manager; deferred notices run from `loop` (as the real one's run_pending). */
kmgr_manager_t *fake_kmgr_create(h2o_loop_t *loop);
/** Frees the manager with every kernel and request it kept. */
void fake_kmgr_destroy(kmgr_manager_t *mgr);
/** The next kmgr_kernel_start fails with `err` (a KMGR_E* code). */
void fake_kmgr_fail_next_start(kmgr_manager_t *mgr, int err);
/**
 * With `on`, every message reaches its request parsed, raw_stream or not: as kernelmgr delivered stream
 * messages before requests could opt in to raw content (the way a test compares both).
 */
void fake_kmgr_parse_all(kmgr_manager_t *mgr, int on);
/** Kernels started (kmgr_kernel_start calls that succeeded). */
size_t fake_kmgr_num_started(const kmgr_manager_t *mgr);
/** Calls made on a destroyed kernel or a finished request: 0, or how many, with the first one described in `*what`. */
size_t fake_kmgr_misuse(const kmgr_manager_t *mgr, const char **what);

/** The kernel changes state (as if its loop saw it): on_state is told at once unless the state is the one last told. */
void fake_kernel_set_state(kmgr_kernel_t *kernel, kmgr_kernel_state_t state);
/**
 * The kernel dies with `reason` and stays dead (no restart limit, or past it): its pending requests end with FAILED
 * (KSYS_EDIED), then on_state hears DEAD.
 */
void fake_kernel_die(kmgr_kernel_t *kernel, const char *reason);
/**
 * The kernel dies with `reason` and kernelmgr restarts it automatically (kmgr_kernel_options_t.restart_limit, whatever
 * the limit: the test decides): the restart counts go up, kmgr_kernel_last_death says `reason`, the pending requests end
 * with FAILED (KSYS_EDIED) while the state is already RESTARTING, then on_state hears RESTARTING. fake_kernel_set_state
 * makes it IDLE again.
 */
void fake_kernel_die_and_restart(kmgr_kernel_t *kernel, const char *reason);
/** The kernel stops (0) or starts (1) answering heartbeats: on_state hears it (kmgr_kernel_answering). */
void fake_kernel_set_answering(kmgr_kernel_t *kernel, int answering);

/** What the gateway did to a kernel. */
typedef struct st_fake_kernel_seen_t {
    size_t executes;        /* execute_requests sent (fake_kernel_request numbers them from 0) */
    unsigned interrupts;    /* kmgr_kernel_interrupt calls that succeeded */
    unsigned restarts;      /* kmgr_kernel_restart calls that succeeded */
    int destroyed;          /* kmgr_kernel_destroy was called */
    size_t sent_parts;      /* kmgr_kernel_send_parts calls that succeeded */
    unsigned restart_limit; /* kmgr_kernel_options_t.restart_limit, or the last kmgr_kernel_set_restart_limit */
    uint64_t tap_text_room; /* the last kmgr_kernel_set_tap_text_room */
} fake_kernel_seen_t;
const fake_kernel_seen_t *fake_kernel_seen(const kmgr_kernel_t *kernel);
/**
 * The kernel sends a message (`msg_type` on `channel`, child of `parent_id`) that its tap hears
 * (kmgr_kernel_set_tap). Returns 1, or 0 when no tap is set.
 */
int fake_kernel_tap_message(kmgr_kernel_t *kernel, wire_channel_t channel, const char *msg_type, const char *parent_id);
/** The `i`-th execute_request sent to the kernel (0: the first), or NULL. */
kmgr_request_t *fake_kernel_request(const kmgr_kernel_t *kernel, size_t i);

/** What the gateway sent and did for a request. */
typedef struct st_fake_request_seen_t {
    const char *code;
    int allow_stdin;
    int raw_stream;        /* the request opted in to raw stream content */
    int cancelled;         /* kmgr_request_cancel was called */
    uint64_t text_room;    /* the last kmgr_request_set_text_room (UINT64_MAX until one) */
    int finished;          /* DONE or FAILED was delivered */
    json_t *input_replies; /* the values of its input_replies, in order (an array) */
} fake_request_seen_t;
const fake_request_seen_t *fake_request_seen(const kmgr_request_t *req);

/**
 * What the kernel sends for the request. Each calls its callback at once (as the loop would) unless
 * it was cancelled; a finished request, or one of a destroyed kernel, hears nothing.
 * `content` references are stolen.
 */
void fake_request_iopub(kmgr_request_t *req, const char *msg_type, json_t *content);
void fake_request_reply(kmgr_request_t *req, json_t *content);
/**
 * An iopub message whose content is the `len` bytes at `content` (copied) as the kernel sent them, whatever
 * they are: as kernelmgr delivers it, kept raw (msg->content_raw) for a `stream` message of a request
 * that opted in (kmgr_execute_options_t.raw_stream), parsed otherwise (content_undecodable when it
 * cannot be).
 */
void fake_request_iopub_bytes(kmgr_request_t *req, const char *msg_type, const char *content, size_t len);
/** An input_request: the request awaits one input_reply afterwards. */
void fake_request_input(kmgr_request_t *req, const char *prompt, int password);
/** DONE (both execute_reply and status idle are in). */
void fake_request_done(kmgr_request_t *req);
/** FAILED with `err` (KSYS_EDIED, KSYS_ESHUTDOWN). */
void fake_request_fail(kmgr_request_t *req, int err);
/**
 * A message of `msg_type` (with `text_bytes` of stream text) the kernel published for `req` after it had ended: as kernelmgr
 * tells it (kmgr_late_sink_cb) for a request that ended with DONE and has a late sink. Returns what the sink answered (1: the
 * owner counted it; 0: it could not), or -1 when kernelmgr would tell nobody (no sink, cancelled, not ended with DONE, or
 * its kernel destroyed).
 */
int fake_request_late(kmgr_request_t *req, const char *msg_type, uint64_t text_bytes);
/** A successful run's end: execute_reply {status ok, execution_count}, status idle, DONE. */
void fake_request_complete(kmgr_request_t *req, int execution_count);

#endif
