/* tests/e2e/test_peak.c: kgate's peak memory (VmHWM) while one big message goes from a kernel to a client. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_helpers.h"
#include "support/base.h"

#define MIB (1024LL * 1024)

/* These binaries check kgate, not themselves (as shared.c says for the other e2e binaries). */
int __lsan_is_turned_off(void);
int __lsan_is_turned_off(void)
{
    return 1;
}

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(peak, .fini = fini, .timeout = 600);

/* A field of /proc/<pid>/status in bytes ("VmRSS:", "VmHWM:"), -1 when unknown. */
static long long status_bytes(pid_t pid, const char *field)
{
    char path[64], line[256];
    long long v = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, field, strlen(field)) == 0)
            v = strtoll(line + strlen(field), NULL, 10) * 1024;
    fclose(f);
    return v;
}

/* Starts VmHWM over from VmRSS (clear_refs 5, Linux 4.0), so that it is the peak of what follows. */
static void reset_hwm(pid_t pid)
{
    char path[64];
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/clear_refs", (int)pid);
    cr_assert((fd = open(path, O_WRONLY)) >= 0, "cannot open %s", path);
    cr_assert_eq(write(fd, "5", 1), 1, "cannot reset VmHWM");
    close(fd);
}

/*
 * One 50 MB line printed in a context (one iopub message) and read whole by the client: kgate's peak stays within its
 * size plus a fixed amount. Before, the kernel connection's buffer, the decoded message's copy of its content and the
 * rendered event each held the 50 MB: a peak of about 150 MB above idle.
 */
Test(peak, one_fifty_megabyte_line_peaks_kgate_at_its_size)
{
    enum { LINE = 50000000 };
    static ts_gateway_t gw;
    ts_events_t evs;

    xh_gateway_start(&gw, NULL);
    char *ctx = xh_context_new(gw.port, NULL, NULL);
    /* the kernel and the code paths warm, so that idle is idle */
    xh_run_ok(gw.port, ctx, "print('x' * 100_000)", &evs);
    ts_events_dispose(&evs);
    ts_sleep_ms(1500); /* the tick trims the heap */
    long long idle = status_bytes(gw.pid, "VmRSS:");
    cr_assert(idle > 0);
    reset_hwm(gw.pid);

    json_t *body = xh_body(ctx, "print('y' * 50_000_000)");
    xh_run(gw.port, body, ts_now_ms() + XH_BIG_RUN_MS, &evs);
    json_decref(body);
    long long peak = status_bytes(gw.pid, "VmHWM:");
    ts_sleep_ms(1500);
    long long after = status_bytes(gw.pid, "VmRSS:");
    fprintf(stderr, "peak: one 50 MB line: kgate VmRSS %lld KiB idle, VmHWM %lld KiB (+%lld MiB), VmRSS %lld KiB after\n",
            idle >> 10, peak >> 10, (peak - idle) / MIB, after >> 10);

    char *out = ts_events_text(&evs, "stdout");
    cr_assert_eq(strlen(out), (size_t)LINE + 1, "stdout holds %zu bytes, expected the whole line", strlen(out));
    cr_assert_eq(out[0], 'y');
    cr_assert_eq(out[LINE - 1], 'y');
    free(out);
    ts_events_dispose(&evs);
    cr_assert_lt(peak - idle, 80 * MIB, "kgate peaked %lld MiB above idle for one 50 MB line", (peak - idle) / MIB);
    free(ctx);
    xh_gateway_stop(&gw);
}
