/* tests/e2e/test_death.c: what happens to kgate's descendants when kgate is killed with SIGKILL (its watchdog), and at the next
 * start. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "exec_helpers.h"
#include "pty_client.h"
#include "support/api.h"
#include "support/base.h"
#include "support/proc.h"

/* The kernels the build sets up (kgate's bash; Deno's, whose spec `deno jupyter --install` wrote), as test_languages.c finds them.
 */
#define KERNELS_DIR KGATE_BINARY_DIR "/kernels/share/jupyter/kernels"

/* After kgate dies, its descendants must be gone this soon (its children get SIGKILL from the kernel at once, the rest from the
 * watchdog). */
#define DEATH_MS 2000
#define MAX_PROCS 256

/* Processes a test started besides kgate (escapees by design), killed by pid and start time in fini whatever happened. */
static ts_proc_t strays[MAX_PROCS];
static size_t num_strays;

/* As in test_languages.c: this binary checks kgate, and a failed assertion abandons the test's heap. */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void kill_strays(void)
{
    for (size_t i = 0; i != num_strays; ++i)
        if (ts_proc_alive(&strays[i]))
            kill(strays[i].pid, SIGKILL);
    num_strays = 0;
}

static void fini(void)
{
    kill_strays();
    xh_gateways_stop_all();
}

TestSuite(death, .fini = fini, .timeout = 300);

static void add_stray(const ts_proc_t *p)
{
    if (num_strays != MAX_PROCS)
        strays[num_strays++] = *p;
}

/* "<pid> <command line>" of a process, for failure messages. */
static const char *describe(const ts_proc_t *p, char *buf, size_t size)
{
    char path[64];
    size_t n = 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)p->pid);
    n = (size_t)snprintf(buf, size, "%d ", (int)p->pid);
    if ((f = fopen(path, "r")) != NULL) {
        size_t got = fread(buf + n, 1, size - n - 1, f);
        fclose(f);
        for (size_t i = n; i != n + got; ++i)
            if (buf[i] == '\0')
                buf[i] = ' ';
        n += got;
    }
    buf[n] = '\0';
    return buf;
}

/* POST `path` with `body` (stolen, may be NULL); asserts 200 and returns the response JSON (a new reference). */
static json_t *post(unsigned short port, const char *path, json_t *body)
{
    ts_response_t r;
    json_t *out;

    if (body != NULL) {
        ts_post_json(port, path, NULL, body, &r);
        json_decref(body);
    } else {
        ts_http_request(port, "POST", path, NULL, NULL, &r);
    }
    cr_assert_eq(r.status, 200, "POST %s: HTTP %d (%s) %.400s", path, r.status, r.error, r.body);
    out = json_incref(r.json);
    ts_response_dispose(&r);
    return out;
}

/* A context of `language` that has run `code` without error (so its kernel is up). */
static void context_ready(unsigned short port, const char *language, const char *code)
{
    char *id = NULL, sum[E2E_MSG_SIZE];
    ts_events_t evs;

    cr_assert_eq(ts_context_create(port, NULL, language, &id, NULL), 200, "POST /code/context %s", language);
    cr_assert_eq(ts_run_code(port, NULL, id, NULL, code, XH_RUN_MS, &evs, NULL), 200);
    E2E_ASSERT_RUN(&evs, id, E2E_FRAMING_SSE);
    cr_assert_eq(ts_events_count(&evs, "error"), 0, "%s: %s", language, ts_events_summary(&evs, sum, sizeof(sum)));
    ts_events_dispose(&evs);
    free(id);
}

static void kill_9_and_reap(ts_gateway_t *gw)
{
    cr_assert_eq(ts_gateway_signal(gw, SIGKILL), 0);
    cr_assert_eq(ts_gateway_wait(gw, ts_now_ms() + 10000), 0, "kgate was not reaped after SIGKILL");
}

/* kgate's instance token, from its record in its runtime dir (kgate-<token>.instance); asserts there is exactly one. */
static void instance_token(const ts_gateway_t *gw, char *token, size_t size)
{
    DIR *dir = opendir(gw->runtime_dir);
    struct dirent *de;
    int found = 0;

    cr_assert_not_null(dir, "%s: %s", gw->runtime_dir, strerror(errno));
    while ((de = readdir(dir)) != NULL) {
        size_t n = strlen(de->d_name);
        if (n > sizeof("kgate-.instance") - 1 && strncmp(de->d_name, "kgate-", 6) == 0 &&
            strcmp(de->d_name + n - (sizeof(".instance") - 1), ".instance") == 0) {
            snprintf(token, size, "%.*s", (int)(n - (sizeof("kgate-.instance") - 1)), de->d_name + 6);
            ++found;
        }
    }
    closedir(dir);
    cr_assert_eq(found, 1, "%d instance records in %s", found, gw->runtime_dir);
}

