/*
 * wire/zmtp.h: ZMTP 3.0 with the NULL security mechanism (ZeroMQ RFC 23), the transport every
 * Jupyter kernel's libzmq sockets speak: the greeting, the READY command, frame headers and
 * commands. A codec over bytes: no sockets (kernelmgr's zsock owns the connections).
 *
 * A connection opens with a 64-byte greeting from each side, then each side's READY command
 * (its socket type and, for a DEALER that wants to be routed to by name, its identity), then
 * frames: a one-byte flags field (MORE, LONG, COMMAND), a size (one byte, or eight big-endian
 * bytes when LONG) and the body. A message is a run of frames whose last lacks MORE.
 *
 * Send the first message only once the peer's READY has been read: libzmq 4.3 drops a connection
 * whose next frame arrives after its peer's READY but before it has sent its own READY
 * (null_mechanism.cpp: "unexpected command"), so greeting, READY and a message in one write fail.
 */
#ifndef WIRE_ZMTP_H
#define WIRE_ZMTP_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_ZMTP_GREETING_LEN 64
/* Longest frame header: flags and an eight-byte size. */
#define WIRE_ZMTP_HEAD_MAX 9

/* Frame flags. */
#define WIRE_ZMTP_MORE 0x01
#define WIRE_ZMTP_LONG 0x02
#define WIRE_ZMTP_COMMAND 0x04

/** Our greeting: signature, version 3.0, mechanism NULL, as-server 0. */
void wire_zmtp_greeting(uint8_t out[WIRE_ZMTP_GREETING_LEN]);

/**
 * Checks a peer's greeting: 0, or WIRE_EZMTP when it is no ZMTP 3.x greeting with the NULL
 * mechanism (ZMTP 1.0 and 2.0 peers, CURVE and PLAIN are not spoken).
 */
int wire_zmtp_check_greeting(const uint8_t in[WIRE_ZMTP_GREETING_LEN]);

/**
 * Writes the whole READY command frame (header included) of a socket of type `socket_type`
 * ("DEALER", "SUB") with routing id `identity` (NULL for none; 1-255 bytes) into `out`. Returns its
 * length, or WIRE_ENOSPACE when `cap` is too small or the identity too long.
 */
int wire_zmtp_ready(uint8_t *out, size_t cap, const char *socket_type, const char *identity);

/**
 * Nonzero when a socket of type `ours` may talk to a peer whose READY named its type `peer`
 * (`peer_len` bytes, compared exactly): the pairs of RFC 28 (REQ, REP, DEALER, ROUTER), RFC 29
 * (PUB, SUB, XPUB, XSUB) and PAIR with PAIR, the table libzmq checks. A kernel's shell, control and
 * stdin sockets are ROUTERs, its iopub a PUB and its heartbeat a REP, so a connection file with two
 * ports swapped is refused at the handshake instead of waiting for replies that never come.
 */
int wire_zmtp_socket_types_match(const char *ours, const uint8_t *peer, size_t peer_len);

/** Writes the header of a frame of `size` bytes with `flags` (MORE, COMMAND; LONG is chosen here). Returns its length: 2 or 9. */
size_t wire_zmtp_write_head(uint8_t out[WIRE_ZMTP_HEAD_MAX], uint64_t size, unsigned flags);

/** A frame header read off a stream. */
typedef struct st_wire_zmtp_head_t {
    unsigned flags;  /* WIRE_ZMTP_MORE, WIRE_ZMTP_LONG, WIRE_ZMTP_COMMAND */
    uint64_t size;   /* of the body that follows */
    size_t head_len; /* 2 or 9 */
} wire_zmtp_head_t;

/**
 * Reads the frame header at the start of `len` bytes at `p`. Returns 1 (a whole header, in
 * `*out`), 0 (more bytes needed), or WIRE_EZMTP (reserved flag bits set, or MORE on a command).
 */
int wire_zmtp_read_head(const uint8_t *p, size_t len, wire_zmtp_head_t *out);

/** A command frame's body split into its name and its data. */
typedef struct st_wire_zmtp_command_t {
    const uint8_t *name;
    size_t name_len;
    const uint8_t *data;
    size_t data_len;
} wire_zmtp_command_t;

/** Splits a command frame's body. 0, or WIRE_EZMTP when the name runs past the body or is empty. */
int wire_zmtp_parse_command(const uint8_t *body, size_t len, wire_zmtp_command_t *out);

/** Nonzero if the command is named `name`. */
int wire_zmtp_command_is(const wire_zmtp_command_t *cmd, const char *name);

/**
 * Finds the property `name` (compared without regard to case, as the RFC says) among a READY
 * command's properties. Returns 1 with `*value`, `*value_len` set; 0 when absent; WIRE_EZMTP
 * when the properties are malformed (a length past the end).
 */
int wire_zmtp_property(const wire_zmtp_command_t *ready, const char *name, const uint8_t **value, size_t *value_len);

/**
 * The PONG command frame (header included) answering a PING command: its context echoed (at most
 * 16 bytes, the RFC's bound). Returns its length, or WIRE_ENOSPACE/WIRE_EZMTP (malformed PING).
 */
int wire_zmtp_pong(uint8_t *out, size_t cap, const wire_zmtp_command_t *ping);

#endif
