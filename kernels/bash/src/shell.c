/* kernels/bash/src/shell.c: the persistent bash process (spawn, markers, interrupt, stdin FIFO). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/fdio.h"
#include "wire/ids.h"
#include "proc.h"
#include "shell.h"
#include "syntax.h"

extern char **environ;

/* Bounds on the /proc walk that looks for a process reading the stdin FIFO. */
#define MAX_WALK_PROCS 256
#define MAX_WALK_DEPTH 16

static char *path_in(const bk_shell_t *sh, const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", sh->dir, name) < 0)
        abort();
    return p;
}

int bk_shell_init(bk_shell_t *sh)
{
    const char *tmp = getenv("TMPDIR");
    char *tmpl = NULL;

    memset(sh, 0, sizeof(*sh));
    sh->fifo_fd = sh->in_fd = sh->out_fd[0] = sh->out_fd[1] = sh->status_fd = -1;
    if (asprintf(&tmpl, "%s/kgate-bash-XXXXXX", tmp != NULL && tmp[0] == '/' ? tmp : "/tmp") < 0)
        abort();
    if (mkdtemp(tmpl) == NULL) {
        int err = -errno;
        free(tmpl);
        return err;
    }
    sh->dir = tmpl;
    sh->fifo_path = path_in(sh, "stdin");
    if (mkfifo(sh->fifo_path, 0600) != 0 || (sh->fifo_fd = open(sh->fifo_path, O_RDWR | O_NONBLOCK | O_CLOEXEC)) < 0) {
        int err = -errno;
        bk_shell_dispose(sh);
        return err;
    }
    return 0;
}

static void close_fd(int *fd)
{
    if (*fd >= 0)
        close(*fd);
    *fd = -1;
}

static void close_pipes(bk_shell_t *sh)
{
    close_fd(&sh->in_fd);
    close_fd(&sh->out_fd[0]);
    close_fd(&sh->out_fd[1]);
    close_fd(&sh->status_fd);
}

void bk_shell_dispose(bk_shell_t *sh)
{
    if (sh->pid > 0) {
        int st, reaped = 0;
        /* An interactive bash ignores SIGTERM; SIGHUP (and EOF on its stdin) end it. */
        close_fd(&sh->in_fd);
        killpg(sh->pid, SIGHUP);
        for (int i = 0; i != 50 && !(reaped = waitpid(sh->pid, &st, WNOHANG) == sh->pid); ++i)
            usleep(10000);
        if (!reaped) {
            killpg(sh->pid, SIGKILL);
            while (waitpid(sh->pid, &st, 0) < 0 && errno == EINTR)
                ;
        }
        sh->pid = 0;
    }
    close_pipes(sh);
    close_fd(&sh->fifo_fd);
    if (sh->dir != NULL) {
        static const char *const names[] = {"stdin", "cell", "check.sh", "complete.out"};
        for (size_t i = 0; i != sizeof(names) / sizeof(names[0]); ++i) {
            char *p = path_in(sh, names[i]);
            unlink(p);
            free(p);
        }
        rmdir(sh->dir);
    }
    free(sh->dir);
    free(sh->fifo_path);
    free(sh->pending);
    sh->dir = sh->fifo_path = sh->pending = NULL;
}

/* The environment for bash: ours, minus what would change its prompt or start-up, plus the marker. */
static char **make_env(const char *token)
{
    static const char *const drop[] = {"PS0=", "PS1=", "PS2=", "PROMPT_COMMAND=", "HISTFILE=", "BASH_ENV=", "ENV="};
    size_t n = 0, k = 0;
    char **env;

    while (environ[n] != NULL)
        ++n;
    env = wire_calloc(n + 4, sizeof(*env));
    for (size_t i = 0; i != n; ++i) {
        size_t j;
        for (j = 0; j != sizeof(drop) / sizeof(drop[0]); ++j)
            if (strncmp(environ[i], drop[j], strlen(drop[j])) == 0)
                break;
        if (j == sizeof(drop) / sizeof(drop[0]))
            env[k++] = wire_strdup(environ[i]);
    }
    env[k++] = wire_strdup("PS1=");
    env[k++] = wire_strdup("PS2=");
    if (asprintf(&env[k++], "PROMPT_COMMAND=__kgate_rc=$?; printf '%%s %%s %%d\\n' %s \"${__kgate_seq-0}\" \"$__kgate_rc\" >&3",
                 token) < 0)
        abort();
    env[k] = NULL;
    return env;
}

