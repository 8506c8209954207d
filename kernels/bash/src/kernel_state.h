/* kernels/bash/src/kernel_state.h: the one bk_kernel_t the kernel's parts share, and which part owns what in it. */
#ifndef BK_KERNEL_STATE_H
#define BK_KERNEL_STATE_H

#include "channels.h"
#include "job.h"
#include "kernel.h"
#include "output.h"
#include "shell.h"

/*
 * One thread serves everything: the poll loop (kernel.c) hands each event to its part, and a part may
 * call another (a marker from bash ends the job, which drains the output and replies). Each member is
 * created in bk_kernel_create and released once, in bk_kernel_destroy; in between its part alone changes it.
 */
struct st_bk_kernel_t {
    bk_channels_t channels; /* channels.h */
    int sigfd;              /* signalfd for SIGINT, SIGTERM, SIGHUP, SIGCHLD (owned; read by the loop) */
    bk_shell_t shell;       /* shell.h: the persistent bash */
    bk_output_t output;     /* output.h: bash's output, on its way to iopub */
    bk_job_t job;           /* job.h, input.h: the request bash serves; shell requests wait in ZeroMQ's queue meanwhile */
    char *bash_version;     /* requests.c: asked of bash once, on the first kernel_info_request */
    int execution_count;    /* job.c: the executions so far that asked to be counted (store_history) */
    int exit_code;          /* the process's exit code once the loop ends */
    int stopping;           /* a shutdown_request, SIGTERM or SIGHUP came: the loop ends */
};

#endif
