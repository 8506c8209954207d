/* sys/src/sandbox.c: the bubblewrap command line of a kernel, and whether bwrap works on this host. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "ksys/errors.h"
#include "ksys/sandbox.h"
#include "ksys/spawn.h"

/* The namespaces and hardening shared by every sandbox (ksys_bwrap_walls); --new-session follows them but for a PTY session. */
#define BWRAP_ISOLATION                                                                                                            \
    "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--disable-userns", "--cap-drop", "ALL",                  \
        "--die-with-parent"

void ksys_strv_push(ksys_strv_t *a, const char *s)
{
    if (a->n + 2 > a->cap) {
        a->cap = a->cap != 0 ? a->cap * 2 : 64;
        a->v = wire_realloc(a->v, a->cap * sizeof(char *));
    }
    a->v[a->n++] = wire_strdup(s);
    a->v[a->n] = NULL;
}

static void push3(ksys_strv_t *a, const char *opt, const char *x, const char *y)
{
    ksys_strv_push(a, opt);
    ksys_strv_push(a, x);
    if (y != NULL)
        ksys_strv_push(a, y);
}

int ksys_path_within(const char *path, const char *dir)
{
    size_t len = strlen(dir);

    while (len > 1 && dir[len - 1] == '/')
        --len;
    if (len == 1 && dir[0] == '/')
        return path[0] == '/';
    return strncmp(path, dir, len) == 0 && (path[len] == '\0' || path[len] == '/');
}

int ksys_path_holds_system(const char *path)
{
    static const char *const system_dirs[] = {KSYS_SYSTEM_DIRS};

    for (size_t i = 0; i != sizeof(system_dirs) / sizeof(system_dirs[0]); ++i)
        if (ksys_path_within(system_dirs[i], path))
            return 1;
    return 0;
}

/* `--size BYTES` before a --tmpfs, when the sandbox's temporary space is capped. */
static void push_sized_tmpfs(ksys_strv_t *a, uint64_t bytes, const char *dest)
{
    char buf[32];

    if (bytes != 0) {
        snprintf(buf, sizeof(buf), "%llu", (unsigned long long)bytes);
        push3(a, "--size", buf, NULL);
    }
    push3(a, "--tmpfs", dest, NULL);
}

char **ksys_bwrap_walls(const ksys_bwrap_walls_t *w)
{
    static const char *const isolation[] = {BWRAP_ISOLATION};
    ksys_strv_t a = {NULL, 0, 0};

    for (size_t i = 0; i != sizeof(isolation) / sizeof(isolation[0]); ++i)
        ksys_strv_push(&a, isolation[i]);
    /* a PTY session's shell keeps the session whose controlling terminal ksys_spawn set: the terminal is its own (a pty
     * kgate holds the master of), so TIOCSTI injects into nothing but the sandbox */
    if (!w->own_terminal)
        ksys_strv_push(&a, "--new-session");
    push3(&a, "--hostname", "sandbox", NULL);
    if (!w->share_net)
        ksys_strv_push(&a, "--unshare-net");
    push3(&a, "--ro-bind", "/", "/");
    /* private and sized: /tmp, /dev/shm and /run (their pages are charged to the memory cgroup of whoever writes them, so
     * the memory cap holds them too; an rlimit cap does not, hence the size); /dev read-only but for its devices, so that
     * nothing unsized is writable; /run empty: the host's daemons' sockets (/var/run is a link to it) are not there to
     * connect to */
    if (w->host_tmp)
        push3(&a, "--bind", "/tmp", "/tmp");
    else
        push_sized_tmpfs(&a, w->tmp_bytes, "/tmp");
    push3(&a, "--dev", "/dev", NULL);
    push_sized_tmpfs(&a, w->tmp_bytes, "/dev/shm");
    push3(&a, "--remount-ro", "/dev", NULL);
    push3(&a, "--proc", "/proc", NULL);
    push_sized_tmpfs(&a, w->tmp_bytes, "/run");
    return a.v;
}

char **ksys_bwrap_argv(const ksys_bwrap_args_t *args, char *const *cmd)
{
    /* a workspace of `/`, or one holding a system directory, would make the system writable: it stays read-only */
    const char *ws = args->workspace != NULL && !ksys_path_holds_system(args->workspace) ? args->workspace : NULL;
    ksys_bwrap_walls_t walls = {.share_net = args->share_net, .own_terminal = args->own_terminal, .tmp_bytes = args->tmp_bytes};
    char **common = ksys_bwrap_walls(&walls);
    ksys_strv_t a = {NULL, 0, 0};

    ksys_strv_push(&a, args->bwrap);
    for (char **p = common; *p != NULL; ++p)
        ksys_strv_push(&a, *p);
    ksys_strv_free(common);
    if (args->home != NULL)
        push3(&a, "--dir", args->home, NULL);
    /* after the private mounts, so that one under /tmp lands on the private /tmp; it holds none of them (it holds no
     * system directory, which rules out `/`) */
    if (ws != NULL)
        push3(&a, "--bind", ws, ws);
    /* keys and connection files of every other kernel live here */
    push3(&a, "--tmpfs", args->runtime_dir, NULL);
    if (args->kernel_dir != NULL)
        push3(&a, "--bind", args->kernel_dir, args->kernel_dir);
    /* the cover holds nothing to write: read-only, or it would be a tmpfs of no size (the kernel's directory is a mount of
     * its own, which stays writable) */
    push3(&a, "--remount-ro", args->runtime_dir, NULL);
    if (args->resource_dir != NULL && !ksys_path_within(args->resource_dir, args->runtime_dir))
        push3(&a, "--ro-bind-try", args->resource_dir, args->resource_dir);
    if (args->cwd != NULL) {
        /* bound read-only only when it lies apart from every other mount: one inside the runtime dir, /run, /dev or /proc
         * stays hidden (bwrap fails to chdir); one inside the workspace is there already; one holding the runtime dir, the
         * workspace or a private mount (`/`, `/tmp`, a parent of the workspace) is visible already, and binding it would lay
         * the host's view back over what is hidden */
        static const char *const private_dirs[] = {"/tmp", "/run", "/dev", "/proc"};
        const char *c = args->cwd;
        int apart = !ksys_path_within(c, args->runtime_dir) && !ksys_path_within(args->runtime_dir, c) &&
                    (ws == NULL || (!ksys_path_within(c, ws) && !ksys_path_within(ws, c)));
        for (size_t i = 0; i != sizeof(private_dirs) / sizeof(private_dirs[0]); ++i)
            if (ksys_path_within(private_dirs[i], c) || (i != 0 && ksys_path_within(c, private_dirs[i])))
                apart = 0;
        if (apart)
            push3(&a, "--ro-bind", c, c);
        push3(&a, "--chdir", args->cwd, NULL);
    }
    ksys_strv_push(&a, "--");
    for (char *const *p = cmd; *p != NULL; ++p)
        ksys_strv_push(&a, *p);
    return a.v;
}

