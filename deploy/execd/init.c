/*
 * deploy/execd/init.c: the launcher as the container's PID 1 (`execd --init -- ENTRYPOINT...`, EXECD_INIT=true in
 * bootstrap.sh), as upstream's execd is in its init mode: kgate and the entrypoint are its children; it reaps every process
 * that ends up its child (orphans of double forks included), forwards the signals a container receives to the entrypoint,
 * holds the entrypoint until the lifecycle's preStart has succeeded (kgate's status file), retires and restarts it when
 * POST /internal/init asks (entrypointPolicy=restart, on kgate's control pipe), and when the entrypoint ends it stops kgate
 * (SIGTERM, SIGKILL after INIT_GRACE_S) and exits with the entrypoint's status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "launcher.h"

/* A lifecycle config is there (upstream's bootstrap.sh and execd look at the same three places). */
int has_lifecycle(void)
{
    const char *env = getenv("OPENSANDBOX_LIFECYCLE"), *path = getenv("EXECD_LIFECYCLE_CONFIG"), *home = getenv("HOME");
    char deflt[PATH_MAX];

    if (env != NULL && strspn(env, " \t\r\n") != strlen(env))
        return 1;
    if (path != NULL && path[0] != '\0')
        return 1;
    if (home == NULL || home[0] == '\0' || snprintf(deflt, sizeof(deflt), "%s/.execd/lifecycle.toml", home) >= (int)sizeof(deflt))
        return 0;
    return access(deflt, F_OK) == 0;
}

int truthy(const char *v)
{
    return v != NULL &&
           (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0 || strcasecmp(v, "on") == 0);
}

/* The last line of the status file kgate appends to (`running <secs>`, `done <status>`); "" when none yet, NULL when gone. */
static const char *last_status(const char *path, char *buf, size_t size)
{
    char line[128];
    FILE *fp = fopen(path, "re");

    if (fp == NULL)
        return NULL;
    buf[0] = '\0';
    while (fgets(line, sizeof(line), fp) != NULL)
        if (strchr(line, '\n') != NULL) {
            *strchr(line, '\n') = '\0';
            snprintf(buf, size, "%s", line);
        }
    fclose(fp);
    return buf;
}

/* The status file and its private directory, once read for the last time. */
static void remove_status(const char *file)
{
    char dir[PATH_MAX];

    unlink(file);
    fmt(dir, sizeof(dir), "%s", file);
    *strrchr(dir, '/') = '\0';
    rmdir(dir);
}

/*
 * The entrypoint, with what only execd may know taken out of its environment (upstream strips the same names): the token,
 * the lifecycle's transport, the runtime-init switch.
 */
static pid_t start_entry(char *const *entry, const sigset_t *old, const char *envs, size_t envs_len)
{
    static const char *const stripped[] = {"EXECD_ACCESS_TOKEN", "OPENSANDBOX_LIFECYCLE", "EXECD_LIFECYCLE_CONFIG",
                                           "EXECD_RUNTIME_INIT"};
    pid_t pid = fork();

    if (pid < 0)
        die("cannot fork", NULL);
    if (pid == 0) {
        for (size_t i = 0; i != sizeof(stripped) / sizeof(stripped[0]); ++i)
            unsetenv(stripped[i]);
        /* an init's envs (entrypointPolicy=restart): "K=V\0" entries, as upstream layers them over execd's environment */
        for (size_t off = 0; envs != NULL && off < envs_len; off += strlen(envs + off) + 1) {
            char *kv = strdup(envs + off), *eq = strchr(kv, '=');
            if (eq != NULL && eq != kv) {
                *eq = '\0';
                setenv(kv, eq + 1, 1);
            }
            free(kv);
        }
        sigprocmask(SIG_SETMASK, old, NULL);
        execvp(entry[0], entry);
        fprintf(stderr, "execd (kgate): cannot execute %s: %s\n", entry[0], strerror(errno));
        _exit(127);
    }
    return pid;
}

