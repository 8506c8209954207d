/* gateway/cmdlog.h: a command's combined output in a bounded ring file, read from a byte cursor. */
#ifndef GW_CMDLOG_H
#define GW_CMDLOG_H

#include <stddef.h>
#include <stdint.h>

/**
 * The log of one command: stdout and stderr as they arrived, interleaved, in a file of at most
 * `cap` bytes used as a ring. Offsets (cursors) count every byte the command ever wrote, so they
 * only grow; once more than `cap` bytes were written, only the newest `cap` are retained and a
 * cursor pointing before them reads from the oldest retained byte.
 */
typedef struct st_gw_cmdlog_t {
    int fd; /* -1 when the file could not be created (output is then only counted) */
    char *path;
    size_t cap;
    uint64_t total; /* bytes written so far: the offset of the end of the log */
} gw_cmdlog_t;

/** What one read returns: the logical range [start, start + len) and where its bytes lie in the file. */
typedef struct st_gw_cmdlog_span_t {
    uint64_t start;     /* >= the cursor asked for: larger when bytes were overwritten */
    size_t len;         /* start + len is the next cursor */
    uint64_t skipped;   /* bytes between the cursor and `start` that are no longer retained */
    size_t file_off[2]; /* the range as at most two segments of the ring file */
    size_t seg_len[2];
} gw_cmdlog_span_t;

/**
 * Plans a read of at most `max_read` bytes from `cursor` in a ring of `cap` bytes holding the
 * first `total` bytes of output (pure). A cursor past the end reads nothing at the end.
 */
void gw_cmdlog_plan(uint64_t total, size_t cap, uint64_t cursor, size_t max_read, gw_cmdlog_span_t *span);

/** Creates (truncates) the file at `path` (copied; mode 0600). Returns 0, or -errno (the log still counts bytes). */
int gw_cmdlog_open(gw_cmdlog_t *log, const char *path, size_t cap);

/** Appends output; when more than `cap` bytes were written, the oldest are overwritten. */
void gw_cmdlog_append(gw_cmdlog_t *log, const char *bytes, size_t len);

/**
 * Reads at most `max_read` bytes from `cursor` into `buf` (which holds `max_read` bytes); fills
 * `span` (span->len bytes were read). Returns 0, or -errno.
 */
int gw_cmdlog_read(const gw_cmdlog_t *log, uint64_t cursor, size_t max_read, char *buf, gw_cmdlog_span_t *span);

/** Closes and deletes the file. */
void gw_cmdlog_dispose(gw_cmdlog_t *log);

#endif
