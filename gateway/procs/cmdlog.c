/* A command's output log: a fixed-size ring file addressed by ever-growing byte offsets. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "procs/cmdlog.h"

void gw_cmdlog_plan(uint64_t total, size_t cap, uint64_t cursor, size_t max_read, gw_cmdlog_span_t *span)
{
    uint64_t oldest = total > cap ? total - cap : 0, from = cursor;
    size_t pos;

    memset(span, 0, sizeof(*span));
    if (from < oldest) {
        span->skipped = oldest - from;
        from = oldest;
    }
    if (from > total)
        from = total;
    span->start = from;
    span->len = total - from < max_read ? (size_t)(total - from) : max_read;
    if (span->len == 0 || cap == 0)
        return;
    pos = (size_t)(from % cap);
    span->file_off[0] = pos;
    span->seg_len[0] = cap - pos < span->len ? cap - pos : span->len;
    span->file_off[1] = 0;
    span->seg_len[1] = span->len - span->seg_len[0];
}

int gw_cmdlog_open(gw_cmdlog_t *log, const char *path, size_t cap)
{
    memset(log, 0, sizeof(*log));
    log->cap = cap;
    log->path = wire_strdup(path);
    if ((log->fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) == -1)
        return -errno;
    return 0;
}

static void write_at(int fd, const char *bytes, size_t len, size_t off)
{
    while (len != 0) {
        ssize_t n = pwrite(fd, bytes, len, (off_t)off);
        if (n <= 0) {
            if (n < 0 && errno == EINTR)
                continue;
            return; /* a full disk loses log bytes, never the command */
        }
        bytes += n;
        len -= (size_t)n;
        off += (size_t)n;
    }
}

void gw_cmdlog_append(gw_cmdlog_t *log, const char *bytes, size_t len)
{
    gw_cmdlog_span_t span;

    if (log->cap == 0 || log->fd == -1) {
        log->total += len;
        return;
    }
    /* where the appended bytes will be read from is where they go (the oldest of them skipped past `cap`) */
    gw_cmdlog_plan(log->total + len, log->cap, log->total, len, &span);
    write_at(log->fd, bytes + span.skipped, span.seg_len[0], span.file_off[0]);
    write_at(log->fd, bytes + span.skipped + span.seg_len[0], span.seg_len[1], 0);
    log->total += len;
}

int gw_cmdlog_read(const gw_cmdlog_t *log, uint64_t cursor, size_t max_read, char *buf, gw_cmdlog_span_t *span)
{
    size_t done = 0;
    int i;

    gw_cmdlog_plan(log->fd != -1 ? log->total : 0, log->cap, cursor, max_read, span);
    for (i = 0; i != 2; ++i) {
        size_t got = 0;
        while (got < span->seg_len[i]) {
            ssize_t n = pread(log->fd, buf + done + got, span->seg_len[i] - got, (off_t)(span->file_off[i] + got));
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                return n < 0 ? -errno : -EIO;
            got += (size_t)n;
        }
        done += got;
    }
    return 0;
}

void gw_cmdlog_dispose(gw_cmdlog_t *log)
{
    if (log->fd != -1) {
        close(log->fd);
        unlink(log->path);
    }
    free(log->path);
    log->path = NULL;
    log->fd = -1;
}
