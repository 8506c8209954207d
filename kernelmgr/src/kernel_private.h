/* kernelmgr/src/kernel_private.h: a kernel's insides, shared by its state machine, its requests and their table. */
#ifndef KMGR_KERNEL_PRIVATE_H
#define KMGR_KERNEL_PRIVATE_H

#include <stddef.h>
#include <stdint.h>
#include "wire/ids.h"
#include "wire/message.h"
#include "kmgr/kernel.h"
#include "channels.h"
#include "process.h"
#include "util_private.h"

/* A request that has its reply but no status idle is finished after this much silence. */
#define KMGR_IDLE_GRACE_MS 5000
/*
 * A request that has its status idle but no reply is finished after this much silence: the kernel has
 * dealt with it. ipykernel sends the reply before it publishes idle, and loses it when an interrupt
 * lands after the code has finished and before the reply has left ("KeyboardInterrupt caught in
 * kernel"): the request would wait for it until its timeout, the kernel idle.
 */
#define KMGR_REPLY_GRACE_MS 1500
/*
 * An interrupt is in flight from when it is sent until the kernel publishes status idle, for at most
 * this long (one that reached an idle kernel, which ignores it, is followed by no idle); another one
 * meanwhile is not sent. A second SIGINT that lands while ipykernel handles the first one's
 * KeyboardInterrupt, outside the code, escapes its handler and ends the kernel.
 */
#define KMGR_INTERRUPT_COALESCE_MS 2000
/*
 * Late output (docs/kernels.md): some kernels (Deno 2.9) publish a request's output after its reply and status idle.
 * A request of a kernel known to do so (kmgr_kernelspec_t.late_output, or kmgr_kernel_t.publishes_after_idle learnt)
 * stays open after reply + idle until its iopub has been quiet for the kernel's quiet window (kmgr_kernel_late_quiet_ms),
 * at most KMGR_LATE_CAP_MS after it completed; other kernels' requests end at reply + idle, with no added wait. The window
 * is KMGR_LATE_QUIET_MS (two manager ticks, KMGR_TICK_MS: a pause between two messages of one burst is far shorter) unless
 * the kernel was seen leaving longer gaps after idle (a loaded machine: the kernel and kgate's loop both lag), then
 * KMGR_LATE_GAP_FACTOR times the longest such gap (kmgr_kernel_t.late_gap_ms), never more than KMGR_LATE_CAP_MS.
 */
#define KMGR_LATE_QUIET_MS 100
#define KMGR_LATE_CAP_MS 10000
#define KMGR_LATE_GAP_FACTOR 2
/*
 * A request that has heard late output for a while (a long flow, kept coming since reply + idle) waits, besides, for a
 * quiet of that time divided by this (never past KMGR_LATE_CAP_MS after idle): a kernel starved of CPU in the middle of
 * its flow (a loaded machine) has a gap no earlier request showed, and the flow's tail would be cut at its first one.
 */
#define KMGR_LATE_FLOW_DIVISOR 2
/* Requests that ended, remembered per kernel so that a message for one of them is known as late output, not noise. */
#define KMGR_ENDED_KEPT 8
/*
 * Deno's flush (late.c; docs/kernels.md, "Late output"). Deno 2.9 queues what a cell prints (console.log, displays, its
 * result) on an unbounded first-in first-out channel from the thread that runs the code to the one that publishes on
 * iopub, which sends them one at a time, each tagged with the request it is handling when it publishes it; the reply
 * and status idle go out directly, without waiting for that queue (cli/js/jupyter_kernel.js: iopubDrainer,
 * handleExecute). On a loaded machine the queue drains for many seconds after idle (5 MB: 20 s under ASan at load 8),
 * so no quiet window tells its end, and what is left of it when the next request arrives is tagged with that one. So
 * once an execute request of such a kernel (kmgr_kernelspec_t.late_flush) has its reply and idle, kgate sends an
 * execute request of its own (silent, no history) whose code puts one marker on the same queue (KMGR_LATE_FLUSH_CODE):
 * when the marker is published, everything queued before it has been, and the requests sent before the flush end then.
 * Until then, output tagged with the flush is the request's (Deno tagged it so). The flush's own messages (its status,
 * execute_input, reply and marker) reach neither the kernel's state nor a relay.
 * Should the marker not come (the flush's reply says it failed: an interrupt landed in it; or nothing of the request or
 * the flush arrived for KMGR_LATE_FLUSH_QUIET_MS; or KMGR_LATE_FLUSH_CAP_MS plus KMGR_LATE_FLUSH_CAP_FACTOR times the
 * request's run to its idle passed since its idle: an endless flow), the request ends by the quiet window as above.
 */
