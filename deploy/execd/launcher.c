/*
 * deploy/execd/launcher.c: the front of the drop-in `execd`, a statically linked program followed by kgate, its bash
 * kernel, the shared libraries they need and the dynamic loader that loads them (deploy/execd/build.sh appends them).
 *
 * OpenSandbox copies one file, `execd`, into an image that may have none of kgate's libraries (or another libc).
 * So the launcher unpacks what follows it once, into `<execd's dir>/.execd-<id>/` (or, where that directory is
 * read-only, `$TMPDIR/kgate-execd-<uid>-<id>/`), writes the bash kernelspec that names the unpacked paths, and
 * executes kgate through the unpacked loader (`ld.so --library-path <dir>/lib`): nothing of the image is loaded, and
 * the environment kgate's children inherit carries no LD_LIBRARY_PATH.
 *
 * It also speaks execd's command line (docs/API.md 6.3) for kgate: `--port N` (and the default 44772) is
 * `--listen 0.0.0.0:N`, EXECD_ACCESS_TOKEN is `--access-token`, execd's flags that kgate has no use for are
 * accepted and dropped (those kgate honours, --log-level, --graceful-shutdown-timeout and
 * --lifecycle-startup-status-file, are passed on), and `--as-execd` is always given. Anything else is passed to kgate unchanged.
 *
 * `--init -- ENTRYPOINT...` (EXECD_INIT=true in bootstrap.sh): the launcher is the container's PID 1 (deploy/execd/init.c).
 * It gives kgate a lifecycle status file when a lifecycle config is given (the entrypoint waits for preStart) and a control
 * pipe (`--init-control-fd`, for entrypointPolicy=restart).
 *
 * The payload: a first line `kgate-execd <id>\n`, then per file a line `<path> <octal mode> <size>\n` and its bytes,
 * then `end\n`; the file ends with a 32-byte trailer `%020llu KGATEPAK01\n` giving the payload's offset.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "launcher.h"

#define TRAILER_LEN 32
#define TRAILER_MAGIC " KGATEPAK01\n"
#define LOADER "lib/ld-linux-x86-64.so.2"
#define MAX_ARGS 512

void die(const char *what, const char *detail)
{
    fprintf(stderr, "execd (kgate): %s%s%s%s%s\n", what, detail != NULL ? ": " : "", detail != NULL ? detail : "",
            errno != 0 ? ": " : "", errno != 0 ? strerror(errno) : "");
    exit(127);
}

/* snprintf that refuses a path too long for its buffer rather than cutting it. */
void fmt(char *buf, size_t size, const char *f, ...)
{
    va_list ap;
    int n;

    va_start(ap, f);
    n = vsnprintf(buf, size, f, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        die("path too long", buf);
    }
}

static int read_line(FILE *fp, char *buf, size_t size)
{
    if (fgets(buf, (int)size, fp) == NULL || strchr(buf, '\n') == NULL)
        return -1;
    *strchr(buf, '\n') = '\0';
    return 0;
}

static void copy_out(FILE *fp, const char *path, unsigned mode, unsigned long long size)
{
    char buf[65536];
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)(mode & 0755));

    if (fd < 0)
        die("cannot create", path);
    while (size != 0) {
        size_t n = size < sizeof(buf) ? (size_t)size : sizeof(buf);
        if (fread(buf, 1, n, fp) != n)
            die("truncated payload at", path);
        for (size_t off = 0; off != n;) {
            ssize_t w = write(fd, buf + off, n - off);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                die("cannot write", path);
            off += (size_t)w;
        }
        size -= n;
    }
    if (close(fd) != 0)
        die("cannot write", path);
}

/* The bash kernelspec, where kgate looks for its own kernels: `<loader's dir>/../share/jupyter/kernels`. */
static void write_kernelspec(const char *tmp, const char *final)
{
    char path[PATH_MAX];
    FILE *fp;

    if (strpbrk(final, "\"\\") != NULL)
        die("directory name unusable in JSON", final);
    fmt(path, sizeof(path), "%s/share/jupyter/kernels/bash/kernel.json", tmp);
    if ((fp = fopen(path, "wx")) == NULL)
        die("cannot create", path);
    fprintf(fp,
            "{\"argv\": [\"%s/" LOADER "\", \"--library-path\", \"%s/lib\", \"%s/bin/kgate-bash-kernel\", \"-f\", "
            "\"{connection_file}\"],\n \"display_name\": \"Bash (kgate)\", \"language\": \"bash\", \"interrupt_mode\": "
            "\"message\",\n \"metadata\": {\"kgate\": {\"transport\": \"ipc\"}}}\n",
            final, final, final);
    if (fclose(fp) != 0)
        die("cannot write", path);
}

static int make_dirs(char *path)
{
    for (char *p = path + 1; *p != '\0'; ++p) {
        if (*p != '/')
            continue;
        *p = '\0';
        int r = mkdir(path, 0755);
        *p = '/';
        if (r != 0 && errno != EEXIST)
            return -1;
    }
    return 0;
}

