/* tests/e2e/test_pty_limits.c: PTY sessions against a kgate of each test's own: tokens, slow clients and memory, kills, bounds. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pty_asserts.h"
#include "support/gateway.h"

#define TOKEN "s3cret"
#define MIB 1024L

static ts_gateway_t own;

static void fini(void)
{
    ts_gateway_stop(&own, NULL);
}

TestSuite(pty_limits, .fini = fini, .timeout = 180);

/* These binaries check kgate, not themselves (as shared.c says for the other e2e binaries). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void start_own(const char *const *args, const char *const *env)
{
    cr_assert_eq(ts_gateway_start(&own, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .env = env}), 0,
                 "kgate did not start: %s", own.error);
}

static char *create(const char *token)
{
    return pt_create(own.port, token, NULL);
}

static void attach(ptc_t *c, const char *id, const char *query, const char *token)
{
    pt_attach(c, own.port, id, query, token);
}

static void expect_output(ptc_t *c, const char *needle)
{
    pt_expect_output(c, needle, 0);
}

static int get(const char *id)
{
    return pt_request(own.port, "GET", id, NULL);
}

/* Waits until no process that descends from kgate is alive. */
static void expect_no_descendants(void)
{
    ts_proc_t procs[64];
    size_t n = 0;

    for (int64_t end = pt_deadline(); ts_now_ms() < end; usleep(50 * 1000))
        if ((n = ts_descendants(own.pid, procs, 64)) == 0)
            return;
    cr_assert_fail("%zu process(es) of kgate are still alive (first: %d)", n, (int)procs[0].pid);
}

Test(pty_limits, no_token_no_session_and_no_upgrade)
{
    static const char *const args[] = {"--access-token", TOKEN, NULL};
    ts_response_t r;
    char *id;
    ptc_t c;

    start_own(args, NULL);
    ts_http_request(own.port, "POST", "/pty", NULL, "{}", &r);
    E2E_ASSERT_ERROR(&r, 401, "UNAUTHORIZED");
    ts_response_dispose(&r);
    id = create(TOKEN);
    cr_assert_eq(ptc_connect(&c, own.port, id, "", NULL, pt_deadline()), -1);
    cr_assert_eq(c.ws.status, 401, "%s", c.error);
    cr_assert_not_null(strstr(c.body, "UNAUTHORIZED"), "%s", c.body);
    ptc_dispose(&c);
    cr_assert_eq(ptc_connect(&c, own.port, id, "", "wrong", pt_deadline()), -1);
    cr_assert_eq(c.ws.status, 401);
    ptc_dispose(&c);
    attach(&c, id, "", TOKEN);
    ptc_stdin(&c, "echo authorised-$((3*3))\n");
    expect_output(&c, "authorised-9");
    ptc_disconnect(&c);
    ptc_dispose(&c);
    free(id);
}

Test(pty_limits, delete_kills_every_process_of_the_session)
{
    ts_proc_t before[64];
    size_t n = 0;
    char *id;
    ptc_t c;

    start_own(NULL, NULL);
    id = create(NULL);
    attach(&c, id, "", NULL);
    /* background jobs (their own process groups under job control), one deaf to SIGHUP, and a foreground one */
    ptc_stdin(&c, "sleep 1001 & sleep 1002 & (trap '' HUP INT TERM; sleep 1003; true) & echo started-$((2*2)); sleep 1004\n");
    expect_output(&c, "started-4");
    for (int64_t end = pt_deadline(); ts_now_ms() < end && (n = ts_descendants(own.pid, before, 64)) < 6; usleep(50 * 1000))
        ;
    cr_assert_geq(n, 6, "expected bash, a subshell and four sleeps; found %zu processes", n);
    cr_assert_eq(pt_request(own.port, "DELETE", id, NULL), 200);
    /* the client hears why */
    cr_assert_eq(ptc_wait_close(&c, pt_deadline()), 0, "%s", c.error);
    cr_assert_str_eq(json_string_value(json_object_get(ptc_find_text(&c, "error"), "code")) ?: "(none)", "SESSION_GONE");
    pt_expect_dead(before, n, "DELETE");
    cr_assert_eq(get(id), 404);
    ptc_dispose(&c);
    free(id);
}

