/* support/jserver.h: Debian's Jupyter Server started for an end-to-end test or the benchmark: its command line and directories. */
#ifndef KGATE_SUPPORT_JSERVER_H
#define KGATE_SUPPORT_JSERVER_H

#include <stddef.h>
#include <sys/types.h>

/* Debian's interpreter: the one python3-jupyter-server is installed for (a `python3` earlier on PATH may not have it). */
#define TS_JSERVER_PYTHON "/usr/bin/python3"

/** What a Jupyter Server is started with. */
typedef struct st_ts_jserver_cmd_t {
    const char *dir;         /* an existing directory of the caller's: the server's HOME, its dirs and its root go below it */
    unsigned short port;     /* on 127.0.0.1 (ts_free_port) */
    const char *token;       /* --ServerApp.token */
    const char *const *args; /* appended to the command line, NULL-terminated; may be NULL */
    const char *log_path;    /* the server's stdout and stderr (created or truncated) */
} ts_jserver_cmd_t;

/**
 * Starts, without waiting for it to answer, `/usr/bin/python3 -m jupyter_server --ip=127.0.0.1
 * --port=<port> --ServerApp.port_retries=0 --ServerApp.token=<token> --ServerApp.root_dir=<dir>/root
 * --no-browser --allow-root <args...>` in `<dir>/root`. Nothing of the machine's configuration leaks
 * in: HOME is `dir`, JUPYTER_CONFIG_DIR, JUPYTER_DATA_DIR, JUPYTER_RUNTIME_DIR and IPYTHONDIR are
 * `<dir>/config`, `data`, `runtime` and `ipython` (created), and every other JUPYTER* and KGATE_*
 * variable, XDG_CONFIG_HOME, XDG_DATA_HOME, XDG_RUNTIME_DIR and PYTHONSTARTUP are dropped
 * (kernelspecs come from the system's /usr/share/jupyter, as kgate's do). The child goes with its
 * starter (ts_child_prepare). Returns 0 with its pid in `*pid` (the caller reaps it), or TS_ESPAWN
 * with `err` set and nothing left running.
 */
int ts_jserver_spawn(const ts_jserver_cmd_t *cmd, pid_t *pid, char *err, size_t errlen);

#endif
