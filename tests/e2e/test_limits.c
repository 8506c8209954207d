/* tests/e2e/test_limits.c: output and result bounds, the message cap, the bounded run log (slow readers, EVENTS_GONE), queue and
 * request bounds. Over 600 lines on purpose: every bound of one run's path, sharing one set of gateway fixtures and readers. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "exec_helpers.h"
#include "shared.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/stream.h"

static void fini(void)
{
    xh_gateways_stop_all();
    e2e_shared_cleanup();
}

TestSuite(limits, .fini = fini, .timeout = 400);

static unsigned short port(void)
{
    return e2e_shared()->port;
}

/* 50 MB of stdout: 500,000 lines of 100 bytes ("%08d", 91 'y', newline), written 1 MB at a time. */
#define BIG_LINES 500000
#define BIG_LINE_LEN 100
#define BIG_BYTES ((size_t)BIG_LINES * BIG_LINE_LEN)
static const char big_code[] =
    "import sys\n"
    "for k in range(50):\n"
    "    sys.stdout.write(''.join('%08d%s\\n' % (i, 'y' * 91) for i in range(k * 10000, (k + 1) * 10000)))\n";

/* `text` is the first `len` bytes of the big output; returns the offset of the first difference, or len. */
static size_t big_mismatch(const char *text, size_t len)
{
    char line[BIG_LINE_LEN + 1];
    memset(line + 8, 'y', 91);
    line[BIG_LINE_LEN - 1] = '\n';
    for (size_t off = 0; off < len; off += BIG_LINE_LEN) {
        char num[24];
        snprintf(num, sizeof(num), "%08zu", off / BIG_LINE_LEN);
        memcpy(line, num, 8);
        size_t n = len - off < BIG_LINE_LEN ? len - off : BIG_LINE_LEN;
        for (size_t i = 0; i < n; i++)
            if (text[off + i] != line[i])
                return off + i;
    }
    return len;
}

static json_t *big_body(const char *ctx, long long output_limit)
{
    json_t *body = xh_body(ctx, big_code);
    json_object_set_new(body, "output_limit", json_integer(output_limit));
    return body;
}

Test(limits, fifty_megabytes_arrive_whole_under_the_limit)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = big_body(ctx, 60000000);
    ts_events_t evs;
    int64_t t0 = ts_now_ms();
    xh_run(port(), body, t0 + XH_BIG_RUN_MS, &evs);
    json_decref(body);
    cr_log_info("50 MB print: %lld ms, %zu events", (long long)(evs.end_ms - t0), evs.n);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    char sum[E2E_MSG_SIZE];
    cr_assert_eq(ts_events_count(&evs, "error"), 0, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    cr_assert_eq(xh_status_count(&evs, "output_truncated"), 0, "50 MB under a 60 MB limit was truncated");
    char *out = ts_events_text(&evs, "stdout");
    size_t len = strlen(out);
    cr_assert_eq(len, BIG_BYTES, "stdout holds %zu bytes, expected exactly %zu", len, BIG_BYTES);
    size_t bad = big_mismatch(out, len);
    cr_assert_eq(bad, len, "stdout differs from the printed pattern at byte %zu (line %zu): '%.40s'", bad, bad / BIG_LINE_LEN,
                 out + (bad > 20 ? bad - 20 : 0));
    json_t *done = evs.v[evs.n - 1].json;
    cr_assert_null(json_object_get(done, "dropped"), "execution_complete reports drops: %s", evs.v[evs.n - 1].data);
    free(out);
    ts_events_dispose(&evs);
    free(ctx);
}

