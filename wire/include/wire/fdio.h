/* wire/fdio.h: writing a whole buffer to a descriptor, the one copy for wire's connection files, the bash kernel and the
 * gateway's files (wire is the lowest module every one of them links). */
#ifndef WIRE_FDIO_H
#define WIRE_FDIO_H

#include <stddef.h>
#include <sys/types.h>

/**
 * Writes the `len` bytes at `data` to `fd`, in as many write(2) calls as it takes, again after EINTR; on a blocking
 * descriptor it returns only when all are written. Returns 0, or -errno of the write that failed (what came before it
 * is written), -EIO for a write that wrote nothing. A non-blocking descriptor that is full fails with -EAGAIN.
 */
int wire_write_all(int fd, const void *data, size_t len);

/** wire_write_all at offset `at` of `fd` with pwrite(2): the descriptor's own offset is neither used nor moved. */
int wire_pwrite_all(int fd, const void *data, size_t len, off_t at);

#endif
