/* tests/kernelmgr/poll_loop.h: a minimal poll()-based host loop for kernelmgr (kmgr_loop_ops_t). */
#ifndef KGATE_TESTS_POLL_LOOP_H
#define KGATE_TESTS_POLL_LOOP_H

#include "kmgr/loop.h"
#include "kmgr/manager.h"

typedef struct st_poll_loop_t poll_loop_t;

/** The operations to pass to kmgr_manager_create together with the loop. */
extern const kmgr_loop_ops_t poll_loop_ops;

poll_loop_t *poll_loop_create(void);
/** Frees the loop; every watch must have been removed (the manager destroyed) first. */
void poll_loop_destroy(poll_loop_t *loop);
/** The manager whose tick and run_pending the loop drives (set right after kmgr_manager_create). */
void poll_loop_set_manager(poll_loop_t *loop, kmgr_manager_t *mgr);
/** Runs one iteration: waits up to `max_wait_ms` for fds, then runs pending work and due ticks. */
void poll_loop_run_once(poll_loop_t *loop, int max_wait_ms);
/** Runs until `done(arg)` returns non-zero (returns 1) or `timeout_ms` passes (returns 0). */
int poll_loop_run_until(poll_loop_t *loop, int (*done)(void *arg), void *arg, unsigned timeout_ms);
/** Runs for `ms` milliseconds regardless. */
void poll_loop_run_for(poll_loop_t *loop, unsigned ms);
/** Number of live watches (0 once every kernel's sockets are closed). */
size_t poll_loop_num_watches(const poll_loop_t *loop);

#endif
