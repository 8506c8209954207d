/* tests/kernelmgr/kmgr_test.h: fixture and recorders shared by the kernelmgr tests. */
#ifndef KGATE_TESTS_KMGR_TEST_H
#define KGATE_TESTS_KMGR_TEST_H

#include <jansson.h>
#include "kmgr/kernel.h"
#include "kmgr/manager.h"
#include "poll_loop.h"

/** The per-test environment: a poll loop, a manager, and the discovered kernelspecs. */
typedef struct st_kt_env_t {
    poll_loop_t *loop;
    kmgr_manager_t *mgr;
    kmgr_kernelspecs_t specs;
    const kmgr_kernelspec_t *python;
} kt_env_t;
extern kt_env_t kt;

/** Creates loop and manager with `config` (NULL: defaults) and finds the python3 spec. */
void kt_setup_config(const kmgr_config_t *config);
void kt_setup(void);
/** Shuts every kernel down, waits (bounded) for the processes to go, destroys everything. */
void kt_teardown(void);

/** Records on_state notices. */
typedef struct st_kt_states_t {
    kmgr_kernel_state_t log[256];
    size_t n;
    int destroy_on_dead; /* destroy the kernel from inside the DEAD notice */
    int restart_on_dead; /* restart it from inside the DEAD notice (once) */
    /* kmgr_kernel_answering as the notices told it: times it went silent and came back, and whether it is silent now */
    unsigned silences, recoveries;
    int silent;
} kt_states_t;
void kt_on_state(kmgr_kernel_t *kernel, void *data);
int kt_states_saw(const kt_states_t *st, kmgr_kernel_state_t state);

/** A spec of our own making ("fake") running `argv` (release with kmgr_kernelspec_destroy). */
kmgr_kernelspec_t *kt_fake_spec(const char *const *argv, size_t argc);

/** Starts a kernel of `spec` (NULL: python3) and waits (30 s) until it is IDLE. */
kmgr_kernel_t *kt_start_ready(const kmgr_kernelspec_t *spec, kt_states_t *st);

/** Records what a request's callback is told. */
typedef struct st_kt_rec_t {
    int n_iopub, n_reply, n_input, n_dropped, n_done, n_failed, err, after_final;
    int dropped_err; /* the err of the last DROPPED */
    /* ksys_now_ms when the reply, the last status idle and DONE were delivered (0: not yet) */
    uint64_t reply_at, idle_at, done_at;
    json_t *iopub;         /* array of {"msg_type": ..., "content": ...} */
    json_t *reply;         /* content of the shell reply */
    char out[16384];       /* stdout stream text (its start) */
    size_t out_bytes;      /* stdout stream text: every byte counted */
    char err_text[16];     /* stderr stream text (its start) */
    size_t err_bytes;      /* stderr stream text: every byte counted */
    int n_cut;             /* stream messages over the cap that came cut to their head (msg->content_cut) */
    uint64_t text_dropped; /* what they dropped after their heads, decoded bytes */
    json_t *buffers;       /* the binary buffers of the last iopub message that had any, as strings */
    json_t *raw;           /* iopub messages that came with raw content: {"msg_type", "content": what it parses to, or null} */
    const char *answer;    /* answer to input_request (from inside the callback) */
    int input_ret;         /* what kmgr_request_input_reply returned */
    json_t *input_content;
    kmgr_request_t *req;
    /* Re-entrancy probes. */
    kmgr_kernel_t *destroy_on_iopub; /* destroy this kernel on the first IOPUB event */
    int cancel_on_iopub;             /* cancel the request on the first IOPUB event */
} kt_rec_t;
void kt_rec_init(kt_rec_t *rec);
void kt_rec_dispose(kt_rec_t *rec);
void kt_on_req(kmgr_request_t *req, kmgr_req_event_t ev, const wire_msg_t *msg, int err, void *data);
/** DONE or FAILED has been delivered. */
int kt_rec_finished(void *rec);
/** Executes `code` with default options, recording into `rec`. */
int kt_execute(kmgr_kernel_t *kernel, const char *code, kt_rec_t *rec);
/** Runs the loop until `rec` is finished (bounded by `ms`); returns whether it finished. */
int kt_wait_rec(kt_rec_t *rec, unsigned ms);
/** Content of the first recorded iopub message of `msg_type`, or NULL. */
json_t *kt_iopub(const kt_rec_t *rec, const char *msg_type);
/** data["text/plain"] of the execute_result, or NULL. */
const char *kt_result_text(const kt_rec_t *rec);

/** Runs the loop until `kernel` is in `state` (bounded by `ms`). */
int kt_wait_state(kmgr_kernel_t *kernel, kmgr_kernel_state_t state, unsigned ms);
/** Runs the loop until the manager has no process left (bounded by `ms`). */
int kt_wait_no_process(unsigned ms);
/** Whether a process `pid` exists (kill(pid, 0)). */
int kt_pid_alive(pid_t pid);

#endif
