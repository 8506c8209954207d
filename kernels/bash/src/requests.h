/* kernels/bash/src/requests.h: serving a shell or control request: to the job it starts, or answered at once. */
#ifndef BK_REQUESTS_H
#define BK_REQUESTS_H

#include "wire/codec.h"
#include "kernel.h"

/**
 * Handles one request that came on `ch` (WIRE_CHANNEL_SHELL or WIRE_CHANNEL_CONTROL); takes ownership of
 * `req`. iopub says busy first. On the shell channel, execute_request and complete_request start a job
 * (job.h), which says idle when bash is done. Everything else is answered now, then idle: kernel_info,
 * is_complete (bash -n), history, comm_info, inspect (none), interrupt (the job's), shutdown (the loop
 * ends after the reply); other types are printed to stderr and ignored.
 */
void bk_requests_handle(bk_kernel_t *k, wire_channel_t ch, wire_msg_t *req);

#endif
