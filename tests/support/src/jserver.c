/* tests/support/src/jserver.c: Debian's Jupyter Server's command line, environment and directories, and its start. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "support/base.h"
#include "support/jserver.h"
#include "support/proc.h"

extern char **environ;

/* The server's private directories below its own: environment variable, subdirectory ("" for HOME). */
static const char *const dirs[][2] = {{"HOME", ""},
                                      {"JUPYTER_CONFIG_DIR", "/config"},
                                      {"JUPYTER_DATA_DIR", "/data"},
                                      {"JUPYTER_RUNTIME_DIR", "/runtime"},
                                      {"IPYTHONDIR", "/ipython"}};
#define NUM_DIRS (sizeof(dirs) / sizeof(dirs[0]))

/* What the server must not inherit: the machine's Jupyter and IPython configuration, and kgate's own variables. */
static int inherited(const char *entry)
{
    static const char *const dropped[] = {"XDG_CONFIG_HOME=", "XDG_DATA_HOME=", "XDG_RUNTIME_DIR=", "PYTHONSTARTUP=", NULL};

    if (strncmp(entry, "JUPYTER", 7) == 0 || strncmp(entry, "KGATE_", 6) == 0)
        return 0;
    for (size_t i = 0; i != NUM_DIRS; ++i)
        if (strncmp(entry, dirs[i][0], strlen(dirs[i][0])) == 0 && entry[strlen(dirs[i][0])] == '=')
            return 0;
    for (size_t i = 0; dropped[i] != NULL; ++i)
        if (strncmp(entry, dropped[i], strlen(dropped[i])) == 0)
            return 0;
    return 1;
}

int ts_jserver_spawn(const ts_jserver_cmd_t *cmd, pid_t *pid, char *err, size_t errlen)
{
    char port[32], token[128], root[600], root_arg[640], env[NUM_DIRS][600];
    const char **argv = NULL, **envp = NULL;
    size_t nargs = 0, nenv = 0, argc = 0, envc = 0;
    int logfd = -1, ret = TS_ESPAWN;
    pid_t parent = getpid(), child;

    /* everything is built before the fork: the child only execs */
    for (size_t i = 0; i != NUM_DIRS; ++i) {
        snprintf(env[i], sizeof(env[i]), "%s=%s%s", dirs[i][0], cmd->dir, dirs[i][1]);
        if (i != 0 && mkdir(strchr(env[i], '=') + 1, 0700) != 0 && errno != EEXIST) {
            snprintf(err, errlen, "mkdir(%s): %s", strchr(env[i], '=') + 1, strerror(errno));
            goto Exit;
        }
    }
    snprintf(root, sizeof(root), "%s/root", cmd->dir);
    if (mkdir(root, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "mkdir(%s): %s", root, strerror(errno));
        goto Exit;
    }
    snprintf(port, sizeof(port), "--port=%u", cmd->port);
    snprintf(token, sizeof(token), "--ServerApp.token=%s", cmd->token);
    snprintf(root_arg, sizeof(root_arg), "--ServerApp.root_dir=%s", root);
    while (cmd->args != NULL && cmd->args[nargs] != NULL)
        ++nargs;
    argv = ts_malloc((nargs + 12) * sizeof(*argv));
    argv[argc++] = TS_JSERVER_PYTHON;
    argv[argc++] = "-m";
    argv[argc++] = "jupyter_server";
    argv[argc++] = "--ip=127.0.0.1";
    argv[argc++] = port;
    argv[argc++] = "--ServerApp.port_retries=0"; /* a port taken meanwhile is the starter's to retry, on a port it knows */
    argv[argc++] = token;
    argv[argc++] = root_arg;
    argv[argc++] = "--no-browser";
    argv[argc++] =
        "--allow-root"; /* it refuses to run as root without it (CI and the benchmark's containers); harmless otherwise */
    for (size_t i = 0; i != nargs; ++i)
        argv[argc++] = cmd->args[i];
    argv[argc] = NULL;
    while (environ[nenv] != NULL)
        ++nenv;
    envp = ts_malloc((nenv + NUM_DIRS + 1) * sizeof(*envp));
    for (size_t i = 0; i != nenv; ++i)
        if (inherited(environ[i]))
            envp[envc++] = environ[i];
    for (size_t i = 0; i != NUM_DIRS; ++i)
        envp[envc++] = env[i];
    envp[envc] = NULL;
    if ((logfd = open(cmd->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
        snprintf(err, errlen, "open(%s): %s", cmd->log_path, strerror(errno));
        goto Exit;
    }
    fflush(NULL);
    if ((child = fork()) == 0) {
        ts_child_prepare(logfd, parent); /* the server goes with its starter */
        if (chdir(root) != 0)
            _exit(127);
        execve(argv[0], (char *const *)argv, (char *const *)envp);
        dprintf(2, "jserver: execve(%s): %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    if (child < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        goto Exit;
    }
    *pid = child;
    ret = 0;
Exit:
    if (logfd >= 0)
        close(logfd);
    free(argv);
    free(envp);
    return ret;
}