/* Unpacks into `final` through a private temporary directory renamed into place: a directory that exists is whole. */
static void unpack(FILE *fp, const char *final)
{
    char tmp[PATH_MAX], line[PATH_MAX + 64], rel[PATH_MAX], path[2 * PATH_MAX];
    unsigned mode;
    unsigned long long size;

    fmt(tmp, sizeof(tmp), "%s.tmp-%d", final, (int)getpid());
    if (mkdir(tmp, 0755) != 0)
        die("cannot create", tmp);
    for (;;) {
        if (read_line(fp, line, sizeof(line)) != 0)
            die("truncated payload", NULL);
        if (strcmp(line, "end") == 0)
            break;
        if (sscanf(line, "%4095s %o %llu", rel, &mode, &size) != 3 || rel[0] == '/' || strstr(rel, "..") != NULL)
            die("bad payload entry", line);
        fmt(path, sizeof(path), "%s/%s", tmp, rel);
        if (make_dirs(path) != 0)
            die("cannot create the directory of", path);
        copy_out(fp, path, mode, size);
    }
    fmt(path, sizeof(path), "%s/share/jupyter/kernels/bash/", tmp);
    if (make_dirs(path) != 0)
        die("cannot create", path);
    write_kernelspec(tmp, final);
    if (rename(tmp, final) != 0) {
        /* Another execd unpacked the same payload first: use its copy, leave ours for nobody (it is whole too). */
        if (errno != EEXIST && errno != ENOTEMPTY)
            die("cannot rename into place", final);
        fprintf(stderr, "execd (kgate): %s was unpacked by another process; %s left behind\n", final, tmp);
    }
}

/* Where to unpack: beside the executable if that directory is writable, else under $TMPDIR. */
static void choose_dir(const char *self, const char *id, char *out, size_t size)
{
    char dir[PATH_MAX];
    const char *tmpdir = getenv("TMPDIR");

    fmt(dir, sizeof(dir), "%s", self);
    *strrchr(dir, '/') = '\0';
    fmt(out, size, "%s/.execd-%s", dir[0] != '\0' ? dir : "", id);
    if (access(out, X_OK) == 0 || access(dir[0] != '\0' ? dir : "/", W_OK) == 0)
        return;
    fmt(out, size, "%s/kgate-execd-%u-%s", tmpdir != NULL && tmpdir[0] == '/' ? tmpdir : "/tmp", (unsigned)getuid(), id);
}

pid_t start(const char *path, char *const *args, const sigset_t *old, int search)
{
    pid_t pid = fork();

    if (pid < 0)
        die("cannot fork", NULL);
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, old, NULL);
        if (search)
            execvp(path, args);
        else
            execv(path, args);
        fprintf(stderr, "execd (kgate): cannot execute %s: %s\n", path, strerror(errno));
        _exit(127);
    }
    return pid;
}

int status_of(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* execd's flags (Go's flag package: -x or --x, value after `=` or as the next argument). */
static const char *const execd_dropped[] = {"jupyter-host", "jupyter-token", "jupyter-idle-poll-interval", "isolation-config",
                                            NULL};

