/* kernels/bash/src/streams.h: batching bash's stdout and stderr bytes into stream texts (pure: no I/O, no clock). */
#ifndef BK_STREAMS_H
#define BK_STREAMS_H

#include <stddef.h>

/*
 * Output is pushed in chunks of at most BK_STREAM_CHUNK bytes and emitted once BK_STREAM_FLUSH_BYTES
 * are buffered or BK_STREAM_FLUSH_MS after the first unemitted byte: streamed as produced, without one
 * message per line of a fast writer.
 */
#define BK_STREAM_CHUNK 65536
#define BK_STREAM_FLUSH_BYTES 65536
#define BK_STREAM_FLUSH_MS 20

enum { BK_STDOUT, BK_STDERR, BK_STREAM_COUNT };

/** The Jupyter name of stream `which`: "stdout" or "stderr". */
const char *bk_stream_name(int which);

/**
 * Called with each text to publish: valid UTF-8 (every invalid byte became U+FFFD), `len` > 0 bytes,
 * NUL-terminated; borrowed for the call.
 */
typedef void (*bk_streams_emit_cb)(void *ctx, int which, const char *text, size_t len);

typedef struct st_bk_stream_t {
    char *buf; /* bytes not yet emitted; at most BK_STREAM_FLUSH_BYTES + BK_STREAM_CHUNK */
    size_t len;
    long long flush_at; /* when to emit them; 0: nothing pending */
} bk_stream_t;

typedef struct st_bk_streams_t {
    bk_stream_t s[BK_STREAM_COUNT];
    bk_streams_emit_cb emit;
    void *ctx;
} bk_streams_t;

/** Allocates the two buffers; `emit` is called with `ctx` for every text. Pair with bk_streams_dispose. */
void bk_streams_init(bk_streams_t *st, bk_streams_emit_cb emit, void *ctx);
/** Frees the buffers; what was not flushed is lost. Accepts a zeroed `st`. */
void bk_streams_dispose(bk_streams_t *st);

/**
 * Appends `len` (at most BK_STREAM_CHUNK) bytes to stream `which` at time `now_ms`. The other stream's
 * pending bytes are emitted first: the two pipes are read independently, and this keeps what was written
 * before this chunk ahead of it. Emits at once when BK_STREAM_FLUSH_BYTES are buffered, else arms the
 * stream's timer (BK_STREAM_FLUSH_MS after its first pending byte).
 */
void bk_streams_push(bk_streams_t *st, int which, const char *data, size_t len, long long now_ms);

/**
 * Emits what stream `which` holds and disarms its timer. Unless `final`, an incomplete UTF-8 sequence at
 * the end stays for the next push (a character split between two reads survives); `final` emits it as
 * U+FFFD (the writer is done).
 */
void bk_streams_flush(bk_streams_t *st, int which, int final);
/** bk_streams_flush on both streams, stdout first. */
void bk_streams_flush_all(bk_streams_t *st, int final);
/** Flushes (not final) each stream whose timer is due at `now_ms`. */
void bk_streams_flush_due(bk_streams_t *st, long long now_ms);
/** The earliest armed timer, or -1 when nothing is pending. */
long long bk_streams_next_flush(const bk_streams_t *st);

#endif
