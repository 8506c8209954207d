/* tests/e2e/test_proxy.c: /proxy/{port}/{path} of the real kgate in front of servers the tests start (HTTP, WebSocket, bounds). */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"
#include "support/stream.h"
#include "upstream.h"
#include "support/ws_client.h"

#define TOKEN "proxy-e2e-token"
#define AUTH "X-EXECD-ACCESS-TOKEN: " TOKEN
#define BIG (100u << 20)
#define RSS_LIMIT_KB (32 * 1024)
#define WS_MS 10000

static ts_gateway_t gw, own;
static upstream_t *up;

/* A kgate with the token and `extra` arguments (NULL-terminated, may be NULL), ASan's quarantine off so that RSS is kgate's own. */
static void start_kgate(ts_gateway_t *g, const char *const *extra)
{
    static char asan[1024];
    const char *prev = getenv("ASAN_OPTIONS"), *args[16] = {"--access-token", TOKEN};
    const char *env[] = {asan, NULL};
    ts_gateway_opts_t opts = {ts_kgate_path(KGATE_BINARY_DIR), args, env, "proxy", NULL, 0};
    size_t n = 2;

    snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%squarantine_size_mb=0:malloc_context_size=5", prev != NULL ? prev : "",
             prev != NULL && *prev != '\0' ? ":" : "");
    for (size_t i = 0; extra != NULL && extra[i] != NULL && n < 15; ++i)
        args[n++] = extra[i];
    args[n] = NULL;
    cr_assert_eq(ts_gateway_start(g, &opts), 0, "kgate did not start: %s", g->error);
}

static void setup(void)
{
    cr_assert_not_null(up = upstream_start(), "the test's upstream server did not start");
    start_kgate(&gw, NULL);
}

/* Stops a kgate a test started; it must exit 0 by itself (a sanitizer report at exit would not). Criterion does not count
 * a failure in a suite's fini: ctest does, from the message (tests/e2e/CMakeLists.txt). */
static void stop_kgate(ts_gateway_t *g)
{
    int started = g->owner && g->pid > 0, rc = ts_gateway_stop_keep(g, NULL), st = g->exit_status;

    if (started && (rc != 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0))
        ts_gateway_dump_log(g, 8192);
    ts_gateway_cleanup(g);
    cr_expect(!started || (rc == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0), "kgate did not exit 0 on SIGTERM (status %#x)", st);
}

static void teardown(void)
{
    stop_kgate(&gw);
    stop_kgate(&own);
    upstream_stop(up);
    up = NULL;
}

TestSuite(proxy, .init = setup, .fini = teardown, .timeout = 180);

/* "/proxy/<upstream port><rest>" */
static const char *proxied(const char *rest)
{
    static char path[512];
    snprintf(path, sizeof(path), "/proxy/%u%s", upstream_port(up), rest);
    return path;
}

static void assert_has(const char *haystack, const char *needle)
{
    cr_assert_not_null(strstr(haystack, needle), "no \"%s\" in:\n%s", needle, haystack);
}

/* ---- HTTP ------------------------------------------------------------------------------------------ */

