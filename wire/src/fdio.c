/* wire/src/fdio.c: a whole buffer to a descriptor, at its offset or at one given (wire/fdio.h). */
#include "wire/fdio.h"

#include <errno.h>
#include <unistd.h>

/* write(2) moves at most 0x7ffff000 bytes a call on Linux; a call of 1 GiB keeps ssize_t's result exact elsewhere too. */
#define MAX_WRITE ((size_t)1 << 30)

/* The one loop of both: write(2) when `at` is negative, pwrite(2) at `at` otherwise. */
static int write_all(int fd, const void *data, size_t len, off_t at)
{
    const char *p = data;

    while (len != 0) {
        size_t piece = len > MAX_WRITE ? MAX_WRITE : len;
        ssize_t n = at < 0 ? write(fd, p, piece) : pwrite(fd, p, piece, at);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
        if (at >= 0)
            at += n;
    }
    return 0;
}

int wire_write_all(int fd, const void *data, size_t len)
{
    return write_all(fd, data, len, -1);
}

int wire_pwrite_all(int fd, const void *data, size_t len, off_t at)
{
    return at < 0 ? -EINVAL : write_all(fd, data, len, at);
}