#define KMGR_LATE_FLUSH_CODE "Deno.jupyter.broadcast(\"" KMGR_LATE_FLUSH_TYPE "\", {})"
#define KMGR_LATE_FLUSH_TYPE "kgate_late_flush"
#define KMGR_LATE_FLUSH_QUIET_MS 5000
#define KMGR_LATE_FLUSH_CAP_MS 30000
#define KMGR_LATE_FLUSH_CAP_FACTOR 4

/* ---- reqtable.c: msg_id -> request, to route a kernel's messages by their parent's msg_id ---- */

/** Chained; every registered request of a kernel is in it. Zeroed is empty. */
typedef struct st_kmgr_reqtable_t {
    kmgr_request_t **buckets;
    size_t nbuckets, size;
} kmgr_reqtable_t;

/** Adds `req` (not in the table) under its msg_id. */
void kmgr_reqtable_insert(kmgr_reqtable_t *t, kmgr_request_t *req);
/** The request whose msg_id is `msg_id`, or NULL (always for ""). */
kmgr_request_t *kmgr_reqtable_find(const kmgr_reqtable_t *t, const char *msg_id);
/** Removes `req` if it is in the table. */
void kmgr_reqtable_remove(kmgr_reqtable_t *t, kmgr_request_t *req);
/** Frees the buckets (not the requests); the table is empty afterwards. */
void kmgr_reqtable_dispose(kmgr_reqtable_t *t);

/* ---- request.c: requests, routing what comes back, completion on reply + idle ---- */

struct st_kmgr_request_t {
    /* In kernel->requests while registered, in kernel->failing while its FAILED is deferred. */
    kmgr_link_t link;
    kmgr_request_t *hash_next;
    int hashed;
    kmgr_kernel_t *kernel;
    char *msg_id;
    /* The request while the kernel is not ready yet; NULL once sent. */
    wire_msg_t *unsent;
    /* NULL once cancelled or dropped: later messages are routed here and discarded. */
    kmgr_request_cb cb;
    void *data;
    int got_reply, got_idle;
    /* Has its reply and idle and waits for late output (kmgr_kernel_late_quiet_ms, or a flush), since `complete_at`. */
    int lingering;
    /* An execute_request: what a flush is sent for (KMGR_LATE_FLUSH_CODE) */
    int is_execute;
    /* The longest gap before a message that came for it after its idle (late output; ms), 0 when none came */
    uint64_t late_gap_ms;
    uint64_t complete_at;
    /* kmgr_execute_options_t.raw_stream: its stream messages are delivered unparsed */
    int raw_stream;
    /* What of a stream message's text it keeps (kmgr_request_set_text_room): bounds a message over the cap's head */
    uint64_t text_room;
    /* Its place among the shell messages sent to the kernel (kmgr_kernel_t.sent); 0 while unsent. */
    uint64_t seq;
    /* When it was sent (ksys_now_ms): kmgr_request_sent_at; 0 while unsent. */
    uint64_t sent_at;
    /* The kernel's count of oversized messages when this request was last told of one (KMGR_REQ_DROPPED). */
    uint64_t told_oversized;
    /* When the reply or the request's last iopub message arrived (ksys_now_ms): see KMGR_IDLE_GRACE_MS. */
    uint64_t last_heard_at;
    /* Set while the final event is being delivered (the request is unlinked and freed after). */
    int finished;
    int fail_err;
    /* Header of the pending input_request (the parent of our input_reply), or NULL. */
    json_t *input_header;
    /* kmgr_request_set_late_sink: told of late output once it has ended (handed to its kmgr_ended_t then); cb NULL: none */
    kmgr_late_sink_cb late_cb;
    void *late_data;
    char *late_tag;
};

