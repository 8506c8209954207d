/* wire/src/fdio.c: a whole buffer to a descriptor (wire/fdio.h). */
#include "wire/fdio.h"

#include <errno.h>
#include <unistd.h>

/* write(2) moves at most 0x7ffff000 bytes a call on Linux; a call of 1 GiB keeps ssize_t's result exact elsewhere too. */
#define MAX_WRITE ((size_t)1 << 30)

int wire_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;

    while (len != 0) {
        ssize_t n = write(fd, p, len > MAX_WRITE ? MAX_WRITE : len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}