/*
 * PID 1: runs kgate and the entrypoint, reaps everything, forwards signals, exits with the entrypoint's status. With
 * `status_file` (a lifecycle config), the entrypoint starts only once kgate has written `done 0` there (its preStart
 * succeeded), as upstream's init mode starts it after preStart: `done N`, no report in time (10 s, then the hook's timeout
 * and 10 s), kgate's death or SIGTERM/SIGINT first stop kgate and end the container (N, 1, kgate's status, 128 + signal).
 */
/* What kgate asks on the control pipe (POST /internal/init, entrypointPolicy=restart), read as it comes. */
typedef struct st_control_t {
    int fd;    /* the read end, non-blocking; -1 once closed */
    char *buf; /* bytes read and not yet a whole message */
    size_t len;
    pid_t retired;    /* the entrypoint being retired: its exit does not end the container */
    time_t retire_by; /* then SIGKILL */
    char *start_envs; /* a `start` waiting for the retired entrypoint to be gone (NULL: none) */
    size_t start_len;
    int start_pending;
} control_t;

#define CONTROL_MAX_BYTES (1024 * 1024 + 64) /* one message: kgate's envs are bounded by its request bodies */

/* Reads what kgate wrote; handles `retire` and `start <bytes>` messages. `*child` is the running entrypoint (-1: none). */
static void control_read(control_t *c, pid_t *child)
{
    char *nl;
    ssize_t n;

    while (c->fd >= 0) {
        if (c->len == CONTROL_MAX_BYTES) {
            fprintf(stderr, "execd (kgate): a control message over %d bytes: the control pipe is closed\n", CONTROL_MAX_BYTES);
            close(c->fd), c->fd = -1;
            break;
        }
        n = read(c->fd, c->buf + c->len, CONTROL_MAX_BYTES - c->len);
        if (n > 0) {
            c->len += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 || errno != EAGAIN)
            close(c->fd), c->fd = -1; /* kgate is gone */
        break;
    }
    while ((nl = memchr(c->buf, '\n', c->len)) != NULL) {
        size_t head = (size_t)(nl - c->buf) + 1, body = 0;
        unsigned long long want = 0;
        char line[64] = "";
        if (head < sizeof(line))
            memcpy(line, c->buf, head - 1);
        if (head == 7 && memcmp(c->buf, "retire\n", 7) == 0) {
            if (*child > 0) {
                fprintf(stderr, "execd (kgate): stopping the entrypoint (pid %d) for runtime init\n", (int)*child);
                c->retired = *child, c->retire_by = time(NULL) + INIT_GRACE_S;
                kill(*child, SIGTERM);
                *child = -1;
            }
        } else if (sscanf(line, "start %llu", &want) == 1 && want <= CONTROL_MAX_BYTES - head) {
            if (c->len - head < want)
                break; /* the rest of its envs is still on its way */
            body = (size_t)want;
            free(c->start_envs);
            c->start_envs = malloc(body + 1);
            memcpy(c->start_envs, c->buf + head, body);
            c->start_envs[body] = '\0';
            c->start_len = body, c->start_pending = 1;
        } else {
            fprintf(stderr, "execd (kgate): an unknown control message: ignored\n");
        }
        memmove(c->buf, c->buf + head + body, c->len - head - body);
        c->len -= head + body;
    }
}

