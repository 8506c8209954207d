/* bench/kgate_proc.h: starting and stopping the kgate process under test. */
#ifndef BENCH_KGATE_PROC_H
#define BENCH_KGATE_PROC_H

#include <stdint.h>
#include <sys/types.h>

/** A kgate process listening on 127.0.0.1:`port`, with its runtime dir under a private temp dir. */
typedef struct st_bench_kgate_proc_t {
    pid_t pid; /* 0 when not running */
    uint16_t port;
    char *tmpdir;      /* owned; removed by bench_kgate_proc_stop */
    char *runtime_dir; /* <tmpdir>/runtime, given to kgate's --runtime-dir */
    char *log_path;    /* <tmpdir>/kgate.log: kgate's stdout and stderr */
} bench_kgate_proc_t;

/**
 * Starts `binary --listen 127.0.0.1:<free port> --runtime-dir <dir> [extra_args...]` (extra_args
 * is NULL-terminated, may be NULL) and waits up to `timeout_ms` until it answers HTTP. A port
 * taken between picking and binding it makes kgate exit ("... in use" in its log); that is retried
 * with another port.
 * Returns 0, or BENCH_ESPAWN (the detail carries the tail of kgate's log); on error nothing is
 * left running.
 */
int bench_kgate_proc_start(bench_kgate_proc_t *p, const char *binary, char *const *extra_args, unsigned timeout_ms);

/**
 * Stops kgate by its PID: SIGTERM, waits up to `grace_ms`, then SIGKILL; reaps it and removes the
 * temp dir. Returns kgate's wait status (or -1 if it was not running). Accepts a stopped process.
 */
int bench_kgate_proc_stop(bench_kgate_proc_t *p, unsigned grace_ms);

#endif
