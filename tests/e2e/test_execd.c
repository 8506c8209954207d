/* tests/e2e/test_execd.c: execd's flags and variables honoured by the real kgate (docs/execd.md, docs/API.md 6.3): EXECD_ENVS
 * expanded per command, --log-level, the SIGTERM drain of --graceful-shutdown-timeout, the lifecycle's preStart with the
 * startup status file, and POST /internal/init's lifecycle, telemetry and entrypointPolicy. Each test runs a private kgate. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"
#include "support/stream.h"

#define RUN_MS 60000 /* a short command, from POST to the end of its stream */

static ts_gateway_t gw;
static char dir[256];

static void fini(void)
{
    if (gw.pid != 0)
        ts_gateway_stop(&gw, NULL);
    if (dir[0] != '\0')
        ts_remove_tree(dir);
}

TestSuite(execd, .fini = fini, .timeout = 180);

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/kgate-execd-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void write_file(const char *name, const char *text)
{
    char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    cr_assert_not_null(f = fopen(path, "w"), "%s", path);
    fputs(text, f);
    fclose(f);
}

/* The file's text, or "" when it does not exist (static buffer). */
static const char *read_file(const char *name)
{
    static char buf[8192];
    char path[512];
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    buf[0] = '\0';
    if ((f = fopen(path, "r")) == NULL)
        return buf;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void start(const char *const *args, const char *const *env)
{
    int rc = ts_gateway_start(
        &gw, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .env = env, .label = "execd"});
    cr_assert_eq(rc, 0, "kgate did not start: %s", gw.error);
}