Test(limits, fifty_megabytes_over_a_one_megabyte_limit_are_cut_and_reported)
{
    enum { LIMIT = 1 << 20 };
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = big_body(ctx, LIMIT);
    ts_events_t evs;
    xh_run(port(), body, ts_now_ms() + XH_BIG_RUN_MS, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    char sum[E2E_MSG_SIZE];
    cr_assert_eq(xh_status_count(&evs, "output_truncated"), 1, "expected exactly one status output_truncated; %s",
                 ts_events_summary(&evs, sum, sizeof(sum)));
    char *out = ts_events_text(&evs, "stdout");
    size_t len = strlen(out);
    cr_assert_eq(len, (size_t)LIMIT, "kept %zu bytes of stdout under output_limit %d", len, LIMIT);
    cr_assert_eq(big_mismatch(out, len), len, "the kept output is not the start of what was printed");
    free(out);
    json_t *dropped = json_object_get(evs.v[evs.n - 1].json, "dropped");
    cr_assert_eq(xh_int(dropped, "output_bytes"), (long long)(BIG_BYTES - LIMIT), "execution_complete: %s", evs.v[evs.n - 1].data);
    cr_assert_eq(xh_int(dropped, "results"), 0, "execution_complete: %s", evs.v[evs.n - 1].data);
    json_t *ex = xh_execution(port(), xh_execution_id(&evs));
    dropped = json_object_get(ex, "dropped");
    cr_assert_eq(xh_int(dropped, "output_bytes"), (long long)(BIG_BYTES - LIMIT), "GET execution: dropped.output_bytes");
    json_decref(ex);
    ts_events_dispose(&evs);

    /* The context is fine afterwards. */
    xh_run_ok(port(), ctx, "print('after')", &evs);
    E2E_ASSERT_TEXT(&evs, "stdout", "after\n");
    ts_events_dispose(&evs);
    free(ctx);
}

Test(limits, results_over_the_result_limit_are_dropped_and_reported)
{
    char *ctx = xh_context_new(port(), NULL, NULL);
    json_t *body = xh_body(
        ctx, "from IPython.display import display, HTML\ndisplay(HTML('<p>' + 'x' * 5000 + '</p>'))\nprint('printed')\n'small'");
    json_object_set_new(body, "result_limit", json_integer(1000));
    ts_events_t evs;
    xh_run(port(), body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    char sum[E2E_MSG_SIZE];
    cr_assert_null(e2e_find_result(&evs, "text/html"), "a 5 kB result passed a 1000-byte result_limit; %s",
                   ts_events_summary(&evs, sum, sizeof(sum)));
    const ts_event_t *small = e2e_find_result(&evs, "text/plain");
    cr_assert_not_null(small, "the small result was dropped too; %s", ts_events_summary(&evs, sum, sizeof(sum)));
    E2E_ASSERT_TEXT(&evs, "stdout", "printed\n");
    cr_assert_eq(xh_status_count(&evs, "output_truncated"), 1);
    json_t *dropped = json_object_get(evs.v[evs.n - 1].json, "dropped");
    cr_assert(xh_int(dropped, "results") == 1 && xh_int(dropped, "output_bytes") == 0, "execution_complete: %s",
              evs.v[evs.n - 1].data);
    ts_events_dispose(&evs);
    free(ctx);
}

/* ---- the slow reader ------------------------------------------------------------------------- */

/* 1 while kgate's end of the connection 127.0.0.1:server_port <-> 127.0.0.1:client_port is ESTABLISHED. */
static int server_side_established(unsigned short server_port, unsigned short client_port)
{
    FILE *f = fopen("/proc/net/tcp", "r");
    if (f == NULL)
        return -1;
    char line[512];
    int found = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned local_port, remote_port, state;
        if (sscanf(line, " %*d: %*8x:%x %*8x:%x %x", &local_port, &remote_port, &state) != 3)
            continue;
        if (local_port == server_port && remote_port == client_port && state == 1)
            found = 1;
    }
    fclose(f);
    return found;
}

enum { LOG_BYTES = 8 << 20 };
static ts_gateway_t slow_gw;

/*
 * Posts a print of `chunks` x 256 KiB (a flush each, then a pause of `pause_s` seconds) to a kgate with an 8 MiB run
 * log, from a client that reads the response head and init and then nothing more, and samples kgate's RSS until the
 * run finishes. Asserts the RSS bound, and that kgate cut the reader off.
 */
static void stuck_reader(int chunks, double pause_s)
{
    ts_gateway_t *gw = &slow_gw;
    char log_arg[32];
    snprintf(log_arg, sizeof(log_arg), "%d", LOG_BYTES);
    const char *args[] = {"--max-run-log-bytes", log_arg, NULL};
    xh_gateway_start(gw, args);
    char *ctx = xh_context_new(gw->port, NULL, NULL);

    /* Warm-up: the same path with a reader that keeps up, so that the baseline includes the allocator's working set. */
    ts_events_t evs;
    json_t *body =
        xh_body(ctx, "import sys\nfor _ in range(16):\n    sys.stdout.write(('w' * 1023 + '\\n') * 256); sys.stdout.flush()");
    xh_run(gw->port, body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    ts_events_dispose(&evs);
    ts_sleep_ms(200);
    long long baseline = xh_rss_bytes(gw->pid);
    cr_assert(baseline > 0);

    /* 256 KiB flushes: no single event is larger than a fraction of the log bound. */
    char code[512];
    char pause[64] = "";
    if (pause_s > 0)
        snprintf(pause, sizeof(pause), "; time.sleep(%.3f)", pause_s);
    snprintf(code, sizeof(code),
             "import sys, time\ntime.sleep(0.5)\nchunk = ('z' * 1023 + '\\n') * 256\n"
             "for _ in range(%d):\n    sys.stdout.write(chunk); sys.stdout.flush()%s\n",
             chunks, pause);
    body = xh_body(ctx, code);
    json_object_set_new(body, "output_limit", json_integer((long long)chunks << 19));
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);

    /* A client with a tiny receive buffer that reads the head and init, then nothing more. */
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(fd >= 0);
    int rcvbuf = 4096;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = htons(gw->port)};
    cr_assert_eq(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0, "connect: %s", strerror(errno));
    struct sockaddr_in mine;
    socklen_t mine_len = sizeof(mine);
    getsockname(fd, (struct sockaddr *)&mine, &mine_len);
    unsigned short client_port = ntohs(mine.sin_port);
    char req[8192];
    int req_len =
        snprintf(req, sizeof(req),
                 "POST /code HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                 strlen(text), text);
    free(text);
    cr_assert(req_len > 0 && (size_t)req_len < sizeof(req));
    cr_assert_eq(send(fd, req, (size_t)req_len, MSG_NOSIGNAL), req_len);
    char head[4096];
    size_t head_len = 0;
    const char *idp = NULL;
    int64_t deadline = ts_now_ms() + XH_HEAD_MS;
    while ((idp = strstr(head, "\"execution_id\":\"")) == NULL || strchr(idp + 16, '"') == NULL) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int64_t left = deadline - ts_now_ms();
        cr_assert(left > 0 && head_len + 1 < sizeof(head), "no init event in the first %zu bytes: %.*s", head_len, (int)head_len,
                  head);
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        /* byte by byte: read nothing past init */
        ssize_t n = recv(fd, head + head_len, 1, 0);
        cr_assert(n == 1, "the connection ended before init");
        head[++head_len] = '\0';
    }
    char exec_id[64];
    snprintf(exec_id, sizeof(exec_id), "%.36s", idp + 16);

    /*
     * The bound. What kgate may legitimately hold for this run: its log (--max-run-log-bytes, 8 MiB of frames, plus the
     * newest event beyond it, one 256 KiB flush); the event in flight, which exists at most three times at once (ZMQ
     * message, parsed JSON, rendered frame: under 1 MiB); and what the stuck reader pins: one batch of frames
     * (--max-reader-batch-bytes, 1 MiB) and h2o's copy of its unsent part (another 1 MiB). That is about 11 MiB over the
     * baseline. The bound allows 3x the log bound plus 32 MiB for allocator fragmentation and ASan's shadow and metadata
     * (kgate runs with quarantine_size_mb=0, so freed blocks do not stay resident), yet it is far below the 128-200 MiB that
     * keeping the output for the reader would cost.
     */
    long long bound = baseline + 3ll * LOG_BYTES + (32ll << 20);
    long long peak = baseline;
    int64_t t0 = ts_now_ms(), run_deadline = t0 + XH_BIG_RUN_MS;
    json_t *ex = NULL;
    for (;;) {
        long long rss = xh_rss_bytes(gw->pid);
        if (rss > peak)
            peak = rss;
        ex = xh_execution(gw->port, exec_id);
        if (strcmp(xh_str(ex, "state"), "finished") == 0)
            break;
        cr_assert(ts_now_ms() < run_deadline, "the %d MiB run did not finish in %d ms (peak RSS %lld MiB over baseline)",
                  chunks / 4, XH_BIG_RUN_MS, (peak - baseline) >> 20);
        json_decref(ex);
        ts_sleep_ms(50);
    }
    int64_t run_ms = ts_now_ms() - t0;
    char *dump = json_dumps(ex, JSON_COMPACT);
    json_decref(ex);
    cr_log_info("stuck reader, %d x 256 KiB, pause %.3f s: run %lld ms, baseline RSS %lld MiB, peak %lld MiB, bound %lld MiB; %s",
                chunks, pause_s, (long long)run_ms, baseline >> 20, peak >> 20, bound >> 20, dump);
    cr_assert(peak <= bound,
              "kgate's RSS peaked at %lld MiB with a reader that stopped reading: baseline %lld MiB + %lld MiB, bound %lld MiB "
              "(--max-run-log-bytes %d MiB); execution: %s",
              peak >> 20, baseline >> 20, (peak - baseline) >> 20, bound >> 20, LOG_BYTES >> 20, dump);
    free(dump);

    /* The slow reader was cut off: kgate's end of the connection is closed (it stays closed after the run, too). */
    int64_t cut_deadline = ts_now_ms() + 10000;
    int established;
    while ((established = server_side_established(gw->port, client_port)) == 1 && ts_now_ms() < cut_deadline)
        ts_sleep_ms(50);
    cr_assert_eq(established, 0,
                 "10 s after the run finished, kgate still holds the connection of the reader that stopped reading "
                 "(it fell about %d MiB behind a log of %d MiB)",
                 chunks / 4 - (LOG_BYTES >> 20), LOG_BYTES >> 20);

    /* What the client can still read ends without execution_complete. */
    size_t total = head_len;
    char tail[256] = "";
    char buf[65536];
    int64_t drain_deadline = ts_now_ms() + 30000;
    for (;;) {
        struct pollfd pfd = {fd, POLLIN, 0};
        int64_t left = drain_deadline - ts_now_ms();
        cr_assert(left > 0, "draining the cut-off connection did not reach its end (%zu bytes read)", total);
        if (poll(&pfd, 1, (int)left) <= 0)
            continue;
        ssize_t n = recv(fd, buf, sizeof(buf), 0);
        if (n <= 0)
            break;
        total += (size_t)n;
        size_t keep = (size_t)n < sizeof(tail) - 1 ? (size_t)n : sizeof(tail) - 1;
        memcpy(tail, buf + n - keep, keep);
        tail[keep] = '\0';
    }
    close(fd);
    cr_assert(total < ((size_t)chunks << 18), "the cut-off reader still received %zu bytes", total);
    cr_assert_null(strstr(tail, "execution_complete"), "the cut-off reader received the end of the run: %s", tail);
    free(ctx);
    xh_gateway_stop(gw);
}

