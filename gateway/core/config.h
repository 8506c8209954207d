/* gateway/config.h: every tunable of the gateway, its default, and the command line that sets it. */
#ifndef GW_CONFIG_H
#define GW_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define GW_VERSION "0.1.0"

/* --pool: the default warm pool (python3=GW_POOL_DEFAULT_SIZE) and the largest size one kernelspec may ask for */
#define GW_POOL_DEFAULT_KERNEL "python3"
/* --kernel-template: the kernelspecs forked from a template unless the flag says otherwise */
#define GW_KERNEL_TEMPLATE_DEFAULT "python3"
#define GW_POOL_DEFAULT_SIZE 1
#define GW_POOL_MAX_SIZE 64

/* XX(field, type, default, option, help): the numeric limits, one table for defaults, --help and parsing. */
#define GW_LIMITS_MAP(XX)                                                                                                          \
    XX(max_body_bytes, size_t, 8u << 20, "max-body-bytes", "largest accepted request body")                                        \
    XX(max_contexts, unsigned, 64, "max-contexts", "contexts (kernels) alive at once; beyond: 429 TOO_MANY_CONTEXTS")              \
    XX(max_queue, unsigned, 32, "max-queue", "runs waiting per context; beyond: 429 QUEUE_FULL")                                   \
    XX(default_timeout_ms, unsigned, 600000, "default-timeout-ms", "run timeout when a request sets none")                         \
    XX(max_timeout_ms, unsigned, 86400000, "max-timeout-ms", "largest timeout a request may set")                                  \
    XX(timeout_grace_ms, unsigned, 2000, "timeout-grace-ms",                                                                       \
       "after a timeout's interrupt (or a stop's, on a kernel whose interrupts may hang: Deno's), wait this long, then restart")   \
    XX(output_limit_bytes, size_t, 64u << 20, "output-limit-bytes", "stdout+stderr kept per run when a request sets none")         \
    XX(max_output_limit_bytes, size_t, 1u << 30, "max-output-limit-bytes", "largest output_limit a request may set")               \
    XX(result_limit_bytes, size_t, 16u << 20, "result-limit-bytes", "largest result (MIME bundle) kept per run default")           \
    XX(max_result_limit_bytes, size_t, 256u << 20, "max-result-limit-bytes", "largest result_limit a request may set")             \
    XX(max_run_log_bytes, size_t, 64u << 20, "max-run-log-bytes", "events retained per run for readers, on disk (oldest dropped)") \
    XX(max_message_bytes, size_t, 64u << 20, "max-message-bytes",                                                                  \
       "largest kernel message (its frames together); beyond: skipped and reported")                                               \
    XX(max_retained_bytes, size_t, 256u << 20, "max-retained-bytes",                                                               \
       "events of finished runs kept for resumption (on disk) and their tool-call records (RAM)")                                  \
    XX(run_retention_ms, unsigned, 300000, "run-retention-ms", "how long a finished run stays readable")                           \
    XX(max_reader_batch_bytes, size_t, 1u << 20, "max-reader-batch-bytes", "bytes of events handed to one socket write")           \
    XX(ping_interval_ms, unsigned, 5000, "ping-interval-ms", "interval of keep-alive `ping` events on a stream")                   \
    XX(context_idle_ms, unsigned, 3600000, "context-idle-ms", "contexts idle this long are deleted")                               \
    XX(shutdown_grace_ms, unsigned, 2000, "shutdown-grace-ms", "grace before SIGTERM, then before SIGKILL, of a kernel")           \
    XX(kernel_start_timeout_ms, unsigned, 60000, "kernel-start-timeout-ms",                                                        \
       "a kernel not ready by then (from its spawn) has failed")                                                                   \
    XX(max_starting_kernels, unsigned, 0, "max-starting-kernels",                                                                  \
       "kernels spawned and not ready yet at once (0: the number of cores); the other starts wait their turn")                     \
    XX(max_forking_kernels, unsigned, 0, "max-forking-kernels",                                                                    \
       "kernels starting at once when the next is forked from a template (0: twice the cores)")                                    \
    XX(max_start_queue, unsigned, 64, "max-start-queue",                                                                           \
       "kernel starts waiting their turn; beyond: 429 TOO_MANY_CONTEXTS with Retry-After")                                         \
    XX(kernel_template_max_pending, unsigned, 64, "kernel-template-max-pending",                                                   \
       "fork requests waiting for a kernel template's answers; beyond: the kernel is spawned (fallback queue_full)")               \
    XX(kernel_restart_limit, unsigned, 5, "kernel-restart-limit",                                                                  \
       "automatic restarts in a row of a context's kernel that died on its own (0: none; it stays dead)")                          \
    XX(heartbeat_kill_ms, unsigned, 0, "heartbeat-kill-ms",                                                                        \
       "kill a kernel silent on heartbeats this long (0: never; a kernel is dead when its process is)")                            \
    XX(max_commands, unsigned, 256, "max-commands", "command records kept, running or finished (oldest finished dropped first)")   \
    XX(max_command_log_bytes, size_t, 8u << 20, "max-command-log-bytes", "output kept per command (a ring file: the newest kept)") \
    XX(command_log_read_bytes, size_t, 4u << 20, "command-log-read-bytes", "largest body of one GET /command/{id}/logs")           \
    XX(command_retention_ms, unsigned, 3600000, "command-retention-ms", "how long a finished command stays queryable")             \
    XX(command_kill_grace_ms, unsigned, 3000, "command-kill-grace-ms", "DELETE /command: SIGTERM, then SIGKILL after this")        \
    XX(request_timeout_ms, unsigned, 120000, "request-timeout-ms", "an HTTP/1 request (head and body) must arrive within this")    \
    XX(header_timeout_ms, unsigned, 20000, "header-timeout-ms",                                                                    \
       "an HTTP/1 request head, once begun, must be whole within this; beyond: the connection is closed")                          \
    XX(max_upload_bytes, size_t, (1u << 30) + (1u << 20), "max-upload-bytes", "largest accepted POST /files/upload body")          \
    XX(body_mmap_threshold, size_t, 4u << 20, "body-mmap-threshold", "request bodies above this are buffered in a temporary file") \
    XX(max_edit_file_bytes, size_t, 16u << 20, "max-edit-file-bytes", "largest file the editor and /files/replace load")           \
    XX(max_undo_depth, unsigned, 10, "max-undo-depth", "versions kept per file for the editor's undo_edit")                        \
    XX(max_undo_bytes, size_t, 64u << 20, "max-undo-bytes", "bytes of versions kept for undo_edit, all files together")            \
    XX(max_list_entries, unsigned, 10000, "max-list-entries", "entries returned by /files/search and /directories/list")           \
    XX(max_connections, unsigned, 4096, "max-connections",                                                                         \
       "client connections at once (also bounded by RLIMIT_NOFILE - fd-reserve)")                                                  \
    XX(fd_reserve, unsigned, 128, "fd-reserve", "file descriptors kept free of client connections, for kernels and files")         \
    XX(stdin_timeout_ms, unsigned, 120000, "stdin-timeout-ms", "an input() unanswered this long ends its run (StdinTimeout)")      \
    XX(max_ptys, unsigned, 64, "max-ptys", "PTY sessions alive at once; beyond: 429 TOO_MANY_SESSIONS")                            \
    XX(jupyter_replay_bytes, size_t, 16u << 20, "jupyter-replay-bytes",                                                            \
       "kernel messages kept for a Jupyter client away (its session_id's last WebSocket closed) until it returns")                 \
    XX(jupyter_replay_ms, unsigned, 60000, "jupyter-replay-ms", "how long they are kept for it; then dropped")                     \
    XX(pty_ring_bytes, size_t, 1u << 20, "pty-ring-bytes", "output kept per PTY session for replay (the newest bytes)")            \
    XX(pty_idle_ms, unsigned, 1800000, "pty-idle-ms", "PTY sessions with no client and no output this long are deleted")           \
    XX(pty_send_queue_bytes, size_t, 4u << 20, "pty-send-queue-bytes",                                                             \
       "live output queued for a PTY client beyond its replay; beyond: the client is cut off")                                     \
    XX(pty_stdin_bytes, size_t, 1u << 20, "pty-stdin-bytes", "stdin queued for a PTY session's shell; beyond: STDIN_WRITE_FAILED") \
    XX(ws_queue_bytes, size_t, 16u << 20, "ws-queue-bytes",                                                                        \
       "bytes queued for a kernel or proxied WebSocket peer (each way); beyond: the peer is cut off (1008)")                       \
    XX(access_log_buffer_bytes, size_t, 1u << 20, "access-log-buffer-bytes",                                                       \
       "--access-log lines waiting for the disk (twice this in RAM at most); beyond: lines dropped and counted")                   \
    XX(proxy_timeout_ms, unsigned, 120000, "proxy-timeout-ms",                                                                     \
       "/proxy: an upstream silent this long (connecting, answering, mid-body) gets 504 or is cut")                                \
    XX(max_proxy_connections, unsigned, 256, "max-proxy-connections",                                                              \
       "/proxy: requests and WebSockets relayed at once; beyond: 429 TOO_MANY_PROXY_CONNECTIONS")                                  \
    XX(max_proxy_body_bytes, size_t, 1u << 30, "max-proxy-body-bytes", "largest request body relayed by /proxy")                   \
    XX(max_memory_mb, unsigned, 0, "max-memory-mb",                                                                                \
       "memory cap of a context's kernel (MiB; its default and the most limits.memory_mb may ask; 0: none; unset under "           \
       "--sandbox bwrap: a quarter of the machine's RAM)")                                                                         \
    XX(max_pids, unsigned, 0, "max-pids",                                                                                          \
       "processes of a context's kernel at once (default and bound of limits.pids; 0: none; unset under --sandbox bwrap: 128 "     \
       "per CPU, 256 to 4096)")                                                                                                    \
    XX(max_tmp_mb, unsigned, 0, "max-tmp-mb",                                                                                      \
       "size of a sandbox's private /tmp and of its /dev/shm, each (MiB; 0: half the memory cap, tmpfs's half of the RAM "         \
       "without one)")                                                                                                             \
    XX(max_cpu_seconds, unsigned, 0, "max-cpu-seconds", "CPU seconds per kernel process (default and bound; 0: none)")             \
    XX(max_open_files, unsigned, 0, "max-open-files", "open files per kernel process (default and bound; 0: kgate's own)")         \
    XX(max_file_size_mb, unsigned, 0, "max-file-size-mb", "largest file a kernel may write (MiB; default and bound; 0: none)")     \
    XX(mcp_max_sessions, unsigned, 16, "mcp-max-sessions", "MCP sessions open at once; beyond: initialize is refused (429)")       \
    XX(mcp_session_idle_ms, unsigned, 1800000, "mcp-session-idle-ms",                                                              \
       "an MCP session without a request this long ends, and its kernels and bash session with it")                                \
    XX(mcp_session_fresh_idle_ms, unsigned, 60000, "mcp-session-fresh-idle-ms",                                                    \
       "an MCP session that sent nothing after initialize (and notifications/initialized) ends after this long idle")              \
    XX(mcp_max_named_contexts, unsigned, 16, "mcp-max-named-contexts",                                                             \
       "MCP 2026-07-28's named contexts at once; beyond: the least recently used idle one ends (its kernels with it)")             \
    XX(mcp_context_idle_ms, unsigned, 1800000, "mcp-context-idle-ms",                                                              \
       "an MCP 2026-07-28 named context without a call this long ends, and its kernels and bash with it")                          \
    XX(mcp_output_bytes, size_t, 1u << 20, "mcp-output-bytes",                                                                     \
       "output kept per MCP tool call (text and results); the rest is dropped")                                                    \
    XX(max_tools, unsigned, 128, "max-tools", "tools one POST /code may declare (code mode)")                                      \
    XX(max_tool_spec_bytes, size_t, 64u << 10, "max-tool-spec-bytes", "one declared tool as JSON (name, description, schema)")     \
    XX(max_tool_calls, unsigned, 1000, "max-tool-calls", "tool calls one run may make; beyond, a call raises in the code")         \
    XX(max_pending_tool_calls, unsigned, 64, "max-pending-tool-calls",                                                             \
       "tool calls awaited at once by one run; beyond, the extra calls raise in the code")                                         \
    XX(max_tool_argument_bytes, size_t, 1u << 20, "max-tool-argument-bytes", "one tool call's arguments as JSON")                  \
    XX(max_tool_result_bytes, size_t, 4u << 20, "max-tool-result-bytes", "one tool_results answer as JSON; beyond: 413")           \
    XX(max_isolated_sessions, unsigned, 16, "max-isolated-sessions",                                                               \
       "isolated sessions (/v1/isolated) at once, destroyed ones kept for GET included; beyond: 429 TOO_MANY_SESSIONS")            \
    XX(isolated_idle_seconds, unsigned, 1800, "isolated-idle-seconds",                                                             \
       "an isolated session's idle_timeout_seconds when its request sets none (0: no expiry)")                                     \
    XX(isolated_run_timeout_seconds, unsigned, 300, "isolated-run-timeout-seconds",                                                \
       "an isolated run's timeout_seconds when its request sets none (0: none)")

