/* wire/connfile.h: Jupyter connection files (read, write, endpoints). No sockets. */
#ifndef WIRE_CONNFILE_H
#define WIRE_CONNFILE_H

#include <stddef.h>

/** The five channels, in the order used by every per-channel array in kgate. */
typedef enum {
    WIRE_CHANNEL_SHELL,
    WIRE_CHANNEL_IOPUB,
    WIRE_CHANNEL_STDIN,
    WIRE_CHANNEL_CONTROL,
    WIRE_CHANNEL_HB,
    WIRE_CHANNEL_COUNT
} wire_channel_t;

/** "shell", "iopub", "stdin", "control", "hb". */
const char *wire_channel_name(wire_channel_t ch);

/** The contents of a connection file. Strings are owned (wire_malloc) by the struct. */
typedef struct st_wire_connection_t {
    char *transport; /* "tcp" or "ipc" */
    char *ip;        /* tcp: an address; ipc: a path prefix */
    int ports[WIRE_CHANNEL_COUNT];
    char *key;              /* the HMAC key string; "" means unsigned */
    char *signature_scheme; /* "hmac-sha256" */
    char *kernel_name;      /* may be "" */
} wire_connection_t;

/** Releases the strings of `conn` and wipes the key (sodium_memzero); accepts a zeroed struct. */
void wire_connection_dispose(wire_connection_t *conn);

/**
 * Writes `conn` as JSON to a new file at `path` created with mode 0600 (O_EXCL: an existing file
 * is never overwritten). Returns 0, WIRE_EEXISTS, WIRE_EIO, or WIRE_EBADCONN (a NULL or non-UTF-8
 * string in `conn`; kernel_name NULL is written as ""). Nothing is created on error.
 */
int wire_connection_write(const wire_connection_t *conn, const char *path);

/**
 * Reads a connection file into `out` (zeroed by the callee first). Returns 0, WIRE_EIO (cannot
 * read) or WIRE_EBADCONN (not JSON, missing fields, ports out of range, unknown transport or
 * signature scheme). On error `out` holds nothing to dispose.
 */
int wire_connection_read(const char *path, wire_connection_t *out);

/**
 * Formats the ZMQ endpoint of channel `ch` into `buf`: "tcp://IP:PORT" or "ipc://IP-PORT".
 * Returns the length written, WIRE_ENOSPACE if `bufsize` is too small, or WIRE_EBADCONN for an
 * unknown transport or channel.
 */
int wire_connection_endpoint(const wire_connection_t *conn, wire_channel_t ch, char *buf, size_t bufsize);

#endif