/* Every live process whose environment carries "KGATE_INSTANCE=<token>" (read from /proc/<pid>/environ) into `out`; how many. */
static size_t marked(const char *token, ts_proc_t *out, size_t max)
{
    char mark[128], path[64];
    static char env[1 << 20];
    size_t n = 0, mark_len;
    DIR *proc = opendir("/proc");
    struct dirent *de;

    cr_assert_not_null(proc);
    mark_len = (size_t)snprintf(mark, sizeof(mark), "KGATE_INSTANCE=%s", token) + 1; /* with its NUL */
    while ((de = readdir(proc)) != NULL && n != max) {
        int pid = atoi(de->d_name), fd;
        ssize_t len;
        if (pid <= 1)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/environ", pid);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
            continue;
        len = read(fd, env, sizeof(env) - 1);
        close(fd);
        if (len <= 0)
            continue;
        env[len] = '\0';
        for (const char *e = env; e < env + len; e += strlen(e) + 1)
            if ((size_t)(strlen(e) + 1) == mark_len && memcmp(e, mark, mark_len) == 0 && ts_proc_get(pid, &out[n]) == 0) {
                ++n;
                break;
            }
    }
    closedir(proc);
    return n;
}

/* Whether one of `procs` runs a command line that contains `needle` (arguments joined by spaces). */
/*
 * Whether one of `procs` is alive running the command line `cmd` itself ("sleep 308"), not a
 * launcher that mentions it ("setsid sleep 308" lives a moment, forks the real one and exits).
 */
static int running(const ts_proc_t *procs, size_t n, const char *cmd)
{
    char buf[512];
    size_t len = strlen(cmd);

    for (size_t i = 0; i != n; ++i) {
        const char *line = ts_proc_alive(&procs[i]) ? strchr(describe(&procs[i], buf, sizeof(buf)), ' ') : NULL;
        if (line != NULL && strncmp(line + 1, cmd, len) == 0 && (line[1 + len] == ' ' || line[1 + len] == '\0'))
            return 1;
    }
    return 0;
}

static int in_set(const ts_proc_t *p, const ts_proc_t *set, size_t n)
{
    for (size_t i = 0; i != n; ++i)
        if (set[i].pid == p->pid && set[i].starttime == p->starttime)
            return 1;
    return 0;
}

/* Polls until none of `procs` and no process carrying `token` is alive, or `deadline`; how many live (0: all gone). */
static size_t wait_all_gone(const ts_proc_t *procs, size_t n, const char *token, int64_t deadline)
{
    ts_proc_t now[MAX_PROCS];
    size_t alive;

    for (;;) {
        alive = marked(token, now, MAX_PROCS);
        for (size_t i = 0; i != n; ++i)
            alive += (size_t)(ts_proc_alive(&procs[i]) && !in_set(&procs[i], now, alive));
        if (alive == 0 || ts_now_ms() >= deadline)
            return alive;
        ts_sleep_ms(10);
    }
}

/* "\n  <pid> <command line>" for each live one of `procs`, and of those carrying `token`. */
static void list_survivors(const ts_proc_t *procs, size_t n, const char *token, char *out, size_t size)
{
    ts_proc_t now[MAX_PROCS];
    size_t len = 0, m = marked(token, now, MAX_PROCS);
    char buf[512];

    out[0] = '\0';
    for (size_t i = 0; i != n + m && len < size - 600; ++i) {
        const ts_proc_t *p = i < n ? &procs[i] : &now[i - n];
        if (ts_proc_alive(p) && (i < n || !in_set(p, procs, n)))
            len += (size_t)snprintf(out + len, size - len, "\n  %s", describe(p, buf, sizeof(buf)));
    }
}

/* Commands that detach what they start, each its own way: the shell that started them is gone at once. */
static const char *const escapes[] = {
    "sh -c 'sleep 301 > /dev/null 2>&1 &'", /* a double fork */
    "setsid sleep 302 > /dev/null 2>&1 &",  /* a new session */
    "nohup sleep 303 > /dev/null 2>&1 &",   /* deaf to SIGHUP, in the dead shell's group */
    "setsid sh -c 'exec sleep 304 < /dev/null > /dev/null 2>&1 &'",
};

