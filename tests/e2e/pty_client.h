/* tests/e2e/pty_client.h: a client of kgate's PTY WebSocket (docs/API.md 5.1) over the tests' WebSocket client; no Criterion
 * inside. */
#ifndef KGATE_E2E_PTY_CLIENT_H
#define KGATE_E2E_PTY_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "support/ws_client.h"

/** A growing byte buffer, NUL-terminated. */
typedef struct st_ptc_bytes_t {
    char *base;
    size_t len, cap;
} ptc_bytes_t;

/** One connection and everything it received, sorted by channel. */
typedef struct st_ptc_t {
    wsc_t ws;
    char body[2048];       /* a refused upgrade: the response body (NUL-terminated) */
    json_t *connected;     /* the first frame */
    ptc_bytes_t out, err;  /* live stdout (0x01) and stderr (0x02) bytes */
    ptc_bytes_t replay;    /* the bytes of every replay frame (0x03), joined */
    uint64_t replay_start; /* the offset of the first replay frame */
    int replays;           /* how many replay frames arrived */
    json_t *texts;         /* every text frame after `connected`, parsed (an array) */
    int exit_code;         /* -1 until an exit frame */
    int closed;            /* a close frame arrived (close_code) or the connection ended (close_code 0) */
    uint16_t close_code;
    char close_reason[128];
    char error[320]; /* why the last call failed */
} ptc_t;

/**
 * Opens /pty/`id`/ws`query` (query "" or "?pty=0&since=3", ...) on 127.0.0.1:`port` with `token`
 * (X-EXECD-ACCESS-TOKEN; NULL: none) and reads the first frame. Returns 0 when it is `connected`;
 * -1 otherwise (c->ws.status: the HTTP status of a refused upgrade, c->body its body). Dispose either way.
 */
int ptc_connect(ptc_t *c, unsigned short port, const char *id, const char *query, const char *token, int64_t deadline_ms);

/** Sends stdin as a binary frame (0x00 + bytes). 0 or -1. */
int ptc_stdin(ptc_t *c, const char *text);
/** Sends a text frame. 0 or -1. */
int ptc_text(ptc_t *c, const char *json);

/** Receives and sorts one message. 0, or -1 on timeout or end of the connection (c->closed set then). */
int ptc_pump(ptc_t *c, int64_t deadline_ms);
/** Pumps until `needle` appears in what stdout (or stderr: `in_stderr`) received. 0 or -1. */
int ptc_wait_output(ptc_t *c, const char *needle, int in_stderr, int64_t deadline_ms);
/** Pumps until the connection closes. 0 or -1. */
int ptc_wait_close(ptc_t *c, int64_t deadline_ms);
/** The first text frame of `type` received so far, or NULL. */
json_t *ptc_find_text(const ptc_t *c, const char *type);

/** Closes politely: a close frame, then waits (bounded) for the server's, then the socket. */
void ptc_disconnect(ptc_t *c);
/** Closes the socket and frees everything. */
void ptc_dispose(ptc_t *c);

/** POST /pty with `body` (may be NULL) and `token`; the session id (malloc'ed) on 201, else NULL with the status in *status. */
char *ptc_create(unsigned short port, const char *token, const char *body, int *status);

/** VmRSS of process `pid` in KiB, or -1. */
long ptc_rss_kib(int pid);

#endif
