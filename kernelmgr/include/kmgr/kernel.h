/* kmgr/kernel.h: one running Jupyter kernel: lifecycle, requests, and message routing. */
#ifndef KMGR_KERNEL_H
#define KMGR_KERNEL_H

#include <sys/types.h>
#include <jansson.h>
#include "wire/connfile.h" /* wire_channel_t */
#include "wire/message.h"
#include "kmgr/kernelspec.h"
#include "kmgr/manager.h"
#include "ksys/sandbox.h"

typedef struct st_kmgr_kernel_t kmgr_kernel_t;
typedef struct st_kmgr_request_t kmgr_request_t;

/**
 * Kernel states. STARTING: spawned, not yet ready (ready = kernel_info_reply received, an iopub
 * message received, proving the SUB subscription is live, and the stdin channel connected, so that
 * an input_request cannot be lost). IDLE/BUSY: follow iopub execution_state
 * of any request. RESTARTING: kmgr_kernel_restart in progress, or an automatic restart after the
 * process died on its own (kmgr_kernel_options_t.restart_limit). DEAD: the process is gone (exit,
 * signal, OOM kill) and no automatic restart follows, or it failed to start, or (opt-in,
 * kmgr_config_t.heartbeat_kill_ms) it was killed for not answering heartbeats; see
 * kmgr_kernel_exit_reason. Missed heartbeats alone never make a kernel DEAD: see kmgr_kernel_answering.
 */
typedef enum {
    KMGR_KERNEL_STARTING,
    KMGR_KERNEL_IDLE,
    KMGR_KERNEL_BUSY,
    KMGR_KERNEL_RESTARTING,
    KMGR_KERNEL_DEAD,
} kmgr_kernel_state_t;

/** "starting", "idle", "busy", "restarting", "dead". */
const char *kmgr_kernel_state_name(kmgr_kernel_state_t state);

typedef struct st_kmgr_kernel_options_t {
    /** The spec to launch (borrowed: must outlive the kernel). */
    const kmgr_kernelspec_t *spec;
    /** Working directory of the kernel process; NULL: kgate's own. */
    const char *cwd;
    /** Extra environment (object of strings), applied after the spec's env; borrowed, may be NULL. */
    json_t *env;
    /**
     * Where the kernel runs (ksys_sandbox_t: bwrap or not) and its limits, for every incarnation; copied.
     * NULL: no sandbox, no limits. A sandboxed kernel is interrupted over the control channel whatever
     * its spec's interrupt_mode (a signal would reach bwrap), and does not get JPY_PARENT_PID.
     */
    const ksys_sandbox_t *sandbox;
    /**
     * Automatic restarts in a row of a kernel whose process dies on its own after it was ready (not
     * destroyed, not restarted by kmgr_kernel_restart), as Jupyter Server's restarter does: its
     * requests end with FAILED (KSYS_EDIED), the state goes RESTARTING, then IDLE. A death during
     * such a restart's start-up counts as one more in the row; the row starts afresh once a restarted
     * kernel stayed up kmgr_config_t.restart_stable_ms. Past the limit the kernel stays DEAD. 0: never
     * restarted automatically (the death makes it DEAD). See kmgr_kernel_set_restart_limit.
     */
    unsigned restart_limit;
    /**
     * Called (from the loop) whenever kmgr_kernel_state() or kmgr_kernel_answering() changes, including
     * the transition out of STARTING (to IDLE when ready, or to DEAD when start-up failed). Not called
     * after kmgr_kernel_destroy. The callback may call any kernel function, including destroy.
     */
    void (*on_state)(kmgr_kernel_t *kernel, void *data);
    void *data;
} kmgr_kernel_options_t;

/**
 * Spawns a kernel: creates its private directory under the runtime dir (connection file mode 0600
 * with a fresh random key, transport as kmgr_kernelspec_transport decides, a private IPYTHONDIR so
 * kernels never share a history database), substitutes {connection_file} in argv, applies env (kernels
 * get NO_COLOR=1 unless the spec's env or `opts->env` sets NO_COLOR), starts the process in its own
 * session (setsid), connects the five channels and begins the readiness handshake. A TCP kernel that
 * exits before it is ready saying "Address already in use" (another process took a port between
 * kernelmgr's pick and the kernel's bind) is started again on new ports, up to KMGR_BIND_RETRIES times.
 * Returns 0 and stores the kernel (state STARTING) in `*out`, or KSYS_ESPAWN / KSYS_EZMQ / KSYS_EIO with
 * nothing left behind. The kernel is owned by the caller until kmgr_kernel_destroy.
 */
