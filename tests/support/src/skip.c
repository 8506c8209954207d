/* tests/support/src/skip.c: skips recorded for the run's summary (support/skip.h). */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "support/skip.h"

const char *ts_skip_note(const char *where, const char *fmt, ...)
{
    static char reason[1024];
    char line[1400];
    const char *path = getenv(TS_SKIP_LOG_ENV);
    va_list ap;
    int n;

    va_start(ap, fmt);
    vsnprintf(reason, sizeof(reason), fmt, ap);
    va_end(ap);
    n = snprintf(line, sizeof(line), "SKIPPED %s: %s\n", where, reason);
    if (n < 0)
        return reason;
    if ((size_t)n >= sizeof(line))
        n = (int)sizeof(line) - 1;
    fputs(line, stderr);
    if (path != NULL && path[0] != '\0') {
        /* O_APPEND: one write per line, so that Criterion's forked tests and parallel binaries never interleave. */
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) {
            if (write(fd, line, (size_t)n) != n)
                fprintf(stderr, "ts_skip_note: cannot append to %s\n", path);
            close(fd);
        }
    }
    return reason;
}
