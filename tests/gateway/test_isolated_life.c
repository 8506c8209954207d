/* The isolated sessions' life cycle (procs/isolated.h) against a fake bwrap: a shell script written per test, given to
 * gw_isolated_init as the bwrap path, that passes kgate's probe and then behaves as the test needs (starts a bash two
 * processes down as bwrap does, fails with bwrap's kind of message, never starts). Runs where bwrap cannot create
 * namespaces. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <h2o.h>
#include <jansson.h>
#include "core/config.h"
#include "core/host.h"
#include "procs/isolated.h"
#include "procs/proctree.h"
#include "ksys/rmtree.h"
#include "runs/run.h"
#include "support/gateway.h"
#include "support/skip.h"

/* What every fake does first: kgate's probe (its command is /bin/true) and --version succeed. */
#define FAKE_HEAD                                                                                                                  \
    "#!/bin/sh\n"                                                                                                                  \
    "for a; do last=$a; done\n"                                                                                                    \
    "[ \"$last\" = /bin/true ] && exit 0\n"                                                                                        \
    "[ \"$1\" = --version ] && { echo 'bubblewrap 0.0-fake'; exit 0; }\n"
/* As bwrap: the outer process, its child (the sandbox's pid 1), and bash beneath it reading the session's stdin. */
#define FAKE_STARTS FAKE_HEAD "exec 3<&0\n( /bin/bash --noprofile --norc <&3; exit $? ) &\nwait $!\n"
/* Its pid 1 outlives bash (stays until killed). */
#define FAKE_STAYS FAKE_HEAD "exec 3<&0\n( /bin/bash --noprofile --norc <&3; exec sleep 30 ) &\nwait $!\n"
#define FAKE_FAILS FAKE_HEAD "echo \"bwrap: Can't find source path /nope: No such file or directory\" >&2\nexit 1\n"
#define FAKE_NEVER FAKE_HEAD "exec sleep 30\n"

static struct {
    char tmp[512], root[600], runtime[600], ws[700], bwrap[600];
    h2o_loop_t *loop;
    gw_config_t config;
    gw_host_t host;
    gw_runs_t runs;
    gw_isolated_t iso;
    int started, released;
    gw_isolated_session_t *ready;
    char error[600];
    pid_t stray[2]; /* a sandbox kgate could not kill: the test stops it, also when an assertion ended the test early */
} t;

static void setup(void)
{
    const char *base = getenv("TMPDIR") != NULL ? getenv("TMPDIR") : P_tmpdir;

    signal(SIGPIPE, SIG_IGN);
    snprintf(t.tmp, sizeof(t.tmp), "%s/kgate-isolife-XXXXXX", base);
    cr_assert_not_null(mkdtemp(t.tmp));
    snprintf(t.root, sizeof(t.root), "%s/root", t.tmp);
    snprintf(t.runtime, sizeof(t.runtime), "%s/runtime", t.tmp);
    snprintf(t.ws, sizeof(t.ws), "%s/ws", t.root);
    snprintf(t.bwrap, sizeof(t.bwrap), "%s/bwrap", t.tmp);
    cr_assert_eq(mkdir(t.root, 0755), 0);
    cr_assert_eq(mkdir(t.runtime, 0700), 0);
    t.loop = h2o_evloop_create();
    gw_config_init(&t.config);
    gw_host_init(&t.host, t.loop, &t.config);
    gw_runs_init(&t.runs, &t.host);
}

static void teardown(void)
{
    if (geteuid() != 0 || getuid() != 0)
        setresuid(0, 0, 0);
    for (int i = 0; i != 2; ++i)
        if (t.stray[i] > 0)
            kill(t.stray[i], SIGKILL);
    if (t.iso.host != NULL) {
        gw_isolated_destroy_all(&t.iso);
        for (int i = 0; i != 2000 && !gw_isolated_is_drained(&t.iso); ++i)
            h2o_evloop_run(t.loop, 2);
        gw_isolated_dispose(&t.iso);
    }
    gw_runs_dispose(&t.runs);
    gw_host_dispose(&t.host);
    h2o_evloop_destroy(t.loop);
    gw_config_dispose(&t.config);
    ts_remove_tree(t.tmp);
}

TestSuite(isolated_life, .init = setup, .fini = teardown, .timeout = 60);

