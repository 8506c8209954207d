/* tests/e2e/test_bounds.c: a client's WebSocket pings against kgate's memory, during and after: a PTY's socket and a kernel's. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pty_asserts.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"

#define MIB 1024LL
#define WAIT_MS 30000
/* ping frames written per write: pre-built, 10 bytes each (a 4-byte payload) */
#define BATCH 50000

static ts_gateway_t own;

/* These binaries check kgate, not themselves (as shared.c says for the other e2e binaries). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void fini(void)
{
    ts_gateway_stop(&own, NULL);
}

TestSuite(bounds, .fini = fini, .timeout = 300);

static void start_own(void)
{
    /* AddressSanitizer keeps freed memory in a quarantine (256 MiB by default): keep it small, so that RSS measures what kgate
     * holds rather than what the sanitizer delays reusing */
    static char asan[512];
    const char *env[] = {asan, NULL};

    snprintf(asan, sizeof(asan), "ASAN_OPTIONS=%s%squarantine_size_mb=8", getenv("ASAN_OPTIONS") ?: "",
             getenv("ASAN_OPTIONS") != NULL ? ":" : "");
    cr_assert_eq(ts_gateway_start(&own, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR), .env = env}), 0,
                 "kgate did not start: %s", own.error);
}

typedef struct {
    long long base, peak, after; /* KiB */
} memory_t;

/*
 * Writes `pings` pings on `ws` as fast as the socket takes them, reading nothing, then closes the socket and
 * waits for kgate to let go: kgate's RSS before, its peak (VmHWM from the start of the flood, and sampled),
 * and its RSS after.
 */
static memory_t flood(wsc_t *ws, long pings)
{
    uint8_t *frames = malloc((size_t)BATCH * 10);
    ts_rss_sampler_t sampler;
    memory_t m;
    int hwm;

    usleep(500 * 1000);
    m.base = ts_proc_status_kib(own.pid, "VmRSS");
    hwm = ts_proc_reset_hwm(own.pid) == 0;
    cr_assert_eq(ts_rss_sampler_start(&sampler, own.pid, 20), 0);
    for (long sent = 0; sent < pings; sent += BATCH)
        cr_assert_eq(wsc_write(ws, frames, wsc_ping_frames(frames, BATCH, (uint32_t)sent, 4)), 0,
                     "kgate stopped taking pings after %ld: %s", sent, ws->error);
    /* what the socket still holds reaches kgate */
    usleep(1000 * 1000);
    wsc_close(ws);
    usleep(1500 * 1000);
    m.peak = ts_rss_sampler_stop(&sampler);
    if (hwm && ts_proc_status_kib(own.pid, "VmHWM") > m.peak)
        m.peak = ts_proc_status_kib(own.pid, "VmHWM");
    m.after = ts_proc_status_kib(own.pid, "VmRSS");
    if (!hwm)
        fprintf(stderr, "bounds: VmHWM could not be reset (clear_refs): the peak is sampled every 20 ms only\n");
    free(frames);
    return m;
}

static void expect_bounded(const char *what, long pings, memory_t m)
{
    fprintf(stderr, "%s: %ld unread pings: kgate RSS %lld KiB before, peak %lld KiB (+%lld), %lld KiB after (+%lld)\n", what, pings,
            m.base, m.peak, m.peak - m.base, m.after, m.after - m.base);
    /* one pong per ping was 220 bytes each: 1M pings grew kgate by 220 MB, and it stayed */
    cr_assert_lt(m.peak, 64 * MIB, "%s: kgate reached %lld KiB during the pings", what, m.peak);
    cr_assert_lt(m.peak - m.base, 64 * MIB, "%s: kgate grew by %lld KiB during the pings", what, m.peak - m.base);
    cr_assert_lt(m.after - m.base, 16 * MIB, "%s: kgate kept %lld KiB after the client left", what, m.after - m.base);
}

Test(bounds, two_million_unread_pings_on_a_pty_socket_leave_kgate_bounded)
{
    long pings = 2000000;
    char *id;
    ptc_t c;

    start_own();
    id = pt_create(own.port, NULL, NULL);
    pt_attach(&c, own.port, id, "", NULL);
    expect_bounded("pty", pings, flood(&c.ws, pings));
    /* kgate still serves the session */
    cr_assert_eq(pt_request(own.port, "GET", id, NULL), 200);
    ptc_dispose(&c);
    free(id);
}

Test(bounds, a_million_unread_pings_on_a_kernel_socket_leave_kgate_bounded)
{
    long pings = 1000000;
    ts_response_t r = {0};
    char path[256];
    wsc_t ws;

    start_own();
    cr_assert_eq(ts_http_request_until(own.port, "POST", "/api/kernels", NULL, "{}", wsc_now_ms() + WAIT_MS, &r), 201, "%s",
                 r.body);
    snprintf(path, sizeof(path), "/api/kernels/%s/channels", json_string_value(json_object_get(r.json, "id")));
    ts_response_dispose(&r);
    cr_assert_eq(wsc_connect(&ws, own.port, path, NULL, wsc_now_ms() + WAIT_MS), 0, "%s", ws.error);
    expect_bounded("kernel", pings, flood(&ws, pings));
    cr_assert_eq(ts_http_request_until(own.port, "GET", "/api/kernels", NULL, NULL, wsc_now_ms() + WAIT_MS, &r), 200, "%s", r.body);
    ts_response_dispose(&r);
}