/* kgate's log (static buffer). */
static const char *gw_log(void)
{
    static char buf[1 << 18];
    FILE *f = fopen(gw.log_path, "r");
    size_t n = f != NULL ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

/* POST /command {"command": command} and the whole stream; asserts 200 and its end. */
static void run_command(const char *command, ts_events_t *out)
{
    static const char *const headers[] = {"Content-Type: application/json", NULL};
    json_t *body = json_pack("{s:s}", "command", command);
    char *text = json_dumps(body, JSON_COMPACT), err[256] = "";
    ts_stream_t *s = ts_stream_open(gw.port, "POST", "/command", headers, text, ts_now_ms() + RUN_MS, err);

    json_decref(body);
    free(text);
    memset(out, 0, sizeof(*out));
    cr_assert_not_null(s, "POST /command: %s", err);
    cr_assert_eq(ts_stream_response(s)->status, 200, "POST /command: HTTP %d", ts_stream_response(s)->status);
    ts_stream_collect(s, ts_now_ms() + RUN_MS, 0, out);
    ts_stream_close(s);
    cr_assert(out->ended, "the command's stream did not end (%s)", out->error);
}

/* The stdout texts of a stream, each followed by '|' (static buffer). */
static const char *stdout_of(const ts_events_t *evs)
{
    static char buf[8192];

    buf[0] = '\0';
    for (size_t i = 0; i != evs->n; ++i)
        if (strcmp(evs->v[i].type, "stdout") == 0) {
            strncat(buf, json_string_value(json_object_get(evs->v[i].json, "text")) ?: "", sizeof(buf) - strlen(buf) - 2);
            strcat(buf, "|");
        }
    return buf;
}

/* Waits until the file `name` holds `text` exactly (within `ms`). */
static void wait_file(const char *name, const char *text, int ms)
{
    int64_t deadline = ts_now_ms() + ms;

    while (strcmp(read_file(name), text) != 0) {
        cr_assert(ts_now_ms() < deadline, "%s holds [%s], not [%s] after %d ms", name, read_file(name), text, ms);
        usleep(20000);
    }
}

static int ready_status(void)
{
    ts_response_t r;
    int status;

    ts_http_request(gw.port, "GET", "/ready", NULL, NULL, &r);
    status = r.status;
    ts_response_dispose(&r);
    return status;
}

/* EXECD_ENVS as upstream reads it: $VAR and ${VAR} from kgate's environment, unset ones empty, quotes kept, comments
 * skipped; and re-read for each command. */
Test(execd, envs_file_is_expanded_for_each_command)
{
    char envs[300], base[64];
    ts_events_t evs;

    make_dir();
    snprintf(envs, sizeof(envs), "EXECD_ENVS=%s/envs", dir);
    snprintf(base, sizeof(base), "BASE_DIR=/opt/base");
    write_file("envs", "# a comment\nFOO=\"quoted value\"\nP=$BASE_DIR/bin\n  Q=${BASE_DIR}x  \nU=[$NOPE]\nbroken line\n");
    start(NULL, (const char *const[]){envs, base, NULL});
    run_command("printf '%s\\n' \"$FOO\" \"$P\" \"$Q\" \"$U\" \"${broken-unset}\"", &evs);
    cr_assert_str_eq(stdout_of(&evs), "\"quoted value\"|/opt/base/bin|/opt/basex|[]|unset|");
    ts_events_dispose(&evs);
    write_file("envs", "P=${BASE_DIR}/next\n");
    run_command("printf '%s\\n' \"$P\" \"${FOO-gone}\"", &evs);
    cr_assert_str_eq(stdout_of(&evs), "/opt/base/next|gone|", "the file is read again for the next command");
    ts_events_dispose(&evs);
    cr_assert(strstr(gw_log(), "line 6 skipped") != NULL, "the malformed line is said in the log:\n%s", gw_log());
}

/* --log-level: kgate's own lines below the level are not written; at and above they are. */
Test(execd, log_level_filters_kgates_lines)
{
    ts_events_t evs;

    start((const char *const[]){"--log-level", "warn", NULL}, (const char *const[]){"EXECD_ENVS=/nonexistent/envs", NULL});
    run_command("true", &evs);
    ts_events_dispose(&evs);
    cr_assert_eq(ts_gateway_stop_keep(&gw, NULL), 0);
    cr_assert(strstr(gw_log(), "EXECD_ENVS file /nonexistent/envs cannot be read") != NULL, "a warning is written:\n%s", gw_log());
    cr_assert(strstr(gw_log(), "listening on") == NULL, "no info line at warn:\n%s", gw_log());
    ts_gateway_cleanup(&gw);

    start((const char *const[]){"--log-level", "3", NULL}, (const char *const[]){"EXECD_ENVS=/nonexistent/envs", NULL});
    run_command("true", &evs);
    ts_events_dispose(&evs);
    cr_assert_eq(ts_gateway_stop_keep(&gw, NULL), 0);
    cr_assert(strstr(gw_log(), "kgate:") == NULL, "execd's 3 (error): not a line of kgate's:\n%s", gw_log());
    ts_gateway_cleanup(&gw);

    start((const char *const[]){"--log-level", "info", NULL}, NULL);
    cr_assert_eq(ts_gateway_stop_keep(&gw, NULL), 0);
    cr_assert(strstr(gw_log(), "listening on") != NULL, "%s", gw_log());
    ts_gateway_cleanup(&gw);
}

/* Opens a command that prints `first`, then more for a while; returns once `first` has arrived. */
static ts_stream_t *open_long_command(const char *command, ts_events_t *evs)
{
    static const char *const headers[] = {"Content-Type: application/json", NULL};
    json_t *body = json_pack("{s:s}", "command", command);
    char *text = json_dumps(body, JSON_COMPACT), err[256] = "";
    ts_stream_t *s = ts_stream_open(gw.port, "POST", "/command", headers, text, ts_now_ms() + RUN_MS, err);
    int64_t deadline = ts_now_ms() + RUN_MS;

    json_decref(body);
    free(text);
    memset(evs, 0, sizeof(*evs));
    cr_assert_not_null(s, "%s", err);
    while (ts_events_find(evs, "stdout", 0) < 0) {
        cr_assert_gt(ts_stream_next(s, deadline, evs), 0, "no first line (%s)", evs->error);
    }
    return s;
}

/* SIGTERM with a command streaming: no new connection is taken, the command runs to its end and its stream is whole, then
 * kgate exits 0. */
Test(execd, sigterm_lets_a_streaming_command_finish)
{
    ts_events_t evs;
    ts_response_t r;
    ts_stream_t *s;

    start((const char *const[]){"--graceful-shutdown-timeout", "30s", NULL}, NULL);
    s = open_long_command("echo first; sleep 2; echo second; sleep 1; echo end", &evs);
    cr_assert_eq(ts_gateway_signal(&gw, SIGTERM), 0);
    usleep(300000);
    ts_http_request(gw.port, "GET", "/healthz", NULL, NULL, &r);
    cr_assert_eq(r.status <= 0 || r.status == 503, 1, "a new request while draining: %d", r.status);
    ts_response_dispose(&r);
    ts_stream_collect(s, ts_now_ms() + RUN_MS, 0, &evs);
    ts_stream_close(s);
    cr_assert(evs.ended, "%s", evs.error);
    cr_assert_str_eq(stdout_of(&evs), "first|second|end|");
    cr_assert_geq(ts_events_find(&evs, "execution_complete", 0), 0, "the stream ends as a finished command's");
    ts_events_dispose(&evs);
    cr_assert_eq(ts_gateway_wait(&gw, ts_now_ms() + 20000), 0, "kgate exits once the command is done");
    cr_assert(WIFEXITED(gw.exit_status) && WEXITSTATUS(gw.exit_status) == 0);
    cr_assert(strstr(gw_log(), "every request finished") != NULL, "%s", gw_log());
    ts_gateway_cleanup(&gw);
}

/* A command longer than the timeout is cut there: its stream ends without its last line, and kgate exits. */
Test(execd, sigterm_cuts_a_command_at_the_timeout)
{
    ts_events_t evs;
    ts_stream_t *s;

    start((const char *const[]){"--graceful-shutdown-timeout", "1s", NULL}, NULL);
    s = open_long_command("echo first; sleep 60; echo never", &evs);
    cr_assert_eq(ts_gateway_signal(&gw, SIGTERM), 0);
    ts_stream_collect(s, ts_now_ms() + RUN_MS, 0, &evs);
    ts_stream_close(s);
    cr_assert_str_eq(stdout_of(&evs), "first|");
    ts_events_dispose(&evs);
    cr_assert_eq(ts_gateway_wait(&gw, ts_now_ms() + 30000), 0, "kgate exits well before the command would have");
    cr_assert(strstr(gw_log(), "still in flight at the timeout") != NULL, "%s", gw_log());
    ts_gateway_cleanup(&gw);
}

/* The lifecycle's preStart at startup: `running <timeout>` then `done 0` in the status file, GET /ready 503 until it is done,
 * and the lifecycle variables never reach a command. */
Test(execd, prestart_runs_at_startup_with_the_status_file)
{
    char status_arg[300], lifecycle[1024];
    ts_events_t evs;

    make_dir();
    write_file("status", "");
    snprintf(status_arg, sizeof(status_arg), "%s/status", dir);
    snprintf(lifecycle, sizeof(lifecycle),
             "OPENSANDBOX_LIFECYCLE={\"version\": 1, \"preStart\": {\"command\": [\"sh\", \"-c\", \"echo pre > %s/marker; "
             "while [ ! -e %s/go ]; do sleep 0.05; done\"], \"timeoutSeconds\": 7}}",
             dir, dir);
    start((const char *const[]){"--lifecycle-startup-status-file", status_arg, NULL}, (const char *const[]){lifecycle, NULL});
    wait_file("marker", "pre\n", 20000);
    cr_assert_str_eq(read_file("status"), "running 7\n");
    cr_assert_eq(ready_status(), 503, "not ready while preStart runs");
    write_file("go", "");
    wait_file("status", "running 7\ndone 0\n", 20000);
    cr_assert_eq(ready_status(), 200);
    run_command("printf '[%s]\\n' \"$OPENSANDBOX_LIFECYCLE\"", &evs);
    cr_assert_str_eq(stdout_of(&evs), "[]|", "the lifecycle's transport is removed from the environment");
    ts_events_dispose(&evs);
}

/* A failing preStart: `done 1`, and kgate exits with status 1 (bootstrap.sh then fails the sandbox). */
Test(execd, a_failing_prestart_ends_kgate)
{
    char status_arg[300], lifecycle[1024];

    make_dir();
    write_file("status", "");
    snprintf(status_arg, sizeof(status_arg), "%s/status", dir);
    snprintf(lifecycle, sizeof(lifecycle),
             "OPENSANDBOX_LIFECYCLE={\"preStart\": {\"command\": [\"sh\", \"-c\", \"while [ ! -e %s/go ]; do sleep 0.05; done; "
             "exit 3\"]}}",
             dir);
    start((const char *const[]){"--lifecycle-startup-status-file", status_arg, NULL}, (const char *const[]){lifecycle, NULL});
    write_file("go", "");
    cr_assert_eq(ts_gateway_wait(&gw, ts_now_ms() + 20000), 0, "kgate exits after a failed preStart");
    cr_assert(WIFEXITED(gw.exit_status) && WEXITSTATUS(gw.exit_status) == 1, "status %d", gw.exit_status);
    cr_assert_str_eq(read_file("status"), "running 60\ndone 1\n", "the default timeout, then the failure");
    cr_assert(strstr(gw_log(), "preStart exited with status 3") != NULL, "%s", gw_log());
    ts_gateway_cleanup(&gw);
}

/* A lifecycle config kgate cannot read stops it at once, with a message (upstream's execd exits too). */
Test(execd, a_toml_lifecycle_is_refused_with_a_message)
{
    ts_gateway_t bad = {0};
    int rc = ts_gateway_start(&bad, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR),
                                                         .label = "execd",
                                                         .env = (const char *const[]){"OPENSANDBOX_LIFECYCLE=version = 1", NULL},
                                                         .startup_ms = 5000});
    cr_assert_neq(rc, 0, "kgate started with a lifecycle config it cannot read");
}