/* The reader alone: the kernel writes 128 MiB slower than kgate relays it, so any growth is what the stuck reader costs. */
Test(limits, a_reader_that_stops_reading_does_not_grow_kgate, .timeout = 600)
{
    stuck_reader(512, 0.04);
}

/*
 * The case: 200 MiB printed as fast as the kernel can (about 100 MB/s), with the reader stuck. Beyond the reader,
 * this bounds what kgate holds of output it has not yet processed.
 */
Test(limits, a_200mb_print_to_a_reader_that_stops_reading_does_not_grow_kgate, .timeout = 600)
{
    stuck_reader(800, 0);
}

/*
 * A reader that keeps up gets every byte, also when the run's output is many times the log bound. The kernel is paced
 * (about 5 MB/s) well below what this test's own reader parses under AddressSanitizer, also on a machine busy with
 * other work (at 25 MB/s and load 15 the reader once fell 8 MiB behind, at 12 MB/s and load 8 about every other run):
 * a reader slower than the output is disconnected at the log bound by design (the stuck-reader tests), and that is not
 * what this test is about.
 */
Test(limits, a_reader_that_keeps_up_gets_every_byte_through_a_small_log, .timeout = 600)
{
    ts_gateway_t *gw = &slow_gw;
    char log_arg[32];
    snprintf(log_arg, sizeof(log_arg), "%d", LOG_BYTES);
    const char *args[] = {"--max-run-log-bytes", log_arg, NULL};
    xh_gateway_start(gw, args);
    char *ctx = xh_context_new(gw->port, NULL, NULL);
    json_t *body = xh_body(ctx, "import sys, time\nchunk = ('k' * 1023 + '\\n') * 256\n"
                                "for _ in range(128):\n    sys.stdout.write(chunk); sys.stdout.flush(); time.sleep(0.05)\n");
    json_object_set_new(body, "output_limit", json_integer(128ll << 20));
    ts_events_t evs;
    int64_t t0 = ts_now_ms();
    xh_run(gw->port, body, t0 + XH_BIG_RUN_MS, &evs);
    json_decref(body);
    cr_log_info("32 MiB through an 8 MiB log to a reader that keeps up: %lld ms, %zu events", (long long)(evs.end_ms - t0), evs.n);
    char *out = ts_events_text(&evs, "stdout");
    size_t len = strlen(out);
    cr_assert(evs.ended && evs.n > 0 && strcmp(evs.v[evs.n - 1].type, "execution_complete") == 0,
              "kgate cut off a reader that reads as fast as it can after %zu of %zu bytes of stdout (%zu events; %s%s)", len,
              (size_t)32 << 20, evs.n, evs.error[0] != '\0' ? "read error: " : "no execution_complete", evs.error);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    cr_assert_eq(len, (size_t)32 << 20, "the reader received %zu bytes of stdout, expected %zu", len, (size_t)32 << 20);
    free(out);
    ts_events_dispose(&evs);
    free(ctx);
    xh_gateway_stop(gw);
}