static void free_env(char **env)
{
    for (size_t i = 0; env[i] != NULL; ++i)
        free(env[i]);
    free(env);
}

/* dup2 that also clears close-on-exec when the descriptor is already in place. */
static void place_fd(int from, int to)
{
    if (from == to)
        fcntl(to, F_SETFD, 0);
    else
        dup2(from, to);
}

int bk_shell_ensure(bk_shell_t *sh)
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, st[2] = {-1, -1}, ret = 0;
    char *argv[] = {(char *)bk_bash_path(), "--noprofile", "--norc", "--noediting", "-i", "+m", NULL};
    char **env;
    char *setup = NULL;
    pid_t pid, parent = getpid();

    if (sh->pid > 0)
        return 0;
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0 || pipe2(st, O_CLOEXEC) != 0) {
        ret = -errno;
        goto Fail;
    }
    wire_random_hex(sh->token, 8);
    env = make_env(sh->token);
    pid = fork();
    if (pid == 0) {
        bk_child_reset_signals();
        /* a bash that outlived the kernel would hold the session's state and children forever */
        bk_child_die_with_parent(parent);
        setpgid(0, 0);
        place_fd(in[0], 0);
        place_fd(out[1], 1);
        place_fd(err[1], 2);
        place_fd(st[1], 3);
        execve(argv[0], argv, env);
        _exit(127);
    }
    ret = pid < 0 ? -errno : 0;
    free_env(env);
    if (pid < 0)
        goto Fail;
    /* Also from the parent: a SIGINT sent before the child's own setpgid must not reach the kernel's group. */
    setpgid(pid, pid);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    close(st[1]);
    sh->pid = pid;
    sh->in_fd = in[1];
    sh->out_fd[0] = out[0];
    sh->out_fd[1] = err[0];
    sh->status_fd = st[0];
    fcntl(sh->in_fd, F_SETFL, O_NONBLOCK);
    fcntl(sh->out_fd[0], F_SETFL, O_NONBLOCK);
    fcntl(sh->out_fd[1], F_SETFL, O_NONBLOCK);
    fcntl(sh->status_fd, F_SETFL, O_NONBLOCK);
    sh->ready = 0;
    sh->status_len = 0;
    sh->ready_seq = ++sh->next_seq;
    /*
     * Un-export what came through the environment (a nested interactive bash would print markers to
     * a closed fd 3), keep users from unsetting the marker, and keep history off disk and `!` literal.
     * __kgate_status hands a cell the previous cell's $? (PROMPT_COMMAND keeps it in __kgate_rc).
     */
    if (asprintf(&setup,
                 "export -n PROMPT_COMMAND PS1 PS2; readonly PROMPT_COMMAND; set +o history +H; "
                 "unset HISTFILE MAILCHECK; __kgate_status() { return \"$1\"; }; readonly -f __kgate_status; "
                 "__kgate_rc=0; __kgate_seq=%lu\n",
                 sh->ready_seq) < 0)
        abort();
    ret = wire_write_all(sh->in_fd, setup, strlen(setup));
    free(setup);
    return ret;

Fail:
    for (int i = 0; i != 2; ++i) {
        close_fd(&in[i]);
        close_fd(&out[i]);
        close_fd(&err[i]);
        close_fd(&st[i]);
    }
    return ret;
}

