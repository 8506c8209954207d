/*
 * kernels/bash/src/kernel.h: the bash kernel as main.c sees it: create, run, destroy. Its parts, one job each:
 * channels.h (the sockets), requests.h (dispatch), job.h (a request bash serves), input.h (a cell's stdin),
 * output.h and streams.h (bash's output to iopub), shell.h (the persistent bash); kernel_state.h ties them.
 */
#ifndef BK_KERNEL_H
#define BK_KERNEL_H

#include "wire/connfile.h"

typedef struct st_bk_kernel_t bk_kernel_t;

/**
 * Binds the five sockets on `conn`'s endpoints, keys the signer, creates the private directory and
 * starts bash. `sigfd` is a signalfd for SIGINT (interrupt the running code), SIGTERM and SIGHUP
 * (exit) and SIGCHLD (bash exited); the kernel owns it afterwards. Returns NULL (after printing why
 * to stderr) on failure; `conn` is not kept.
 */
bk_kernel_t *bk_kernel_create(const wire_connection_t *conn, int sigfd);

/** Serves requests until a shutdown_request, SIGTERM or SIGHUP. Returns the process exit code. */
int bk_kernel_run(bk_kernel_t *k);

/** Stops bash (its whole process group), closes the sockets and removes the private directory. */
void bk_kernel_destroy(bk_kernel_t *k);

#endif