static void post_init(json_t *body, ts_response_t *r)
{
    ts_post_json(gw.port, "/internal/init", NULL, body, r);
    json_decref(body);
}

/* POST /internal/init runs the init's preStart (after its envs are set) with the status lines, answers once it is done, and
 * says what kgate does not act on (telemetry export, entrypointPolicy=restart) in `warning`; one init only. */
Test(execd, runtime_init_runs_the_inits_prestart)
{
    char status_arg[300], script[512];
    ts_response_t r;
    json_t *warnings;

    make_dir();
    write_file("status", "");
    snprintf(status_arg, sizeof(status_arg), "%s/status", dir);
    start((const char *const[]){"--runtime-init", "--lifecycle-startup-status-file", status_arg, NULL}, NULL);
    cr_assert_str_eq(read_file("status"), "", "nothing before init");
    /* an invalid lifecycle is refused and does not consume the init */
    post_init(json_pack("{s:s, s:i, s:{s:{s:[]}}}", "sandboxId", "sb-1", "generation", 1, "lifecycle", "preStart", "command"), &r);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_REQUEST_BODY");
    cr_assert(strstr(r.body, "preStart command must not be empty") != NULL, "%s", r.body);
    ts_response_dispose(&r);
    snprintf(script, sizeof(script), "echo \"$INIT_VAR\" > %s/marker", dir);
    post_init(json_pack("{s:s, s:i, s:s, s:{s:s}, s:{s:{s:[s,s,s], s:i}}, s:{s:{s:s, s:s}}}", "sandboxId", "sb-1", "generation", 2,
                        "entrypointPolicy", "restart", "envs", "INIT_VAR", "from-init", "lifecycle", "preStart", "command", "sh",
                        "-c", script, "timeoutSeconds", 5, "telemetry", "attributes", "tenant", "a", "sandbox_id", "spoof"),
              &r);
    cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
    cr_assert_str_eq(read_file("marker"), "from-init\n", "preStart ran, with the init's envs");
    cr_assert_str_eq(read_file("status"), "running 5\ndone 0\n");
    warnings = json_object_get(r.json, "warning");
    cr_assert_eq(json_array_size(warnings), 3, "%s", r.body);
    cr_assert(strstr(r.body, "entrypointPolicy=restart ignored") != NULL, "%s", r.body);
    cr_assert(strstr(r.body, "sandbox_id is reserved") != NULL, "%s", r.body);
    cr_assert(strstr(r.body, "not exported") != NULL, "%s", r.body);
    ts_response_dispose(&r);
    cr_assert_eq(ready_status(), 200);
    post_init(json_pack("{s:s, s:i}", "sandboxId", "sb-1", "generation", 3), &r);
    E2E_ASSERT_ERROR(&r, 409, "ALREADY_INITIALIZED");
    ts_response_dispose(&r);
}

