/* tests/e2e/test_dropin.c: kgate as OpenSandbox's execd in another image, started as OpenSandbox's runtimes start it. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jserver.h"
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"
#include "support/skip.h"

/*
 * What OpenSandbox's Kubernetes runtime does, without Kubernetes: the user's image is a Debian of another release than
 * this machine's, made by debootstrap (deploy/execd/rootfs.sh, cached: only the first run pays), with python3 and
 * ipykernel and none of kgate's libraries; `execd` and `bootstrap.sh` (deploy/execd/build.sh) are copied into a
 * directory mounted at its /opt/opensandbox (the init container's emptyDir), and the container is bubblewrap over that
 * tree (its own PID namespace; the network is the host's, so the test reaches the port on 127.0.0.1) running
 * `/opt/opensandbox/bootstrap.sh <entrypoint>`. The checks are the OpenSandbox SDK's (tests/e2e/opensandbox_client).
 */

#define CLIENT KGATE_SOURCE_DIR "/tests/e2e/opensandbox_client/checks.mjs"
#define DEFAULT_MODULES_DIR "/usr/local/lib/kgate/opensandbox-client" /* where deploy/deps.sh installs the npm lock */
#define PREPARE_MS 1500000 /* debootstrap (about 8 minutes here, once) and a Release build of kgate (3 minutes, once) */
#define START_MS 60000
#define CLIENT_MS 240000

static char rootfs[PATH_MAX], artifact[PATH_MAX], opt[PATH_MAX], logpath[PATH_MAX + 16], token[33];
static unsigned short port;
static pid_t bwrap = -1;

int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1; /* this binary checks the drop-in, not itself (a failed assertion abandons the test's heap) */
}

/* Runs a script of deploy/execd and returns the last line it printed on stdout in `out`. */
static void run_script(const char *const *argv, const char *const *env, char *out, size_t size)
{
    js_run_t run;

    cr_assert_eq(js_run(argv, env, PREPARE_MS, &run), 0, "cannot run %s: %s", argv[1], run.error);
    int ok = !run.timed_out && WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0;
    if (!ok)
        cr_log_error("%s:\n%s\n%s", argv[1], run.out, run.err);
    cr_assert(ok, "%s failed (timed out: %d)", argv[1], run.timed_out);
    char *end = run.out + strlen(run.out);
    while (end > run.out && end[-1] == '\n')
        *--end = '\0';
    char *last = strrchr(run.out, '\n');
    snprintf(out, size, "%s", last != NULL ? last + 1 : run.out);
    js_run_dispose(&run);
}

static void prepare(void)
{
    char build[PATH_MAX];

    if (geteuid() != 0)
        cr_skip_test("%s", ts_skip_note(__func__, "debootstrap needs root to make the other image"));
    run_script((const char *const[]){"sh", KGATE_SOURCE_DIR "/deploy/execd/rootfs.sh", NULL}, NULL, rootfs, sizeof(rootfs));
    snprintf(build, sizeof(build), "KGATE_EXECD_BUILD=%s/execd", KGATE_BINARY_DIR);
    run_script((const char *const[]){"bash", KGATE_SOURCE_DIR "/deploy/execd/build.sh", NULL},
               (const char *const[]){build, "KGATE_EXECD_MEASURE=0", NULL}, artifact, sizeof(artifact));
    cr_assert(strncmp(artifact, "execd: ", 7) == 0, "build.sh said: %s", artifact);
    memmove(artifact, artifact + 7, strlen(artifact + 7) + 1);
    *strrchr(artifact, '/') = '\0'; /* the output directory */
}