/* The largest of `peak` and `samples` readings of kgate's RSS, 150 ms apart. */
static long watch_rss(long peak, int samples)
{
    for (int i = 0; i != samples; ++i) {
        long rss = ptc_rss_kib(own.pid);
        if (rss > peak)
            peak = rss;
        usleep(150 * 1000);
    }
    return peak;
}

Test(pty_limits, a_client_that_stops_reading_is_cut_off_and_memory_stays_bounded)
{
    /* AddressSanitizer keeps freed memory in a quarantine (256 MiB by default): keep it small, so
     * that RSS measures what kgate holds rather than what the sanitizer delays reusing */
    char asan[512];
    const char *env[] = {asan, NULL};
    long base, peak = 0, after;
    long long offset_cut, offset_later;
    char *id;
    ptc_t c;

    snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%squarantine_size_mb=8", getenv("ASAN_OPTIONS") ?: "",
             getenv("ASAN_OPTIONS") != NULL ? ":" : "");
    start_own(NULL, env);
    id = create(NULL);
    attach(&c, id, "", NULL);
    ptc_stdin(&c, "echo go-$((5+5))\n");
    expect_output(&c, "go-10");
    base = ptc_rss_kib(own.pid);
    ptc_stdin(&c, "yes 'kgate keeps its memory bounded while nobody reads'\n");
    /* stop reading: the socket buffers fill, then the WebSocket's queue reaches its bound */
    peak = watch_rss(peak, 40);
    offset_cut = (long long)pt_offset(own.port, id);
    peak = watch_rss(peak, 20);
    offset_later = (long long)pt_offset(own.port, id);
    after = ptc_rss_kib(own.pid);
    cr_log_info("kgate RSS: %ld KiB before `yes`, peak %ld KiB while the client did not read, %ld KiB at the end; output offset "
                "%lld then %lld",
                base, peak, after, offset_cut, offset_later);
    fprintf(stderr, "pty slow client: kgate RSS %ld KiB before, peak %ld KiB, end %ld KiB (+%ld KiB); output %lld -> %lld bytes\n",
            base, peak, after, peak - base, offset_cut, offset_later);
    /* the session kept running into its ring while the client was cut off */
    cr_assert_gt(offset_later, offset_cut, "the shell stopped producing output");
    /* bound: 1 MiB ring + 4 MiB queue + the kernel's socket buffers, far below what 9 s of `yes` wrote */
    cr_assert_lt(peak - base, 48 * MIB, "kgate grew by %ld KiB", peak - base);
    cr_assert_gt(offset_later, 16 * MIB * 1024, "`yes` wrote only %lld bytes: the test proves nothing", offset_later);
    /* reading now: whatever the socket still holds, then the end */
    cr_assert_eq(ptc_wait_close(&c, ts_now_ms() + 30000), 0, "the client was never cut off: %s", c.error);
    cr_assert(c.close_code == 0 || c.close_code == 1008, "closed with %u", c.close_code);
    cr_assert_eq(pt_request(own.port, "DELETE", id, NULL), 200);
    expect_no_descendants();
    ptc_dispose(&c);
    free(id);
}

