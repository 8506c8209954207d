/* support/skip.h: a test that skips says why, and the run lists it (deploy/test.sh prints the list at its end). */
#ifndef KGATE_SUPPORT_SKIP_H
#define KGATE_SUPPORT_SKIP_H

/*
 * A test skips only for what the machine cannot do (no user namespaces for bubblewrap, no writable cgroups, not
 * root). A package the test needs that is missing is a failure naming the package, never a skip: deploy/deps.sh
 * installs everything the tests use, so a skip for a package is a test that does not exist. tests/lint/check_skips.sh
 * checks that every cr_skip_test of the tree goes through ts_skip_note.
 */

/** The environment variable naming the file that collects the skips of a run (deploy/test.sh sets it). */
#define TS_SKIP_LOG_ENV "KGATE_TEST_SKIP_LOG"

/**
 * Formats the reason (printf), prints "SKIPPED <where>: <reason>" on stderr and appends that line to the file named
 * by $KGATE_TEST_SKIP_LOG when set (appends of one line each, so forked tests do not mix lines). Returns the reason,
 * valid until the next call in this process, for `cr_skip_test("%s", ts_skip_note(__func__, ...))`.
 */
const char *ts_skip_note(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