/* The container: bwrap over the image, the emptyDir at /opt/opensandbox holding execd and bootstrap.sh. */
static void start(const char *const *env, int as_pid_1, const char *const *entrypoint)
{
    const char *argv[64];
    char cmd[PATH_MAX * 4], execd_var[64];
    size_t n = 0;

    ts_random_hex(token, sizeof(token));
    cr_assert_eq(ts_free_port(&port), 0);
    snprintf(opt, sizeof(opt), "/tmp/kgate-dropin-XXXXXX");
    cr_assert_not_null(mkdtemp(opt));
    snprintf(cmd, sizeof(cmd), "cp '%s/execd' '%s/bootstrap.sh' '%s/'", artifact, artifact, opt);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(logpath, sizeof(logpath), "%s.log", opt);
    /* upstream's bootstrap.sh runs $EXECD unquoted, so EXECD may carry flags: the port is a free one, not 44772 */
    snprintf(execd_var, sizeof(execd_var), "/opt/opensandbox/execd --port %u", port);
    const char *fixed[] = {"bwrap",
                           "--ro-bind",
                           rootfs,
                           "/",
                           "--bind",
                           opt,
                           "/opt/opensandbox",
                           "--proc",
                           "/proc",
                           "--dev",
                           "/dev",
                           "--tmpfs",
                           "/tmp",
                           "--tmpfs",
                           "/root",
                           "--unshare-pid",
                           "--die-with-parent",
                           "--clearenv",
                           "--setenv",
                           "PATH",
                           "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
                           "--setenv",
                           "HOME",
                           "/root",
                           "--setenv",
                           "EXECD",
                           execd_var,
                           "--setenv",
                           "EXECD_ACCESS_TOKEN",
                           token};
    for (size_t i = 0; i != sizeof(fixed) / sizeof(fixed[0]); ++i)
        argv[n++] = fixed[i];
    if (as_pid_1)
        argv[n++] = "--as-pid-1";
    for (size_t i = 0; env != NULL && env[i] != NULL; i += 2) {
        argv[n++] = "--setenv";
        argv[n++] = env[i];
        argv[n++] = env[i + 1];
    }
    argv[n++] = "/opt/opensandbox/bootstrap.sh";
    for (size_t i = 0; entrypoint[i] != NULL && n < 63; ++i)
        argv[n++] = entrypoint[i];
    argv[n] = NULL;

    int logfd = open(logpath, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert(logfd >= 0);
    pid_t parent = getpid();
    if ((bwrap = fork()) == 0) {
        ts_child_prepare(logfd, parent);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(logfd);
    cr_assert(bwrap > 0);
}

static void dump_log(void)
{
    char cmd[PATH_MAX * 2];
    snprintf(cmd, sizeof(cmd), "tail -c 4000 '%s' >&2", logpath);
    if (system(cmd) != 0)
        cr_log_warn("no log at %s", logpath);
}

/* GET `path` until it answers `status` (or START_MS passes); returns the last status seen. */
static int wait_status(const char *path, int status, char *body, size_t size)
{
    char auth[80];
    int64_t deadline = ts_now_ms() + START_MS;
    int got = 0;

    snprintf(auth, sizeof(auth), "X-EXECD-ACCESS-TOKEN: %s", token);
    while (ts_now_ms() < deadline) {
        ts_response_t r;
        if (ts_http_request(port, "GET", path, (const char *const[]){auth, NULL}, NULL, &r) > 0) {
            got = r.status;
            if (body != NULL)
                snprintf(body, size, "%.*s", (int)r.body_len, r.body != NULL ? r.body : "");
            ts_response_dispose(&r);
            if (got == status)
                return got;
        }
        if (waitpid(bwrap, NULL, WNOHANG) == bwrap) {
            bwrap = -1;
            dump_log();
            cr_assert_fail("the container exited before %s answered %d", path, status);
        }
        usleep(50 * 1000);
    }
    return got;
}

static void fini(void)
{
    char cmd[PATH_MAX * 2 + 32];

    if (bwrap > 0) {
        kill(bwrap, SIGKILL); /* bwrap's PID namespace goes with it: every process of the container */
        waitpid(bwrap, NULL, 0);
        bwrap = -1;
    }
    if (opt[0] != '\0') {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", opt, logpath);
        if (system(cmd) != 0)
            cr_log_warn("cannot remove %s", opt);
        opt[0] = '\0';
    }
}

TestSuite(dropin, .init = prepare, .fini = fini, .timeout = 1800);

/* Runs the SDK's checks against the container; asserts every step reported ok. */
static void run_client(const char *const *extra)
{
    const char *modules = js_modules_dir("KGATE_OSCLIENT_DIR", DEFAULT_MODULES_DIR);
    char url[64];
    const char *argv[16] = {js_node(), CLIENT, "--url", url, "--token", token, "--modules", modules};
    size_t n = 8;
    js_run_t run;

    js_assert_installed(modules, "@alibaba-group/opensandbox", KGATE_SOURCE_DIR "/tests/e2e/opensandbox_client/package-lock.json");
    snprintf(url, sizeof(url), "http://127.0.0.1:%u", port);
    for (size_t i = 0; extra != NULL && extra[i] != NULL; ++i)
        argv[n++] = extra[i];
    argv[n] = NULL;
    cr_assert_eq(js_run(argv, NULL, CLIENT_MS, &run), 0, "cannot run node: %s", run.error);
    int ok = !run.timed_out && WIFEXITED(run.status) && WEXITSTATUS(run.status) == 0;
    if (!ok) {
        cr_log_error("client:\n%s\n%s", run.out, run.err);
        dump_log();
    }
    cr_assert(ok, "the SDK's checks failed:\n%s", run.out);
    cr_assert_not_null(strstr(run.out, "\"step\":\"code_bash\",\"ok\":true"), "%s", run.out);
    js_run_dispose(&run);
}

/* The image is another release than this machine's and has none of kgate's own libraries. */
static void assert_other_image(void)
{
    char path[PATH_MAX + 64], theirs[300] = "", ours[300] = "", line[256];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/etc/os-release", rootfs);
    for (int i = 0; i != 2; ++i) {
        cr_assert_not_null(fp = fopen(i == 0 ? path : "/etc/os-release", "r"));
        while (fgets(line, sizeof(line), fp) != NULL)
            if (strncmp(line, "VERSION_CODENAME=", 17) == 0)
                snprintf(i == 0 ? theirs : ours, sizeof(ours), "%s", line + 17);
        fclose(fp);
    }
    cr_assert(theirs[0] != '\0' && strcmp(theirs, ours) != 0, "the image is %s, this machine %s", theirs, ours);
    static const char *const libs[] = {"libh2o*", "libjansson*", "libwslay*"};
    for (size_t i = 0; i != 3; ++i) {
        glob_t g;
        snprintf(path, sizeof(path), "%s/usr/lib/*/%s", rootfs, libs[i]);
        cr_assert_eq(glob(path, 0, NULL, &g), GLOB_NOMATCH, "the image has %s", libs[i]);
        globfree(&g);
    }
}

/* kgate (the process running bin/kgate) maps libraries only from what execd unpacked. */
static void assert_own_libraries(void)
{
    char path[300], line[PATH_MAX + 128], cmdline[PATH_MAX];
    DIR *proc = opendir("/proc");
    struct dirent *e;
    int found = 0, h2o = 0;

    cr_assert_not_null(proc);
    while ((e = readdir(proc)) != NULL && !found) {
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t n = read(fd, cmdline, sizeof(cmdline) - 1);
        close(fd);
        for (ssize_t i = 0; i < n - 1; ++i)
            if (cmdline[i] == '\0')
                cmdline[i] = ' ';
        if (n <= 0 || strstr((cmdline[n] = '\0', cmdline), "/opt/opensandbox/.execd-") == NULL ||
            strstr(cmdline, "/bin/kgate ") == NULL)
            continue;
        found = 1;
        snprintf(path, sizeof(path), "/proc/%s/maps", e->d_name);
        FILE *fp = fopen(path, "r");
        cr_assert_not_null(fp);
        while (fgets(line, sizeof(line), fp) != NULL) {
            if (strstr(line, ".so") == NULL)
                continue;
            cr_expect_not_null(strstr(line, ".execd-"), "kgate maps a library of the image: %s", line);
            h2o |= strstr(line, "libh2o-evloop") != NULL;
        }
        fclose(fp);
    }
    closedir(proc);
    cr_assert(found, "no kgate process of the container found in /proc");
    cr_assert(h2o, "kgate maps no libh2o-evloop");
}

Test(dropin, sdk_checks_pass_in_another_image)
{
    assert_other_image();
    start(NULL, 0, (const char *const[]){"sleep", "600", NULL});
    cr_assert_eq(wait_status("/ping", 200, NULL, 0), 200, "execd never answered /ping");
    run_client((const char *const[]){"--envs-file", "/opt/opensandbox/.env", NULL});
    assert_own_libraries();
}

/* Zombies whose parent is `pid` (a host PID). */
static int zombies_of(pid_t pid)
{
    char path[300], line[256];
    DIR *proc = opendir("/proc");
    struct dirent *e;
    int count = 0;

    while (proc != NULL && (e = readdir(proc)) != NULL) {
        snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
        FILE *fp = fopen(path, "r");
        int zombie = 0;
        long ppid = -1;
        while (fp != NULL && fgets(line, sizeof(line), fp) != NULL) {
            zombie |= strncmp(line, "State:\tZ", 8) == 0;
            if (strncmp(line, "PPid:", 5) == 0)
                ppid = atol(line + 5);
        }
        if (fp != NULL)
            fclose(fp);
        count += zombie && ppid == pid;
    }
    if (proc != NULL)
        closedir(proc);
    return count;
}

/* The only child of bwrap: with --as-pid-1, the container's PID 1. */
static pid_t child_of(pid_t parent)
{
    char path[300], line[256];
    DIR *proc = opendir("/proc");
    struct dirent *e;
    pid_t found = -1;

    while (proc != NULL && (e = readdir(proc)) != NULL && found < 0) {
        snprintf(path, sizeof(path), "/proc/%s/status", e->d_name);
        FILE *fp = fopen(path, "r");
        while (fp != NULL && fgets(line, sizeof(line), fp) != NULL)
            if (strncmp(line, "PPid:", 5) == 0 && atol(line + 5) == parent)
                found = (pid_t)atol(e->d_name);
        if (fp != NULL)
            fclose(fp);
    }
    if (proc != NULL)
        closedir(proc);
    return found;
}

Test(dropin, init_reaps_orphans_and_passes_the_exit_status)
{
    /* Each `( ... &)` leaves an orphan that PID 1 inherits; they end at once, and only a reaping PID 1 clears them. */
    start((const char *const[]){"EXECD_INIT", "true", NULL}, 1,
          (const char *const[]){"sh", "-c", "for i in 1 2 3 4 5; do (true &); (sleep 0.1 &); done; sleep 4; exit 7", NULL});
    cr_assert_eq(wait_status("/ping", 200, NULL, 0), 200, "execd never answered /ping");
    pid_t init = child_of(bwrap);
    cr_assert(init > 0, "no PID 1 under bwrap");
    usleep(1000 * 1000); /* the orphans (0.1 s at most) are gone by now; a PID 1 that does not reap keeps them as zombies */
    cr_expect_eq(zombies_of(init), 0, "PID 1 (execd --init) leaves zombies");
    int status;
    cr_assert_eq(waitpid(bwrap, &status, 0), bwrap);
    bwrap = -1;
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 7, "the container's exit status is %d, the entrypoint's was 7",
              WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status));
}

