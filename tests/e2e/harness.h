/* tests/e2e/harness.h: runs the real kgate binary and speaks HTTP/SSE to it (no Criterion inside). */
#ifndef KGATE_E2E_HARNESS_H
#define KGATE_E2E_HARNESS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

/* Every wait in the harness is bounded by one of these (milliseconds). */
#define E2E_STARTUP_MS 10000      /* kgate answering /healthz */
#define E2E_HEALTH_POLL_MS 20     /* /healthz polling period */
#define E2E_STOP_GRACE_MS 10000   /* SIGTERM to exit, before SIGKILL */
#define E2E_REQUEST_MS 30000      /* a plain request/response (a kernel start fits in it) */
#define E2E_END_GRACE_MS 2000     /* after execution_complete, waiting for the end of the response */
#define E2E_MAX_BODY (64u << 20)  /* largest response body or SSE event accepted */
#define E2E_MAX_EVENTS 200000     /* events collected from one stream */
#define E2E_MAX_TEXT (512u << 20) /* concatenated text of one stream (e2e_events_text) */

/** Monotonic clock in milliseconds. */
int64_t e2e_now_ms(void);

/* ---- the kgate process ---------------------------------------------------------------------- */

typedef struct st_e2e_gateway_t {
    pid_t pid;             /* 0 once stopped */
    unsigned short port;   /* 127.0.0.1:port */
    char tmpdir[256];      /* private temp dir: log, runtime dir; removed by stop unless KGATE_E2E_KEEP */
    char log_path[300];    /* kgate's stdout and stderr */
    char runtime_dir[300]; /* passed as --runtime-dir unless the caller passes its own */
    int exit_status;       /* waitpid() status once stopped; -1 before */
    int owner;             /* 1 when this process started it (stop waits for it), 0 for a borrowed handle */
    char error[512];       /* why the last harness call on it failed */
} e2e_gateway_t;

/**
 * Path of the kgate executable: $KGATE_E2E_KGATE if set, else `binary_dir`/gateway/kgate.
 * Returns a static buffer.
 */
const char *e2e_kgate_path(const char *binary_dir);

/**
 * Starts `exe --listen 127.0.0.1:<free port> --runtime-dir <tmp>/runtime --kernel-path
 * /usr/share/jupyter/kernels <args...>` (NULL-terminated `args`, may be NULL; the default
 * --runtime-dir / --kernel-path are left out when `args` has its own) with `env` ("K=V",
 * NULL-terminated, may be NULL) added to its environment and KGATE_ACCESS_TOKEN removed unless
 * `env` sets it. stdout and stderr go to gw->log_path. kgate gets SIGTERM if the starting thread
 * dies. Waits until GET /healthz answers 200 (polling every 20 ms, at most 10 s).
 * Returns 0, or -1 with gw->error set (the process, if any, is then stopped and reaped).
 */
int e2e_gateway_start(e2e_gateway_t *gw, const char *exe, const char *const *args, const char *const *env);

/**
 * Stops a gateway this process started: SIGTERM, waits up to 10 s, then SIGKILL. Before signalling
 * it records every descendant of kgate (from /proc); afterwards `*survivors` (may be NULL) is how
 * many of them still live (excluding zombies). Removes the temp dir unless KGATE_E2E_KEEP is set.
 * Returns 0 if kgate exited by itself within the grace period, -1 if it had to be killed or could
 * not be reaped (gw->error says which). gw->exit_status holds the wait status. Idempotent.
 */
int e2e_gateway_stop(e2e_gateway_t *gw, size_t *survivors);

/** e2e_gateway_stop without removing the temp dir (to read the log afterwards); then call e2e_gateway_cleanup. */
int e2e_gateway_stop_keep(e2e_gateway_t *gw, size_t *survivors);

/** Sends `sig` (for tests that then observe the exit themselves with e2e_gateway_wait). */
int e2e_gateway_signal(e2e_gateway_t *gw, int sig);

/** Waits for a started gateway to exit, until `deadline_ms` (e2e_now_ms clock). 0 if it exited, -1 if not. */
int e2e_gateway_wait(e2e_gateway_t *gw, int64_t deadline_ms);