/*
 * Routing (loop context; `msg` borrowed). Each delivers to the request whose msg_id is the
 * message's parent, and finishes it (DONE) once it has both its reply and its iopub status idle,
 * in either order; the callbacks may destroy or restart the kernel.
 */
/** A shell reply. Returns 1 if a request took it, 0 if none is its parent (a handshake reply). */
int kmgr_requests_on_reply(kmgr_kernel_t *k, const wire_msg_t *msg);
/** An iopub message. Unless its request opted in (raw_stream), a stream message kept raw is parsed first, in `msg`. */
void kmgr_requests_on_iopub(kmgr_kernel_t *k, wire_msg_t *msg);
/** The same for a message Deno tagged with a flush: routed as if its parent were `parent` (late.c). */
void kmgr_requests_on_iopub_as(kmgr_kernel_t *k, wire_msg_t *msg, const char *parent);
/** Ends (DONE) the lingering requests sent before shell message `seq` (a flush's marker arrived). May run callbacks. */
void kmgr_requests_end_lingering(kmgr_kernel_t *k, uint64_t seq);
/** A stdin message: an input_request goes to its request (answered "" if it was cancelled). */
void kmgr_requests_on_input(kmgr_kernel_t *k, const wire_msg_t *msg);
/**
 * Tells every request sent up to shell message `sent` that a message over the cap was dropped
 * (KMGR_REQ_DROPPED, once per drop). Loop context; stops if a callback destroys or restarts the kernel.
 */
void kmgr_requests_on_oversized(kmgr_kernel_t *k, uint64_t sent);
/**
 * A probe sent as shell message `seq` was answered on iopub (`iopub`) or on shell: the kernel has
 * dealt with every earlier request, so whatever of theirs did not arrive on that channel (status
 * idle, or reply) was lost; those requests count it as arrived and finish (DONE) once they have
 * both. Loop context.
 */
void kmgr_requests_sync(kmgr_kernel_t *k, uint64_t seq, int iopub);
/**
 * Finishes (DONE) requests that have their reply and heard nothing for KMGR_IDLE_GRACE_MS, those
 * that have their status idle and heard nothing for KMGR_REPLY_GRACE_MS, and lingering ones whose
 * iopub was quiet for KMGR_LATE_QUIET_MS or that reached KMGR_LATE_CAP_MS. Loop context.
 */
void kmgr_requests_finish_replied_without_idle(kmgr_kernel_t *k, uint64_t now);

/** Sends the requests queued while the kernel was not ready (it is now). */
void kmgr_requests_send_unsent(kmgr_kernel_t *k);
/** Unregisters every request and queues its FAILED (`err`) for kmgr_requests_process_failing. No callbacks. */
void kmgr_requests_fail_all(kmgr_kernel_t *k, int err);
/** Delivers the queued FAILED events (loop context; stops once the kernel is destroyed). */
void kmgr_requests_process_failing(kmgr_kernel_t *k);
/** Detaches every request's callback (kmgr_kernel_destroy); the requests live on until kmgr_requests_free_all. */
void kmgr_requests_silence(kmgr_kernel_t *k);
/** Frees every request, registered or failing, and the table (kmgr_kernel_free). */
void kmgr_requests_free_all(kmgr_kernel_t *k);

/** A request that ended (kmgr_kernel_t.ended): its msg_id, and whether its late output was logged yet. */
typedef struct st_kmgr_ended_t {
    char *msg_id;
    int logged;
    /* the request's late sink (kmgr_request_set_late_sink), or cb NULL; the tag is owned here */
    kmgr_late_sink_cb late_cb;
    void *late_data;
    char *late_tag;
    uint64_t last_heard_at; /* the request's last message, then its last late one (ksys_now_ms): the gaps of lost output */
} kmgr_ended_t;