/* An init whose preStart fails answers 500, leaves the routes closed and consumes the init, as upstream. */
Test(execd, runtime_init_with_a_failing_prestart_stays_closed)
{
    ts_response_t r;

    start((const char *const[]){"--runtime-init", NULL}, NULL);
    post_init(json_pack("{s:s, s:i, s:{s:{s:[s,s,s]}}}", "sandboxId", "sb-2", "generation", 1, "lifecycle", "preStart", "command",
                        "sh", "-c", "exit 4"),
              &r);
    E2E_ASSERT_ERROR(&r, 500, "RUNTIME_ERROR");
    cr_assert(strstr(r.body, "preStart exited with status 4") != NULL, "%s", r.body);
    ts_response_dispose(&r);
    cr_assert_eq(ready_status(), 503);
    ts_http_request(gw.port, "GET", "/command/status/x", NULL, NULL, &r);
    E2E_ASSERT_ERROR(&r, 503, "NOT_INITIALIZED");
    ts_response_dispose(&r);
    post_init(json_pack("{s:s, s:i}", "sandboxId", "sb-2", "generation", 2), &r);
    E2E_ASSERT_ERROR(&r, 409, "ALREADY_INITIALIZED");
    ts_response_dispose(&r);
}

/*
 * The lifecycle's preStart and the entrypoint, as bootstrap.sh (run_bootstrap) and the drop-in's --init (run_dropin_init)
 * start them: `lifecycle` is OPENSANDBOX_LIFECYCLE with `prestart` as its command, `cmd` the entrypoint `entrypoint` after
 * it writes the OPENSANDBOX_LIFECYCLE it sees to <dir>/entry-env.
 */
