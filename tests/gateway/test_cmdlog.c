/* tests/gateway/test_cmdlog.c: a command's ring log: cursor planning (pure) and file round trips. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "procs/cmdlog.h"
#include "gw_test.h"

TestSuite(cmdlog, .init = gw_test_init);

static void check_plan(uint64_t total, size_t cap, uint64_t cursor, size_t max_read, uint64_t start, size_t len, uint64_t skipped,
                       size_t off0, size_t len0, size_t len1)
{
    gw_cmdlog_span_t span;

    gw_cmdlog_plan(total, cap, cursor, max_read, &span);
    cr_assert_eq(span.start, start, "total %llu cap %zu cursor %llu: start %llu", (unsigned long long)total, cap,
                 (unsigned long long)cursor, (unsigned long long)span.start);
    cr_assert_eq(span.len, len, "len %zu, expected %zu", span.len, len);
    cr_assert_eq(span.skipped, skipped);
    cr_assert_eq(span.file_off[0], off0);
    cr_assert_eq(span.seg_len[0], len0);
    cr_assert_eq(span.file_off[1], 0);
    cr_assert_eq(span.seg_len[1], len1);
}

Test(cmdlog, plan_within_the_first_lap)
{
    check_plan(10, 100, 0, 1000, 0, 10, 0, 0, 10, 0);
    check_plan(10, 100, 4, 1000, 4, 6, 0, 4, 6, 0);
    check_plan(10, 100, 10, 1000, 10, 0, 0, 0, 0, 0);
    check_plan(10, 100, 25, 1000, 10, 0, 0, 0, 0, 0); /* past the end: nothing, at the end */
    check_plan(10, 100, 2, 3, 2, 3, 0, 2, 3, 0);      /* bounded by max_read */
}

Test(cmdlog, plan_after_the_ring_wrapped)
{
    /* 250 bytes through a ring of 100: 150..249 retained, 150 sits at file offset 50 */
    check_plan(250, 100, 0, 1000, 150, 100, 150, 50, 50, 50);
    check_plan(250, 100, 150, 30, 150, 30, 0, 50, 30, 0);
    check_plan(250, 100, 190, 1000, 190, 60, 0, 90, 10, 50);
    check_plan(250, 100, 200, 1000, 200, 50, 0, 0, 50, 0);
}

static char *tmp_log_path(void)
{
    static char path[64];
    snprintf(path, sizeof(path), "/tmp/kgate-test-cmdlog-%d.log", (int)getpid());
    return path;
}

static void check_read(const gw_cmdlog_t *log, uint64_t cursor, const char *expected, uint64_t next)
{
    char buf[64];
    gw_cmdlog_span_t span;

    cr_assert_eq(gw_cmdlog_read(log, cursor, sizeof(buf), buf, &span), 0);
    cr_assert_eq(span.len, strlen(expected), "read from %llu: %zu bytes, expected \"%s\"", (unsigned long long)cursor, span.len,
                 expected);
    cr_assert(memcmp(buf, expected, span.len) == 0, "read from %llu: \"%.*s\", expected \"%s\"", (unsigned long long)cursor,
              (int)span.len, buf, expected);
    cr_assert_eq(span.start + span.len, next);
}

Test(cmdlog, reads_continue_where_the_last_ended)
{
    gw_cmdlog_t log;

    cr_assert_eq(gw_cmdlog_open(&log, tmp_log_path(), 1024), 0);
    gw_cmdlog_append(&log, "hello ", 6);
    check_read(&log, 0, "hello ", 6);
    gw_cmdlog_append(&log, "world", 5);
    check_read(&log, 6, "world", 11);
    check_read(&log, 11, "", 11);
    gw_cmdlog_dispose(&log);
    cr_assert_neq(access(tmp_log_path(), F_OK), 0, "the log file is deleted");
}

Test(cmdlog, the_ring_keeps_the_newest_bytes)
{
    gw_cmdlog_t log;

    cr_assert_eq(gw_cmdlog_open(&log, tmp_log_path(), 8), 0);
    gw_cmdlog_append(&log, "0123456789", 10); /* longer than the ring at once */
    check_read(&log, 0, "23456789", 10);
    gw_cmdlog_append(&log, "ab", 2);
    check_read(&log, 0, "456789ab", 12);
    check_read(&log, 10, "ab", 12);
    check_read(&log, 7, "789ab", 12);
    gw_cmdlog_dispose(&log);
}