void ksys_strv_free(char **v)
{
    if (v == NULL)
        return;
    for (char **p = v; *p != NULL; ++p)
        free(*p);
    free(v);
}

int ksys_bwrap_probe(const char *bwrap, char *why, size_t whylen)
{
    ksys_bwrap_walls_t walls = {0};
    char **common = ksys_bwrap_walls(&walls);
    const char *argv[64];
    char *const envp[] = {NULL};
    char buf[512];
    ksys_spawn_failure_t failure;
    ksys_spawn_options_t opts;
    size_t n = 0, len = 0;
    int pipefd[2], status, ret;
    pid_t pid;
    ssize_t r;

    /* exactly what every sandbox starts with, around /bin/true */
    argv[n++] = bwrap;
    for (char **p = common; *p != NULL && n < sizeof(argv) / sizeof(argv[0]) - 3; ++p)
        argv[n++] = *p;
    argv[n++] = "--";
    argv[n++] = "/bin/true";
    argv[n] = NULL;
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        snprintf(why, whylen, "pipe: %s", strerror(errno));
        ksys_strv_free(common);
        return KSYS_ESPAWN;
    }
    opts = (ksys_spawn_options_t){
        .path = bwrap, .argv = (char *const *)argv, .envp = envp, .fds = {KSYS_SPAWN_DEVNULL, KSYS_SPAWN_DEVNULL, pipefd[1]}};
    ret = ksys_spawn(&opts, &pid, &failure);
    ksys_strv_free(common);
    close(pipefd[1]);
    if (ret != 0) {
        close(pipefd[0]);
        snprintf(why, whylen, "cannot run %s: %s: %s", bwrap, failure.step, strerror(failure.err));
        return KSYS_ESPAWN;
    }
    while (len < sizeof(buf) - 1 && ((r = read(pipefd[0], buf + len, sizeof(buf) - 1 - len)) > 0 || (r < 0 && errno == EINTR)))
        if (r > 0)
            len += (size_t)r;
    close(pipefd[0]);
    buf[len] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    while (waitpid(pid, &status, 0) == -1 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    snprintf(why, whylen, "%s cannot create namespaces here: %s", bwrap, buf[0] != '\0' ? buf : "it failed");
    return KSYS_ESPAWN;
}

void ksys_format_bytes(uint64_t bytes, char *buf, size_t size)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t u = 0;
    uint64_t whole = bytes;

    while (u + 1 < sizeof(units) / sizeof(units[0]) && whole >= 1024 && whole % 1024 == 0) {
        whole /= 1024;
        ++u;
    }
    if (u == 0 && bytes >= 1024 * 1024) {
        /* not a round number of KiB: one decimal of the largest unit that fits */
        double v = (double)bytes;
        for (u = 0; v >= 1024 && u + 1 < sizeof(units) / sizeof(units[0]); ++u)
            v /= 1024;
        snprintf(buf, size, "%.1f %s", v, units[u]);
        return;
    }
    snprintf(buf, size, "%llu %s", (unsigned long long)whole, units[u]);
}

size_t ksys_limits_rlimits(const ksys_limits_t *l, int memory_by_cgroup, int pids_by_cgroup, ksys_spawn_rlimit_t *out)
{
    size_t n = 0;

    if (l->memory_bytes != 0 && !memory_by_cgroup)
        out[n++] = (ksys_spawn_rlimit_t){RLIMIT_AS, l->memory_bytes};
    if (l->pids != 0 && !pids_by_cgroup)
        out[n++] = (ksys_spawn_rlimit_t){RLIMIT_NPROC, l->pids};
    if (l->cpu_seconds != 0)
        out[n++] = (ksys_spawn_rlimit_t){RLIMIT_CPU, l->cpu_seconds};
    if (l->open_files != 0)
        out[n++] = (ksys_spawn_rlimit_t){RLIMIT_NOFILE, l->open_files};
    if (l->file_size_bytes != 0)
        out[n++] = (ksys_spawn_rlimit_t){RLIMIT_FSIZE, l->file_size_bytes};
    return n;
}