int bk_shell_submit(bk_shell_t *sh, const char *line, unsigned long *seq)
{
    char *full = NULL;
    int ret;

    if ((ret = bk_shell_ensure(sh)) != 0)
        return ret;
    *seq = ++sh->next_seq;
    if (asprintf(&full, "__kgate_seq=%lu; __kgate_status \"$__kgate_rc\"; %s\n", *seq, line) < 0)
        abort();
    if (!sh->ready) {
        free(sh->pending);
        sh->pending = full;
        return 0;
    }
    ret = wire_write_all(sh->in_fd, full, strlen(full));
    free(full);
    return ret;
}

int bk_shell_run_cell(bk_shell_t *sh, const char *code, size_t len, int allow_stdin, unsigned long *seq)
{
    char *cell = path_in(sh, "cell"), *qcell = NULL, *qsrc = NULL, *line = NULL;
    FILE *fp = fopen(cell, "w");
    int ret = 0;

    if (fp == NULL) {
        ret = -errno;
    } else {
        int ok = fwrite(code, 1, len, fp) == len;
        if (fclose(fp) != 0 || !ok)
            ret = -EIO;
    }
    if (ret == 0) {
        const char *src = allow_stdin ? sh->fifo_path : "/dev/null";
        qcell = bk_shell_quote(cell, strlen(cell));
        qsrc = bk_shell_quote(src, strlen(src));
        if (asprintf(&line, ". %s 0<%s 3>&-", qcell, qsrc) < 0)
            abort();
        ret = bk_shell_submit(sh, line, seq);
    }
    free(cell);
    free(qcell);
    free(qsrc);
    free(line);
    return ret;
}

int bk_shell_cancel_pending(bk_shell_t *sh)
{
    int had = sh->pending != NULL;
    free(sh->pending);
    sh->pending = NULL;
    return had;
}

/* Reads and drops what the non-blocking descriptor `fd` holds now (none when it is -1). */
static void discard_pending(int fd)
{
    char buf[4096];
    while (fd >= 0 && read(fd, buf, sizeof(buf)) > 0)
        ;
}

/* Handles one complete marker line; returns 1 if it is for the caller. */
static int on_marker(bk_shell_t *sh, const char *line, unsigned long *seq, int *status)
{
    char token[sizeof(sh->token)];
    unsigned long s;
    int st;

    if (sscanf(line, "%16s %lu %d", token, &s, &st) != 3 || strcmp(token, sh->token) != 0)
        return 0;
    if (!sh->ready) {
        if (s != sh->ready_seq)
            return 0;
        /* Everything bash said while starting ("no job control in this shell") is noise. */
        discard_pending(sh->out_fd[0]);
        discard_pending(sh->out_fd[1]);
        sh->ready = 1;
        if (sh->pending != NULL) {
            char *p = sh->pending;
            sh->pending = NULL;
            wire_write_all(sh->in_fd, p, strlen(p));
            free(p);
        }
        return 0;
    }
    *seq = s;
    *status = st;
    return 1;
}

int bk_shell_read_marker(bk_shell_t *sh, unsigned long *seq, int *status)
{
    for (;;) {
        char *nl = memchr(sh->status_line, '\n', sh->status_len);
        if (nl != NULL) {
            size_t used = (size_t)(nl - sh->status_line) + 1;
            *nl = '\0';
            int mine = on_marker(sh, sh->status_line, seq, status);
            memmove(sh->status_line, sh->status_line + used, sh->status_len - used);
            sh->status_len -= used;
            if (mine)
                return 1;
            continue;
        }
        if (sh->status_len == sizeof(sh->status_line))
            sh->status_len = 0; /* not a marker of ours */
        if (sh->status_fd < 0)
            return -EPIPE;
        ssize_t n = read(sh->status_fd, sh->status_line + sh->status_len, sizeof(sh->status_line) - sh->status_len);
        if (n < 0)
            return errno == EAGAIN || errno == EINTR ? 0 : -errno;
        if (n == 0) {
            close_fd(&sh->status_fd);
            return -EPIPE;
        }
        sh->status_len += (size_t)n;
    }
}