int kmgr_kernel_start(kmgr_manager_t *mgr, const kmgr_kernel_options_t *opts, kmgr_kernel_t **out);

/**
 * Gives the kernel up: every pending request is dropped silently (its callback is not called
 * again), then the shutdown sequence runs in the background (control shutdown_request, SIGTERM
 * after the grace period, SIGKILL after another), sockets are closed, the key is wiped, and the
 * kernel's directory is removed once the process is reaped. The handle is invalid on return.
 * Accepts NULL. Safe to call from any kmgr callback.
 */
void kmgr_kernel_destroy(kmgr_kernel_t *kernel);
/**
 * As kmgr_kernel_destroy, but the process group is sent SIGKILL at once instead of a shutdown_request: for a kernel whose
 * state nobody will read again, whose place a new kernel takes now (an evicted MCP session's), so that the two are
 * never alive together beyond the moment the signal takes. Accepts NULL.
 */
void kmgr_kernel_kill(kmgr_kernel_t *kernel);

/** Sets kmgr_kernel_options_t.restart_limit from now on (a pooled kernel handed to a context). */
void kmgr_kernel_set_restart_limit(kmgr_kernel_t *kernel, unsigned limit);

/**
 * Replaces the kernel process with a fresh one (same object and spec, new key and directory):
 * pending requests end with KMGR_REQ_FAILED (err KSYS_ESHUTDOWN), the old process goes through the
 * shutdown sequence in the background, the state becomes RESTARTING, then IDLE once the new
 * process is ready (or DEAD if it fails to start). Works on a DEAD kernel too. The count of automatic
 * restarts in a row starts afresh, and kmgr_kernel_last_death is cleared. Returns 0 or a start error
 * (the kernel is then DEAD).
 */
int kmgr_kernel_restart(kmgr_kernel_t *kernel);

/**
 * Interrupts the running code as the spec's interrupt_mode says: SIGINT to the kernel's process
 * group ("signal") or a control interrupt_request ("message", and always for a sandboxed kernel).
 * Idempotent while one is in flight: until the kernel publishes status idle, or for at most 2 s, a
 * later call sends nothing and returns 0 (two interrupts close together can end an ipykernel).
 * A kernel still starting (STARTING or RESTARTING: queued for its start, its template's answer
 * awaited, or not ready yet) runs nothing (requests wait unsent until it is ready): nothing is sent
 * (a SIGINT before its handler is installed would kill it) and 0 returned. Returns 0, or KSYS_EDIED
 * (DEAD or destroyed).
 */
int kmgr_kernel_interrupt(kmgr_kernel_t *kernel);

kmgr_kernel_state_t kmgr_kernel_state(const kmgr_kernel_t *kernel);
const kmgr_kernelspec_t *kmgr_kernel_spec(const kmgr_kernel_t *kernel);
/** The kernel process id (0 when there is none: queued for its start, or its template not yet answering its fork). */
pid_t kmgr_kernel_pid(const kmgr_kernel_t *kernel);
/**
 * How the current process started: "forked" from a template (kmgr_manager_use_template) or "spawned"; "" when there is none
 * (yet: its template's answer comes through the loop).
 */
const char *kmgr_kernel_start_path(const kmgr_kernel_t *kernel);
/** The connection file path of the current process. */
const char *kmgr_kernel_connection_file(const kmgr_kernel_t *kernel);
/** The kernel_info_reply content once ready (borrowed), else NULL. */
json_t *kmgr_kernel_info(const kmgr_kernel_t *kernel);
/**
 * Why the kernel is DEAD, for humans: "exited with code 1", "killed by signal 9 (SIGKILL)",
 * "out of memory (memory limit 256 MiB)", "stopped answering heartbeats", "did not become ready
 * within 60000 ms". A kernel that died before it was ready has the last lines of its output (stdout
 * and stderr: at most KMGR_OUTPUT_TAIL_LINES lines, KMGR_OUTPUT_TAIL_BYTES bytes, as valid UTF-8)
 * after its reason: "exited with code 1; its last output:\n...". One that reached the restart limit
 * says so after its reason. "" otherwise. At most KMGR_REASON_MAX bytes with the terminating NUL.
 */
const char *kmgr_kernel_exit_reason(const kmgr_kernel_t *kernel);
/** The bounds of the output tail in a start-up failure's reason, and of a reason. */
#define KMGR_OUTPUT_TAIL_LINES 10
#define KMGR_OUTPUT_TAIL_BYTES 2048
#define KMGR_REASON_MAX 3072
/** Times a TCP kernel that lost one of its ports before binding it is started again (kmgr_kernel_start). */
#define KMGR_BIND_RETRIES 3
/**
 * Why the last incarnation died, as kmgr_kernel_exit_reason says it, kept through an automatic
 * restart (for the requests that died with it); "" when none died since kmgr_kernel_start or the last
 * kmgr_kernel_restart.
 */