/** Removes the temp dir (unless KGATE_E2E_KEEP). Called by stop; for use after e2e_gateway_wait. */
void e2e_gateway_cleanup(e2e_gateway_t *gw);

/** Writes the last `max` bytes of kgate's log to stderr, framed, for failure reports. */
void e2e_gateway_dump_log(const e2e_gateway_t *gw, size_t max);

/** Serialises a started gateway for a child process (environment variable value), and back. */
void e2e_gateway_format(const e2e_gateway_t *gw, char *buf, size_t size);
int e2e_gateway_parse(e2e_gateway_t *gw, const char *s);

/* ---- processes ------------------------------------------------------------------------------ */

typedef struct st_e2e_proc_t {
    pid_t pid;
    unsigned long long starttime; /* /proc/<pid>/stat field 22, so that a reused PID is not mistaken */
} e2e_proc_t;

/** Collects every live descendant of `root` (not `root` itself) into `out` (at most `max`); returns how many. */
size_t e2e_descendants(pid_t root, e2e_proc_t *out, size_t max);

/** 1 if that process (same PID and start time; starttime 0 = any) still exists and is not a zombie. */
int e2e_proc_alive(const e2e_proc_t *p);

/** CPU time (user + system) that process `pid` has used so far, in milliseconds, or -1 if unknown. */
int64_t e2e_proc_cpu_ms(pid_t pid);

/* ---- HTTP/1.1 client ------------------------------------------------------------------------ */

typedef struct st_e2e_header_t {
    char *name;
    char *value;
} e2e_header_t;

typedef struct st_e2e_response_t {
    int status; /* 0 if no response arrived */
    e2e_header_t *headers;
    size_t num_headers;
    int chunked; /* Transfer-Encoding: chunked */
    char *body;  /* NUL-terminated; empty when none */
    size_t body_len;
    json_t *json;    /* body parsed as JSON, or NULL */
    char error[256]; /* transport failure, if any */
} e2e_response_t;

/**
 * One request on its own connection to 127.0.0.1:`port` (Connection: close), blocking, bounded by
 * E2E_REQUEST_MS. `headers` are "Name: value" strings, NULL-terminated (may be NULL); `body` may be
 * NULL (no body) and is sent with Content-Length. Reads Content-Length, chunked and
 * until-close bodies. Returns the status (> 0), or -1 with out->error set. Release with
 * e2e_response_dispose in every case.
 */
int e2e_http_request(unsigned short port, const char *method, const char *path, const char *const *headers, const char *body,
                     e2e_response_t *out);

/** Same with an explicit deadline (e2e_now_ms clock). */
int e2e_http_request_until(unsigned short port, const char *method, const char *path, const char *const *headers, const char *body,
                           int64_t deadline_ms, e2e_response_t *out);

/** First value of header `name` (case-insensitive), or NULL. */
const char *e2e_response_header(const e2e_response_t *r, const char *name);

void e2e_response_dispose(e2e_response_t *r);

/** POSTs `body` (borrowed) serialised compactly, with Content-Type: application/json. */
int e2e_post_json(unsigned short port, const char *path, const char *const *headers, json_t *body, e2e_response_t *out);

/* ---- SSE ------------------------------------------------------------------------------------ */

typedef struct st_e2e_event_t {
    long long id;     /* value of the `id:` field, -1 when absent */
    char *data;       /* the event's data (data: lines joined by \n, or the bare JSON line) */
    json_t *json;     /* data parsed as JSON, or NULL */
    const char *type; /* json's "type" if a string, else "" (points into json) */
    int bare;         /* 1 when framed as a bare JSON line (execd compat), 0 for SSE data: lines */
    int64_t recv_ms;  /* e2e_now_ms() when the event was complete */
} e2e_event_t;

typedef struct st_e2e_events_t {
    e2e_event_t *v;
    size_t n, cap;
    int ended;      /* the response ended cleanly (final chunk / Content-Length / close) */
    int timed_out;  /* the deadline passed first */
    int truncated;  /* more than the caller's max_events arrived */
    int64_t end_ms; /* when reading stopped */
    char error[256];
} e2e_events_t;

