/* tests/e2e/shared.h: one kgate per test binary, started before the first test and stopped after the last. */
#ifndef KGATE_E2E_SHARED_H
#define KGATE_E2E_SHARED_H

#include "support/gateway.h"

/*
 * Linking shared.c into a Criterion binary starts `kgate` (no extra arguments) in the runner process
 * before any test (Criterion's PRE_ALL hook) and hands it to the test processes through the environment.
 * After the last test (POST_ALL) it is stopped with SIGTERM; if it does not exit 0 within the grace period
 * or a descendant survives it, the run is marked failed. On any failure its log tail is printed.
 */

/** The shared gateway (asserts, with kgate's start-up error, that it is running). */
const ts_gateway_t *e2e_shared(void);

/** Deletes every python context of the shared gateway (a test's fini: no test leaves contexts behind). */
void e2e_shared_cleanup(void);

#endif
