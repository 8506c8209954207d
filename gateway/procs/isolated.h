/* procs/isolated.h: execd's isolated sessions: one persistent bash per session inside its own bubblewrap sandbox, its runs
 * streamed as runs, its filesystem reachable from outside as the sandbox sees it. */
#ifndef GW_ISOLATED_H
#define GW_ISOLATED_H

#include <stdint.h>
#include <sys/types.h>
#include <h2o.h>
#include "core/host.h"
#include "procs/isolation.h"
#include "procs/reaper.h"
#include "runs/run.h"

typedef struct st_gw_isolated_t gw_isolated_t;
typedef struct st_gw_isolated_session_t gw_isolated_session_t;

/** A create's outcome: `s` ready (findable from now on) and `error` NULL, or `s` NULL and why the sandbox did not start. */
typedef void (*gw_isolated_started_cb)(gw_isolated_session_t *s, void *data, const char *error);
/** A deleted session's sandbox is gone and its id forgotten (its directory may still be being removed). */
typedef void (*gw_isolated_released_cb)(void *data);

/** One session. Written by procs/isolated.c only. */
struct st_gw_isolated_session_t {
    gw_isolated_t *owner;
    char id[37];
    gw_iso_spec_t spec;
    int64_t created_at_ms;  /* wall clock */
    int64_t last_run_at_ms; /* wall clock of the last run's end; 0: none yet */
    int64_t idle_since_ms;  /* gw_now_ms clock: creation or the last run's end */
    /* the sandbox */
    char *dir;              /* <runtime dir>/isolated/<id>: ctl/, and upper/, work/, merged/ for overlay */
    pid_t pid;              /* the outer process (unshare, then bwrap: one pid); 0 once reaped */
    pid_t init_pid;         /* the sandbox's pid 1 (bwrap), host pid: its /proc/<pid>/root is the sandbox's root */
    pid_t bash_pid;         /* the session's bash, host pid */
    dev_t ws_dev;           /* the workspace as the sandbox started with it (gw_isolated_open_view): its device */
    ino_t ws_ino;           /* and its inode; 0 until the sandbox is ready */
    int stdin_fd;           /* bash's stdin (non-blocking); -1 once closed */
    h2o_socket_t *pipes[2]; /* bash's stdout, stderr */
    char nonce[33];         /* the end-of-run marker's secret */
    /* the run in progress */
    gw_run_t *run;
    unsigned run_seq;
    int64_t deadline_ms;  /* gw_now_ms; 0: none */
    int64_t killed_at_ms; /* the run's processes were killed (timeout): the session goes too if bash does not come back */
    unsigned timeout_ms;
    int after_cr[2];
    int marker_seen[2];
    int exit_code;
    unsigned timed_out : 1;
    unsigned destroyed : 1; /* the sandbox is gone (bash exited, or it was killed): kept for GET until deleted or expired */
    char reason[160];       /* why it was destroyed */
    /* its life outside the findable list (owner->pending): starting, or deleted and being reaped */
    unsigned starting : 1;    /* spawned, its bash not running yet */
    unsigned deleting : 1;    /* gw_isolated_destroy'd: freed once its sandbox is reaped */
    unsigned reaping : 1;     /* killed: its processes are polled until gone */
    int64_t until_ms;         /* gw_now_ms: starting, the start's deadline; reaping, when it goes to owner->reaper */
    int start_fds[2];         /* starting: bash's stdout and stderr (read ends) until they become `pipes`; -1: none */
    h2o_timeout_entry_t poll; /* owner->poll_timeout: the start's and the reaping's checks */
    gw_isolated_started_cb on_started;
    gw_isolated_released_cb on_released;
    void *cb_data;
    h2o_linklist_t link; /* owner->sessions (findable) or owner->pending */
};

/** Every isolated session, and what the host allows. */
struct st_gw_isolated_t {
    gw_host_t *host;
    gw_runs_t *runs;
    char *bwrap, *unshare; /* absolute paths; NULL: not found */
    char *runtime_dir;
    char *root; /* the files root: workspaces and writable binds live under it */
    int available;
    char message[512];       /* why not available */
    char version[64];        /* bwrap --version */
    h2o_linklist_t sessions; /* ready (active, or destroyed and kept for GET): what find and the list see */
    h2o_linklist_t pending;  /* starting, or deleted and not reaped yet: nobody's to find */
    size_t num_sessions;     /* both lists: the bound counts sandboxes still starting and still dying */
    h2o_timeout_t poll_timeout;
    gw_reaper_t reaper; /* sandboxes still there reap_ms after SIGKILL: their sessions are freed, they are not */
    unsigned start_ms;  /* how long a sandbox may take to start its bash (5 s; tests lower it) */
    unsigned reap_ms;   /* how long a killed sandbox is polled before it goes to `reaper` (2 s; tests lower it) */
};