static void lifecycle_and_entrypoint(const char *prestart, const char *entrypoint, char *lifecycle, size_t lifecycle_size,
                                     char *cmd, size_t cmd_size)
{
    snprintf(lifecycle, lifecycle_size, "OPENSANDBOX_LIFECYCLE={\"preStart\": {\"command\": [\"sh\", \"-c\", \"%s\"]}}", prestart);
    snprintf(cmd, cmd_size, "echo \"[$OPENSANDBOX_LIFECYCLE]\" > %s/entry-env; %s", dir, entrypoint);
}

/* Waits for `pid` (its wait status) for `ms` at most; then kills it and fails, with `who` and its output <dir>/`log`. */
static int wait_exit(pid_t pid, int ms, const char *who, const char *log)
{
    int status;

    for (int64_t deadline = ts_now_ms() + ms; waitpid(pid, &status, WNOHANG) == 0;) {
        if (ts_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            cr_assert_fail("%s did not end: %s", who, read_file(log));
        }
        usleep(20000);
    }
    return status;
}

/* Starts `prestart` then `entrypoint` with a lifecycle config (run_bootstrap, run_dropin_init); returns the wait status. */
typedef int (*lifecycle_run_fn)(const char *prestart, const char *entrypoint);

/* The entrypoint starts after preStart succeeded, ends the container with its own status `code`, sees no lifecycle config. */
static void check_entrypoint_after_prestart(lifecycle_run_fn run, const char *log, int code)
{
    char prestart[600], entry[600];
    int status;

    make_dir();
    snprintf(prestart, sizeof(prestart), "sleep 0.3; echo pre > %s/marker", dir);
    snprintf(entry, sizeof(entry), "cat %s/marker > %s/seen; exit %d", dir, dir, code);
    status = run(prestart, entry);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == code, "the entrypoint's status: %d\n%s", status, read_file(log));
    cr_assert_str_eq(read_file("seen"), "pre\n", "the entrypoint ran after preStart");
    cr_assert_str_eq(read_file("entry-env"), "[]\n", "the lifecycle's transport does not reach the entrypoint");
}