/** One entry of --pool: `size` kernels of the kernelspec named `kernel` kept started ahead. */
typedef struct st_gw_pool_size_t {
    char *kernel;
    unsigned size;
} gw_pool_size_t;

typedef struct st_gw_config_t {
    char *listen_host; /* "127.0.0.1", "::1", "0.0.0.0" ... */
    uint16_t listen_port;
    /* --e2b-listen: a listener of its own for E2B's SDK (which looks at localhost:49999 in debug mode); NULL: none */
    char *e2b_listen_host;
    uint16_t e2b_listen_port;
    char *access_token; /* NULL: no authentication */
    int allow_remote_without_token;
    char **kernel_paths; /* extra kernelspec directories, each holding <name>/kernel.json */
    size_t num_kernel_paths;
    int compat_execd;  /* execd's exact framing: `<json>\n\n`, and results.text */
    int keep_ansi;     /* keep ANSI colour codes in tracebacks */
    char *runtime_dir; /* NULL: a fresh temporary directory */
    char *shell;       /* stateless runs: `<shell> -c <code>` */
    char *access_log;  /* --access-log PATH|-: one line per HTTP request (app/access_log.h); NULL: none */
    /* files and editor routes: every path lives beneath it; NULL: the current directory at start */
    char *workspace_root;
    int allow_hardlinks; /* files routes serve regular files with several hard links (one may live outside the root) */
    /* kgate is a sandbox's execd (its container is the boundary): the files routes serve the whole
     * filesystem unless --workspace-root says otherwise, and commands and sessions start in kgate's
     * own working directory */
    int as_execd;
    /* --runtime-init (or EXECD_RUNTIME_INIT=true): every route but the public ones answers 503 until POST /internal/init
     * (app/runtime_init.h) */
    int runtime_init;
    /* --log-level (ksys/log.h): kgate's own log lines below it are not written */
    int log_level;
    /* --graceful-shutdown-timeout (or EXECD_API_GRACE_SHUTDOWN), in ms: on SIGTERM, how long requests and streams in flight
     * may take to finish before kernels are stopped (0: none, the default; 5 s under --as-execd when not given) */
    unsigned graceful_shutdown_ms;
    int graceful_shutdown_given;
    /* --lifecycle-startup-status-file: bootstrap.sh's file that kgate appends `running <secs>` and `done <status>` to around
     * the lifecycle's preStart hook (app/lifecycle.h); NULL: none */
    char *lifecycle_status_file;
    /* --init-control-fd (the drop-in's launcher, deploy/execd/launcher.c): the pipe on which kgate asks the launcher, PID 1
     * and owner of the entrypoint, to retire it and start it again (entrypointPolicy=restart); -1: none */
    int init_control_fd;
    /* origins (scheme://host[:port], comma-separated, or "*") whose browser pages may call kgate;
     * NULL: only kgate's own origin (a request whose Origin names another host is refused) */
    char *allow_origin;
    /* where kernels run: 0 as plain children (--sandbox none), 1 in bubblewrap (--sandbox bwrap) */
    int sandbox;
    char *bwrap_path; /* NULL: bwrap on PATH */
    /* --pool NAME=N,...: warm kernels per kernelspec (docs/operations.md, Warm pool); default
     * GW_POOL_DEFAULT_KERNEL=GW_POOL_DEFAULT_SIZE, none after --pool none */
    gw_pool_size_t *pool;
    size_t num_pool;
    /* --kernel-template NAME[,NAME]...: ipykernel kernelspecs whose kernels are forked from a template process (docs/kernels.md,
     * Kernels forked from a template); default GW_KERNEL_TEMPLATE_DEFAULT, NULL after --kernel-template none */
    char *kernel_template;
    /* --kernel-template-merge: forked kernels' memory is marked for KSM (docs/kernels.md, docs/security.md); 0, the default:
     * never, merging opening side channels between contexts */
    int kernel_template_merge;
    /* --kernel-template-imports-only: kernels are forked from the template's imports alone, not from its warm kernel
     * (docs/kernels.md, "A warm kernel forked"); 0, the default: from the warm kernel where ipykernel allows it */
    int kernel_template_imports_only;
/* each limit, and whether its flag was given (a derived default replaces only an unset one) */
#define GW_XX_FIELD(field, type, def, opt, help)                                                                                   \
    type field;                                                                                                                    \
    unsigned char field##_given;
    GW_LIMITS_MAP(GW_XX_FIELD)
#undef GW_XX_FIELD
} gw_config_t;