Test(pty_limits, bounded_sessions_ring_and_idle_time)
{
    static const char *const args[] = {"--pty-idle-ms", "2500", "--pty-ring-bytes", "4096", "--max-ptys", "2", NULL};
    int status;
    long long total;
    char *id, *spare;
    ptc_t c;

    start_own(args, NULL);
    id = create(NULL);
    spare = create(NULL);
    cr_assert_null(ptc_create(own.port, NULL, NULL, &status));
    cr_assert_eq(status, 429);

    attach(&c, id, "", NULL);
    ptc_stdin(&c, "seq 1 3000; echo done-$((4+4))\n");
    expect_output(&c, "done-8");
    ptc_disconnect(&c);
    ptc_dispose(&c);
    usleep(200 * 1000);
    total = (long long)pt_offset(own.port, id);
    cr_assert_gt(total, 4096);
    /* older bytes than the ring holds are reported: the replay starts where the ring does */
    attach(&c, id, "?since=0", NULL);
    cr_assert_eq(ptc_pump(&c, pt_deadline()), 0);
    cr_assert_eq(c.replays, 1);
    cr_assert_eq(c.replay_start, (uint64_t)total - 4096, "replay from %llu of %lld", (unsigned long long)c.replay_start, total);
    cr_assert_eq(c.replay.len, 4096);
    cr_assert_not_null(strstr(c.replay.base, "done-8"));
    ptc_disconnect(&c);
    ptc_dispose(&c);

    /* neither a detached shell nor a never-started session outlives the idle time */
    for (int64_t end = pt_deadline(); ts_now_ms() < end && (get(id) != 404 || get(spare) != 404); usleep(100 * 1000))
        ;
    cr_assert_eq(get(id), 404);
    cr_assert_eq(get(spare), 404);
    expect_no_descendants();
    free(id);
    free(spare);
}

/* True when one of `procs` is a sleep leading the foreground process group of its terminal. */
static int foreground_sleep(const ts_proc_t *procs, size_t n)
{
    for (size_t i = 0; i != n; ++i) {
        char path[64], stat[512] = "", *p;
        int pgrp, tpgid;
        FILE *fp;
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)procs[i].pid);
        if ((fp = fopen(path, "r")) == NULL)
            continue;
        if (fgets(stat, sizeof(stat), fp) == NULL)
            stat[0] = '\0';
        fclose(fp);
        /* pid (comm) state ppid pgrp session tty_nr tpgid */
        if (strstr(stat, "(sleep)") != NULL && (p = strrchr(stat, ')')) != NULL &&
            sscanf(p + 1, " %*c %*d %d %*d %*d %d", &pgrp, &tpgid) == 2 && pgrp == tpgid)
            return 1;
    }
    return 0;
}

Test(pty_limits, no_process_outlives_kgate)
{
    ts_proc_t procs[64];
    size_t n = 0, survivors = 99;
    char *id;
    ptc_t c;
    int rc;

    /* SIGTERM: kgate ends every session, background jobs included, before it exits */
    start_own(NULL, NULL);
    id = create(NULL);
    attach(&c, id, "", NULL);
    ptc_stdin(&c, "sleep 1001 & echo bg-$((1+5)); sleep 1002\n");
    expect_output(&c, "bg-6");
    rc = ts_gateway_stop_keep(&own, &survivors);
    cr_assert_eq(rc, 0, "SIGTERM: %s", own.error);
    cr_assert_eq(survivors, 0, "%zu process(es) survived kgate's shutdown", survivors);
    cr_assert(WIFEXITED(own.exit_status) && WEXITSTATUS(own.exit_status) == 0, "wait status %#x", own.exit_status);
    ts_gateway_cleanup(&own);
    ptc_dispose(&c);
    free(id);

    /* SIGKILL: the shell dies with kgate (its parent-death signal), its foreground job with the terminal */
    memset(&own, 0, sizeof(own));
    start_own(NULL, NULL);
    id = create(NULL);
    attach(&c, id, "", NULL);
    ptc_stdin(&c, "echo fg-$((3+4)); sleep 1003\n");
    expect_output(&c, "fg-7");
    /* until sleep is the terminal's foreground job (bash hands the terminal over after forking it) */
    for (int64_t end = pt_deadline(); ts_now_ms() < end && !foreground_sleep(procs, n); usleep(50 * 1000))
        n = ts_descendants(own.pid, procs, 64);
    cr_assert(foreground_sleep(procs, n), "sleep never became the foreground job (%zu processes)", n);
    cr_assert_eq(ts_gateway_signal(&own, SIGKILL), 0);
    cr_assert_eq(ts_gateway_wait(&own, pt_deadline()), 0);
    pt_expect_dead(procs, n, "a SIGKILLed kgate");
    ts_gateway_cleanup(&own);
    ptc_dispose(&c);
    free(id);
}