/* A failed preStart ends the container with status 1 and says so in <dir>/`log`; the entrypoint never runs. */
static void check_prestart_failure(lifecycle_run_fn run, const char *log)
{
    char entry[600];
    int status;

    make_dir();
    snprintf(entry, sizeof(entry), "echo ran > %s/seen", dir);
    status = run("exit 3", entry);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 1, "status %d\n%s", status, read_file(log));
    cr_assert_str_eq(read_file("seen"), "", "the entrypoint never ran");
    cr_assert(strstr(read_file(log), "lifecycle preStart failed (status 1)") != NULL, "%s", read_file(log));
}

/*
 * bootstrap.sh's lifecycle mode, as upstream's (no EXECD_INIT): execd gets --lifecycle-startup-status-file, and the
 * entrypoint starts only after `done 0`; a failed preStart fails the container and the entrypoint never runs. EXECD is the
 * plain kgate here (word-split, as bootstrap.sh does), on a free port of 127.0.0.1. Returns bootstrap's wait status.
 */
static int run_bootstrap(const char *prestart, const char *entrypoint)
{
    char execd[1024], envs[320], lifecycle[1400], tmp[320], cmd[1400];
    unsigned short p;
    pid_t pid;

    cr_assert_eq(ts_free_port(&p), 0);
    snprintf(execd, sizeof(execd), "EXECD=%s --listen 127.0.0.1:%u --runtime-dir %s/rt --pool none --kernel-path %s",
             ts_kgate_path(KGATE_BINARY_DIR), p, dir, TS_KERNEL_PATH);
    snprintf(envs, sizeof(envs), "EXECD_ENVS=%s/.env", dir);
    snprintf(tmp, sizeof(tmp), "TMPDIR=%s", dir);
    lifecycle_and_entrypoint(prestart, entrypoint, lifecycle, sizeof(lifecycle), cmd, sizeof(cmd));
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char log[320];
        snprintf(log, sizeof(log), "%s/bootstrap.log", dir);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1), dup2(fd, 2);
        putenv(execd), putenv(envs), putenv(lifecycle), putenv(tmp);
        execlp("sh", "sh", KGATE_SOURCE_DIR "/deploy/execd/bootstrap.sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return wait_exit(pid, 60000, "bootstrap.sh", "bootstrap.log");
}

Test(execd, bootstrap_starts_the_entrypoint_after_prestart)
{
    check_entrypoint_after_prestart(run_bootstrap, "bootstrap.log", 7);
}

Test(execd, bootstrap_fails_when_prestart_fails)
{
    check_prestart_failure(run_bootstrap, "bootstrap.log");
}

/* The drop-in's tests: the first builds the artifact (a Release build of kgate, minutes under load). */
TestSuite(execd_init, .fini = fini, .timeout = 1800);

static const char *dropin_artifact(void)
{
    static char artifact[1024];
    char buf[2048], line[2048] = "";

    if (artifact[0] == '\0') {
        FILE *fp = popen("KGATE_EXECD_BUILD=" KGATE_BINARY_DIR "/execd KGATE_EXECD_MEASURE=0 bash " KGATE_SOURCE_DIR
                         "/deploy/execd/build.sh 2>&1",
                         "r");
        cr_assert_not_null(fp);
        while (fgets(buf, sizeof(buf), fp) != NULL)
            snprintf(line, sizeof(line), "%s", buf);
        cr_assert_eq(pclose(fp), 0, "build.sh failed: %s", line);
        cr_assert(strncmp(line, "execd: ", 7) == 0, "build.sh said: %s", line);
        sscanf(line + 7, "%1000s", artifact);
    }
    return artifact;
}

/* Starts `<dir>/execd --init [--runtime-init] --listen 127.0.0.1:<port> ... -- sh -c <command>` with `env` (may be NULL)
 * added; its output goes to <dir>/init.log. */
