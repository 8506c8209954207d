/* support/gateway.h: a kgate process of one's own, started on a free 127.0.0.1 port and stopped by its PID. */
#ifndef KGATE_SUPPORT_GATEWAY_H
#define KGATE_SUPPORT_GATEWAY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Every wait here is bounded by one of these (milliseconds). */
#define TS_STARTUP_MS 10000    /* kgate answering /healthz, unless the caller says otherwise */
#define TS_HEALTH_POLL_MS 20   /* /healthz polling period */
#define TS_STOP_GRACE_MS 10000 /* SIGTERM to exit, before SIGKILL */

#define TS_KERNEL_PATH "/usr/share/jupyter/kernels" /* Debian's python3-ipykernel kernelspec: the default --kernel-path */

typedef struct st_ts_gateway_t {
    pid_t pid;             /* 0 once stopped */
    unsigned short port;   /* 127.0.0.1:port */
    char tmpdir[256];      /* private temp dir: log, runtime dir; removed by stop unless keep_env says otherwise */
    char log_path[300];    /* kgate's stdout and stderr */
    char runtime_dir[300]; /* passed as --runtime-dir unless the caller passes its own */
    char keep_env[64];     /* the variable that keeps the temp dir (ts_gateway_opts_t) */
    int exit_status;       /* waitpid() status once stopped; -1 before */
    int owner;             /* 1 when this process started it (stop waits for it), 0 for a borrowed handle */
    char error[512];       /* why the last call on it failed */
} ts_gateway_t;

/** How to start kgate: only `exe` is required. */
typedef struct st_ts_gateway_opts_t {
    const char *exe;
    const char *const *args; /* more arguments, NULL-terminated, may be NULL */
    const char *const *env;  /* "K=V" added to kgate's environment, NULL-terminated, may be NULL */
    const char *label;       /* names the temp dir, kgate-<label>-XXXXXX; NULL: "e2e" */
    const char *keep_env;    /* when this variable is set (not "" nor "0") the temp dir is kept; NULL: "KGATE_E2E_KEEP" */
    int startup_ms;          /* how long kgate may take to answer /healthz; 0: TS_STARTUP_MS */
} ts_gateway_opts_t;

/**
 * Path of the kgate executable: $KGATE_E2E_KGATE if set, else `binary_dir`/gateway/kgate.
 * Returns a static buffer.
 */
const char *ts_kgate_path(const char *binary_dir);

/**
 * Starts `exe --listen 127.0.0.1:<free port> --runtime-dir <tmp>/runtime --kernel-path
 * TS_KERNEL_PATH --pool none <args...>` (the default --runtime-dir, --kernel-path and --pool are
 * left out when `args` has its own: kgate's default warm pool is off unless a test or case asks)
 * with `env` added to its environment and KGATE_ACCESS_TOKEN removed unless `env` sets it. stdout
 * and stderr go to gw->log_path. kgate gets SIGTERM if the starting thread dies.
 * Waits until GET /healthz answers 200 (polling every TS_HEALTH_POLL_MS). Another process may take
 * the port before kgate binds it: when kgate exits saying the address is in use, it is started
 * again on another port (three attempts in all).
 * Returns 0, or TS_ESPAWN with gw->error set and kgate's log tail written to stderr (the process,
 * if any, is then stopped and reaped, and the temp dir removed).
 */
int ts_gateway_start(ts_gateway_t *gw, const ts_gateway_opts_t *opts);

/**
 * Stops a gateway this process started: SIGTERM, waits up to TS_STOP_GRACE_MS, then SIGKILL.
 * Before signalling it records every descendant of kgate (from /proc); afterwards `*survivors`
 * (may be NULL) is how many of them still live, excluding zombies, and they are killed. Removes the
 * temp dir (see ts_gateway_opts_t.keep_env). Returns 0 if kgate exited by itself within the grace
 * period, TS_ETIMEDOUT if it had to be killed or could not be reaped (gw->error says which).
 * gw->exit_status holds the wait status. Idempotent.
 */
int ts_gateway_stop(ts_gateway_t *gw, size_t *survivors);

/** ts_gateway_stop without removing the temp dir (to read the log afterwards); then call ts_gateway_cleanup. */
int ts_gateway_stop_keep(ts_gateway_t *gw, size_t *survivors);

/** Sends `sig` (for tests that then observe the exit themselves with ts_gateway_wait). 0, or TS_EINVAL (not started here) or
 * TS_EIO. */
int ts_gateway_signal(ts_gateway_t *gw, int sig);

/** Waits for a started gateway to exit, until `deadline_ms` (ts_now_ms clock). 0 if it exited, else TS_ETIMEDOUT or TS_EINVAL. */
int ts_gateway_wait(ts_gateway_t *gw, int64_t deadline_ms);

/** Removes the temp dir (unless kept). Called by stop; for use after ts_gateway_wait or ts_gateway_stop_keep. */
void ts_gateway_cleanup(ts_gateway_t *gw);

/** Removes the directory `dir` and everything in it, not following symbolic links, best effort: a server's temp dir. */
void ts_remove_tree(const char *dir);

/** Writes the last `max` bytes of kgate's log to stderr, framed, for failure reports. */
void ts_gateway_dump_log(const ts_gateway_t *gw, size_t max);

/** Serialises a started gateway for a child process (an environment variable's value), and back (0 or TS_EINVAL). */
void ts_gateway_format(const ts_gateway_t *gw, char *buf, size_t size);
int ts_gateway_parse(ts_gateway_t *gw, const char *s);

#endif
