/* mcp/output.h: a run's events gathered into one tools/call result, within a byte budget (pure). */
#ifndef GW_MCP_OUTPUT_H
#define GW_MCP_OUTPUT_H

#include <stddef.h>
#include <jansson.h>

typedef struct st_gw_mcp_buf_t {
    char *base;
    size_t len, cap;
} gw_mcp_buf_t;

/**
 * What a run said, so far. Text (stdout, stderr, plain results, tracebacks) and result bundles
 * count against `max_bytes`; beyond, text is cut at a character boundary and whole results are
 * dropped, both counted and reported in the result.
 */
typedef struct st_gw_mcp_output_t {
    size_t max_bytes, used_bytes;
    size_t dropped_bytes, dropped_results;
    int engine_dropped; /* the run itself dropped output (its own limits, or an oversized kernel message) */
    /* what the run dropped before this budget saw it, as its execution_complete counts it (`dropped`) */
    size_t run_dropped_bytes, run_dropped_results, run_dropped_messages;
    gw_mcp_buf_t text, out, err;
    json_t *results;                               /* MIME bundles */
    json_t *images;                                /* image content blocks */
    json_t *error;                                 /* {ename, evalue, traceback} of the last error event; NULL without one */
    int execution_count;                           /* -1 until the kernel numbers the cell */
    unsigned timeout_asked_ms, timeout_applied_ms; /* set by the caller when timeout_ms was over the cap: the result says so */
    size_t outputs;                                /* output events seen (progress) */
    char last_line[128];                           /* the newest line of output, for progress messages */
} gw_mcp_output_t;

void gw_mcp_output_init(gw_mcp_output_t *out, size_t max_bytes);
void gw_mcp_output_dispose(gw_mcp_output_t *out);

/**
 * Takes one event of a run (POST /code's event objects, borrowed). Returns 1 when it was output
 * (stdout, stderr, result, error), 0 for the rest (init, ping, status, execution_count, ...).
 */
int gw_mcp_output_add(gw_mcp_output_t *out, const json_t *event);

/**
 * The tools/call result: `content` (one text block: the output in order, tracebacks, a line on what
 * was dropped, by this budget and by the run's own limits together; then an image block per image/png or image/jpeg result),
 * `isError` when the run raised, and with `structured` the `structuredContent` {language, execution_count, stdout, stderr, results,
 * error?, truncated?, timeout_capped?}; `timeout_capped` is {asked_ms, applied_ms} (and a line in the text) when
 * timeout_asked_ms is set; `truncated` is {limit_bytes, dropped_bytes, dropped_results, dropped_messages (kernel messages over
 * --max-message-bytes: what they carried is not counted in bytes), dropped_by_run}. A new object; `out` is left as it was.
 */
json_t *gw_mcp_output_result(const gw_mcp_output_t *out, const char *language, int structured);

/** A tool result with one text block (`isError` when `is_error`): what failed before or outside a run. Never NULL: text that
 * is not UTF-8 goes through gw_json_text. */
json_t *gw_mcp_text_result(const char *text, size_t len, int is_error);

#endif