static int flag_is(const char *arg, const char *name, const char **value)
{
    size_t n = strlen(name);
    const char *a = arg[0] == '-' && arg[1] == '-' ? arg + 2 : arg[0] == '-' ? arg + 1 : NULL;

    if (a == NULL || strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    *value = NULL;
    return a[n] == '\0';
}

int main(int argc, char **argv)
{
    char self[PATH_MAX], dir[PATH_MAX], line[256], id[128], loader[PATH_MAX + 64], libdir[PATH_MAX + 8], kgate[PATH_MAX + 16],
        listen[64] = "0.0.0.0:44772";
    const char *args[MAX_ARGS], *rest[MAX_ARGS], *token = getenv("EXECD_ACCESS_TOKEN"), *value;
    unsigned long long offset;
    char trailer[TRAILER_LEN + 1];
    ssize_t len;
    FILE *fp;
    size_t n = 0, m = 0;
    int has_listen = 0, init = 0;
    char **entry = NULL;

    errno = 0;
    if ((len = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0)
        die("cannot find itself (/proc/self/exe)", NULL);
    self[len] = '\0';
    if ((fp = fopen(self, "rb")) == NULL || fseek(fp, -TRAILER_LEN, SEEK_END) != 0 ||
        fread(trailer, 1, TRAILER_LEN, fp) != TRAILER_LEN)
        die("cannot read its payload", self);
    trailer[TRAILER_LEN] = '\0';
    if (strcmp(trailer + 20, TRAILER_MAGIC) != 0 || sscanf(trailer, "%20llu", &offset) != 1 ||
        fseek(fp, (long)offset, SEEK_SET) != 0 || read_line(fp, line, sizeof(line)) != 0 ||
        sscanf(line, "kgate-execd %127[0-9a-f]", id) != 1)
        die("no kgate payload in", self);
    choose_dir(self, id, dir, sizeof(dir));
    if (access(dir, X_OK) != 0)
        unpack(fp, dir);
    fclose(fp);

    fmt(loader, sizeof(loader), "%s/" LOADER, dir);
    fmt(libdir, sizeof(libdir), "%s/lib", dir);
    fmt(kgate, sizeof(kgate), "%s/bin/kgate", dir);
    args[n++] = loader;
    args[n++] = "--library-path";
    args[n++] = libdir;
    args[n++] = "--argv0";
    args[n++] = argv[0];
    args[n++] = kgate;
    args[n++] = "--as-execd";
    for (int i = 1; i < argc; ++i) {
        if (n + m + 4 >= MAX_ARGS)
            die("too many arguments", NULL);
        if (strcmp(argv[i], "--init") == 0) {
            init = 1;
            continue;
        }
        if (strcmp(argv[i], "--") == 0 && init) {
            entry = argv + i + 1;
            break;
        }
        if (strcmp(argv[i], "--") == 0) {
            for (; i < argc && n + m + 4 < MAX_ARGS; ++i)
                rest[m++] = argv[i];
            break;
        }
        if (flag_is(argv[i], "port", &value)) {
            if (value == NULL && (value = argv[++i]) == NULL)
                die("--port needs a value", NULL);
            fmt(listen, sizeof(listen), "0.0.0.0:%s", value);
            continue;
        }
        if (flag_is(argv[i], "access-token", &value)) {
            if (value == NULL && (value = argv[++i]) == NULL)
                die("--access-token needs a value", NULL);
            token = value;
            continue;
        }
        size_t k;
        for (k = 0; execd_dropped[k] != NULL && !flag_is(argv[i], execd_dropped[k], &value); ++k)
            ;
        if (execd_dropped[k] != NULL) {
            if (value == NULL && argv[i + 1] != NULL)
                ++i;
            continue;
        }
        if (strncmp(argv[i], "--listen", 8) == 0)
            has_listen = 1;
        rest[m++] = argv[i];
    }
    if (!has_listen) {
        args[n++] = "--listen";
        args[n++] = listen;
    }
    if (token != NULL && token[0] != '\0') {
        args[n++] = "--access-token";
        args[n++] = token;
    } else {
        /* execd serves without a token when given none; the pod's network policy is then the boundary. */
        args[n++] = "--allow-remote-without-token";
    }
    memcpy(args + n, rest, m * sizeof(*rest));
    args[n + m] = NULL;
    if (init) {
        static char status_dir[PATH_MAX], status_file[PATH_MAX + 16];
        const char *tmpdir = getenv("TMPDIR");
        int runtime_init = truthy(getenv("EXECD_RUNTIME_INIT"));
        if (entry == NULL || entry[0] == NULL)
            die("--init needs an entrypoint after --", NULL);
        for (size_t i = 0; i != m; ++i)
            runtime_init |= strcmp(rest[i], "--runtime-init") == 0;
        /* with --runtime-init preStart waits for POST /internal/init: the entrypoint is not held for it */
        if (has_lifecycle() && !runtime_init) {
            fmt(status_dir, sizeof(status_dir), "%s/execd-lifecycle.XXXXXX", tmpdir != NULL && tmpdir[0] == '/' ? tmpdir : "/tmp");
            if (mkdtemp(status_dir) == NULL)
                die("cannot create the lifecycle status directory", status_dir);
            fmt(status_file, sizeof(status_file), "%s/status", status_dir);
            int fd = open(status_file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
            if (fd < 0 || close(fd) != 0)
                die("cannot create", status_file);
            if (n + m + 2 >= MAX_ARGS)
                die("too many arguments", NULL);
            args[n + m] = "--lifecycle-startup-status-file";
            args[n + m + 1] = status_file;
            args[n + m + 2] = NULL;
        }
        /* the pipe on which kgate asks for the entrypoint's restart (POST /internal/init, entrypointPolicy=restart) */
        static char control_arg[16];
        int control[2];
        if (pipe(control) != 0 || fcntl(control[0], F_SETFD, FD_CLOEXEC) != 0 || fcntl(control[0], F_SETFL, O_NONBLOCK) != 0)
            die("cannot create the control pipe", NULL);
        fmt(control_arg, sizeof(control_arg), "%d", control[1]);
        for (n += m; args[n] != NULL; ++n)
            ;
        if (n + 2 >= MAX_ARGS)
            die("too many arguments", NULL);
        args[n++] = "--init-control-fd";
        args[n++] = control_arg;
        args[n] = NULL;
        return run_init(loader, (char *const *)args, entry, status_file[0] != '\0' ? status_file : NULL, control[0], control[1]);
    }
    execv(loader, (char *const *)args);
    die("cannot execute", loader);
}