const char *kmgr_kernel_last_death(const kmgr_kernel_t *kernel);
/**
 * Automatic restarts since the kernel was started; `*in_a_row` (may be NULL) gets those of the
 * current row (kmgr_kernel_options_t.restart_limit), and `*limit` (may be NULL) the limit.
 */
unsigned kmgr_kernel_auto_restarts(const kmgr_kernel_t *kernel, unsigned *in_a_row, unsigned *limit);
/**
 * 0 while the kernel is ready (IDLE or BUSY) and a heartbeat has gone unanswered for
 * kmgr_config_t.heartbeat_timeout_ms or more (a long cell in a kernel that answers heartbeats on its
 * code's thread, a stopped process); 1 otherwise. Information only: on_state hears its changes.
 */
int kmgr_kernel_answering(const kmgr_kernel_t *kernel);
/**
 * How many kernel messages were larger than kmgr_config_t.max_message_bytes, over every
 * incarnation: each was passed over as its bytes arrived, never held whole, and its connection went on. A
 * signed iopub `stream` message among them reached its request cut to the head of its text (KMGR_REQ_IOPUB,
 * wire_msg_t.content_cut); one read whole whose signature failed is dropped as any forged message is, and not counted
 * here; every other one was lost (KMGR_REQ_DROPPED).
 */
uint64_t kmgr_kernel_oversized_messages(const kmgr_kernel_t *kernel);
/**
 * How many messages (other than status) the kernel published for a request after that request had ended, over
 * every incarnation: not delivered (the request is gone), each told to the request's late sink if it has one
 * (kmgr_request_set_late_sink), and logged once per request on stderr. A kernel that does it is known from then on to
 * publish late, and its requests wait for late output (docs/kernels.md).
 */
uint64_t kmgr_kernel_late_messages(const kmgr_kernel_t *kernel);
/** Whether the kernel's requests wait for output published after idle: its spec says so, or it was seen doing it. */
int kmgr_kernel_publishes_late(const kmgr_kernel_t *kernel);

/**
 * How long a request of a kernel that publishes late waits, after reply + idle, for its iopub to be quiet (docs/kernels.md,
 * "Late output"): 100 ms (KMGR_LATE_QUIET_MS) for a kernel never seen leaving a longer gap before output published after
 * idle; else twice the longest such gap seen (lost output's included), halved by each request that ends unless its own
 * gaps were longer; never more than 10 s (KMGR_LATE_CAP_MS).
 */
unsigned kmgr_kernel_late_quiet_ms(const kmgr_kernel_t *kernel);
/**
 * How many big iopub messages arrived while no request awaited anything (output of a kernel's
 * background thread after its run, or of another client's request) and were passed over unread.
 */
uint64_t kmgr_kernel_unawaited_messages(const kmgr_kernel_t *kernel);

/**
 * A relay's view of the kernel: every message the kernel sends on shell, control, stdin and iopub,
 * after kernelmgr has routed it to its own requests (if it was theirs). `msg` is decoded, except the
 * content of an iopub message over KMGR_UNAWAITED_MAX_BYTES that no request awaits, which is verified
 * but not parsed (msg->content_skipped), and the content of a `stream` message that no request reads
 * parsed (one that opted in with kmgr_execute_options_t.raw_stream, or none), and likewise of an `execute_result` or
 * `display_data`, which is verified and
 * kept unparsed (msg->content_raw; wire_msg_raw_content_parse parses it); `parts` are its signed parts as the kernel sent them
 * (header, parent_header, metadata, content, then the buffers: `nparts` of them), to be relayed
 * verbatim. Both are borrowed for the call. The callback may call any kernel function, including destroy.
 * `msg` with content_cut set (and `parts` NULL, `nparts` 0): a signed iopub `stream` message over
 * kmgr_config_t.max_message_bytes, verified and cut to the head of its text (KMGR_REQ_IOPUB says how): there are no signed
 * parts to relay verbatim; its content is raw (content_raw) unless a request parsed it. `msg` NULL: a message the kernel sent
 * on `channel` was over kmgr_config_t.max_message_bytes and was not relayed (its requests were told: KMGR_REQ_DROPPED);
 * `parts[0]` is then its parent_header as the kernel sent it, unverified (`nparts` 1), or `nparts` is 0 when it was not seen.
 */
