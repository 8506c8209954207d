/* tests/e2e/upstream.h: a small HTTP and WebSocket server a test runs on 127.0.0.1 (threads of the test process) behind /proxy. */
#ifndef KGATE_E2E_UPSTREAM_H
#define KGATE_E2E_UPSTREAM_H

#include <stddef.h>

/*
 * One connection, one request, then the server closes (Connection: close). What it answers, by path:
 *   /echo...          200 text/plain; the body is the request exactly as received (head, then body)
 *   /status/NNN       status NNN with `X-Upstream-Status: NNN` and the body "status NNN\n" (none for 204/304)
 *   /big/N            N bytes of upstream_pattern_byte() with Content-Length; `?chunked=1`: chunked instead
 *   /stream           text/event-stream: `data: first`, then, once the test calls upstream_release_stream (at most
 *                     UPSTREAM_STREAM_HOLD_MS after), `data: last`
 *   /silent           reads the request and never answers (until the peer closes or the server stops)
 *   /trickle          sends its answer's head one byte a second, for ever (until the peer closes or the server stops)
 *   /endless-head     a head that never ends: one header line, sent as fast as the peer takes it, for ever (until the peer
 *                     closes or the server stops)
 *   /cut/N            a 200 that stops after N body bytes and closes: chunked (one chunk of N), or `?short=1` with a
 *                     Content-Length of 2N
 *   /ws               a WebSocket echo (text and binary); Sec-WebSocket-Protocol "chat" is chosen when
 *                     offered; the text message "close-me" makes it close with 4001; a close is answered in kind
 * Anything else is 404 with the /echo body.
 */
#define UPSTREAM_STREAM_HOLD_MS 30000

typedef struct st_upstream_t upstream_t;

/** Starts the server on a free port of 127.0.0.1 (each connection in its own thread); NULL on failure. */
upstream_t *upstream_start(void);

/** Its port. */
unsigned short upstream_port(const upstream_t *u);

/** Requests it has read so far (whole heads). */
unsigned upstream_requests(const upstream_t *u);

/** Connections accepted and not yet closed by the server's side (it closes once the peer has). */
unsigned upstream_open(const upstream_t *u);

/** Lets one /stream answer (held, or the next one) send its last event. */
void upstream_release_stream(upstream_t *u);

/** Stops it: no more connections, every connection's socket shut down, every thread joined. NULL is fine. */
void upstream_stop(upstream_t *u);

/** The byte at offset `i` of a /big body (a pattern a shifted copy would not reproduce). */
unsigned char upstream_pattern_byte(size_t i);

/** A port of 127.0.0.1 that nothing listens on (bound, then released). */
unsigned short upstream_closed_port(void);

#endif
