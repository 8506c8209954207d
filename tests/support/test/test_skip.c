/* tests/support/test/test_skip.c: a skip's reason reaches the run's list (support/skip.h). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "support/skip.h"

static char path[64];

static void setup(void)
{
    snprintf(path, sizeof(path), "/tmp/kgate-skips-%d.txt", (int)getpid());
    unlink(path);
}

static void teardown(void)
{
    unlink(path);
    unsetenv(TS_SKIP_LOG_ENV);
}

TestSuite(skip, .init = setup, .fini = teardown, .timeout = 10);

static void read_all(char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s was not written", path);
    size_t n = fread(buf, 1, size - 1, f);
    buf[n] = '\0';
    fclose(f);
}

Test(skip, each_note_appends_one_line_with_its_reason)
{
    char buf[1024];
    setenv(TS_SKIP_LOG_ENV, path, 1);
    cr_assert_str_eq(ts_skip_note("suite_a", "no %s here", "namespaces"), "no namespaces here");
    ts_skip_note("suite_b", "not root");
    read_all(buf, sizeof(buf));
    cr_assert_str_eq(buf, "SKIPPED suite_a: no namespaces here\nSKIPPED suite_b: not root\n");
}

Test(skip, without_the_variable_nothing_is_written)
{
    unsetenv(TS_SKIP_LOG_ENV);
    cr_assert_str_eq(ts_skip_note("suite_a", "x"), "x");
    cr_assert_neq(access(path, F_OK), 0, "a file was written without %s", TS_SKIP_LOG_ENV);
}