/* The python kernel drops its parent-death signal (prctl PR_SET_PDEATHSIG, 0) and starts a child in a session of its own. */
#define PYTHON_ESCAPE                                                                                                              \
    "import ctypes, subprocess\n"                                                                                                  \
    "ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)\n"                                                                                     \
    "p = subprocess.Popen(['sleep', '305'], start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, "         \
    "stderr=subprocess.DEVNULL)\n"                                                                                                 \
    "print(p.pid)\n"

Test(death, kill_9_takes_every_descendant_along)
{
    static ts_gateway_t gw;
    static const char *const args[] = {"--kernel-path", KERNELS_DIR, NULL};
    static const char *const expected[] = {"sleep 300", "sleep 301", "sleep 302", "sleep 303", "sleep 304",
                                           "sleep 305", "sleep 306", "sleep 307", "sleep 308"};
    char path[1024], token[64], survivors[8192];
    ts_proc_t procs[MAX_PROCS], tree[MAX_PROCS], watchdog;
    size_t n, num_marked, num_descendants, num_detached = 0, alive;
    int64_t deadline, killed_at, gone_at;
    char *pty_id;
    json_t *session;
    ptc_t pty;

    xh_gateway_start(&gw, args);
    instance_token(&gw, token, sizeof(token));
    cr_assert_eq(ts_watchdog_of(gw.pid, &watchdog), 0, "kgate has no watchdog");
    add_stray(&watchdog);
    context_ready(gw.port, "python", PYTHON_ESCAPE);
    context_ready(gw.port, "bash", "echo up");
    snprintf(path, sizeof(path), "%s/deno/kernel.json", KERNELS_DIR);
    cr_assert(access(path, R_OK) == 0, "no %s: deploy/deps.sh installs Deno, then cmake writes its kernelspec", path);
    context_ready(gw.port, "javascript", "1 + 1");
    json_decref(post(gw.port, "/command", json_pack("{s:s, s:b}", "command", "sleep 300", "background", 1)));
    for (size_t i = 0; i != sizeof(escapes) / sizeof(escapes[0]); ++i)
        json_decref(post(gw.port, "/command", json_pack("{s:s, s:b}", "command", escapes[i], "background", 1)));
    session = post(gw.port, "/session", NULL);
    snprintf(path, sizeof(path), "/session/%s/run", xh_str(session, "id"));
    json_decref(session);
    json_decref(post(gw.port, path, json_pack("{s:s}", "command", "sleep 306 > /dev/null 2>&1 &")));
    /* a PTY: a foreground job, and a background one that leaves the terminal's session */
    cr_assert_not_null(pty_id = ptc_create(gw.port, NULL, NULL, &(int){0}), "POST /pty failed");
    cr_assert_eq(ptc_connect(&pty, gw.port, pty_id, "", NULL, ts_now_ms() + 15000), 0, "PTY: %s %s", pty.error, pty.body);
    ptc_stdin(&pty, "setsid sleep 308 > /dev/null 2>&1 & echo pty-$((6*7)); sleep 307\n");
    cr_assert_eq(ptc_wait_output(&pty, "pty-42", 0, ts_now_ms() + 15000), 0, "PTY: %s", pty.error);

    /* every one of them started, and is found by kgate's mark */
    deadline = ts_now_ms() + 15000;
    do {
        num_marked = marked(token, procs, MAX_PROCS);
        alive = 0;
        for (size_t i = 0; i != sizeof(expected) / sizeof(expected[0]); ++i)
            alive += (size_t)running(procs, num_marked, expected[i]);
    } while (alive != sizeof(expected) / sizeof(expected[0]) && ts_now_ms() < deadline && (ts_sleep_ms(50), 1));
    for (size_t i = 0; i != sizeof(expected) / sizeof(expected[0]); ++i)
        cr_assert(running(procs, num_marked, expected[i]), "no process carrying kgate's mark runs \"%s\"", expected[i]);
    /* and the pids recorded as kgate's descendants; some of the marked are not among them: they left kgate's tree */
    num_descendants = ts_descendants(gw.pid, tree, MAX_PROCS);
    cr_assert_geq(num_descendants, 9u, "only %zu descendants before the kill", num_descendants);
    n = num_marked;
    for (size_t i = 0; i != num_marked; ++i)
        num_detached += (size_t)!in_set(&procs[i], tree, num_descendants);
    for (size_t i = 0; i != num_descendants && n != MAX_PROCS - 1; ++i)
        if (!in_set(&tree[i], procs, num_marked))
            procs[n++] = tree[i];
    cr_assert_geq(num_detached, 4u, "only %zu marked processes have left kgate's tree: the test proves little", num_detached);
    procs[n++] = watchdog;
    for (size_t i = 0; i != n; ++i)
        add_stray(&procs[i]);

    killed_at = ts_now_ms();
    kill_9_and_reap(&gw);
    alive = wait_all_gone(procs, n, token, killed_at + DEATH_MS);
    gone_at = ts_now_ms();
    list_survivors(procs, n, token, survivors, sizeof(survivors));
    cr_assert_eq(alive, 0, "%zu of %zu processes outlived kgate's SIGKILL by %d ms:%s", alive, n, DEATH_MS, survivors);
    cr_log_info("%zu processes (%zu marked, %zu of them out of kgate's tree, and the watchdog) gone %d ms after kgate's SIGKILL", n,
                num_marked, num_detached, (int)(gone_at - killed_at));
    ptc_dispose(&pty);
    free(pty_id);
    ts_gateway_cleanup(&gw);
    xh_gateway_stop(&gw);
}