static pid_t spawn_dropin(int runtime_init, const char *env, const char *command, unsigned short *port)
{
    char cmd[2048], exe[512], listen[64], rt[320];
    pid_t pid;

    snprintf(cmd, sizeof(cmd), "cp '%s' '%s/execd'", dropin_artifact(), dir);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    snprintf(exe, sizeof(exe), "%s/execd", dir);
    cr_assert_eq(ts_free_port(port), 0);
    snprintf(listen, sizeof(listen), "127.0.0.1:%u", *port);
    snprintf(rt, sizeof(rt), "%s/rt", dir);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char log[320], tmp[320];
        snprintf(log, sizeof(log), "%s/init.log", dir);
        snprintf(tmp, sizeof(tmp), "TMPDIR=%s", dir);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1), dup2(fd, 2);
        putenv(tmp);
        if (env != NULL)
            putenv((char *)env);
        execl(exe, exe, "--init", "--listen", listen, "--runtime-dir", rt, "--pool", "none",
              runtime_init ? "--runtime-init" : "--keep-ansi", "--", "sh", "-c", command, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/*
 * The drop-in's --init (deploy/execd/launcher.c, PID 1 of the container; here a child of the test): with a lifecycle config
 * the entrypoint starts only after kgate's preStart has succeeded, as upstream's init mode; a failed preStart ends the
 * container without running it. The artifact is built by deploy/execd/build.sh (a Release build, shared with test_dropin)
 * and run on this machine: the rootfs plays no part in this. Returns the launcher's wait status.
 */
static int run_dropin_init(const char *prestart, const char *entrypoint)
{
    static char lifecycle[1400];
    char cmd[1400];
    unsigned short p;

    lifecycle_and_entrypoint(prestart, entrypoint, lifecycle, sizeof(lifecycle), cmd, sizeof(cmd));
    return wait_exit(spawn_dropin(0, lifecycle, cmd, &p), 60000, "execd --init", "init.log");
}

Test(execd_init, starts_the_entrypoint_after_prestart)
{
    check_entrypoint_after_prestart(run_dropin_init, "init.log", 5);
}

Test(execd_init, fails_when_prestart_fails)
{
    check_prestart_failure(run_dropin_init, "init.log");
}

/* POST /internal/init with entrypointPolicy=restart under --init: the launcher stops the running entrypoint (its exit does not
 * end the container) and starts it again with the init's envs, as upstream's execd does with its own. */
Test(execd_init, restarts_the_entrypoint_on_init)
{
    char cmd[600];
    unsigned short p;
    ts_response_t r;
    pid_t pid;
    int status;

    make_dir();
    snprintf(cmd, sizeof(cmd), "echo \"start [$INIT_VAR]\" >> %s/log; exec sleep 60", dir);
    pid = spawn_dropin(1, NULL, cmd, &p);
    wait_file("log", "start []\n", 30000);
    for (int64_t deadline = ts_now_ms() + 30000;;) {
        ts_http_request(p, "GET", "/ping", NULL, NULL, &r);
        status = r.status;
        ts_response_dispose(&r);
        if (status == 200)
            break;
        cr_assert(ts_now_ms() < deadline, "execd does not answer /ping: %s", read_file("init.log"));
        usleep(50000);
    }
    json_t *body = json_pack("{s:s, s:i, s:s, s:{s:s}}", "sandboxId", "sb-r", "generation", 1, "entrypointPolicy", "restart",
                             "envs", "INIT_VAR", "from-init");
    ts_post_json(p, "/internal/init", NULL, body, &r);
    json_decref(body);
    cr_assert_eq(r.status, 200, "%d %s", r.status, r.body);
    cr_assert_null(strstr(r.body, "restart"), "no warning about the restart: %s", r.body);
    ts_response_dispose(&r);
    wait_file("log", "start []\nstart [from-init]\n", 30000);
    cr_assert_eq(waitpid(pid, &status, WNOHANG), 0, "the container outlives its retired entrypoint: %s", read_file("init.log"));
    kill(pid, SIGTERM);
    status = wait_exit(pid, 60000, "execd --init", "init.log");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 143, "the new entrypoint's status (SIGTERM): %d\n%s", status,
              read_file("init.log"));
}
