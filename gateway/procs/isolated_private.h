/* procs/isolated_private.h: what isolated.c (the pipes' reader, runs, release, expiry) and isolated_start.c (a session's
 * start) share about a session; nothing outside these two files includes it. */
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

/** The poll timer's callback (s->poll.cb): a starting session's check, a killed one's reaping, the release of a deleted one. */
void gw_isolated_on_poll(h2o_timeout_entry_t *entry);

/** One check of a starting session: ready once bwrap's pid 1 runs bash (the pipes then go to the loop), failed when bwrap
 * exited or the start timed out; else the timer is armed again. */
void gw_isolated_poll_start(gw_isolated_session_t *s);

/** A start that failed (`err`): the session goes (released from the loop) and its creator's callback hears why. */
void gw_isolated_fail_start(gw_isolated_session_t *s, const char *err);

/** A ready session's stdout or stderr became readable (sock->data is the session): relays its output up to the run's marker. */
void gw_isolated_on_pipe_read(h2o_socket_t *sock, const char *err);

#endif