/* The fallback when the watchdog cannot act (killed first: any process of kgate's user may do that): the next start sweeps. */
Test(death, the_next_kgate_on_the_runtime_dir_kills_what_escaped)
{
    static ts_gateway_t first, second;
    char pidfile[400], command[1400], log[1 << 14];
    ts_proc_t escapee = {0, 0}, watchdog;
    int64_t deadline, started;
    const char *args[] = {"--runtime-dir", NULL, NULL};
    FILE *f;

    xh_gateway_start(&first, NULL);
    /* a double fork: a new session, and a parent (the command's shell) that is gone at once */
    snprintf(pidfile, sizeof(pidfile), "%s/escapee.pid", first.tmpdir);
    snprintf(command, sizeof(command), "setsid sh -c 'echo $$ > %s.tmp && mv %s.tmp %s && exec sleep 300' > /dev/null 2>&1 &",
             pidfile, pidfile, pidfile);
    json_decref(post(first.port, "/command", json_pack("{s:s, s:b}", "command", command, "background", 1)));
    deadline = ts_now_ms() + 10000;
    while (escapee.pid == 0 && ts_now_ms() < deadline) {
        int pid = 0;
        if ((f = fopen(pidfile, "r")) != NULL) {
            if (fscanf(f, "%d", &pid) == 1 && pid > 1)
                cr_assert_eq(ts_proc_get(pid, &escapee), 0, "the double-forked process (pid %d) is already gone", pid);
            fclose(f);
        }
        if (escapee.pid == 0)
            ts_sleep_ms(20);
    }
    cr_assert_neq(escapee.pid, 0, "the double-forked process never wrote %s", pidfile);
    add_stray(&escapee);

    cr_assert_eq(ts_watchdog_of(first.pid, &watchdog), 0, "kgate has no watchdog");
    add_stray(&watchdog);
    cr_assert_eq(kill(watchdog.pid, SIGKILL), 0);
    kill_9_and_reap(&first);
    ts_sleep_ms(500);
    cr_assert(!ts_proc_alive(&watchdog), "the watchdog survived SIGKILL");
    cr_assert(ts_proc_alive(&escapee), "the escapee died with kgate: the test proves nothing (its parent-death signal reached it)");

    args[1] = first.runtime_dir;
    xh_gateway_start(&second, args);
    started = ts_now_ms();
    while (ts_proc_alive(&escapee) && ts_now_ms() < started + DEATH_MS)
        ts_sleep_ms(20);
    cr_assert(!ts_proc_alive(&escapee), "the escapee (pid %d) outlived the start of a kgate on the same runtime dir by %d ms",
              (int)escapee.pid, DEATH_MS);
    if ((f = fopen(second.log_path, "r")) != NULL) {
        log[fread(log, 1, sizeof(log) - 1, f)] = '\0';
        fclose(f);
        cr_expect(strstr(log, "killed 1 process(es) left running by an earlier kgate") != NULL, "kgate's log: %s", log);
    }
    xh_gateway_stop(&second);
    ts_gateway_cleanup(&first);
    xh_gateway_stop(&first);
}