/* ---- late.c: Deno's flush (KMGR_LATE_FLUSH_CODE) ---- */

/** The kernel's flush: at most one in flight; the last one's ids are kept to know its messages that come after it. */
typedef struct st_kmgr_flush_t {
    int active;                        /* sent, its marker not published yet */
    int failed;                        /* its reply said it did not run: no marker will come */
    char id[WIRE_UUID_STRLEN + 1];     /* its msg_id; "" before the first */
    char for_id[WIRE_UUID_STRLEN + 1]; /* the execute request it was sent for, whose late output Deno tags with `id` */
    uint64_t seq;                      /* its place among shell messages: it covers the requests sent before it */
    uint64_t heard_at;                 /* when it was sent, or anything of it or of its request last arrived */
    /* The flush before (its marker arrived, or it failed): what still comes tagged with it is its request's, or its own */
    char prev_id[WIRE_UUID_STRLEN + 1], prev_for_id[WIRE_UUID_STRLEN + 1];
} kmgr_flush_t;

/** `req` (an execute request of a kernel whose spec says late_flush) has its reply and idle: sends a flush for it unless one
 * is in flight and still expected (the next is sent when its marker arrives); after a failed one, a new one. */
void kmgr_late_flush_send(kmgr_kernel_t *k, const kmgr_request_t *req);
/** Whether lingering `req` still waits for a flush's marker at `now` (else the quiet window decides). */
int kmgr_late_flush_waits(kmgr_kernel_t *k, const kmgr_request_t *req, uint64_t now);
/** Whether `msg` is the flush's own (status, execute_input, reply, marker): kept from the kernel's state and the relay. */
int kmgr_late_flush_own(const kmgr_kernel_t *k, const wire_msg_t *msg);
/** A shell reply: 1 if it was the flush's (taken), else 0. */
int kmgr_late_flush_on_reply(kmgr_kernel_t *k, const wire_msg_t *msg);
/** An iopub message no request claimed: 1 if it was tagged with a flush (taken: routed, or the marker), else 0. May run
 * callbacks. */
int kmgr_late_flush_on_iopub(kmgr_kernel_t *k, wire_msg_t *msg);

/* ---- kernel.c: the state machine ---- */

/*
 * After the channels passed over a message above the cap (the connection goes on), a request in flight may have lost
 * its reply or its status idle with it, and nothing would end it but KMGR_IDLE_GRACE_MS, or nothing at all for a lost
 * reply. Kernels deal with shell requests one at a time, in order, so a probe (kernel_info_request) sent after the
 * loss is answered only after every earlier request: once its iopub status arrives, every earlier status idle has been
 * sent, and once its reply arrives, every earlier reply (kmgr_requests_sync). One probe is enough: the connections
 * stay, so its answers cannot be lost but to another message over the cap, which starts a new resynchronisation.
 */
typedef struct st_kmgr_resync_t {
    int active;
    int got_iopub, got_reply;
    char id[WIRE_UUID_STRLEN + 1];
    uint64_t seq;
} kmgr_resync_t;