/* Writes the fake and starts the engine's isolated sessions on it. */
static void use_fake(const char *script)
{
    FILE *f = fopen(t.bwrap, "w");

    cr_assert_not_null(f);
    fputs(script, f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(t.bwrap, 0755), 0);
    gw_isolated_init(&t.iso, &t.host, &t.runs, t.bwrap, t.runtime, t.root);
    cr_assert(t.iso.available, "the fake bwrap is not usable: %s", t.iso.message);
}

static void on_started(gw_isolated_session_t *s, void *data, const char *error)
{
    cr_assert_eq(data, &t);
    ++t.started;
    t.ready = s;
    snprintf(t.error, sizeof(t.error), "%s", error != NULL ? error : "");
}

static void on_released(void *data)
{
    cr_assert_eq(data, &t);
    ++t.released;
}

static gw_isolated_session_t *create(void)
{
    json_t *body = json_pack("{s:{s:s, s:s}}", "workspace", "path", t.ws, "mode", "rw");
    gw_iso_spec_t spec;
    gw_isolated_session_t *s = NULL;
    char err[512];

    cr_assert_eq(gw_iso_spec_parse(body, t.root, t.runtime, 0, &spec, err, sizeof(err)), 0, "%s", err);
    json_decref(body);
    cr_assert_eq(gw_isolated_create(&t.iso, &spec, on_started, &t, &s, err, sizeof(err)), 0, "%s", err);
    cr_assert_not_null(s);
    return s;
}

/* Runs the loop and the tick until `*counter` reaches `want` or `ms` passed. */
static int run_until(int *counter, int want, unsigned ms)
{
    int64_t end = gw_now_ms() + ms;

    while (*counter < want && gw_now_ms() < end) {
        h2o_evloop_run(t.loop, 2);
        gw_isolated_tick(&t.iso);
    }
    return *counter >= want;
}

static int dir_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* Gone and not a zombie of ours: /proc no longer lists it. */
static int pid_absent(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    return !dir_exists(path);
}

static void wait_removals(void)
{
    for (int i = 0; i != 2000 && ksys_rmtree_in_flight() != 0; ++i)
        usleep(1000);
}

Test(isolated_life, a_sandbox_that_starts_is_ready_once)
{
    gw_isolated_session_t *s;

    use_fake(FAKE_STARTS);
    s = create();
    cr_assert_null(gw_isolated_find(&t.iso, s->id), "a starting session is not findable");
    cr_assert(run_until(&t.started, 1, 3000), "the ready callback never came");
    cr_assert_str_empty(t.error);
    cr_assert_eq(t.ready, s);
    cr_assert_eq(gw_isolated_find(&t.iso, s->id), s);
    cr_assert_str_eq(gw_isolated_status(s), "active");
    run_until(&t.started, 2, 100);
    cr_assert_eq(t.started, 1, "the ready callback ran %d times", t.started);
}

Test(isolated_life, a_sandbox_that_fails_reports_its_stderr)
{
    use_fake(FAKE_FAILS);
    create();
    cr_assert(run_until(&t.started, 1, 3000));
    cr_assert_null(t.ready);
    cr_assert_str_eq(t.error, "the sandbox did not start: bwrap: Can't find source path /nope: No such file or directory");
    cr_assert_eq(t.iso.num_sessions, 1, "released from the loop, later");
    h2o_evloop_run(t.loop, 10);
    h2o_evloop_run(t.loop, 10);
    cr_assert_eq(t.iso.num_sessions, 0, "a failed start no longer counts against the bound");
}

Test(isolated_life, a_sandbox_that_never_starts_times_out)
{
    gw_isolated_session_t *s;
    pid_t pid;

    use_fake(FAKE_NEVER);
    t.iso.start_ms = 150;
    s = create();
    pid = s->pid;
    cr_assert(run_until(&t.started, 1, 3000));
    cr_assert_null(t.ready);
    cr_assert_str_eq(t.error, "the sandbox did not start bash within 150 ms");
    for (int i = 0; i != 500 && t.iso.num_sessions != 0; ++i)
        h2o_evloop_run(t.loop, 2);
    cr_assert_eq(t.iso.num_sessions, 0);
    cr_assert(pid_absent(pid), "the sandbox (pid %d) was killed and reaped", (int)pid);
}

