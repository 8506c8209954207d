/* kgate's log lines: one level for the process, one write per line. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include "ksys/log.h"

static ksys_log_level_t current = KSYS_LOG_DEFAULT;

int ksys_log_parse_level(const char *s, ksys_log_level_t *out)
{
    static const struct {
        const char *name;
        ksys_log_level_t level;
    } names[] = {{"debug", KSYS_LOG_DEBUG},
                 {"info", KSYS_LOG_INFO},
                 {"warn", KSYS_LOG_WARN},
                 {"warning", KSYS_LOG_WARN},
                 {"error", KSYS_LOG_ERROR}};
    char *end;
    long n;

    if (s == NULL || s[0] == '\0')
        return -1;
    for (size_t i = 0; i != sizeof(names) / sizeof(names[0]); ++i) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].level;
            return 0;
        }
    }
    if (s[0] < '0' || s[0] > '9')
        return -1;
    n = strtol(s, &end, 10);
    if (*end != '\0' || n > 7)
        return -1;
    *out = n <= 3 ? KSYS_LOG_ERROR : n == 4 ? KSYS_LOG_WARN : n <= 6 ? KSYS_LOG_INFO : KSYS_LOG_DEBUG;
    return 0;
}

const char *ksys_log_level_name(ksys_log_level_t level)
{
    switch (level) {
    case KSYS_LOG_DEBUG:
        return "debug";
    case KSYS_LOG_INFO:
        return "info";
    case KSYS_LOG_WARN:
        return "warn";
    default:
        return "error";
    }
}

void ksys_log_set_level(ksys_log_level_t level)
{
    current = level;
}

int ksys_log_enabled(ksys_log_level_t level)
{
    return level >= current;
}

void ksys_log(ksys_log_level_t level, const char *fmt, ...)
{
    char line[4096];
    va_list ap;
    int n;

    if (!ksys_log_enabled(level))
        return;
    memcpy(line, "kgate: ", 7);
    va_start(ap, fmt);
    n = vsnprintf(line + 7, sizeof(line) - 8, fmt, ap);
    va_end(ap);
    /* a longer line is cut, never split: one write keeps lines of concurrent writers (kernels share stderr) whole */
    n = n < 0 ? 0 : n > (int)sizeof(line) - 9 ? (int)sizeof(line) - 9 : n;
    line[7 + n] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n + 8) < 0) {
        /* nowhere else to say it */
    }
}
