/* kernels/bash/src/job.h: the job, one shell request that bash serves (execute or complete), from its start to its reply. */
#ifndef BK_JOB_H
#define BK_JOB_H

#include "wire/codec.h"
#include "kernel.h"
#include "syntax.h"

/* Bounds on a completion's reply: bytes of candidates read, matches sent. */
#define BK_MAX_COMPLETE_OUTPUT (1 << 20)
#define BK_MAX_MATCHES 1000

typedef enum { BK_JOB_NONE, BK_JOB_EXECUTE, BK_JOB_COMPLETE } bk_job_kind_t;

/*
 * A job starts when its request is taken from the shell socket and ends when bash's marker for it
 * arrives (or bash exits, or an interrupt cancels a line bash never received): then the reply goes out,
 * iopub says idle, and the loop takes the next shell request.
 */
typedef struct st_bk_job_t {
    bk_job_kind_t kind;
    wire_msg_t *req;            /* the request served (owned); NULL when kind is BK_JOB_NONE */
    unsigned long seq;          /* the command line whose marker ends the job */
    int silent;                 /* execute_request's silent: no execute_input, error or output */
    int allow_stdin;            /* execute_request's allow_stdin: the cell may be asked for input (input.h) */
    int interrupted;            /* an interrupt came while the job ran */
    int count;                  /* the execution_count the reply carries */
    bk_complete_ctx_t complete; /* for a completion: the word under the cursor */
    char *input_req_id;         /* msg_id of the unanswered input_request (owned; input.c), NULL when none */
    long long next_stdin_scan;  /* when input.c next looks for a process reading the cell's stdin */
} bk_job_t;

/**
 * The code a request carries (content.code: execute, complete and is_complete requests), "" when absent or
 * not a string; it lives as long as `req`. Its length in bytes goes to `*len` unless `len` is NULL.
 */
const char *bk_job_code(const wire_msg_t *req, size_t *len);

/** Frees what the job holds and makes it BK_JOB_NONE. The one release path of req and input_req_id. */
void bk_job_release(bk_job_t *job);

/**
 * Starts an execute_request (takes ownership of `req`): counts it unless silent or store_history is
 * false, directs output to it, publishes execute_input and hands the code to bash. A cell bash cannot
 * be given is answered at once (status 126).
 */
void bk_job_execute(bk_kernel_t *k, wire_msg_t *req);

/**
 * Starts a complete_request (takes ownership of `req`): bash's compgen writes the candidates for the
 * word under the cursor to a file, read when the marker comes, so that the user's functions, aliases,
 * variables and working directory count. Answered at once with no matches if bash cannot be given it.
 */
void bk_job_complete(bk_kernel_t *k, wire_msg_t *req);

/**
 * Interrupts the job, if any: SIGINT to bash's process group, or, when bash has not received the line
 * yet (it is still starting), the line is dropped and the job answered at once (an execution with
 * status 130, a completion with no matches).
 */
void bk_job_interrupt(bk_kernel_t *k);

/** Reads bash's markers (its fd 3 is readable); the job's ends it. Looks for bash's exit once fd 3 closes. */
void bk_job_on_markers(bk_kernel_t *k);

/**
 * Reaps bash if it has exited: the output it left is published, the job, if any, is answered with bash's
 * exit status ("bash exited ..."; "bash could not be started" if it never got ready), and the next job
 * starts a new bash.
 */
void bk_job_check_bash(bk_kernel_t *k);

#endif
