/* tests/e2e/checks.h: what a kgate user would notice, as checks returning a message, and Criterion wrappers. */
#ifndef KGATE_E2E_CHECKS_H
#define KGATE_E2E_CHECKS_H

#include <stdbool.h>
#include "support/events.h"
#include "support/http.h"

/* Each check returns true when it holds; otherwise false with an explanation in msg (never NULL). */

/** `r` is an error response: `status`, a JSON object body with non-empty string "code" and "message", and
 *  "code" equal to `code` when `code` is not NULL. */
bool e2e_check_error(const ts_response_t *r, int status, const char *code, char *msg, size_t size);

enum { E2E_FRAMING_SSE, E2E_FRAMING_EXECD };

/**
 * The envelope of one execution stream: the response ended cleanly; every event is a JSON object with a
 * non-empty string `type` and an integer `timestamp`; the first is `init` whose `text` is `ctx_id` (or any
 * UUID when NULL); the second is `ping`; `execution_complete` occurs exactly once and is last. With
 * E2E_FRAMING_SSE every event came as `id:` + `data:` with strictly increasing ids; with E2E_FRAMING_EXECD
 * every event was a bare JSON line without `id:`.
 */
bool e2e_check_run(const ts_events_t *evs, const char *ctx_id, int framing, char *msg, size_t size);

/** The concatenated `text` of all events of `type` equals `expected` exactly. */
bool e2e_check_text(const ts_events_t *evs, const char *type, const char *expected, char *msg, size_t size);

/** 1 if `s` is a UUID in its canonical 8-4-4-4-12 hexadecimal form. */
int e2e_is_uuid(const char *s);

/** The first `result` event whose results bundle has `mime`, or NULL. */
const ts_event_t *e2e_find_result(const ts_events_t *evs, const char *mime);

#define E2E_MSG_SIZE 8192

/* Criterion wrappers, so that a failure points at the test's line. */
#define E2E_ASSERT_ERROR(resp, status, code)                                                                                       \
    do {                                                                                                                           \
        char e2e_msg_[E2E_MSG_SIZE];                                                                                               \
        cr_assert(e2e_check_error((resp), (status), (code), e2e_msg_, sizeof(e2e_msg_)), "%s", e2e_msg_);                          \
    } while (0)

#define E2E_ASSERT_RUN(evs, ctx_id, framing)                                                                                       \
    do {                                                                                                                           \
        char e2e_msg_[E2E_MSG_SIZE];                                                                                               \
        cr_assert(e2e_check_run((evs), (ctx_id), (framing), e2e_msg_, sizeof(e2e_msg_)), "%s", e2e_msg_);                          \
    } while (0)

#define E2E_ASSERT_TEXT(evs, type, expected)                                                                                       \
    do {                                                                                                                           \
        char e2e_msg_[E2E_MSG_SIZE];                                                                                               \
        cr_assert(e2e_check_text((evs), (type), (expected), e2e_msg_, sizeof(e2e_msg_)), "%s", e2e_msg_);                          \
    } while (0)

/* The status of a response, with its body in the message when it differs. */
#define E2E_ASSERT_STATUS(resp, expected)                                                                                          \
    cr_assert_eq((resp)->status, (expected), "expected HTTP %d, got %d (%s); body: %.600s", (expected), (resp)->status,            \
                 (resp)->error, (resp)->body != NULL ? (resp)->body : "")

#endif
