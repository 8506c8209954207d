/* bench/jupyter_server.h: Debian's Jupyter Server as the benchmark's peer: started in a temp dir, stopped by its PID. */
#ifndef BENCH_JUPYTER_SERVER_H
#define BENCH_JUPYTER_SERVER_H

#include <stddef.h>
#include <sys/types.h>
#include "common.h"

#define BENCH_JSERVER_MAX_KERNELS 16

/** A Jupyter Server process of the benchmark's own and the kernels started through it. */
typedef struct st_bench_jserver_t {
    pid_t pid; /* 0 once stopped */
    unsigned short port;
    char token[40];
    char version[32]; /* from GET /api */
    char tmpdir[256]; /* HOME and every JUPYTER_* dir; the log, jupyter-server.log; removed by stop unless KGATE_BENCH_KEEP */
    char *kernels[BENCH_JSERVER_MAX_KERNELS];
    size_t nkernels;
    unsigned timeout_ms;
} bench_jserver_t;

/**
 * 1 when Debian's Jupyter Server can be run (`/usr/bin/python3 -m jupyter_server` imports), else
 * 0 with the reason and the remedy in the detail.
 */
int bench_jserver_available(void);

/**
 * Starts Debian's Jupyter Server (ts_jserver_spawn: `/usr/bin/python3 -m jupyter_server
 * --ServerApp.token=<random> --ip=127.0.0.1 --port=<free> --no-browser`, HOME and every Jupyter and
 * IPython dir in a fresh temp dir, none of the machine's configuration; kernelspecs come from the
 * system's /usr/share/jupyter, as kgate's do), its output in `<tmpdir>/jupyter-server.log`, and waits
 * until `GET /api` answers
 * 200. A port taken meanwhile by another process means another attempt (three in all). Returns 0,
 * or BENCH_EIO with the detail set (the process, if any, then stopped and the temp dir removed).
 */
int bench_jserver_start(bench_jserver_t *js, unsigned timeout_ms);

/**
 * POST /api/kernels {"name": `name`}: a kernel managed by this Jupyter Server; its id is stored
 * in `*id` (owned by `js`, shut down by bench_jserver_stop). Returns 0, BENCH_ESTATUS or a
 * transport error.
 */
int bench_jserver_start_kernel(bench_jserver_t *js, const char *name, const char **id);

/** The path of the channels WebSocket of kernel `id`, with the token (written to `buf`). */
const char *bench_jserver_channels_path(const bench_jserver_t *js, const char *id, char *buf, size_t size);

/**
 * Shuts every kernel down through the REST API (DELETE /api/kernels/{id}), then SIGTERM to the
 * server, SIGKILL after 10 s, and SIGKILL to any descendant that outlives it; removes the temp dir.
 * Failures are warnings on stderr. Idempotent; accepts a zeroed struct.
 */
void bench_jserver_stop(bench_jserver_t *js);

#endif
