/* ksys/log.h: kgate's own log lines (`kgate: ...` on stderr), filtered by one process-wide level (--log-level). */
#ifndef KSYS_LOG_H
#define KSYS_LOG_H

/* Upstream execd's level names; a line is written when its level is at or above the process's. */
typedef enum en_ksys_log_level_t {
    KSYS_LOG_DEBUG = 0,
    KSYS_LOG_INFO,
    KSYS_LOG_WARN,
    KSYS_LOG_ERROR,
} ksys_log_level_t;

#define KSYS_LOG_DEFAULT KSYS_LOG_INFO /* upstream's default (its 6, "informational") */

/**
 * Pure: parses a --log-level value into `*out`: a name, `debug`, `info`, `warn` (or `warning`), `error` (any case), or
 * upstream execd's number (Go's log levels as its pkg/log maps them: 0 to 3 error, 4 warn, 5 and 6 info, 7 debug).
 * Returns 0, or -1 (and `*out` unchanged) for anything else.
 */
int ksys_log_parse_level(const char *s, ksys_log_level_t *out);
/** The level's name ("debug", "info", "warn", "error"). */
const char *ksys_log_level_name(ksys_log_level_t level);

/** Sets the process's level (KSYS_LOG_DEFAULT until then). kgate is one thread: no locking. */
void ksys_log_set_level(ksys_log_level_t level);
/** Whether a line of `level` would be written (to skip building an expensive one). */
int ksys_log_enabled(ksys_log_level_t level);

/**
 * Writes `kgate: <message>\n` to stderr in one write when `level` is enabled (no newline in `fmt`). The prefix is the same
 * at every level, so that lines read the same with any filter; the level decides only whether the line is written.
 */
__attribute__((format(printf, 2, 3))) void ksys_log(ksys_log_level_t level, const char *fmt, ...);

#define ksys_log_debug(...) ksys_log(KSYS_LOG_DEBUG, __VA_ARGS__)
#define ksys_log_info(...) ksys_log(KSYS_LOG_INFO, __VA_ARGS__)
#define ksys_log_warn(...) ksys_log(KSYS_LOG_WARN, __VA_ARGS__)
#define ksys_log_error(...) ksys_log(KSYS_LOG_ERROR, __VA_ARGS__)

#endif
