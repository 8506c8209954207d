/* support/sse.h: an SSE parser that finds each event where it lies in the caller's buffer (no I/O, no hidden state). */
#ifndef KGATE_SUPPORT_SSE_H
#define KGATE_SUPPORT_SSE_H

#include <stddef.h>

/** One event, as ts_sse_parse finds it. */
typedef struct st_ts_sse_event_t {
    /** Its data lines joined by "\n": a pointer into the caller's bytes when there is one line (the
     *  usual case: nothing is copied), into the parser's scratch when there are several. Not
     *  NUL-terminated. */
    const char *data;
    size_t len;
    long long id; /* the `id:` field: -1 when absent, -2 when it is not a decimal integer */
    int bare;     /* framed as bare JSON lines (execd's compatibility framing), not `data:` lines */
} ts_sse_event_t;

/** Where parsing stands; every offset is from the start of the pending event. */
typedef struct st_ts_sse_parser_t {
    size_t line;    /* where the line being looked at starts */
    size_t scanned; /* that line holds no line end before this offset */
    int has_data, bare, joined;
    long long id;
    size_t data_off, data_len; /* the event's only data line so far, while !joined */
    char *join;                /* several data lines, joined */
    size_t join_len, join_cap;
} ts_sse_parser_t;

void ts_sse_parser_init(ts_sse_parser_t *p);

/** Frees the scratch buffer and leaves the parser as ts_sse_parser_init does. */
void ts_sse_parser_dispose(ts_sse_parser_t *p);

/**
 * Looks for the next complete event in the `len` bytes at `buf`. `buf` must start where the
 * pending event starts: the caller passes its unconsumed bytes again, with more appended (they may
 * have moved in between), and each byte is looked at once however the stream is split. Lines end
 * with LF, CRLF or CR (WHATWG's rules); lines starting with ':' are comments; `data` and `id` are
 * the fields read, others are ignored; a line starting with '{' or '[' is a data line in itself
 * (execd's bare-JSON framing). A blank line ends an event; an event without data is skipped.
 *
 * Returns 1 when an event is complete: *ev is filled, and ev->data stays valid until the next call
 * or until the caller changes those bytes. Returns 0 when more bytes are needed. Either way
 * *consumed is how many leading bytes are done with: the caller drops them before the next call.
 */
int ts_sse_parse(ts_sse_parser_t *p, const char *buf, size_t len, size_t *consumed, ts_sse_event_t *ev);

#endif
