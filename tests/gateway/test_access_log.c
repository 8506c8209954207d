/* tests/gateway/test_access_log.c: the access log's line (app/access_log.h's formatter, pure) and its writer's bound. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "app/access_log.h"
#include "gw_test.h"

TestSuite(access_log, .init = gw_test_init);

static size_t format(const char *method, const char *path, char *buf, size_t size)
{
    gw_access_entry_t e = {.unix_ms = 1795890410123LL, /* 2026-11-28T18:26:50.123Z */
                           .peer = "127.0.0.1:4321",
                           .method = method,
                           .method_len = strlen(method),
                           .path = path,
                           .path_len = strlen(path),
                           .status = 200,
                           .bytes_sent = 561,
                           .seconds = 0.25,
                           .door = "execd"};
    return gw_access_log_format(&e, buf, size);
}

Test(access_log, one_line_of_fields_without_the_query)
{
    char buf[4096];
    size_t n = format("GET", "/code/contexts?access_token=s3cret&x=1", buf, sizeof(buf));

    cr_assert_str_eq(buf, "2026-11-28T18:26:50.123Z 127.0.0.1:4321 GET /code/contexts 200 561 0.250000 execd\n");
    cr_assert_eq(n, strlen(buf));
}

Test(access_log, bytes_that_would_split_or_forge_a_line_are_escaped)
{
    char buf[4096];

    format("GET", "/a b\n2026-01-01T00:00:00.000Z forged \"q\"\\", buf, sizeof(buf));
    cr_assert_str_eq(buf, "2026-11-28T18:26:50.123Z 127.0.0.1:4321 GET /a%20b%0A2026-01-01T00:00:00.000Z%20forged%20%22q%22%5C 200 "
                          "561 0.250000 execd\n");
    format("", "", buf, sizeof(buf));
    cr_assert_str_eq(buf, "2026-11-28T18:26:50.123Z 127.0.0.1:4321 - - 200 561 0.250000 execd\n", "empty fields are -");
}

Test(access_log, a_long_path_is_cut)
{
    char path[5000], buf[8192];
    memset(path, 'a', sizeof(path) - 1);
    path[0] = '/';
    path[sizeof(path) - 1] = '\0';

    format("GET", path, buf, sizeof(buf));
    cr_assert_not_null(strstr(buf, "aaa... 200 561"), "%s", buf);
    cr_assert_lt(strlen(buf), GW_ACCESS_LOG_MAX_PATH + 200);
}

typedef struct st_drain_t {
    int fd;
    char text[1 << 20];
    size_t len;
} drain_t;

static void *drain_main(void *arg)
{
    drain_t *d = arg;
    ssize_t got;
    while ((got = read(d->fd, d->text + d->len, sizeof(d->text) - 1 - d->len)) > 0)
        d->len += (size_t)got;
    d->text[d->len] = '\0';
    return NULL;
}

/* A disk behind the loop (a pipe nobody reads yet: the writer blocks once it is full) never blocks the writes nor grows
 * memory: lines beyond the buffer are dropped and counted; the lines kept reach the file whole, and the drop is written. */
Test(access_log, a_stuck_disk_drops_and_counts_lines_never_blocks)
{
    static drain_t drain;
    char path[64], err[256], line[100];
    int pipefd[2];
    gw_access_log_t log;
    unsigned kept = 0, dropped = 0;
    pthread_t reader;

    cr_assert_eq(pipe(pipefd), 0);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", pipefd[1]);
    cr_assert_eq(gw_access_log_open(&log, path, 256, err, sizeof(err)), 0, "%s", err);
    close(pipefd[1]);
    memset(line, 'x', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\n';
    /* 200 KB against a 64 KiB pipe and two 256-byte buffers: the loop side never waits, it drops */
    for (int i = 0; i != 2000; ++i)
        gw_access_log_write(&log, line, sizeof(line)) == 0 ? ++kept : ++dropped;
    cr_assert_eq(log.dropped_total, dropped);
    cr_assert_geq(dropped, 2000 - (65536 + 512) / 100 - 1, "%u dropped", dropped);
    drain.fd = pipefd[0];
    cr_assert_eq(pthread_create(&reader, NULL, drain_main, &drain), 0);
    gw_access_log_dispose(&log);
    pthread_join(reader, NULL);
    close(pipefd[0]);
    cr_assert_not_null(strstr(drain.text, "lines dropped"), "the log says it dropped lines");
    size_t whole = 0;
    for (char *p = drain.text; (p = strstr(p, "xxxxxxxxxx")) != NULL; p += sizeof(line))
        ++whole;
    cr_assert_eq(whole, kept, "every line kept is in the file, whole (%zu of %u)", whole, kept);
}

Test(access_log, an_unwritable_path_is_an_error)
{
    gw_access_log_t log;
    char err[256];

    cr_assert_eq(gw_access_log_open(&log, "/nonexistent-dir/access.log", 1024, err, sizeof(err)), -1);
    cr_assert_not_null(strstr(err, "No such file"), "%s", err);
    gw_access_log_dispose(&log);
}