/**
 * Incremental SSE parser with no I/O (also understands execd's bare `<json>\n\n` framing). Feed it
 * bytes in any split; complete events are appended to `out`. Returns 0, or -1 if an event exceeds
 * E2E_MAX_BODY (parser then unusable).
 */
typedef struct st_e2e_sse_parser_t {
    char *line;
    size_t line_len, line_cap;
    char *data;
    size_t data_len, data_cap;
    int has_data, bare;
    long long id;
    int skip_lf; /* a \r ended the last line; ignore a following \n */
} e2e_sse_parser_t;

void e2e_sse_parser_init(e2e_sse_parser_t *p);
int e2e_sse_parser_feed(e2e_sse_parser_t *p, const char *buf, size_t len, e2e_events_t *out);
void e2e_sse_parser_dispose(e2e_sse_parser_t *p);

void e2e_events_dispose(e2e_events_t *evs);
/** Index of the first event of `type` at or after `from`, or -1. */
long e2e_events_find(const e2e_events_t *evs, const char *type, size_t from);
size_t e2e_events_count(const e2e_events_t *evs, const char *type);
/** Concatenation of the `text` of every event of `type` (e.g. "stdout"), in order; caller frees. */
char *e2e_events_text(const e2e_events_t *evs, const char *type);
/** Writes a one-line-per-event summary into `buf` (for assertion messages); returns buf. */
const char *e2e_events_summary(const e2e_events_t *evs, char *buf, size_t size);

/** A streamed response read incrementally. */
typedef struct st_e2e_stream_t e2e_stream_t;

/**
 * Sends a request and reads the response head (bounded by `deadline_ms`). Returns NULL only on
 * transport failure before a status line (message in `err`, may be NULL, size 256). If the
 * response is not an event stream (no text/event-stream Content-Type), its whole body is read
 * into e2e_stream_response(s) and no events follow.
 */
e2e_stream_t *e2e_stream_open(unsigned short port, const char *method, const char *path, const char *const *headers,
                              const char *body, int64_t deadline_ms, char *err);

/** The response head (and, for non-stream responses, body and json). Owned by the stream. */
const e2e_response_t *e2e_stream_response(const e2e_stream_t *s);

/**
 * Reads until at least one more event is parsed (appended to `out`), the response ends, or the
 * deadline passes. Returns the number of events appended (> 0), 0 at the end of the response
 * (out->ended set), or -1 on timeout (out->timed_out) or transport error (out->error).
 */
int e2e_stream_next(e2e_stream_t *s, int64_t deadline_ms, e2e_events_t *out);

/**
 * Reads every event until the response ends, the deadline passes, or `max_events` (0 = the
 * default bound) are collected. Once an `execution_complete` event has arrived it waits at most
 * E2E_END_GRACE_MS more for the end of the response. Returns 0 when the response ended, else -1.
 */
int e2e_stream_collect(e2e_stream_t *s, int64_t deadline_ms, size_t max_events, e2e_events_t *out);

/** Closes the connection (early or not) and frees the stream. NULL is fine. */
void e2e_stream_close(e2e_stream_t *s);

/* ---- code interpreter helpers --------------------------------------------------------------- */

/**
 * POST /code/context {"language": language}. On 200 with an "id" string, *id is a copy (caller
 * frees). Returns the status, or -1 on transport failure. `resp` may be NULL.
 */
int e2e_context_create(unsigned short port, const char *const *headers, const char *language, char **id, e2e_response_t *resp);

/** DELETE /code/contexts/{id}; returns the status. */
int e2e_context_delete(unsigned short port, const char *const *headers, const char *id);

/**
 * Builds the POST /code body: {"context": {"id"?, "language"?}, "code": code}; no "context" at
 * all when both are NULL. New reference.
 */
json_t *e2e_code_body(const char *ctx_id, const char *language, const char *code);

/**
 * POST /code and collect the whole stream within `timeout_ms`. Returns the HTTP status (-1 on
 * transport failure). When `resp` is given it receives a copy of the head (and the body of a
 * non-stream response); dispose it.
 */
int e2e_run_code(unsigned short port, const char *const *headers, const char *ctx_id, const char *language, const char *code,
                 int timeout_ms, e2e_events_t *out, e2e_response_t *resp);

#endif
