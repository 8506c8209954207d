/* procs/isolated_private.h: what isolated.c (the pipes' reader, runs, release, expiry) gives isolated_start.c (a session's
 * start, its poll timer, shutdown), which calls it; nothing outside these two files includes it. */
#ifndef GW_PROCS_ISOLATED_PRIVATE_H
#define GW_PROCS_ISOLATED_PRIVATE_H

#include "procs/isolated.h"

/** Links the session's poll timer (owner->poll_timeout) unless it is linked already. */
void gw_isolated_arm(gw_isolated_session_t *s);

/**
 * Kills the sandbox: its run ends with SessionDestroyed (`reason`, kept for GET as the first reason given), its pipes and
 * descriptors close, and the poll timer reaps it from the loop, then hands its directory to a thread. Never waits.
 */
void gw_isolated_release_sandbox(gw_isolated_session_t *s, const char *reason);

/** A killed sandbox, polled: 1 once its processes are gone (its directory then removed) or handed to the reaper with it. */
int gw_isolated_reap(gw_isolated_session_t *s);

/** Unlinks the session from its owner's lists and count, and frees it. */
void gw_isolated_free_session(gw_isolated_session_t *s);

/** A ready session's stdout or stderr became readable (sock->data is the session): relays its output up to the run's marker. */
void gw_isolated_on_pipe_read(h2o_socket_t *sock, const char *err);

#endif