Test(isolated_life, a_deleted_sandbox_that_dies_at_once_is_reaped_and_its_directory_removed)
{
    gw_isolated_session_t *s;
    char dir[600];
    pid_t pid, init;

    use_fake(FAKE_STARTS);
    s = create();
    cr_assert(run_until(&t.started, 1, 3000));
    pid = s->pid;
    init = s->init_pid;
    snprintf(dir, sizeof(dir), "%s", s->dir);
    cr_assert(dir_exists(dir));
    gw_isolated_destroy(s, on_released, &t);
    cr_assert_eq(t.released, 0, "the callback runs later, never inside destroy");
    cr_assert(run_until(&t.released, 1, 3000), "the released callback never came");
    cr_assert_eq(gw_reaper_count(&t.iso.reaper), 0);
    wait_removals();
    cr_assert_not(dir_exists(dir), "the session's directory %s is still there", dir);
    cr_assert(pid_absent(pid), "the sandbox (pid %d) stays a zombie", (int)pid);
    cr_assert(gw_proctree_gone(init));
    cr_assert_eq(t.iso.num_sessions, 0);
}

Test(isolated_life, a_client_gone_during_create_gets_no_callback_and_leaves_nothing)
{
    gw_isolated_session_t *s;
    char dir[600];
    pid_t pid;

    use_fake(FAKE_STARTS);
    s = create();
    pid = s->pid;
    snprintf(dir, sizeof(dir), "%s", s->dir);
    gw_isolated_abandon(s);
    for (int i = 0; i != 1500 && t.iso.num_sessions != 0; ++i)
        h2o_evloop_run(t.loop, 2);
    cr_assert_eq(t.iso.num_sessions, 0);
    cr_assert_eq(t.started, 0, "an abandoned create's callback ran");
    wait_removals();
    cr_assert_not(dir_exists(dir));
    cr_assert(pid_absent(pid), "the sandbox (pid %d) stays a zombie", (int)pid);
}

/* A sandbox still there after SIGKILL (kgate's SIGKILL cannot reach it: the test drops the right to signal root's processes
 * while it is deleted, as a process in uninterruptible sleep would ignore it): its session goes after reap_ms, its pid and
 * its directory go to the reaper, which reaps it and removes the directory once it is gone, and not before. */
Test(isolated_life, a_sandbox_that_outlives_sigkill_is_reaped_later_and_its_directory_kept_until_then)
{
    gw_isolated_session_t *s;
    char dir[600];
    pid_t pid, init;

    if (geteuid() != 0)
        cr_skip_test("%s", ts_skip_note(__func__, "needs root: the sandbox outlives SIGKILL by running as another user than "
                                                  "the one sending it"));
    use_fake(FAKE_STAYS);
    t.iso.reap_ms = 50;
    t.iso.reaper.interval_ms = 20;
    s = create();
    cr_assert(run_until(&t.started, 1, 3000));
    pid = s->pid;
    init = s->init_pid;
    t.stray[0] = pid;
    t.stray[1] = init;
    snprintf(dir, sizeof(dir), "%s", s->dir);
    cr_assert_eq(setresuid(65534, 65534, 0), 0, "%s", strerror(errno));
    gw_isolated_destroy(s, on_released, &t);
    cr_assert(run_until(&t.released, 1, 3000), "the session was not released after reap_ms");
    run_until(&t.released, 2, 100); /* a few reaper checks while it still lives */
    cr_assert_eq(setresuid(0, 0, 0), 0, "%s", strerror(errno));
    cr_assert_eq(t.iso.num_sessions, 0, "the session is freed (it no longer counts against the bound)");
    cr_assert_eq(gw_reaper_count(&t.iso.reaper), 1, "the live sandbox was not handed to the reaper");
    wait_removals();
    cr_assert(dir_exists(dir), "the directory of a sandbox still running was removed");
    cr_assert_not(gw_proctree_gone(init));

    /* it dies at last (stopped by the test that started it): reaped, and only now its directory goes */
    kill(init, SIGKILL);
    kill(pid, SIGKILL);
    for (int i = 0; i != 1500 && gw_reaper_count(&t.iso.reaper) != 0; ++i) {
        h2o_evloop_run(t.loop, 2);
        gw_isolated_tick(&t.iso);
    }
    cr_assert_eq(gw_reaper_count(&t.iso.reaper), 0);
    t.stray[0] = t.stray[1] = 0; /* reaped: their pids may be anyone's now */
    cr_assert(pid_absent(pid), "the sandbox (pid %d) stays a zombie of kgate", (int)pid);
    wait_removals();
    cr_assert_not(dir_exists(dir), "the sandbox is gone but its directory %s stays", dir);
}