int run_init(const char *loader, char *const *kgate_args, char *const *entry, const char *status_file, int control_fd,
             int control_write)
{
    static const int forwarded[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    sigset_t set, old;
    pid_t kgate, child = -1, pid;
    int status, result = -1;
    time_t deadline = 0, report_by = time(NULL) + 10;
    int running_seen = 0, kgate_status = -1;
    char line[128];
    control_t control = {.fd = control_fd, .retired = -1};

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    for (size_t i = 0; i != sizeof(forwarded) / sizeof(forwarded[0]); ++i)
        sigaddset(&set, forwarded[i]);
    sigprocmask(SIG_BLOCK, &set, &old);
    kgate = start(loader, kgate_args, &old, 0);
    close(control_write); /* kgate's alone: the entrypoint never gets it, and kgate's end closing is the launcher's EOF */
    if (control.fd >= 0) {
        control.buf = malloc(CONTROL_MAX_BYTES);
        if (control.buf == NULL)
            die("out of memory", NULL);
    }
    if (status_file == NULL)
        child = start_entry(entry, &old, NULL, 0);
    for (;;) {
        siginfo_t info;
        struct timespec tick = {(status_file != NULL && child < 0 && result < 0) || control.fd >= 0 ? 0 : 1, 100000000};
        int sig = sigtimedwait(&set, &info, &tick);

        if (sig > 0 && sig != SIGCHLD && result < 0) {
            if (child > 0) {
                kill(child, sig);
            } else if (sig == SIGTERM || sig == SIGINT) {
                /* stopped before any entrypoint: nothing to hand the signal to */
                result = 128 + sig;
                kill(kgate, SIGTERM);
                deadline = time(NULL) + INIT_GRACE_S;
            }
        }
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
            if (pid == control.retired) {
                fprintf(stderr, "execd (kgate): the previous entrypoint exited (status %d)\n", status_of(status));
                control.retired = -1;
            } else if (child > 0 && pid == child) {
                result = status_of(status);
                kill(kgate, SIGTERM);
                deadline = time(NULL) + INIT_GRACE_S;
            } else if (pid == kgate) {
                kgate = -1;
                if (result < 0 && child < 0) {
                    kgate_status = status_of(status); /* the status file says why, below */
                } else if (result < 0) {
                    fprintf(stderr, "execd (kgate): kgate exited (status %d); the entrypoint goes on\n", status_of(status));
                }
            }
        }
        if (result < 0 && child < 0 && status_file != NULL) {
            const char *last = last_status(status_file, line, sizeof(line));
            unsigned long secs;
            int n = -1;
            if (last != NULL && strcmp(last, "done 0") == 0) {
                child = start_entry(entry, &old, NULL, 0);
            } else if (last != NULL && sscanf(last, "done %d", &n) == 1) {
                fprintf(stderr, "execd (kgate): lifecycle preStart failed (status %d)\n", n);
                result = n > 0 && n <= 255 ? n : 1;
            } else if (last != NULL && sscanf(last, "running %lu", &secs) == 1 && !running_seen) {
                report_by = time(NULL) + (time_t)secs + 10;
                running_seen = 1;
            } else if (last == NULL || (last[0] != '\0' && strncmp(last, "running ", 8) != 0)) {
                fprintf(stderr, "execd (kgate): the lifecycle status file is %s\n", last == NULL ? "gone" : "malformed");
                result = 1;
            } else if (time(NULL) >= report_by) {
                fprintf(stderr, "execd (kgate): kgate did not report the lifecycle's preStart in time\n");
                result = 1;
            }
            if (result < 0 && child < 0 && kgate_status >= 0) {
                fprintf(stderr, "execd (kgate): kgate exited (status %d) before the lifecycle's preStart finished\n", kgate_status);
                result = kgate_status != 0 ? kgate_status : 1;
            }
            if (result >= 0) {
                deadline = time(NULL) + INIT_GRACE_S;
                if (kgate > 0)
                    kill(kgate, SIGTERM);
            }
        }
        if (result < 0 && control.fd >= 0)
            control_read(&control, &child);
        if (control.retired > 0 && time(NULL) >= control.retire_by)
            kill(control.retired, SIGKILL);
        if (result < 0 && control.start_pending && control.retired < 0 && child < 0) {
            child = start_entry(entry, &old, control.start_envs, control.start_len);
            fprintf(stderr, "execd (kgate): the entrypoint started again (pid %d) for runtime init\n", (int)child);
            control.start_pending = 0;
        }
        if (status_file != NULL && (result >= 0 || child > 0)) {
            remove_status(status_file);
            status_file = NULL;
        }
        if (result >= 0 && kgate < 0)
            return result;
        if (result >= 0 && time(NULL) >= deadline)
            kill(kgate, SIGKILL);
    }
}