/* 1 if kgate's log (stdout and stderr) holds `needle`. */
static int log_contains(const ts_gateway_t *gw, const char *needle)
{
    FILE *f = fopen(gw->log_path, "r");
    char line[1024];
    int found = 0;
    if (f == NULL)
        return 0;
    while (!found && fgets(line, sizeof(line), f) != NULL)
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

/*
 * One kernel message over --max-message-bytes (64 MiB): a 70 MB line of stdout is one iopub message. kgate never holds it
 * whole (with libzmq, which dropped the connection for good, every later run of the context once lost its output and
 * waited 5 s for a status idle that never came): it reads it in pieces, verifies its signature over all of them, and the
 * run gets the head of its text up to the cap with the exact count of the rest. The context works at once.
 */
Test(limits, a_message_over_the_cap_is_reported_and_the_context_works_on, .timeout = 600)
{
    /* the head: the cap less 64 KiB kept for the message's other frames (kernelmgr/src/overcap.h) */
    /* the head: what one event of the run's log carries (--max-run-log-bytes, 64 MiB, less the 64 KiB kept for the run's
     * last events, less the 256 bytes of its stream event's framing: gateway/runs/limits.c), under the cap less 64 KiB */
    enum { PRINTED = 70000000 + 1, HEAD = (64 << 20) - (64 << 10) - 256 };
    static ts_gateway_t gw;
    xh_gateway_start(&gw, NULL);
    char *ctx = xh_context_new(gw.port, NULL, NULL);
    ts_events_t evs;
    xh_run_ok(gw.port, ctx, "print('warm')", &evs);
    ts_events_dispose(&evs);
    ts_sleep_ms(200);
    long long baseline = xh_rss_bytes(gw.pid);
    cr_assert(baseline > 0);

    json_t *body = xh_body(ctx, "print('x' * 70_000_000)");
    /* room for the head and a newline ipykernel may send on its own: only the message cap cuts */
    json_object_set_new(body, "output_limit", json_integer(128 << 20));
    int64_t t0 = ts_now_ms(), deadline = t0 + XH_BIG_RUN_MS;
    ts_stream_t *s = xh_open(gw.port, body, deadline);
    json_decref(body);
    memset(&evs, 0, sizeof(evs));
    xh_wait_event(s, &evs, "init", 0, deadline);
    char exec_id[64];
    snprintf(exec_id, sizeof(exec_id), "%s", xh_execution_id(&evs));
    /* kgate's memory while the kernel sends the 70 MB: the head (up to the cap) is kept, never the whole message */
    long long peak = baseline;
    for (;;) {
        long long rss = xh_rss_bytes(gw.pid);
        if (rss > peak)
            peak = rss;
        json_t *ex = xh_execution(gw.port, exec_id);
        int finished = strcmp(xh_str(ex, "state"), "finished") == 0;
        json_decref(ex);
        if (finished)
            break;
        cr_assert(ts_now_ms() < deadline, "the 70 MB print did not finish in %d ms", XH_BIG_RUN_MS);
        ts_sleep_ms(20);
    }
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    int64_t took = ts_now_ms() - t0;
    char sum[E2E_MSG_SIZE];
    ts_events_summary(&evs, sum, sizeof(sum));
    cr_log_info("70 MB line: %lld ms, RSS baseline %lld MiB, peak %lld MiB; %s", (long long)took, baseline >> 20, peak >> 20, sum);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    cr_assert_eq(xh_status_count(&evs, "output_truncated"), 1, "the cut message is reported once; %s", sum);
    const ts_event_t *notice = NULL;
    for (size_t i = 0; i < evs.n; i++)
        if (strcmp(evs.v[i].type, "status") == 0 && json_object_get(evs.v[i].json, "message_limit") != NULL)
            notice = &evs.v[i];
    cr_assert_not_null(notice, "no output_truncated status names the message cap; %s", sum);
    cr_assert_eq(xh_int(notice->json, "message_limit"), 64ll << 20, "%s", notice->data);
    cr_assert_not_null(strstr(xh_str(notice->json, "reason"), "--max-message-bytes"), "%s", notice->data);
    /* the head: one log event's worth of the line, as printed */
    char *out = ts_events_text(&evs, "stdout");
    size_t out_len = strlen(out), xs = strspn(out, "x");
    free(out);
    cr_assert_eq(xs, (size_t)HEAD, "stdout begins with %zu bytes of the line (%zu in all), expected one log event's %d; %s", xs,
                 out_len, HEAD, sum);
    /* and the rest, counted exactly: what arrived and what was dropped make what was printed */
    json_t *dropped = json_object_get(evs.v[evs.n - 1].json, "dropped");
    cr_assert_eq((long long)out_len + xh_int(dropped, "output_bytes"), (long long)PRINTED,
                 "%zu bytes of stdout and %lld dropped, %d printed; execution_complete: %s", out_len,
                 xh_int(dropped, "output_bytes"), PRINTED, evs.v[evs.n - 1].data);
    cr_assert_eq(xh_int(notice->json, "dropped_bytes"), xh_int(dropped, "output_bytes"), "%s", notice->data);
    cr_assert_eq(json_integer_value(json_object_get(dropped, "messages")), 0, "no message was lost: %s", evs.v[evs.n - 1].data);
    cr_assert(peak - baseline < ((64ll + 32) << 20),
              "kgate's RSS grew by %lld MiB while a 70 MB message went by (the head: 64 MiB)", (peak - baseline) >> 20);
    cr_assert(log_contains(&gw, "larger than the message cap"), "kgate logged no line about the dropped message");
    ts_events_dispose(&evs);

    /* The context works on, at once: output flows, and the run does not wait out a 5 s grace for a lost idle. */
    t0 = ts_now_ms();
    xh_run_ok(gw.port, ctx, "print('ok')", &evs);
    took = ts_now_ms() - t0;
    E2E_ASSERT_TEXT(&evs, "stdout", "ok\n");
    cr_assert(took < 4000, "the next run took %lld ms", (long long)took);
    ts_events_dispose(&evs);
    json_t *info = NULL;
    int64_t idle_deadline = ts_now_ms() + 5000;
    for (;;) {
        cr_assert_eq(xh_context_get(gw.port, ctx, &info), 200);
        if (strcmp(xh_str(info, "status"), "idle") == 0 || ts_now_ms() >= idle_deadline)
            break;
        json_decref(info);
        ts_sleep_ms(50);
    }
    cr_assert_str_eq(xh_str(info, "status"), "idle", "the context's kernel state is idle again");
    json_decref(info);
    free(ctx);
    xh_gateway_stop(&gw);
}

Test(limits, trimmed_events_are_gone_and_finished_runs_expire)
{
    static ts_gateway_t gw;
    const char *args[] = {"--max-run-log-bytes", "1048576", "--run-retention-ms", "3000", NULL};
    xh_gateway_start(&gw, args);
    char *ctx = xh_context_new(gw.port, NULL, NULL);
    /* 64 flushes of 64 KiB: 4 MiB through a 1 MiB log. */
    json_t *body =
        xh_body(ctx, "import sys\nfor k in range(64):\n    sys.stdout.write(str(k % 10) * 65535 + '\\n'); sys.stdout.flush()");
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    ts_stream_t *s = xh_open(gw.port, body, deadline);
    json_decref(body);
    ts_events_t evs = {0};
    xh_wait_event(s, &evs, "init", 0, deadline);
    char exec_id[64];
    snprintf(exec_id, sizeof(exec_id), "%s", xh_execution_id(&evs));
    ts_stream_close(s); /* the run goes on without a reader */
    ts_events_dispose(&evs);

    json_t *ex = xh_execution_wait_state(gw.port, exec_id, "finished", deadline);
    int64_t seen_finished = ts_now_ms();
    long long first = xh_int(ex, "first_retained_event_id"), last = xh_int(ex, "last_event_id");
    char *dump = json_dumps(ex, JSON_COMPACT);
    cr_assert(first > 2 && last > first, "4 MiB through a 1 MiB log: expected early events trimmed: %s", dump);
    cr_assert_str_eq(xh_str(ex, "outcome"), "ok", "%s", dump);
    json_decref(ex);

    char path[256];
    snprintf(path, sizeof(path), "/code/executions/%s/events", exec_id);
    ts_response_t r;
    ts_http_request(gw.port, "GET", path, NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 410, "EVENTS_GONE");
    ts_response_dispose(&r);
    char header[64];
    snprintf(header, sizeof(header), "Last-Event-ID: %lld", first - 2);
    const char *gone[] = {header, NULL};
    ts_http_request(gw.port, "GET", path, gone, NULL, &r);
    E2E_ASSERT_ERROR(&r, 410, "EVENTS_GONE");
    ts_response_dispose(&r);

    /* From the first retained event on, everything is there, in order, to the end. */
    snprintf(header, sizeof(header), "Last-Event-ID: %lld", first - 1);
    const char *ok[] = {header, NULL};
    char err[256] = "";
    s = ts_stream_open(gw.port, "GET", path, ok, NULL, ts_now_ms() + XH_RUN_MS, err);
    cr_assert_not_null(s, "%s", err);
    cr_assert_eq(ts_stream_response(s)->status, 200, "GET %s (%s): %d %.300s", path, header, ts_stream_response(s)->status,
                 ts_stream_response(s)->body);
    memset(&evs, 0, sizeof(evs));
    ts_stream_collect(s, ts_now_ms() + XH_RUN_MS, 0, &evs);
    ts_stream_close(s);
    char sum[E2E_MSG_SIZE];
    cr_assert(evs.ended && evs.n == (size_t)(last - first + 1), "expected events %lld..%lld; %s", first, last,
              ts_events_summary(&evs, sum, sizeof(sum)));
    for (size_t i = 0; i < evs.n; i++)
        cr_assert_eq(evs.v[i].id, first + (long long)i, "event %zu has id %lld", i, evs.v[i].id);
    cr_assert_str_eq(evs.v[evs.n - 1].type, "execution_complete");
    ts_events_dispose(&evs);
    free(dump);

    /* Retention: gone some time after run-retention-ms (3000), not before about then. */
    int64_t gone_deadline = seen_finished + 3000 + 5000;
    snprintf(path, sizeof(path), "/code/executions/%s", exec_id);
    for (;;) {
        ts_http_request(gw.port, "GET", path, NULL, NULL, &r);
        if (r.status != 200 || ts_now_ms() >= gone_deadline)
            break;
        ts_response_dispose(&r);
        ts_sleep_ms(100);
    }
    int64_t elapsed = ts_now_ms() - seen_finished;
    E2E_ASSERT_ERROR(&r, 404, "EXECUTION_NOT_FOUND");
    ts_response_dispose(&r);
    cr_assert(elapsed >= 2000, "the finished run was collected %lld ms after it finished (--run-retention-ms 3000)",
              (long long)elapsed);
    free(ctx);
    xh_gateway_stop(&gw);
}

Test(limits, queue_full)
{
    static ts_gateway_t gw;
    const char *args[] = {"--max-queue", "1", NULL};
    xh_gateway_start(&gw, args);
    char *ctx = xh_context_new(gw.port, NULL, NULL);
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    json_t *body = xh_body(ctx, "import time; time.sleep(2); print('A')");
    ts_stream_t *a = xh_open(gw.port, body, deadline);
    json_decref(body);
    body = xh_body(ctx, "print('B')");
    ts_stream_t *b = xh_open(gw.port, body, deadline);
    cr_assert_eq(ts_stream_response(b)->status, 200, "one run may wait with --max-queue 1: HTTP %d %.300s",
                 ts_stream_response(b)->status, ts_stream_response(b)->body);
    ts_stream_t *c = xh_open(gw.port, body, deadline);
    E2E_ASSERT_ERROR(ts_stream_response(c), 429, "QUEUE_FULL");
    ts_stream_close(c);

    ts_events_t aev = {0}, bev = {0};
    ts_stream_collect(a, deadline, 0, &aev);
    ts_stream_close(a);
    ts_stream_collect(b, deadline, 0, &bev);
    ts_stream_close(b);
    E2E_ASSERT_TEXT(&aev, "stdout", "A\n");
    E2E_ASSERT_TEXT(&bev, "stdout", "B\n");
    ts_events_dispose(&aev);
    ts_events_dispose(&bev);

    /* With the queue drained, runs are accepted again. */
    xh_run(gw.port, body, deadline, &bev);
    E2E_ASSERT_RUN(&bev, ctx, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&bev, "stdout", "B\n");
    ts_events_dispose(&bev);
    json_decref(body);
    free(ctx);
    xh_gateway_stop(&gw);
}

static void expect_bad_option(unsigned short p, const char *ctx, const char *name, json_t *value)
{
    json_t *body = xh_body(ctx, "print(1)");
    json_object_set_new(body, name, value);
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    ts_response_t r;
    ts_http_request(p, "POST", "/code", NULL, text, &r);
    char msg[E2E_MSG_SIZE];
    cr_assert(e2e_check_error(&r, 400, "INVALID_REQUEST_BODY", msg, sizeof(msg)), "POST /code %s: %s", text, msg);
    free(text);
    ts_response_dispose(&r);
}

Test(limits, request_bounds_and_the_default_timeout)
{
    static ts_gateway_t gw;
    const char *args[] = {"--default-timeout-ms",
                          "1500",
                          "--max-timeout-ms",
                          "5000",
                          "--max-output-limit-bytes",
                          "1048576",
                          "--max-result-limit-bytes",
                          "65536",
                          NULL};
    xh_gateway_start(&gw, args);
    char *ctx = xh_context_new(gw.port, NULL, NULL);
    expect_bad_option(gw.port, ctx, "timeout", json_integer(5001));
    expect_bad_option(gw.port, ctx, "timeout", json_integer(0));
    expect_bad_option(gw.port, ctx, "timeout", json_string("1000"));
    expect_bad_option(gw.port, ctx, "output_limit", json_integer(1048577));
    expect_bad_option(gw.port, ctx, "result_limit", json_integer(65537));
    expect_bad_option(gw.port, ctx, "stdin", json_string("yes"));

    json_t *body = xh_body(ctx, "print(1)");
    json_object_set_new(body, "timeout", json_integer(5000));
    json_object_set_new(body, "output_limit", json_integer(1048576));
    json_object_set_new(body, "result_limit", json_integer(65536));
    ts_events_t evs;
    xh_run(gw.port, body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    E2E_ASSERT_TEXT(&evs, "stdout", "1\n");
    ts_events_dispose(&evs);

    /* No timeout in the request: --default-timeout-ms applies. */
    body = xh_body(ctx, "while True: pass");
    int64_t t0 = ts_now_ms();
    xh_run(gw.port, body, t0 + XH_RUN_MS, &evs);
    json_decref(body);
    E2E_ASSERT_RUN(&evs, ctx, E2E_FRAMING_SSE);
    xh_error_event(&evs, "TimeoutError");
    int64_t took = evs.end_ms - t0;
    cr_assert(took >= 1400 && took < 3500, "with --default-timeout-ms 1500 the busy loop ended after %lld ms", (long long)took);
    ts_events_dispose(&evs);
    free(ctx);
    xh_gateway_stop(&gw);
}

/* Request bodies are bounded (--max-body-bytes): beyond it a JSON 413 PAYLOAD_TOO_LARGE, and nothing runs. */
Test(limits, request_bodies_beyond_the_bound_are_413)
{
    static ts_gateway_t gw;
    const char *args[] = {"--max-body-bytes", "1024", NULL};
    char body[4096];
    ts_response_t r;

    xh_gateway_start(&gw, args);
    snprintf(body, sizeof(body), "{\"code\": \"echo %02000d\"}", 0);
    ts_http_request(gw.port, "POST", "/code", NULL, body, &r);
    E2E_ASSERT_ERROR(&r, 413, "PAYLOAD_TOO_LARGE");
    ts_response_dispose(&r);
    ts_http_request(gw.port, "POST", "/code/context", NULL, body, &r);
    E2E_ASSERT_ERROR(&r, 413, "PAYLOAD_TOO_LARGE");
    ts_response_dispose(&r);
    /* a body within the bound still runs */
    ts_http_request(gw.port, "POST", "/code", NULL, "{\"code\": \"echo small\"}", &r);
    cr_assert_eq(r.status, 200, "a 22-byte body got %d", r.status);
    ts_response_dispose(&r);
    xh_gateway_stop(&gw);
}
