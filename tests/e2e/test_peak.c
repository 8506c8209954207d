/* tests/e2e/test_peak.c: kgate's peak memory (VmHWM) while one big message goes from a kernel to a client. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec_helpers.h"
#include "support/base.h"
#include "support/http.h"

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

/* POST /mcp with `body` in session `sid` ("" before initialize); returns the reply (asserted 200 and JSON), session id in `sid`. */
static json_t *mcp_post(unsigned short port, char *sid, size_t sid_size, const char *body)
{
    char session[300];
    const char *headers[] = {"Accept: application/json, text/event-stream", session, NULL};
    ts_response_t r = {0};
    json_t *reply;
    int st;

    snprintf(session, sizeof(session), "Mcp-Session-Id: %s", sid);
    if (sid[0] == '\0')
        headers[1] = NULL;
    st = ts_http_request_until(port, "POST", "/mcp", headers, body, ts_now_ms() + XH_BIG_RUN_MS, &r);
    cr_assert(st == 200 || st == 202, "POST /mcp: %d %s %.300s", st, r.error != NULL ? r.error : "", r.body);
    if (sid[0] == '\0' && ts_response_header(&r, "mcp-session-id") != NULL)
        snprintf(sid, sid_size, "%s", ts_response_header(&r, "mcp-session-id"));
    reply = r.json != NULL ? json_incref(r.json) : NULL;
    /* an answer in an SSE stream: progress notifications, then the reply, the last `data:` line */
    for (const char *d = r.body != NULL ? strstr(r.body, "data: ") : NULL; reply == NULL && d != NULL;
         d = strstr(d + 1, "data: ")) {
        const char *next = strstr(d + 1, "data: ");
        if (next == NULL)
            reply = json_loadb(d + 6, strcspn(d + 6, "\n"), 0, NULL);
    }
    ts_response_dispose(&r);
    return reply;
}

/*
 * MCP's run_code printing 100 MB (100 lines of 1 MB): the call's budget (--mcp-output-bytes, 1 MiB) comes back with a note and
 * a structured count of exactly what was dropped. Before issue 27, the note said "0 bytes of text and 0 results dropped".
 */
Test(peak, an_mcp_call_printing_100_megabytes_reports_the_dropped_bytes_exactly)
{
    enum { PRINTED = 100 * 1000000, BUDGET = 1 << 20 };
    /* ipykernel batches what a cell prints between flushes: printed this fast, one stream message can carry tens of MB
     * (69 MB seen in CI). Over --max-message-bytes (64 MiB) such a message is passed over whole and counted as a message,
     * not in bytes (issue 27's last item); the cap here admits any batch of the 100 MB, so the count is exact. */
    static const char *const args[] = {"--max-message-bytes", "134217728", NULL};
    static ts_gateway_t gw;
    char sid[256] = "";
    json_t *reply;

    xh_gateway_start(&gw, args);
    reply = mcp_post(gw.port, sid, sizeof(sid),
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-03-26\","
                     "\"capabilities\":{},\"clientInfo\":{\"name\":\"test_peak\",\"version\":\"1\"}}}");
    cr_assert(sid[0] != '\0', "initialize gave no Mcp-Session-Id");
    json_decref(reply);
    json_decref(mcp_post(gw.port, sid, sizeof(sid), "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
    reply = mcp_post(gw.port, sid, sizeof(sid),
                     "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\",\"arguments\":{"
                     "\"language\":\"python\",\"code\":\"for _ in range(100):\\n    print('z' * 999999)\"}}}");
    cr_assert_not_null(reply, "tools/call gave no JSON reply");
    json_t *result = json_object_get(reply, "result");
    const char *text = json_string_value(json_object_get(json_array_get(json_object_get(result, "content"), 0), "text"));
    cr_assert_not_null(text, "no text block: %s", json_dumps(reply, JSON_COMPACT));
    json_t *tr = json_object_get(json_object_get(result, "structuredContent"), "truncated");
    long long dropped = json_integer_value(json_object_get(tr, "dropped_bytes"));
    const char *note = strstr(text, "[kgate: output truncated: ");
    cr_assert_not_null(note, "no truncation note in the text's last 200 bytes: %s", text + strlen(text) - 200);
    size_t kept = (size_t)(note - text);
    fprintf(stderr, "peak: MCP run_code printing 100 MB: %zu bytes of text kept, %lld dropped; %s", kept, dropped, note);
    cr_assert_eq(dropped, (long long)(PRINTED - BUDGET), "dropped_bytes %lld, expected %d", dropped, PRINTED - BUDGET);
    /* the budget's last byte is inside a line (1048576 = 1 line of 1000000 and 48576 bytes): a newline puts the note on its own */
    cr_assert_eq(kept, (size_t)BUDGET + 1, "%zu bytes of text before the note, expected the budget, %d, and a newline", kept,
                 BUDGET);
    cr_assert_eq(text[BUDGET - 1], 'z');
    cr_assert_eq(text[BUDGET], '\n');
    char expected[64];
    snprintf(expected, sizeof(expected), ": %d bytes of text", PRINTED - BUDGET);
    cr_assert_not_null(strstr(note, expected), "the note does not say %s: %s", expected, note);
    json_decref(reply);
    xh_gateway_stop(&gw);
}