Test(proxy, request_and_answer_pass_through)
{
    const char *headers[] = {AUTH,
                             "X-Custom: one two",
                             "Cookie: a=1",
                             "X-Forwarded-For: 10.9.8.7",
                             "X-Forwarded-Proto: https",
                             "X-Forwarded-Host: spoofed.example",
                             "Connection: X-Hop",
                             "X-Hop: dropped",
                             NULL};
    char line[256];
    ts_response_t r;

    ts_http_request(gw.port, "POST", proxied("/echo/a%20b/c?x=1&y=two"), headers, "hello body", &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_str_eq(ts_response_header(&r, "x-upstream"), "echo");
    cr_assert_str_eq(ts_response_header(&r, "content-type"), "text/plain");
    cr_assert_not_null(ts_response_header(&r, "content-length"), "a sized answer is relayed sized");
    cr_assert(strncmp(r.body, "POST /echo/a%20b/c?x=1&y=two HTTP/1.1\r\n", 39) == 0, "request line: %.80s", r.body);
    snprintf(line, sizeof(line), "\r\nHost: 127.0.0.1:%u\r\n", gw.port);
    assert_has(r.body, line);
    assert_has(r.body, "\r\nX-Custom: one two\r\n");
    assert_has(r.body, "\r\nCookie: a=1\r\n");
    assert_has(r.body, "\r\nContent-Length: 10\r\n");
    assert_has(r.body, "\r\nX-Forwarded-For: 10.9.8.7, 127.0.0.1\r\n");
    assert_has(r.body, "\r\nX-Forwarded-Proto: http\r\n");
    snprintf(line, sizeof(line), "\r\nX-Forwarded-Host: 127.0.0.1:%u\r\n", gw.port);
    assert_has(r.body, line);
    snprintf(line, sizeof(line), "\r\nX-Forwarded-Prefix: /proxy/%u\r\n", upstream_port(up));
    assert_has(r.body, line);
    cr_assert_null(strcasestr(r.body, "x-execd-access-token"), "kgate's token reached the upstream:\n%s", r.body);
    cr_assert_null(strcasestr(r.body, "x-hop"), "a header the Connection header names was relayed:\n%s", r.body);
    cr_assert_null(strstr(r.body, "spoofed"), "the client's X-Forwarded-Host was kept:\n%s", r.body);
    cr_assert_null(strstr(r.body, "https"), "the client's X-Forwarded-Proto was kept:\n%s", r.body);
    cr_assert(r.body_len > 14 && strcmp(r.body + r.body_len - 14, "\r\n\r\nhello body") == 0, "body: %s", r.body);
    ts_response_dispose(&r);
}

Test(proxy, methods_statuses_and_paths)
{
    static const char *const methods[] = {"GET", "PUT", "DELETE", "PATCH", "OPTIONS"};
    static const int statuses[] = {201, 204, 302, 404, 418, 500, 503};
    const char *headers[] = {AUTH, NULL};
    char expect[64];
    ts_response_t r;

    for (size_t i = 0; i != sizeof(methods) / sizeof(methods[0]); ++i) {
        ts_http_request(gw.port, methods[i], proxied("/echo/m"), headers, NULL, &r);
        E2E_ASSERT_STATUS(&r, 200);
        snprintf(expect, sizeof(expect), "%s /echo/m HTTP/1.1\r\n", methods[i]);
        cr_assert(strncmp(r.body, expect, strlen(expect)) == 0, "%s: %.80s", methods[i], r.body);
        ts_response_dispose(&r);
    }
    for (size_t i = 0; i != sizeof(statuses) / sizeof(statuses[0]); ++i) {
        char path[64], value[16];
        snprintf(path, sizeof(path), "/status/%d", statuses[i]);
        ts_http_request(gw.port, "GET", proxied(path), headers, NULL, &r);
        E2E_ASSERT_STATUS(&r, statuses[i]);
        snprintf(value, sizeof(value), "%d", statuses[i]);
        cr_assert_str_eq(ts_response_header(&r, "x-upstream-status"), value);
        snprintf(expect, sizeof(expect), "status %d\n", statuses[i]);
        cr_assert_str_eq(r.body, statuses[i] == 204 ? "" : expect);
        ts_response_dispose(&r);
    }
    /* no path at all is "/", and the query still follows */
    ts_http_request(gw.port, "GET", proxied(""), headers, NULL, &r);
    E2E_ASSERT_STATUS(&r, 404);
    cr_assert(strncmp(r.body, "GET / HTTP/1.1\r\n", 16) == 0, "%.80s", r.body);
    ts_response_dispose(&r);
    ts_http_request(gw.port, "GET", proxied("?q=1"), headers, NULL, &r);
    cr_assert(strncmp(r.body, "GET /?q=1 HTTP/1.1\r\n", 20) == 0, "%.80s", r.body);
    ts_response_dispose(&r);
    ts_http_request(gw.port, "HEAD", proxied("/echo/h"), headers, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_str_eq(r.body, "");
    ts_response_dispose(&r);
}

/* The upstream holds its last event until the test has read the first through kgate: an order, not a time (a proxy that
 * waited for the whole answer would deliver nothing before the release). */
Test(proxy, an_answer_streams_as_it_arrives)
{
    const char *headers[] = {AUTH, NULL};
    char err[256] = "";
    int64_t t0 = ts_now_ms();
    ts_stream_t *s = ts_stream_open(gw.port, "GET", proxied("/stream"), headers, NULL, t0 + 20000, err);
    ts_events_t evs = {0};

    cr_assert_not_null(s, "%s", err);
    cr_assert_eq(ts_stream_response(s)->status, 200);
    int got_first = ts_stream_next(s, t0 + 20000, &evs);
    upstream_release_stream(up); /* whatever the verdict: the upstream's answer ends */
    cr_assert_gt(got_first, 0, "the first event did not arrive before the rest of the answer was sent: %s", evs.error);
    cr_assert_str_eq(evs.v[0].data, "first");
    cr_assert_gt(ts_stream_next(s, t0 + 20000, &evs), 0, "%s", evs.error);
    cr_assert_str_eq(evs.v[1].data, "last");
    cr_assert_eq(ts_stream_next(s, t0 + 20000, &evs), 0, "the answer did not end cleanly");
    ts_events_dispose(&evs);
    ts_stream_close(s);
}

/* ---- large answers in bounded memory -------------------------------------------------------------- */

/* A raw connection to kgate with `GET path` sent; returns the fd. */
static int raw_get(unsigned short port, const char *path)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    char req[1024];
    int fd = socket(AF_INET, SOCK_STREAM, 0), n;

    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s", strerror(errno));
    n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" AUTH "\r\nConnection: close\r\n\r\n", path);
    cr_assert_eq(write(fd, req, (size_t)n), n);
    return fd;
}

/* Reads the body of a /big answer, checking every byte; `buf` holds `*len` bytes read past the head. */
typedef struct st_body_reader_t {
    int fd;
    char buf[1 << 16];
    size_t len, off;    /* bytes in buf, and how many of them are consumed */
    size_t total;       /* body bytes checked */
    size_t pause_after; /* stop reading for pause_ms once this many body bytes arrived (0: never) */
    int pause_ms;
} body_reader_t;

/* One more byte of the connection, or -1 at its end. */
static int next_byte(body_reader_t *b)
{
    if (b->off == b->len) {
        ssize_t n = read(b->fd, b->buf, sizeof(b->buf));
        if (n <= 0)
            return -1;
        b->len = (size_t)n;
        b->off = 0;
    }
    return (unsigned char)b->buf[b->off++];
}

/* Checks `n` body bytes against the pattern (n == SIZE_MAX: until the connection ends). 0, or -1 at a premature end. */
static int check_bytes(body_reader_t *b, size_t n)
{
    for (size_t i = 0; i != n; ++i) {
        int c = next_byte(b);
        if (c < 0)
            return n == SIZE_MAX ? 0 : -1;
        cr_assert_eq(c, upstream_pattern_byte(b->total), "byte mismatch at offset %zu", b->total);
        if (++b->total == b->pause_after && b->pause_ms != 0)
            usleep((useconds_t)b->pause_ms * 1000);
    }
    return 0;
}

/* Reads the head; returns the status and whether the body is chunked. */
static int read_head(body_reader_t *b, int *chunked, char *head, size_t size)
{
    size_t n = 0;
    int status = 0, c;

    while (n + 1 < size && (c = next_byte(b)) >= 0) {
        head[n++] = (char)c;
        if (n >= 4 && memcmp(head + n - 4, "\r\n\r\n", 4) == 0)
            break;
    }
    head[n] = '\0';
    sscanf(head, "HTTP/1.1 %d", &status);
    *chunked = strcasestr(head, "transfer-encoding: chunked") != NULL;
    return status;
}

/* Reads a chunked body through its last chunk, checking the pattern. 0, or -1 when it ended early. */
static int check_chunked(body_reader_t *b)
{
    for (;;) {
        char line[32];
        size_t n = 0, size;
        int c;
        while ((c = next_byte(b)) >= 0 && c != '\n' && n + 1 < sizeof(line))
            line[n++] = (char)c;
        if (c < 0)
            return -1;
        line[n] = '\0';
        size = strtoul(line, NULL, 16);
        if (size == 0)
            return 0;
        if (check_bytes(b, size) != 0 || next_byte(b) != '\r' || next_byte(b) != '\n')
            return -1;
    }
}

/* GETs a 100 MiB /big answer through kgate, pausing the reader for `pause_ms` after 1 MiB, with kgate's RSS sampled. */
static void big_answer(const char *query, int pause_ms)
{
    char path[128], head[2048];
    ts_rss_sampler_t s;
    body_reader_t *b = calloc(1, sizeof(*b));
    long long idle_kb = ts_proc_rss_kb(gw.pid), peak_kb;
    int64_t t0 = ts_now_ms();
    int chunked, status;

    snprintf(path, sizeof(path), "/big/%u%s", BIG, query);
    cr_assert_eq(ts_rss_sampler_start(&s, gw.pid, 5), 0);
    b->fd = raw_get(gw.port, proxied(path));
    b->pause_after = 1u << 20;
    b->pause_ms = pause_ms;
    status = read_head(b, &chunked, head, sizeof(head));
    cr_assert_eq(status, 200, "%s", head);
    if (chunked) {
        cr_assert_eq(check_chunked(b), 0, "the chunked answer ended after %zu bytes", b->total);
    } else {
        cr_assert_not_null(strcasestr(head, "content-length: 104857600"), "%s", head);
        cr_assert_eq(check_bytes(b, BIG), 0, "the answer ended after %zu bytes", b->total);
    }
    cr_assert_eq(b->total, BIG);
    peak_kb = ts_rss_sampler_stop(&s);
    close(b->fd);
    fprintf(stderr, "proxy, 100 MiB %s, reader paused %d ms after 1 MiB: kgate VmRSS idle %lld kB, peak %lld kB (%lld ms)\n",
            chunked ? "chunked" : "sized", pause_ms, idle_kb, peak_kb, (long long)(ts_now_ms() - t0));
    cr_assert(peak_kb > 0 && peak_kb < RSS_LIMIT_KB, "kgate's resident memory peaked at %lld kB", peak_kb);
    free(b);
}

Test(proxy, a_sized_100_mib_answer_streams_in_bounded_memory_to_a_reader_that_pauses)
{
    big_answer("", 2000);
}

Test(proxy, a_chunked_100_mib_answer_streams_in_bounded_memory)
{
    big_answer("?chunked=1", 0);
}

/* ---- errors, bounds and the token -------------------------------------------------------------------- */

Test(proxy, a_closed_port_is_502)
{
    const char *headers[] = {AUTH, NULL};
    unsigned short port = upstream_closed_port();
    char path[64], port_text[16];
    ts_response_t r;

    snprintf(path, sizeof(path), "/proxy/%u/x", port);
    ts_http_request(gw.port, "GET", path, headers, NULL, &r);
    E2E_ASSERT_ERROR(&r, 502, "BAD_GATEWAY");
    snprintf(port_text, sizeof(port_text), "%u", port);
    cr_assert_not_null(json_string_value(json_object_get(r.json, "message")));
    assert_has(json_string_value(json_object_get(r.json, "message")), port_text);
    ts_response_dispose(&r);
}

Test(proxy, ports_out_of_range_and_kgate_itself_are_refused)
{
    static const char *const bad[] = {"/proxy/0/x", "/proxy/65536/x", "/proxy/abc/x", "/proxy/-1/x", "/proxy/123456/x"};
    const char *headers[] = {AUTH, NULL};
    char path[64];
    ts_response_t r;

    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        ts_http_request(gw.port, "GET", bad[i], headers, NULL, &r);
        E2E_ASSERT_ERROR(&r, 400, "INVALID_PARAMETER");
        ts_response_dispose(&r);
    }
    snprintf(path, sizeof(path), "/proxy/%u/healthz", gw.port);
    ts_http_request(gw.port, "GET", path, headers, NULL, &r);
    E2E_ASSERT_ERROR(&r, 403, "FORBIDDEN");
    ts_response_dispose(&r);
}

