/* kernels/bash/src/output.h: bash's stdout and stderr, from its pipes to iopub stream messages. */
#ifndef BK_OUTPUT_H
#define BK_OUTPUT_H

#include <jansson.h>
#include "channels.h"
#include "shell.h"
#include "streams.h"

/**
 * Where bash's output goes: the latest execute_request, also for what background jobs write between
 * cells (a shell has no other request to attribute it to).
 */
typedef struct st_bk_output_t {
    bk_streams_t streams;
    bk_channels_t *channels; /* borrowed: where stream messages are published */
    json_t *parent;          /* the latest execute_request's header (a reference held); NULL before the first */
    int silent;              /* that request was silent: its output is read and dropped */
} bk_output_t;

/** Publishes through `channels`, which must outlive `out`. Pair with bk_output_dispose. */
void bk_output_init(bk_output_t *out, bk_channels_t *channels);
/** Releases the buffers and the parent; what was not published is lost. Accepts a zeroed `out`. */
void bk_output_dispose(bk_output_t *out);

/** From now on output goes to the request whose header is `parent_header` (a reference is taken), or nowhere if `silent`. */
void bk_output_direct(bk_output_t *out, json_t *parent_header, int silent);

/**
 * Reads once from bash's stdout (BK_STDOUT) or stderr (BK_STDERR) and pushes what came, unless bash is not
 * ready yet (what it says while starting is noise). Returns 1 if bytes came, 0 otherwise (none now, or the pipe is closed).
 */
int bk_output_read(bk_output_t *out, bk_shell_t *sh, int which);

/**
 * Reads both pipes until they are empty. Everything a finished command wrote is in the pipes already:
 * call it before replying, or before asking for input, so that the output comes first.
 */
void bk_output_drain(bk_output_t *out, bk_shell_t *sh);

#endif
