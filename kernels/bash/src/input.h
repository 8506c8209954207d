/* kernels/bash/src/input.h: a cell's stdin: asking the client for a line (input_request) and feeding its input_reply to the cell.
 */
#ifndef BK_INPUT_H
#define BK_INPUT_H

#include "wire/codec.h"
#include "kernel.h"

/*
 * Nothing on a pipe says "someone is reading" (shell.h), so while a cell run with allow_stdin has no
 * input_request outstanding, the kernel looks every BK_STDIN_SCAN_MS for a process reading its stdin;
 * the first look comes BK_STDIN_FIRST_SCAN_MS after the cell starts, for a cell that reads at once.
 */
#define BK_STDIN_SCAN_MS 30
#define BK_STDIN_FIRST_SCAN_MS 5
/* The longest input_reply value fed to a cell; a longer one is dropped and the request stays open. */
#define BK_MAX_INPUT_BYTES 65536

/**
 * Handles one message from the stdin socket (takes ownership of `msg`): an input_reply to the
 * outstanding input_request, or without a parent (jupyter_client sends none), is fed to the cell with
 * a newline; anything else, a reply to an older request and a value of BK_MAX_INPUT_BYTES or more are dropped.
 */
void bk_input_on_reply(bk_kernel_t *k, wire_msg_t *msg);

/**
 * At `now_ms`, if a look is due: when a process of the cell waits on its stdin, publishes what the cell
 * printed so far (its prompt) and sends an input_request on the stdin socket.
 */
void bk_input_scan(bk_kernel_t *k, long long now_ms);

/** When bk_input_scan next has work, or -1 when no look is armed (no cell with allow_stdin, or a request outstanding). */
long long bk_input_next_scan(const bk_kernel_t *k);

#endif