Test(proxy, no_token_is_401_and_nothing_is_relayed)
{
    const char *wrong[] = {"X-EXECD-ACCESS-TOKEN: nope", NULL};
    ts_response_t r;
    wsc_t ws;

    ts_http_request(gw.port, "GET", proxied("/echo/x"), NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 401, "UNAUTHORIZED");
    ts_response_dispose(&r);
    ts_http_request(gw.port, "POST", proxied("/echo/x"), wrong, "body", &r);
    E2E_ASSERT_ERROR(&r, 401, "UNAUTHORIZED");
    ts_response_dispose(&r);
    cr_assert_eq(wsc_connect(&ws, gw.port, proxied("/ws"), NULL, wsc_now_ms() + WS_MS), -1);
    cr_assert_eq(ws.status, 401, "the upgrade without a token: %s", ws.error);
    wsc_close(&ws);
    cr_assert_eq(upstream_requests(up), 0, "the upstream was asked %u time(s)", upstream_requests(up));
}

Test(proxy, a_silent_upstream_is_504_and_a_stuck_reader_is_cut_off)
{
    const char *args[] = {"--proxy-timeout-ms", "1000", NULL}, *headers[] = {AUTH, NULL};
    char path[128], head[2048];
    body_reader_t *b = calloc(1, sizeof(*b));
    int64_t t0;
    int chunked;
    ts_response_t r;

    start_kgate(&own, args);
    t0 = ts_now_ms();
    snprintf(path, sizeof(path), "/proxy/%u/silent", upstream_port(up));
    ts_http_request(own.port, "GET", path, headers, NULL, &r);
    E2E_ASSERT_ERROR(&r, 504, "GATEWAY_TIMEOUT");
    cr_assert(ts_now_ms() - t0 >= 900 && ts_now_ms() - t0 < 10000, "504 after %lld ms", (long long)(ts_now_ms() - t0));
    ts_response_dispose(&r);

    /* a reader that stops: the upstream is paused, then both are dropped once the timeout passes */
    snprintf(path, sizeof(path), "/proxy/%u/big/%u", upstream_port(up), BIG);
    b->fd = raw_get(own.port, path);
    cr_assert_eq(read_head(b, &chunked, head, sizeof(head)), 200, "%s", head);
    b->pause_after = 1u << 20;
    b->pause_ms = 4000;
    check_bytes(b, SIZE_MAX);
    cr_assert_lt(b->total, BIG, "a reader stuck for 4 s still got the whole answer");
    close(b->fd);
    free(b);
    ts_http_request(own.port, "GET", "/healthz", NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
}

Test(proxy, relayed_connections_are_bounded)
{
    const char *args[] = {"--max-proxy-connections", "1", NULL}, *headers[] = {AUTH, NULL};
    char path[128];
    unsigned before;
    ts_response_t r;
    int fd;

    start_kgate(&own, args);
    snprintf(path, sizeof(path), "/proxy/%u/silent", upstream_port(up));
    before = upstream_requests(up);
    fd = raw_get(own.port, path);
    /* the silent request holds the one relay once the upstream has it */
    for (int64_t deadline = ts_now_ms() + 10000; upstream_requests(up) == before;) {
        cr_assert_lt(ts_now_ms(), deadline, "the silent request never reached the upstream");
        usleep(10000);
    }
    snprintf(path, sizeof(path), "/proxy/%u/echo/x", upstream_port(up));
    ts_http_request(own.port, "GET", path, headers, NULL, &r);
    E2E_ASSERT_ERROR(&r, 429, "TOO_MANY_PROXY_CONNECTIONS");
    cr_assert_str_eq(ts_response_header(&r, "retry-after"), "1", "a 429 says when to retry");
    ts_response_dispose(&r);
    close(fd);
}

/* An upstream sending its head a byte a second keeps every read under the timeout: the head as a whole must not. */
Test(proxy, an_upstream_trickling_its_head_is_504_within_the_timeout)
{
    const char *args[] = {"--proxy-timeout-ms", "1500", NULL}, *headers[] = {AUTH, NULL};
    char path[128];
    int64_t t0;
    ts_response_t r;

    start_kgate(&own, args);
    snprintf(path, sizeof(path), "/proxy/%u/trickle", upstream_port(up));
    t0 = ts_now_ms();
    ts_http_request_until(own.port, "GET", path, headers, NULL, ts_now_ms() + 10000, &r);
    E2E_ASSERT_ERROR(&r, 504, "GATEWAY_TIMEOUT");
    cr_assert_lt(ts_now_ms() - t0, 4000, "504 after %lld ms", (long long)(ts_now_ms() - t0));
    ts_response_dispose(&r);
    for (int64_t deadline = ts_now_ms() + 5000; upstream_open(up) != 0;) {
        cr_assert_lt(ts_now_ms(), deadline, "%u upstream connection(s) still open after the 504", upstream_open(up));
        usleep(20000);
    }
}

/*
 * An upstream whose head never ends (one header line, as fast as kgate reads it) is 502 once the head passes kgate's bound,
 * long before the timeout, and kgate's memory stays within it: h2o's client alone read such a head until --proxy-timeout-ms
 * (kgate's RSS peaked at 381 MiB in 45 s).
 */
Test(proxy, an_endless_answer_head_is_502_in_bounded_memory)
{
    const char *headers[] = {AUTH, NULL};
    char path[128];
    ts_rss_sampler_t s;
    long long peak_kb;
    int64_t t0;
    ts_response_t r;

    snprintf(path, sizeof(path), "/proxy/%u/endless-head", upstream_port(up));
    cr_assert_eq(ts_rss_sampler_start(&s, gw.pid, 5), 0);
    t0 = ts_now_ms();
    ts_http_request_until(gw.port, "GET", path, headers, NULL, ts_now_ms() + 20000, &r);
    peak_kb = ts_rss_sampler_stop(&s);
    fprintf(stderr, "proxy, endless head: %d after %lld ms, kgate VmRSS peak %lld kB\n", r.status, (long long)(ts_now_ms() - t0),
            peak_kb);
    E2E_ASSERT_ERROR(&r, 502, "BAD_GATEWAY");
    assert_has(json_string_value(json_object_get(r.json, "message")), "head is over");
    cr_assert(peak_kb > 0 && peak_kb < RSS_LIMIT_KB, "kgate's resident memory peaked at %lld kB", peak_kb);
    ts_response_dispose(&r);
    for (int64_t deadline = ts_now_ms() + 5000; upstream_open(up) != 0;) {
        cr_assert_lt(ts_now_ms(), deadline, "%u upstream connection(s) still open after the 502", upstream_open(up));
        usleep(20000);
    }
}

/*
 * 300 clients ask for answers that never come whole (the upstream trickles their heads): 256 are relayed, 44 get 429
 * with Retry-After. Once the clients close, kgate closes every upstream connection (h2o reads no client socket while a
 * request is handled: without a watch, the slots were held for ever) and /proxy serves again.
 */
Test(proxy, slots_of_clients_that_close_are_freed_whatever_the_exchange_waits_for, .timeout = 120)
{
    enum { NCLIENTS = 300, BOUND = 256 };
    static int fds[NCLIENTS];
    const char *headers[] = {AUTH, NULL};
    char path[128], buf[1024];
    unsigned refused = 0, with_retry = 0;
    ts_response_t r;

    snprintf(path, sizeof(path), "/proxy/%u/trickle", upstream_port(up));
    for (int i = 0; i != NCLIENTS; ++i)
        fds[i] = raw_get(gw.port, path);
    for (int64_t deadline = ts_now_ms() + 20000; upstream_open(up) < BOUND;) {
        cr_assert_lt(ts_now_ms(), deadline, "%u of %d requests reached the upstream", upstream_open(up), BOUND);
        usleep(20000);
    }
    usleep(500 * 1000); /* the 429s leave at once */
    for (int i = 0; i != NCLIENTS; ++i) {
        struct pollfd pfd = {fds[i], POLLIN, 0};
        ssize_t n;
        if (poll(&pfd, 1, 0) != 1 || (n = read(fds[i], buf, sizeof(buf) - 1)) <= 0)
            continue;
        buf[n] = '\0';
        refused += strncmp(buf, "HTTP/1.1 429 ", 13) == 0;
        with_retry += strcasestr(buf, "\r\nretry-after: 1\r\n") != NULL;
    }
    cr_assert_eq(upstream_open(up), BOUND, "%u upstream connections for a bound of %d", upstream_open(up), BOUND);
    cr_assert_eq(refused, NCLIENTS - BOUND, "%u of %d clients beyond the bound got 429", refused, NCLIENTS - BOUND);
    cr_assert_eq(with_retry, refused, "%u of %u 429s carried Retry-After", with_retry, refused);
    for (int i = 0; i != NCLIENTS; ++i)
        close(fds[i]);
    for (int64_t deadline = ts_now_ms() + 10000; upstream_open(up) != 0;) {
        cr_assert_lt(ts_now_ms(), deadline, "%u upstream connections still open 10 s after their clients closed",
                     upstream_open(up));
        usleep(50000);
    }
    ts_http_request(gw.port, "GET", proxied("/echo/again"), headers, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
}

/* curl's exit status for `url` (with kgate's token); -1 when it could not run or ran past 20 s. */
static int curl_status(const char *url)
{
    char *argv[] = {"curl", "-s", "-o", "/dev/null", "--max-time", "15", "-H", AUTH, (char *)url, NULL};
    extern char **environ;
    pid_t pid;
    int st;

    if (posix_spawnp(&pid, "curl", NULL, NULL, argv, environ) != 0)
        return -1;
    for (int64_t deadline = ts_now_ms() + 20000; waitpid(pid, &st, WNOHANG) == 0;) {
        if (ts_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        usleep(10000);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* An upstream that closes before its last chunk, or short of its Content-Length: the client sees a failed transfer (curl's
 * 18, "partial file"), never a whole-looking body; the whole answer still passes. */
Test(proxy, an_answer_cut_by_the_upstream_fails_the_client)
{
    char url[256];

    snprintf(url, sizeof(url), "http://127.0.0.1:%u/proxy/%u/cut/12288", gw.port, upstream_port(up));
    cr_assert_eq(curl_status(url), 18, "curl on a chunked answer cut after 12288 bytes");
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/proxy/%u/cut/10?short=1", gw.port, upstream_port(up));
    cr_assert_eq(curl_status(url), 18, "curl on an answer cut short of its Content-Length");
    snprintf(url, sizeof(url), "http://127.0.0.1:%u/proxy/%u/big/100000?chunked=1", gw.port, upstream_port(up));
    cr_assert_eq(curl_status(url), 0, "curl on a whole chunked answer");
}

/* ---- WebSocket --------------------------------------------------------------------------------------- */

static void ws_open(wsc_t *ws)
{
    const char *headers[] = {AUTH, "Sec-WebSocket-Protocol: chat, superchat", NULL};
    char proto[64];

    cr_assert_eq(wsc_connect(ws, gw.port, proxied("/ws"), headers, wsc_now_ms() + WS_MS), 0, "upgrade: %s (status %d)", ws->error,
                 ws->status);
    cr_assert_str_eq(wsc_header(ws, "sec-websocket-protocol", proto, sizeof(proto)), "chat");
}

static void ws_expect(wsc_t *ws, int opcode, const void *data, size_t len)
{
    wsc_msg_t msg;

    cr_assert_eq(wsc_recv(ws, wsc_now_ms() + WS_MS, &msg), 0, "%s", ws->error);
    cr_assert_eq(msg.opcode, opcode);
    cr_assert_eq(msg.len, len);
    cr_assert(memcmp(msg.data, data, len) == 0, "the message came back changed");
    free(msg.data);
}

Test(proxy, websocket_messages_cross_both_ways)
{
    size_t big_len = 100000;
    uint8_t *big = malloc(big_len);
    wsc_msg_t msg;
    wsc_t ws;

    for (size_t i = 0; i != big_len; ++i)
        big[i] = (uint8_t)i;
    ws_open(&ws);
    cr_assert_eq(wsc_send(&ws, WSC_TEXT, "hello", 5), 0);
    ws_expect(&ws, WSC_TEXT, "hello", 5);
    cr_assert_eq(wsc_send(&ws, WSC_BINARY, big, big_len), 0);
    ws_expect(&ws, WSC_BINARY, big, big_len);
    cr_assert_eq(wsc_send(&ws, WSC_TEXT, "h\xc3\xa9", 3), 0);
    ws_expect(&ws, WSC_TEXT, "h\xc3\xa9", 3);
    /* the client closes: the upstream hears it and answers, and the answer comes back */
    cr_assert_eq(wsc_send(&ws, WSC_CLOSE, "\x03\xe8", 2), 0);
    cr_assert_eq(wsc_recv(&ws, wsc_now_ms() + WS_MS, &msg), 0, "%s", ws.error);
    cr_assert_eq(msg.opcode, WSC_CLOSE);
    cr_assert_eq(msg.close_code, 1000);
    free(msg.data);
    wsc_close(&ws);
    free(big);
}

Test(proxy, websocket_close_from_the_upstream_reaches_the_client)
{
    wsc_msg_t msg;
    wsc_t ws;

    ws_open(&ws);
    cr_assert_eq(wsc_send(&ws, WSC_TEXT, "close-me", 8), 0);
    cr_assert_eq(wsc_recv(&ws, wsc_now_ms() + WS_MS, &msg), 0, "%s", ws.error);
    cr_assert_eq(msg.opcode, WSC_CLOSE);
    cr_assert_eq(msg.close_code, 4001, "close code %u", msg.close_code);
    free(msg.data);
    wsc_send(&ws, WSC_CLOSE, "\x0f\xa1", 2);
    wsc_close(&ws);
}

Test(proxy, an_upgrade_the_upstream_refuses_gets_its_answer)
{
    const char *headers[] = {AUTH, NULL};
    wsc_t ws;

    cr_assert_eq(wsc_connect(&ws, gw.port, proxied("/status/404"), headers, wsc_now_ms() + WS_MS), -1);
    cr_assert_eq(ws.status, 404, "%s", ws.error);
    wsc_close(&ws);
}

Test(proxy, kgate_stops_cleanly_with_a_websocket_and_a_request_relayed)
{
    const char *headers[] = {AUTH, NULL};
    wsc_msg_t msg;
    wsc_t ws;
    ts_stream_t *s;
    char err[256] = "";

    ws_open(&ws);
    cr_assert_eq(wsc_send(&ws, WSC_TEXT, "x", 1), 0);
    ws_expect(&ws, WSC_TEXT, "x", 1);
    s = ts_stream_open(gw.port, "GET", proxied("/stream"), headers, NULL, ts_now_ms() + WS_MS, err);
    cr_assert_not_null(s, "%s", err);
    stop_kgate(&gw);
    /* the client was told (1001), or its connection simply ended with kgate */
    if (wsc_recv(&ws, wsc_now_ms() + WS_MS, &msg) == 0) {
        cr_assert_eq(msg.opcode, WSC_CLOSE);
        cr_assert_eq(msg.close_code, 1001);
        free(msg.data);
    }
    wsc_close(&ws);
    ts_stream_close(s);
}