ssize_t bk_shell_read_output(bk_shell_t *sh, int which, char *buf, size_t size)
{
    int *fd = &sh->out_fd[which];
    ssize_t n;

    if (*fd < 0)
        return 0;
    if ((n = read(*fd, buf, size)) == 0)
        close_fd(fd);
    return n;
}

void bk_shell_interrupt(bk_shell_t *sh)
{
    if (sh->pid > 0)
        killpg(sh->pid, SIGINT);
}

int bk_shell_reap(bk_shell_t *sh, int *wstatus)
{
    if (sh->pid <= 0)
        return 0;
    return waitpid(sh->pid, wstatus, WNOHANG) == sh->pid;
}

void bk_shell_forget(bk_shell_t *sh)
{
    if (sh->pid > 0)
        killpg(sh->pid, SIGHUP); /* background jobs of the bash that is gone */
    close_pipes(sh);
    bk_shell_cancel_pending(sh);
    sh->pid = 0;
    sh->ready = 0;
    sh->status_len = 0;
}

/* Reads a small /proc file into buf (NUL-terminated); returns its length or -1. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;
    if (fd < 0)
        return -1;
    n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* Is thread `tid` of `pid` in read(2) (or readv/pread) on the FIFO `fifo`? */
static int reads_fifo(pid_t pid, const char *tid, const struct stat *fifo)
{
    char path[sizeof("/proc//task//syscall") + 11 + 256], buf[256]; /* tid: a d_name, up to 255 bytes */
    long nr;
    unsigned long fd;
    struct stat st;

    snprintf(path, sizeof(path), "/proc/%d/task/%s/syscall", (int)pid, tid);
    if (read_small(path, buf, sizeof(buf)) < 0 || sscanf(buf, "%ld %lx", &nr, &fd) != 2)
        return 0;
    if (nr != SYS_read && nr != SYS_readv && nr != SYS_pread64)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/fd/%lu", (int)pid, fd);
    return stat(path, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_ino == fifo->st_ino && st.st_dev == fifo->st_dev;
}

static int walk(pid_t pid, const struct stat *fifo, int depth, int *budget)
{
    char path[64];
    DIR *dir;
    struct dirent *de;
    int found = 0;

    if (depth > MAX_WALK_DEPTH || --*budget < 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    if ((dir = opendir(path)) == NULL)
        return 0;
    while (!found && (de = readdir(dir)) != NULL) {
        char cpath[320], kids[4096], *p, *end;
        if (de->d_name[0] == '.')
            continue;
        if (reads_fifo(pid, de->d_name, fifo)) {
            found = 1;
            break;
        }
        snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children", (int)pid, de->d_name);
        if (read_small(cpath, kids, sizeof(kids)) < 0)
            continue;
        for (p = kids; !found; p = end) {
            long kid = strtol(p, &end, 10);
            if (end == p || kid <= 0)
                break;
            found = walk((pid_t)kid, fifo, depth + 1, budget);
        }
    }
    closedir(dir);
    return found;
}

int bk_shell_stdin_wanted(bk_shell_t *sh)
{
    struct stat fifo;
    int queued = 0, budget = MAX_WALK_PROCS;

    if (sh->pid <= 0 || !sh->ready || fstat(sh->fifo_fd, &fifo) != 0)
        return 0;
    if (ioctl(sh->fifo_fd, FIONREAD, &queued) == 0 && queued > 0)
        return 0;
    return walk(sh->pid, &fifo, 0, &budget);
}

void bk_shell_feed_stdin(bk_shell_t *sh, const char *data, size_t len)
{
    wire_write_all(sh->fifo_fd, data, len);
}

void bk_shell_drop_stdin(bk_shell_t *sh)
{
    discard_pending(sh->fifo_fd);
}