/**
 * Pure: under --sandbox bwrap, the caps a context gets when no flag set them: --max-memory-mb a quarter of `ram_bytes`,
 * --max-pids 128 per CPU (256 to 4096). A flag given, 0 included (none), is kept. Does nothing without --sandbox bwrap.
 */
void gw_config_derive_sandbox_caps(gw_config_t *config, uint64_t ram_bytes, unsigned ncpu);
/** The size of a sandbox's /tmp and /dev/shm for a memory cap of `memory_bytes` (0: none): --max-tmp-mb, else half the
 * cap; 0 (tmpfs's default) when neither is set. */
uint64_t gw_config_tmp_bytes(const gw_config_t *config, uint64_t memory_bytes);

/**
 * Pure: parses a Go duration (time.ParseDuration, as execd's duration flags take: "200ms", "1.5s", "1m30s", "0"; units ns,
 * us, µs, ms, s, m, h; no sign) into whole milliseconds (rounded down) in `*ms`. Returns 0, or -1 when malformed or over
 * UINT_MAX ms.
 */
int gw_config_parse_duration_ms(const char *s, unsigned *ms);

/** Fills `config` with the defaults (127.0.0.1:44772, no token, /bin/bash, the default pool, GW_LIMITS_MAP). */
void gw_config_init(gw_config_t *config);
/** Releases the strings owned by `config`. */
void gw_config_dispose(gw_config_t *config);
/** True when kgate listens on loopback addresses only (localhost, 127.0.0.0/8, ::1; --listen and --e2b-listen). */
int gw_config_listens_on_loopback(const gw_config_t *config);

/**
 * Pure: parses --pool's value, "none" or "NAME=N[,NAME=N]..." (a kernelspec name of letters, digits,
 * '.', '_' and '-'; N from 0 to GW_POOL_MAX_SIZE; each name once), into a new array in `*out` (the
 * caller frees it with gw_config_pool_free). Returns 0, or -1 with why in `err`.
 */
int gw_config_parse_pool(const char *arg, gw_pool_size_t **out, size_t *num, char *err, size_t errlen);
/** Frees what gw_config_parse_pool returned; accepts NULL. */
void gw_config_pool_free(gw_pool_size_t *pool, size_t num);

/** Pure: whether --kernel-template's value is "none" or NAME[,NAME]... (kernelspec names as --pool takes them). */
int gw_config_valid_template_list(const char *arg);

/**
 * Parses the command line (and KGATE_ACCESS_TOKEN) into `config`. Returns 0 to run, 1 when
 * --help or --version was printed to `out` (exit 0), or -1 after printing an error to `err`
 * (exit 2). Rejects a non-loopback listen address without a token unless
 * --allow-remote-without-token is given.
 */
int gw_config_parse_args(gw_config_t *config, int argc, char **argv, void *out, void *err);

#endif