/* POST `body` to `path` with `header` (may be NULL); returns the status, the body in `out`. */
static int post(const char *path, const char *header, const char *body, char *out, size_t size)
{
    ts_response_t r;
    const char *headers[] = {"Content-Type: application/json", header, NULL};
    int status = ts_http_request(port, "POST", path, headers, body, &r);
    snprintf(out, size, "%.*s", (int)r.body_len, r.body != NULL ? r.body : "");
    ts_response_dispose(&r);
    return status;
}

static int get(const char *path, const char *header, char *out, size_t size)
{
    ts_response_t r;
    int status = ts_http_request(port, "GET", path, (const char *const[]){header, NULL}, NULL, &r);
    snprintf(out, size, "%.*s", (int)r.body_len, r.body != NULL ? r.body : "");
    ts_response_dispose(&r);
    return status;
}

Test(dropin, runtime_init_closes_the_routes_until_init_then_checks_the_token_hash)
{
    char body[4096], hash[65] = "", cmd[128], auth[80], init[512];
    FILE *fp;

    /* no token at start: the token arrives with the init, as its SHA-256 */
    start((const char *const[]){"EXECD_RUNTIME_INIT", "true", "EXECD_ACCESS_TOKEN", "", NULL}, 0,
          (const char *const[]){"sleep", "600", NULL});
    snprintf(cmd, sizeof(cmd), "printf %%s '%s' | sha256sum", token);
    cr_assert_not_null(fp = popen(cmd, "r"));
    cr_assert_eq(fscanf(fp, "%64s", hash), 1);
    pclose(fp);
    snprintf(auth, sizeof(auth), "X-EXECD-ACCESS-TOKEN: %s", token);
    cr_assert_eq(wait_status("/ping", 200, NULL, 0), 200, "execd never answered /ping");

    cr_assert_eq(get("/ready", NULL, body, sizeof(body)), 503, "%s", body);
    cr_assert_not_null(strstr(body, "\"initialized\": false") ?: strstr(body, "\"initialized\":false"), "%s", body);
    cr_assert_eq(get("/code/contexts", auth, body, sizeof(body)), 503, "%s", body);
    cr_assert_not_null(strstr(body, "NOT_INITIALIZED"), "%s", body);
    cr_assert_eq(post("/internal/init", NULL, "{\"sandboxId\": \"sbx-1\", \"generation\": 0}", body, sizeof(body)), 400, "%s",
                 body);
    cr_assert_eq(post("/internal/init", NULL, "{\"sandboxId\": \"sbx-1\", \"generation\": 1, \"accessTokenHash\": \"sha256:zz\"}",
                      body, sizeof(body)),
                 400, "%s", body);

    snprintf(init, sizeof(init),
             "{\"sandboxId\": \"sbx-1\", \"generation\": 3, \"entrypointPolicy\": \"keep\", \"accessTokenHash\": \"sha256:%s\", "
             "\"envs\": {\"DROPIN_INIT_VAR\": \"set by init\"}}",
             hash);
    cr_assert_eq(post("/internal/init", NULL, init, body, sizeof(body)), 200, "%s", body);
    cr_assert_not_null(strstr(body, "initialized"), "%s", body);
    cr_assert_eq(post("/internal/init", NULL, init, body, sizeof(body)), 409, "%s", body);
    cr_assert_not_null(strstr(body, "ALREADY_INITIALIZED"), "%s", body);
    cr_assert_eq(get("/ready", NULL, body, sizeof(body)), 200, "%s", body);
    cr_assert_not_null(strstr(body, "sbx-1"), "%s", body);

    cr_assert_eq(get("/code/contexts", NULL, body, sizeof(body)), 401, "no token: %s", body);
    cr_assert_eq(get("/code/contexts", "X-EXECD-ACCESS-TOKEN: not-the-token", body, sizeof(body)), 401, "%s", body);
    cr_assert_eq(get("/code/contexts", auth, body, sizeof(body)), 200, "%s", body);
    cr_assert_eq(post("/command", auth, "{\"command\": \"echo \\\"$DROPIN_INIT_VAR\\\"\"}", body, sizeof(body)), 200, "%s", body);
    cr_assert_not_null(strstr(body, "set by init"), "the init's envs do not reach a command: %s", body);
}