typedef void (*kmgr_tap_cb)(kmgr_kernel_t *kernel, wire_channel_t channel, const wire_msg_t *msg, const wire_frame_t *parts,
                            size_t nparts, void *data);

/**
 * Sets the kernel's one tap (`cb` NULL removes it). A kernel with a tap reads every big iopub message
 * (see kmgr_kernel_unawaited_messages), and keeps each message's raw parts alive while the tap runs.
 */
void kmgr_kernel_set_tap(kmgr_kernel_t *kernel, kmgr_tap_cb cb, void *data);

/**
 * How many decoded bytes of a stream message's text over kmgr_config_t.max_message_bytes the kernel's relay can pass on
 * (UINT64_MAX, the default each kmgr_kernel_set_tap sets: as much as the cap lets through): such a message is read with a
 * head of no more than that, or than the room of its request if larger (kmgr_request_set_text_room), so a relay with a
 * send bound (a kernel WebSocket) costs the head it can send rather than the cap's.
 */
void kmgr_kernel_set_tap_text_room(kmgr_kernel_t *kernel, uint64_t bytes);

/**
 * Sends a client's message verbatim on `channel` (shell, control or stdin): `parts` are header,
 * parent_header, metadata and content as JSON texts, signed as they are, then `nparts - 4` buffers
 * (all copied). kernelmgr does not track it: what the kernel answers reaches the tap. Returns 0,
 * KSYS_ENOTREADY while the kernel is starting or restarting (nothing was sent), KSYS_EDIED when it is
 * dead, KSYS_EINVAL for another channel or fewer than four parts, or KSYS_EZMQ.
 */
int kmgr_kernel_send_parts(kmgr_kernel_t *kernel, wire_channel_t channel, const wire_frame_t *parts, size_t nparts);

/** What a request's callback is told. */
typedef enum {
    /**
     * An iopub message whose parent is this request (status, stream, execute_input, ...). A `stream` message larger than
     * kmgr_config_t.max_message_bytes whose signature verified comes cut to the head of its text: at most the cap less 64 KiB
     * of it as the kernel encoded them, and no more than kmgr_request_set_text_room said, whole characters only; msg->content_cut
     * is set and msg->text_dropped is the decoded bytes of the text dropped after the head (its content is then raw for a
     * raw_stream request, parsed for another, as any stream message's).
     */
    KMGR_REQ_IOPUB,
    /** The shell reply (execute_reply etc.). */
    KMGR_REQ_REPLY,
    /** A stdin input_request for this request; answer with kmgr_request_input_reply. */
    KMGR_REQ_INPUT,
    /**
     * A kernel message larger than kmgr_config_t.max_message_bytes was dropped while this request
     * was in flight (`err`: KSYS_EMSGSIZE), other than a signed stream message (which comes cut: KMGR_REQ_IOPUB):
     * it may have been one of this request's iopub messages,
     * its reply, or an input_request (which kernelmgr answers with an empty line: the kernel would
     * wait for it forever); the connection goes on, and nothing else is lost. The request goes
     * on; once the kernel has dealt with it, it ends with DONE even if its status idle or its reply
     * was among the lost (DONE without REPLY: the reply was lost). Once per dropped message.
     */
    KMGR_REQ_DROPPED,
    /**
     * Both the reply and iopub status idle have arrived (or were lost: see KMGR_REQ_DROPPED; an idle
     * still missing 5 s after the reply counts as lost too): the request is complete. Last event.
     */
    KMGR_REQ_DONE,
    /** The request cannot complete (`err`: KSYS_EDIED, KSYS_ESHUTDOWN). Last event. */
    KMGR_REQ_FAILED,
} kmgr_req_event_t;

/**
 * Request callback. `msg` is the message for IOPUB/REPLY/INPUT (borrowed for the call), NULL
 * otherwise; `err` is 0 except for FAILED. After DONE or FAILED the request is freed by kernelmgr
 * and must not be touched. The callback may call any kernel function, including destroy.
 */
typedef void (*kmgr_request_cb)(kmgr_request_t *req, kmgr_req_event_t ev, const wire_msg_t *msg, int err, void *data);

typedef struct st_kmgr_execute_options_t {
    int silent;
    int store_history;
    int allow_stdin;
    int stop_on_error;
    /**
     * Nonzero: the request's `stream`, `execute_result` and `display_data` iopub messages reach its callback with their content
     * verified but not parsed (msg->content_raw: the bytes in msg->raw_content, msg->content an empty object; see
     * WIRE_DECODE_RAW_STREAM and _RAW_RESULT), for a receiver that relays the text and bundles as they came (wire/json_scan.h) and
     * parses it only when it must (wire_msg_raw_content_parse). Zero: every message arrives parsed.
     */
    int raw_stream;
} kmgr_execute_options_t;

