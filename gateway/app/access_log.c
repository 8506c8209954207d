/* The access log: a pure line formatter, and a double buffer written out by a thread of its own. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/fdio.h"
#include "app/access_log.h"

/* Copies `len` bytes of `s` as a log field: printable ASCII but quote and backslash as is (a target arrives percent-encoded
 * already), the rest %XX: a field never holds a space, so a line splits into its fields. */
static size_t put_field(char *out, size_t room, const char *s, size_t len, size_t max)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    int cut = len > max;

    if (cut)
        len = max;
    for (size_t i = 0; i != len && n + 4 < room; ++i) {
        unsigned char c = (unsigned char)s[i];
        if (c > 0x20 && c < 0x7f && c != '"' && c != '\\') {
            out[n++] = (char)c;
        } else {
            out[n++] = '%';
            out[n++] = hex[c >> 4];
            out[n++] = hex[c & 15];
        }
    }
    if (len == 0 && n + 2 < room)
        out[n++] = '-';
    if (cut && n + 4 < room) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    return n;
}

size_t gw_access_log_format(const gw_access_entry_t *e, char *buf, size_t size)
{
    time_t secs = (time_t)(e->unix_ms / 1000);
    const char *query = e->path != NULL ? memchr(e->path, '?', e->path_len) : NULL;
    size_t path_len = query != NULL ? (size_t)(query - e->path) : e->path_len, n;
    struct tm tm;
    int w;

    gmtime_r(&secs, &tm);
    n = strftime(buf, size, "%Y-%m-%dT%H:%M:%S", &tm);
    w = snprintf(buf + n, size - n, ".%03dZ ", (int)(e->unix_ms % 1000));
    n += w > 0 ? (size_t)w : 0;
    n += put_field(buf + n, size - n, e->peer, strlen(e->peer), 64);
    buf[n++] = ' ';
    n += put_field(buf + n, size - n, e->method, e->method_len, 32);
    buf[n++] = ' ';
    n += put_field(buf + n, size - n, e->path, path_len, GW_ACCESS_LOG_MAX_PATH);
    w = snprintf(buf + n, size - n, " %d %llu %.6f %s\n", e->status, (unsigned long long)e->bytes_sent, e->seconds, e->door);
    n += w > 0 ? (size_t)w : 0;
    if (n >= size)
        n = size - 1;
    return n;
}

static void *writer_main(void *arg)
{
    gw_access_log_t *log = arg;
    char note[96];

    pthread_mutex_lock(&log->mutex);
    for (;;) {
        while (log->fill_len == 0 && log->dropped == 0 && !log->stopping)
            pthread_cond_wait(&log->cond, &log->mutex);
        if (log->fill_len == 0 && log->dropped == 0 && log->stopping)
            break;
        char *full = log->fill;
        size_t len = log->fill_len;
        uint64_t dropped = log->dropped;
        log->fill = log->spare;
        log->fill_len = 0;
        log->dropped = 0;
        pthread_mutex_unlock(&log->mutex);
        (void)wire_write_all(log->fd, full, len); /* a full disk or a closed stderr: lines lost, kgate goes on */
        if (dropped != 0) {
            int n = snprintf(note, sizeof(note),
                             "kgate: access log: %llu lines dropped (the log's disk was slower than the requests)\n",
                             (unsigned long long)dropped);
            (void)wire_write_all(log->fd, note, (size_t)n);
        }
        pthread_mutex_lock(&log->mutex);
        log->spare = full;
    }
    pthread_mutex_unlock(&log->mutex);
    return NULL;
}

int gw_access_log_open(gw_access_log_t *log, const char *path, size_t max_bytes, char *err, size_t errlen)
{
    memset(log, 0, sizeof(*log));
    log->fd = -1;
    if (strcmp(path, "-") == 0) {
        log->fd = STDERR_FILENO;
    } else if ((log->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640)) < 0) {
        snprintf(err, errlen, "--access-log %s: %s", path, strerror(errno));
        return -1;
    } else {
        log->owns_fd = 1;
    }
    log->max_bytes = max_bytes;
    log->fill = wire_malloc(max_bytes);
    log->spare = wire_malloc(max_bytes);
    pthread_mutex_init(&log->mutex, NULL);
    pthread_cond_init(&log->cond, NULL);
    if ((errno = pthread_create(&log->thread, NULL, writer_main, log)) != 0) {
        snprintf(err, errlen, "--access-log: cannot start its writer thread: %s", strerror(errno));
        return -1;
    }
    log->thread_started = 1;
    return 0;
}

void gw_access_log_dispose(gw_access_log_t *log)
{
    if (log->fill == NULL)
        goto Close;
    if (log->thread_started) {
        pthread_mutex_lock(&log->mutex);
        log->stopping = 1;
        pthread_cond_signal(&log->cond);
        pthread_mutex_unlock(&log->mutex);
        pthread_join(log->thread, NULL);
    }
    pthread_mutex_destroy(&log->mutex);
    pthread_cond_destroy(&log->cond);
    free(log->fill);
    free(log->spare);
    log->fill = log->spare = NULL;
Close:
    if (log->owns_fd && log->fd >= 0)
        close(log->fd);
    log->fd = -1;
    log->owns_fd = 0;
}

int gw_access_log_write(gw_access_log_t *log, const char *line, size_t len)
{
    int ret = 0;

    pthread_mutex_lock(&log->mutex);
    if (log->fill_len + len > log->max_bytes) {
        ++log->dropped;
        ++log->dropped_total;
        ret = -1;
    } else {
        memcpy(log->fill + log->fill_len, line, len);
        log->fill_len += len;
    }
    pthread_cond_signal(&log->cond);
    pthread_mutex_unlock(&log->mutex);
    return ret;
}
