/* support/ws_client.h: a small blocking WebSocket client (RFC 6455) for tests and the bench: handshake, masked frames, close. */
#ifndef KGATE_SUPPORT_WS_CLIENT_H
#define KGATE_SUPPORT_WS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#define WSC_TEXT 0x1
#define WSC_BINARY 0x2
#define WSC_CLOSE 0x8
#define WSC_PING 0x9
#define WSC_PONG 0xa

typedef struct st_wsc_t {
    int fd;
    int status;         /* the handshake's HTTP status */
    char headers[4096]; /* the handshake response head, NUL-terminated */
    char error[256];    /* why the last call failed */
    /**
     * Set (1) after wsc_connect to acknowledge every read at once (TCP_QUICKACK) instead of after
     * Linux's delayed-ACK timer (40 ms at least). A server that does not set TCP_NODELAY holds each
     * small write until the previous one is acknowledged (Nagle), so with delayed ACKs a reply of
     * several frames costs it ~40 ms per stall; this client option shows what is left without them.
     */
    int quickack;
    uint8_t *in; /* bytes read and not yet consumed */
    size_t in_len, in_cap;
} wsc_t;

/** One message: its opcode and payload (malloc'ed, NUL-terminated, owned by the caller). */
typedef struct st_wsc_msg_t {
    int opcode;
    uint8_t *data;
    size_t len;
    uint16_t close_code; /* for WSC_CLOSE: the code, or 0 */
} wsc_msg_t;

/**
 * Connects to 127.0.0.1:`port` and asks to upgrade `path` (extra header lines in `headers`,
 * NULL-terminated, may be NULL). Returns 0 on 101 with a valid Sec-WebSocket-Accept; -1 otherwise
 * (ws->status holds the HTTP status when one arrived, ws->error why). Call wsc_close either way.
 */
int wsc_connect(wsc_t *ws, unsigned short port, const char *path, const char *const *headers, int64_t deadline_ms);

/** A header of the handshake response (case-insensitive name), copied into `out`; NULL when absent. */
const char *wsc_header(const wsc_t *ws, const char *name, char *out, size_t size);

/** Sends one masked frame (fin set). Returns 0 or -1. */
int wsc_send(wsc_t *ws, int opcode, const void *data, size_t len);

/**
 * Receives the next message (continuation frames joined), answering pings itself. Returns 0, or -1
 * on timeout, EOF or a protocol error (ws->error). Dispose msg->data with free().
 */
int wsc_recv(wsc_t *ws, int64_t deadline_ms, wsc_msg_t *msg);

/**
 * Writes `count` masked ping frames into `out` (room for count * (6 + payload_len) bytes), each with a
 * `payload_len`-byte payload (4 to 125) that starts with its sequence number, big-endian, from
 * `first_seq`. Returns the bytes written: pre-built frames for a client that pings as fast as a socket
 * takes them (write them with wsc_write).
 */
size_t wsc_ping_frames(uint8_t *out, size_t count, uint32_t first_seq, size_t payload_len);

/** Writes `len` raw bytes to the socket (blocking). Returns 0 or -1 (ws->error). */
int wsc_write(wsc_t *ws, const void *bytes, size_t len);

/** The sequence number at the start of a pong's payload (see wsc_ping_frames); 0 when it is shorter. */
uint32_t wsc_pong_seq(const wsc_msg_t *msg);

/** Closes the socket and frees buffers (no close frame: send one with wsc_send first if wanted). */
void wsc_close(wsc_t *ws);

/** Milliseconds of CLOCK_MONOTONIC (deadlines). */
int64_t wsc_now_ms(void);

#endif