/**
 * Finds bwrap (`bwrap_path`, else on PATH) and unshare, and probes whether bwrap can create the sandbox's namespaces
 * here (ksys_bwrap_probe: a few ms, at start-up). `root` is the files root. Never fails: `available` and `message` say.
 */
void gw_isolated_init(gw_isolated_t *iso, gw_host_t *host, gw_runs_t *runs, const char *bwrap_path, const char *runtime_dir,
                      const char *root);
/** Releases what is left at once (after the loop stopped: a sandbox still dying is killed again and its directory removed)
 * and the timer. */
void gw_isolated_dispose(gw_isolated_t *iso);

/**
 * Starts a session (takes ownership of `spec` on success, leaves it to the caller otherwise): creates its directories,
 * mkdir -p of the workspace, spawns the sandbox and returns at once with the session starting in `*out` (not findable, but
 * counted against the bound). Returns 0, or GW_ETOOMANYISOLATED, or GW_ESPAWN with the reason in `err`; on an error `cb`
 * never runs. Otherwise `cb` runs exactly once, later, from the loop (checks every few ms): the session ready once its bash
 * runs, or the reason it did not start within 5 s (bwrap's own message: a missing bind source, ...), the session then
 * released by itself. Unless gw_isolated_abandon comes first.
 */
int gw_isolated_create(gw_isolated_t *iso, gw_iso_spec_t *spec, gw_isolated_started_cb cb, void *data, gw_isolated_session_t **out,
                       char *err, size_t errlen);
/** A ready session (never a starting or deleted one), or NULL. */
gw_isolated_session_t *gw_isolated_find(gw_isolated_t *iso, const char *id);
/**
 * Forgets the ready session `s` at once (find no longer sees it) and releases it without blocking: SIGKILL, its processes
 * reaped from the loop, its directory (its upper layer) removed in a thread once it is gone. `cb` (may be NULL) runs
 * once, later, when the sandbox is gone, or after reap_ms (2 s) when it is still there (logged): `s` is freed then and the
 * sandbox goes on to `reaper` (reaped from the tick, its directory removed once it is gone).
 */
void gw_isolated_destroy(gw_isolated_session_t *s, gw_isolated_released_cb cb, void *data);
/**
 * The caller of gw_isolated_create or gw_isolated_destroy for `s` no longer wants its callback (its client went away): a
 * starting session is released (its callback never runs); a session being deleted goes on without one.
 */
void gw_isolated_abandon(gw_isolated_session_t *s);

/**
 * Runs `code` in the session's bash (sourced: cwd and variables persist), after exporting `envs` ({"K": "V"}, may be NULL)
 * and changing to `cwd` (NULL: stay). Output becomes stdout/stderr events, one per line (as /command's); a non-zero status
 * an error event (CommandExitError, evalue the status); past `timeout_ms` (0: none) every process the run started is
 * killed (TimeoutError), and the session too if bash itself does not come back within a second. Returns 0 and the run,
 * GW_EBUSY (a run is in progress: one at a time), GW_EKERNELDEAD (the session is destroyed), or -errno.
 */
int gw_isolated_run(gw_isolated_session_t *s, const char *code, json_t *envs, const char *cwd, unsigned timeout_ms,
                    const gw_run_limits_t *limits, gw_run_t **out);

/**
 * Opens (O_PATH) the workspace as the sandbox sees it, through "/proc/<sandbox pid 1>/root" (its mount namespace: an
 * overlay's merged view, a read-only bind's EROFS), the workspace's path resolved as inside the sandbox (RESOLVE_IN_ROOT:
 * a link the sandbox planted above the workspace leads within the sandbox, never to kgate's root). What is found must be
 * the directory the sandbox started with (`ws_dev`, `ws_ino`), else -EXDEV: the sandbox can move the workspace's parents
 * away (its /tmp is its own) and put a link in its place. Returns 0 and the descriptor in `*fd` (the caller closes it),
 * GW_EKERNELDEAD once the session is destroyed, or -errno.
 */
int gw_isolated_open_view(const gw_isolated_session_t *s, int *fd);

/** "active" or "destroyed"; the seconds left before idle expiry (-1: none). */
const char *gw_isolated_status(const gw_isolated_session_t *s);
long gw_isolated_idle_remaining(const gw_isolated_session_t *s);
/** {session_id, status, created_at, last_run_at, idle_remaining_seconds, ...the creation fields, reason?}. */
json_t *gw_isolated_to_json(const gw_isolated_session_t *s);

/** Reaps (the reaper's sandboxes too), enforces run timeouts and idle expiry (server tick). */
void gw_isolated_tick(gw_isolated_t *iso);
/** Destroys every session (server shutdown): starting ones report "kgate is shutting down" to their callback. */
void gw_isolated_destroy_all(gw_isolated_t *iso);
/**
 * True once no session is starting or being reaped and no directory is being removed (after gw_isolated_destroy_all); the
 * reaper's sandboxes are not waited for (they may never go: gw_isolated_dispose removes their directories).
 */
int gw_isolated_is_drained(gw_isolated_t *iso);

#endif
