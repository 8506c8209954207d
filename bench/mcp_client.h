/* bench/mcp_client.h: a minimal MCP client of kgate's /mcp (Streamable HTTP) for the `mcp` case. */
#ifndef BENCH_MCP_CLIENT_H
#define BENCH_MCP_CLIENT_H

#include <stdint.h>
#include "common.h"
#include "support/http.h"

/* The revision the client asks for in initialize and names in MCP-Protocol-Version afterwards. */
#define BENCH_MCP_VERSION "2025-11-25"
/* The stateless revision, and the named context its calls run in. */
#define BENCH_MCP_VERSION_STATELESS "2026-07-28"
#define BENCH_MCP_CONTEXT "bench"

/**
 * One MCP session over one keep-alive HTTP/1.1 connection of its own (TCP_NODELAY, as every ts_http_t).
 * Every request says `Accept: application/json, text/event-stream`, as the transport requires, so kgate
 * may answer either way: a quick call in JSON, a slow one (the first call, which starts the kernel) in an
 * SSE stream; both are read.
 */
typedef struct st_bench_mcp_t {
    ts_http_t http;
    unsigned timeout_ms;
    char session_id[72]; /* "" until initialize has answered */
    long long next_id;   /* of the next JSON-RPC request */
    /** tools/call requests say `Accept: text/event-stream` only: every answer is an SSE stream, begun at once. */
    int sse_only;
    /** Revision 2026-07-28: no initialize and no session; each call carries _meta and Mcp-* headers, `context` "bench". */
    int stateless;
    /** tools/call answers so far, by how they came: a JSON body, or an SSE stream (a call over a second). */
    size_t json_answers, sse_answers;
} bench_mcp_t;

/**
 * Connects to 127.0.0.1:`port`, sends `initialize` (keeping its Mcp-Session-Id) and then
 * `notifications/initialized`. With `sse_only`, the session's later requests accept only SSE (see
 * bench_mcp_t). With `stateless`, sends nothing: revision 2026-07-28 has no session (bench_mcp_t). Returns 0, or BENCH_ESTATUS,
 * BENCH_EPROTO (no session id, a JSON-RPC error) or a transport error, with the detail set. Close it with bench_mcp_close in every
 * case.
 */
int bench_mcp_open(bench_mcp_t *m, unsigned short port, unsigned timeout_ms, int sse_only, int stateless);

/**
 * tools/call `run_code {code, language}` in the session. `out` is zeroed first; `out->ms` runs from
 * just before the request is written to just after the JSON-RPC response is parsed (the JSON body,
 * or the SSE event carrying it; any notifications before it are read and skipped). `out->result_text`
 * is the last line of the result's first text block (where the plain-text result comes, after any
 * stdout and stderr), which must equal structuredContent's first `text/plain` result (BENCH_EPROTO if
 * not); `out->error` is set (and not an error here) for an `isError` result or a JSON-RPC error.
 * Returns 0, BENCH_ESTATUS, BENCH_EPROTO or a transport error.
 */
int bench_mcp_run_code(bench_mcp_t *m, const char *code, const char *language, bench_outcome_t *out);

/**
 * Ends the session (`DELETE /mcp`: kgate shuts its kernels down), as clean-up: a failure is a warning
 * and an earlier detail is kept; then closes the connection. Fine on a client whose open failed.
 */
void bench_mcp_close(bench_mcp_t *m);

#endif
