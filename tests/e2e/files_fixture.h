/* tests/e2e/files_fixture.h: what the files suites share: their own kgate on a fresh --workspace-root. */
#ifndef KGATE_TESTS_FILES_FIXTURE_H
#define KGATE_TESTS_FILES_FIXTURE_H

#include "support/gateway.h"
#include "support/http.h"
#include "exec_helpers.h" /* xh_sh */

/* The kgate of the running test, its temp dir, the workspace root inside it, and a directory outside it. */
extern ts_gateway_t gw;
extern char tmp[256], root[300], outside[300];

/** The whole file (up to 64 KiB) in a static buffer, or NULL. */
char *read_file(const char *path);
/** True when `path` exists (a link is not followed). */
int exists(const char *path);
/** Suite .init: a workspace with files, a secret outside it, symbolic links out and in, and kgate on it. */
void start(void);
/** Suite .fini: kgate stopped cleanly (asserted) and the temp dir removed. */
void stop(void);
/** One request to the test's kgate. */
int req(const char *method, const char *path, const char *body, ts_response_t *r);
/** One request, asserting its status (and API error code when given). */
void expect(const char *method, const char *path, const char *body, int status, const char *code);

#endif