/**
 * Sends an execute_request for `code` (copied). If the kernel is still STARTING, the request is
 * queued and sent once it is ready. Returns 0 and stores the request in `*out` (may be NULL), or
 * KSYS_EDIED (the kernel is DEAD; the callback will not be called). On success `cb` is called
 * later, never from inside this call, and ends with exactly one DONE or FAILED.
 */
int kmgr_kernel_execute(kmgr_kernel_t *kernel, const char *code, const kmgr_execute_options_t *opts, kmgr_request_cb cb, void *data,
                        kmgr_request_t **out);

/**
 * Sends any shell request (`msg_type` with `content`, reference stolen) with the same routing and
 * completion rules as kmgr_kernel_execute (DONE after reply + idle).
 */
int kmgr_kernel_request(kmgr_kernel_t *kernel, const char *msg_type, json_t *content, kmgr_request_cb cb, void *data,
                        kmgr_request_t **out);

/** The msg_id of the request's execute_request. */
const char *kmgr_request_msg_id(const kmgr_request_t *req);

/**
 * When the request went to the kernel (ksys_now_ms clock), or 0 while it waits unsent for a kernel still starting or
 * restarting (kmgr_kernel_execute queues it): what a run's timeout counts from, so that a slow start is the start's
 * (kmgr_config_t.startup_timeout_ms), not the run's.
 */
uint64_t kmgr_request_sent_at(const kmgr_request_t *req);

/**
 * How many decoded bytes of a stream message's text `req`'s owner can still keep (a run's output budget left; UINT64_MAX, the
 * default: as much as the message cap lets through). A stream message over kmgr_config_t.max_message_bytes for it is read
 * with a head of no more than that (KMGR_REQ_IOPUB: msg->text_dropped counts the rest, exactly), so the memory it costs
 * follows what its owner keeps rather than the cap. A relay attached to the kernel (kmgr_kernel_set_tap) gets the head it
 * said it can pass on (kmgr_kernel_set_tap_text_room) when that is larger.
 */
void kmgr_request_set_text_room(kmgr_request_t *req, uint64_t bytes);

/**
 * Told of a message (other than a status) the kernel published for a request after that request had ended (late output:
 * docs/kernels.md, "Late output"), which reached kgate too late for the request's callback. `tag` is what
 * kmgr_request_set_late_sink gave, `msg_type` the message's type, `text_bytes` the decoded bytes of the text of a `stream`
 * message as far as kernelmgr read it (0 for other types, and for a big message whose content the kernel's tap asked to
 * pass unread: kmgr_kernel_unawaited_messages). Returns 1 when the owner recorded the loss where its caller can read it, 0 when it
 * could not (it no longer keeps what the request was for): kernelmgr's log then says the loss went unreported. Called from the
 * loop, in the middle of routing a message: it must only record, and call no kmgr_* function.
 */
typedef int (*kmgr_late_sink_cb)(const char *tag, const char *msg_type, uint64_t text_bytes, void *data);

/**
 * Asks to be told of `req`'s late output once it has ended with DONE (not FAILED: its kernel died or restarted, and
 * publishes nothing more for it). `tag` (copied, may be NULL) names what the request was for on the owner's side (a run's
 * id); `data` must stay valid as long as the kernel lives. kernelmgr remembers the last 8 requests of each kernel that
 * ended (KMGR_ENDED_KEPT), so late output for an older one is counted (kmgr_kernel_late_messages) and logged but not told.
 * kmgr_request_cancel withdraws it. Every message is counted in kmgr_kernel_late_messages whether or not a sink is told.
 */
void kmgr_request_set_late_sink(kmgr_request_t *req, kmgr_late_sink_cb cb, void *data, const char *tag);

/**
 * Answers the pending input_request of `req` with an input_reply carrying `value`. Returns 0 or
 * KSYS_ENOINPUT when no input_request is pending.
 */
int kmgr_request_input_reply(kmgr_request_t *req, const char *value);

/**
 * Detaches the caller: no callback is called for `req` any more. The request itself lives on
 * inside kernelmgr until the kernel finishes it (so later messages still find their owner and are
 * dropped). The handle is invalid on return. An input_request that later arrives for it is answered
 * with an empty line, so that the kernel does not wait for input forever.
 */
void kmgr_request_cancel(kmgr_request_t *req);

#endif
