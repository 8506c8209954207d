/* app/access_log.h: --access-log: one line per HTTP request, written by a thread of its own so that a slow disk never stalls the
 * loop. */
#ifndef GW_APP_ACCESS_LOG_H
#define GW_APP_ACCESS_LOG_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/** The longest path written; a longer one is cut and ends in "...". */
#define GW_ACCESS_LOG_MAX_PATH 1024

/**
 * The loop appends lines to a buffer of `max_bytes`; the writer thread swaps it for its own empty one and writes it out.
 * So the loop waits at most for the swap (a pointer exchange under a mutex), never for the disk, and memory stays at two
 * buffers whatever the disk does: a line that does not fit while the writer is behind is dropped and counted (the count
 * is in `dropped`, in a line of the log itself once there is room again, and in kgate_access_log_dropped_lines_total).
 */
typedef struct st_gw_access_log_t {
    int fd;
    int owns_fd; /* a file (closed at dispose), not stderr */
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    char *fill;      /* the loop's buffer, under mutex */
    size_t fill_len; /* under mutex */
    char *spare;     /* the writer's */
    size_t max_bytes;
    uint64_t dropped;       /* lines dropped since the last report, under mutex */
    uint64_t dropped_total; /* lines dropped ever, loop only (the figure) */
    unsigned stopping : 1;  /* under mutex */
    unsigned thread_started : 1;
} gw_access_log_t;

/**
 * Opens `path` for appending (created 0640), or stderr for "-", and starts the writer. Returns 0, or -1 with the reason in
 * `err` (the log is then not open; gw_access_log_dispose is still safe).
 */
int gw_access_log_open(gw_access_log_t *log, const char *path, size_t max_bytes, char *err, size_t errlen);

/** Flushes what is buffered, stops the writer and closes the file. Safe on a log that never opened. */
void gw_access_log_dispose(gw_access_log_t *log);

/** One request's line (every field is escaped: no space, quote, control byte or non-ASCII byte gets through as is). */
typedef struct st_gw_access_entry_t {
    int64_t unix_ms;  /* when it ended */
    const char *peer; /* "127.0.0.1:54321", "[::1]:1234", "-" */
    const char *method;
    size_t method_len;
    const char *path; /* the request target; cut at its query ('?'), which may carry a token */
    size_t path_len;
    int status;
    uint64_t bytes_sent;
    double seconds;
    const char *door;
} gw_access_entry_t;

/**
 * Formats `entry` as `<RFC 3339 UTC time> <peer> <method> <path> <status> <bytes> <seconds> <door>\n` into `buf` (pure).
 * Returns the line's length (at most `size` - 1, NUL-terminated).
 */
size_t gw_access_log_format(const gw_access_entry_t *entry, char *buf, size_t size);

/** Appends one line (loop side; never waits for the disk). Returns 0, or -1 when it was dropped (the buffer is full). */
int gw_access_log_write(gw_access_log_t *log, const char *line, size_t len);

#endif