struct st_kmgr_kernel_t {
    kmgr_link_t link; /* in mgr->kernels */
    kmgr_manager_t *mgr;
    const kmgr_kernelspec_t *spec;
    char *cwd;
    json_t *env;
    ksys_sandbox_t sandbox; /* its workspace points at `workspace` */
    char *workspace;
    void (*on_state)(kmgr_kernel_t *kernel, void *data);
    void *data;
    kmgr_kernel_state_t state;
    /* What on_state last reported; a notice is due whenever it differs from `state` (or `answering`). */
    kmgr_kernel_state_t notified_state;
    /* kmgr_kernel_answering, and what on_state last reported of it */
    int answering, notified_answering;
    int destroyed;
    int queued; /* waits for a place among the kernels starting (kmgr_config_t.max_starting): not spawned yet */
    /* its incarnation was launched past the start queue (a restart, a retry on new ports): a fallback spawn of it is not held
     * back either, and it takes no place in the queue (start_queue.c) */
    int relaunched;
    /* Bumped whenever the current incarnation stops being current (its channels are closed then,
     * which stops their drain): dispatch stops. */
    uint64_t generation;
    char exit_reason[KMGR_REASON_MAX];
    /* kmgr_kernel_last_death: the reason of the last incarnation that died, kept through an automatic restart */
    char last_death[KMGR_REASON_MAX];
    /* Automatic restarts (kmgr_kernel_options_t.restart_limit): all of them, those in the current row, and whether
     * the current incarnation is one not yet ready (its death continues the row). */
    unsigned restart_limit, restarts, restarts_in_row;
    int auto_restarting;
    /* When the current incarnation became ready (restart_stable_ms), and its starts again on new ports (KMGR_BIND_RETRIES). */
    uint64_t ready_at;
    unsigned bind_retries;
    kmgr_proc_t *proc;
    char session[WIRE_UUID_STRLEN + 1];
    json_t *info;
    int got_info_reply, got_iopub;
    uint64_t started_at, next_info_at;
    /* the wait before the next kernel_info_request while the shell has not answered: kernel_info_retry_ms, doubled at each
     * resend up to KMGR_INFO_RETRY_MAX_FACTOR times it (kmgr_kernel_info_next) */
    unsigned info_retry_ms;
    /* ping_sent_at: when the oldest ping not answered yet went out, 0 when none is outstanding; ping_resent_at: its last resend */
    uint64_t next_ping_at, ping_sent_at, ping_resent_at;
    uint64_t interrupt_sent_at; /* 0 when no interrupt is in flight (KMGR_INTERRUPT_COALESCE_MS) */
    kmgr_link_t requests;
    kmgr_link_t failing;
    /* iopub messages passed over unread: big, and nobody awaiting anything (KMGR_UNAWAITED_MAX_BYTES) */
    uint64_t unawaited;
    /* Shell messages sent to the current incarnation, requests and probes alike. */
    uint64_t sent;
    /* Messages over the cap, each passed over as it came (kmgr_kernel_oversized_messages). */
    uint64_t oversized;
    kmgr_resync_t resync;
    kmgr_flush_t flush;
    kmgr_reqtable_t table;
    /* Late output (KMGR_LATE_QUIET_MS): learnt when a message arrived for a request past its idle; kept through restarts. */
    int publishes_after_idle;
    /* The longest gap seen before a message published after idle (ms; a lost one's too), which each lingering request that
     * ends halves unless its own gaps were longer: what kmgr_kernel_late_quiet_ms scales. 0 until one is seen; kept through
     * restarts. */
    uint64_t late_gap_ms;
    /* Messages for a request that had ended, not delivered (kmgr_kernel_late_messages), over every incarnation. */
    uint64_t late_lost;
    /* The last KMGR_ENDED_KEPT requests that ended (a ring; `ended_next` is the oldest slot). */
    kmgr_ended_t ended[KMGR_ENDED_KEPT];
    size_t ended_next;
    /* The relay watching every message (kmgr_kernel_set_tap), or NULL. */
    kmgr_tap_cb tap;
    void *tap_data;
    /* What text of a stream message over the cap the relay can pass on (kmgr_kernel_set_tap_text_room): sizes its head */
    uint64_t tap_text_room;
};

/** Sends `msg` (owned by the callee) on the current incarnation's `channel`. Returns 0 or KSYS_EZMQ. */
int kmgr_kernel_send(kmgr_kernel_t *k, wire_channel_t channel, wire_msg_t *msg);
/**
 * Makes the kernel DEAD for `reason` (copied into its exit reason and last death), killing the current incarnation
 * first if `kill_it`: fails its requests (KSYS_EDIED), then tells the owner. Loop context.
 */
void kmgr_kernel_die(kmgr_kernel_t *k, const char *reason, int kill_it);
/**
 * Hands the current incarnation (if any) to the manager's shutdown sequence, politely if `polite`, killed otherwise,
 * and starts a new one (its handshake begun). The state and the requests are the caller's business. Returns 0, or a
 * start error with why in `why`. No callbacks.
 */
