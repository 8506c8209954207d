/* tests/sys/test_log.c: --log-level's values (ksys/log.h), upstream execd's numbers included, and the filter itself. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ksys/log.h"

Test(log, names_and_upstream_numbers)
{
    static const struct {
        const char *in;
        ksys_log_level_t want;
    } ok[] = {{"debug", KSYS_LOG_DEBUG}, {"INFO", KSYS_LOG_INFO}, {"warn", KSYS_LOG_WARN}, {"Warning", KSYS_LOG_WARN},
              {"error", KSYS_LOG_ERROR}, {"0", KSYS_LOG_ERROR},   {"3", KSYS_LOG_ERROR},   {"4", KSYS_LOG_WARN},
              {"5", KSYS_LOG_INFO},      {"6", KSYS_LOG_INFO},    {"7", KSYS_LOG_DEBUG}};
    static const char *const bad[] = {"", "8", "-1", "verbose", "6x", "info ", " 6", "fatal"};
    ksys_log_level_t level;

    for (size_t i = 0; i != sizeof(ok) / sizeof(ok[0]); ++i) {
        level = (ksys_log_level_t)-1;
        cr_assert_eq(ksys_log_parse_level(ok[i].in, &level), 0, "%s", ok[i].in);
        cr_assert_eq(level, ok[i].want, "%s", ok[i].in);
    }
    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        level = KSYS_LOG_INFO;
        cr_assert_eq(ksys_log_parse_level(bad[i], &level), -1, "[%s]", bad[i]);
        cr_assert_eq(level, KSYS_LOG_INFO, "[%s] left the level alone", bad[i]);
    }
    cr_assert_str_eq(ksys_log_level_name(KSYS_LOG_WARN), "warn");
}

/* Lines below the level are not written; those at or above are, with the prefix and one newline. */
Test(log, the_level_filters_lines)
{
    char buf[512] = "";
    int fds[2], saved = dup(STDERR_FILENO);
    ssize_t n;

    cr_assert_eq(pipe(fds), 0);
    dup2(fds[1], STDERR_FILENO);
    ksys_log_set_level(KSYS_LOG_WARN);
    ksys_log_debug("debug %d", 1);
    ksys_log_info("info %d", 2);
    ksys_log_warn("warn %d", 3);
    ksys_log_error("error %d", 4);
    cr_assert(!ksys_log_enabled(KSYS_LOG_INFO));
    ksys_log_set_level(KSYS_LOG_DEFAULT);
    ksys_log_info("info %d", 5);
    dup2(saved, STDERR_FILENO);
    close(fds[1]);
    n = read(fds[0], buf, sizeof(buf) - 1);
    close(fds[0]);
    cr_assert_gt(n, 0);
    cr_assert_str_eq(buf, "kgate: warn 3\nkgate: error 4\nkgate: info 5\n");
}

/* A line longer than the buffer is cut, and still ends with its newline. */
Test(log, a_long_line_is_cut_whole)
{
    static char big[10000], buf[8192];
    int fds[2], saved = dup(STDERR_FILENO);
    ssize_t n;

    memset(big, 'a', sizeof(big) - 1);
    cr_assert_eq(pipe(fds), 0);
    dup2(fds[1], STDERR_FILENO);
    ksys_log_error("%s", big);
    dup2(saved, STDERR_FILENO);
    close(fds[1]);
    n = read(fds[0], buf, sizeof(buf));
    close(fds[0]);
    cr_assert_eq(n, 4095);
    cr_assert_eq(buf[n - 1], '\n');
    cr_assert_eq(memcmp(buf, "kgate: aaa", 10), 0);
}
