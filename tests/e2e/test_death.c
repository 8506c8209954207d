/* tests/e2e/test_death.c: what happens to kgate's children when kgate is killed with SIGKILL, and at the next start. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"
#include "exec_helpers.h"
#include "support/api.h"
#include "support/base.h"
#include "support/proc.h"

/* kgate's own kernels (bash; tslab's javascript when deploy/deps.sh installed it), as test_languages.c finds them. */
#define KERNELS_DIR KGATE_BINARY_DIR "/kernels/share/jupyter/kernels"

/* After kgate dies, its children must be gone this soon (they get SIGKILL from the kernel at once). */
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

Test(death, kill_9_takes_every_child_along)
{
    static ts_gateway_t gw;
    static const char *const args[] = {"--kernel-path", KERNELS_DIR, NULL};
    char path[1024], buf[512], survivors[4096] = "";
    ts_proc_t procs[MAX_PROCS];
    size_t n, alive = 0, len = 0;
    int with_js;
    json_t *session;

    xh_gateway_start(&gw, args);
    context_ready(gw.port, "python", "1 + 1");
    context_ready(gw.port, "bash", "echo up");
    snprintf(path, sizeof(path), "%s/javascript/kernel.json", KERNELS_DIR);
    if ((with_js = access(path, R_OK) == 0))
        context_ready(gw.port, "javascript", "1 + 1");
    else
        cr_log_warn("no javascript kernelspec in %s (tslab is not installed): no JS context in this test", KERNELS_DIR);
    json_decref(post(gw.port, "/command", json_pack("{s:s, s:b}", "command", "sleep 300", "background", 1)));
    session = post(gw.port, "/session", NULL);
    snprintf(path, sizeof(path), "/session/%s/run", xh_str(session, "id"));
    json_decref(session);
    json_decref(post(gw.port, path, json_pack("{s:s}", "command", "echo up")));

    /* python; bash kernel + bash twice (context, session); the command's sleep (bash -c execs it); node */
    n = ts_descendants(gw.pid, procs, MAX_PROCS);
    for (size_t i = 0; i != n; ++i)
        add_stray(&procs[i]);
    cr_assert_geq(n, with_js ? 7u : 6u, "only %zu descendants before the kill", n);
    kill_9_and_reap(&gw);
    int64_t deadline = ts_now_ms() + DEATH_MS;
    do {
        ts_sleep_ms(20);
        alive = 0;
        for (size_t i = 0; i != n; ++i)
            alive += (size_t)ts_proc_alive(&procs[i]);
    } while (alive != 0 && ts_now_ms() < deadline);
    for (size_t i = 0; i != n && len < sizeof(survivors) - 600; ++i)
        if (ts_proc_alive(&procs[i]))
            len += (size_t)snprintf(survivors + len, sizeof(survivors) - len, "\n  %s", describe(&procs[i], buf, sizeof(buf)));
    cr_assert_eq(alive, 0, "%zu of %zu descendants outlived kgate's SIGKILL by %d ms:%s", alive, n, DEATH_MS, survivors);
    ts_gateway_cleanup(&gw);
    xh_gateway_stop(&gw);
}

Test(death, the_next_kgate_on_the_runtime_dir_kills_what_escaped)
{
    static ts_gateway_t first, second;
    char pidfile[400], command[1400], log[1 << 14];
    ts_proc_t escapee = {0, 0};
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

    kill_9_and_reap(&first);
    ts_sleep_ms(500);
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