int kmgr_kernel_relaunch(kmgr_kernel_t *k, int polite, char *why, size_t whylen);
/** Tells the owner of a changed state or answering, from the loop (kmgr_manager_run_pending). */
void kmgr_kernel_notify_later(kmgr_kernel_t *k);
/** Fails the requests marked failing and tells the owner of its current state: what was deferred goes out before anything newer. */
void kmgr_kernel_flush_deferred(kmgr_kernel_t *k);

/* ---- kernel_overcap.c: messages over the message cap (the channels' ops of a kernel, kernel.c's channel_ops) ---- */

/** kmgr_channels_ops_t.big_iopub: reads a big iopub message while starting or with requests, its headers for a relay, or passes it
 * over. */
kmgr_big_iopub_t kmgr_kernel_big_iopub(void *data);
/**
 * kmgr_channels_ops_t.on_oversized: a stream message's head goes to its request and the relay; any other loss tells the
 * requests in flight and starts a resynchronisation (a probe) when ready, and an empty input_reply answers a lost stdin
 * request. Loop context: callbacks run.
 */
void kmgr_kernel_on_oversized(void *data, wire_channel_t channel, wire_msg_t *head, const char *parent, size_t parent_len);
/** kmgr_channels_ops_t.text_room: the text a stream message over the cap keeps for its head (the relay's room or its request's). */
uint64_t kmgr_kernel_text_room(void *data, const char *parent, size_t parent_len);
/** A message on `channel` during a resynchronisation: when the probe is its parent, syncs the requests (callbacks may run). */
void kmgr_kernel_resync_on(kmgr_kernel_t *k, const wire_msg_t *msg, wire_channel_t channel);

/* ---- liveness.c: a kernel is dead when its process is gone; heartbeats inform; automatic restarts ---- */

/**
 * The heartbeats of a ready kernel: sends them, marks it not answering after heartbeat_timeout_ms of silence (and
 * answering again at its next pong, in kernel.c), and kills it only after heartbeat_kill_ms when that is set.
 * Returns 1 when the kernel died (callbacks ran), 0 otherwise. Loop context.
 */
int kmgr_kernel_heartbeats(kmgr_kernel_t *k, uint64_t now);
/**
 * The current incarnation ended (reaped, `reason` says how) or must (`kill_it`: it did not become ready in time, or
 * stopped answering heartbeats). A TCP kernel that lost a port before it was ready is started again on new ports
 * (KMGR_BIND_RETRIES); a kernel that was ready, or whose automatic restart was starting, is restarted automatically
 * within restart_limit (requests FAILED with KSYS_EDIED, state RESTARTING); otherwise it is DEAD, with the tail of
 * its output in the reason when it died before it was ready. Loop context: callbacks run.
 */
void kmgr_kernel_incarnation_ended(kmgr_kernel_t *k, const char *reason, int kill_it);

/*
 * While a kernel starts, kgate sends kernel_info_request until it has the reply on shell and any message on iopub. The
 * resends are for iopub (as Jupyter clients' "nudge"): a PUB socket drops what it publishes before the SUB's subscription
 * reached it, so the first request's status may never come, and a later request makes the kernel publish again. A
 * request on shell is not lost so: it waits in kgate's connection for the handshake and then in the kernel's socket until
 * the kernel reads it (a resend before that only queues a duplicate, which the kernel answers at its start, CPU a burst of
 * starts has not got). So before the shell has answered, resends back off (250, 500, 1000, then every 2000 ms: insurance
 * against a request lost with its connection); once it has, and iopub is silent, they come every kernel_info_retry_ms
 * (`base`). Returns when the next one is due, one having been sent at `now`.
 */
#define KMGR_INFO_RETRY_MAX_FACTOR 8
static inline uint64_t kmgr_kernel_info_next(kmgr_kernel_t *k, unsigned base, uint64_t now)
{
    unsigned max = base * KMGR_INFO_RETRY_MAX_FACTOR;

    if (k->got_info_reply)
        return now + base;
    k->info_retry_ms = k->info_retry_ms * 2 < max ? k->info_retry_ms * 2 : max;
    return now + k->info_retry_ms;
}

#endif
