/* tests/e2e/test_sandbox.c: kernels under --sandbox bwrap: what a context can reach (network, runtime dir, files), its limits
 * (a memory cap ends a run with KernelDied naming it; a fork bomb stays capped while kgate keeps answering), and that
 * interrupt, timeout, stdin and restart still work inside; stateless shell runs, commands and PTY sessions in the same
 * sandbox, and nothing of them left once kgate stops. Each test runs a private kgate. Just over 600 lines: one fixture for
 * every sandboxed kind of child. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "exec_helpers.h"
#include "pty_asserts.h"
#include "support/api.h"
#include "support/base.h"
#include "support/events.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"
#include "support/skip.h"
#include "support/stream.h"

static void fini(void)
{
    xh_gateways_stop_all();
}

TestSuite(sandbox, .fini = fini, .timeout = 300);

static ts_gateway_t gw;
static char ws[300];

/* A private kgate with --sandbox bwrap and a workspace of its own (under its temp dir), plus `extra` arguments. */
static void start(const char *const *extra)
{
    const char *args[16] = {"--sandbox", "bwrap", "--workspace-root", NULL};
    size_t n = 3;

    xh_require_bwrap("--sandbox bwrap cannot run");
    snprintf(ws, sizeof(ws), "/tmp/kgate-e2e-ws-%d", (int)getpid());
    mkdir(ws, 0755);
    args[n++] = ws;
    for (; extra != NULL && *extra != NULL; ++extra)
        args[n++] = *extra;
    args[n] = NULL;
    xh_gateway_start(&gw, args);
}

static void stop(void)
{
    char cmd[400];
    xh_gateway_stop(&gw);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", ws);
    cr_assert_eq(system(cmd), 0);
}

/* POST /code/context with `extra` fields (a JSON object text) merged in; returns the id (caller frees). */
static char *context_new(const char *extra)
{
    json_t *body = json_loads(extra != NULL ? extra : "{}", 0, NULL);
    ts_response_t r;
    int64_t t0 = ts_now_ms();

    json_object_set_new(body, "language", json_string("python"));
    int st = ts_post_json(gw.port, "/code/context", NULL, body, &r);
    json_decref(body);
    cr_assert_eq(st, 200, "POST /code/context %s: HTTP %d (%s) %.600s", extra != NULL ? extra : "", st, r.error, r.body);
    cr_log_info("sandboxed context ready in %lld ms", (long long)(ts_now_ms() - t0));
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r.json, "sandbox"), "profile")), "bwrap", "%s", r.body);
    char *id = strdup(json_string_value(json_object_get(r.json, "id")));
    ts_response_dispose(&r);
    return id;
}

/* Runs `code` and returns its stdout (caller frees); asserts that it ran without an error. */
static char *run_stdout(const char *ctx, const char *code)
{
    ts_events_t evs;
    char sum[E2E_MSG_SIZE];

    json_t *body = xh_body(ctx, code);
    xh_run(gw.port, body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    cr_assert_eq(ts_events_count(&evs, "error"), 0, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    size_t len = 0;
    char *out = calloc(1, 1);
    for (size_t i = 0; i != evs.n; ++i) {
        const char *text = strcmp(evs.v[i].type, "stdout") == 0 ? xh_str(evs.v[i].json, "text") : NULL;
        if (text == NULL)
            continue;
        out = realloc(out, len + strlen(text) + 1);
        strcpy(out + len, text);
        len += strlen(text);
    }
    ts_events_dispose(&evs);
    return out;
}

static const char connect_code[] = "import socket\n"
                                   "def probe(host, port):\n"
                                   "    try:\n"
                                   "        socket.create_connection((host, port), timeout=2).close()\n"
                                   "        return 'open'\n"
                                   "    except OSError as e:\n"
                                   "        return 'refused' if isinstance(e, ConnectionRefusedError) else type(e).__name__\n"
                                   "print(probe('127.0.0.1', %u), probe('1.1.1.1', 53))\n";

Test(sandbox, no_network_unless_share_net)
{
    char code[1024];

    start(NULL);
    snprintf(code, sizeof(code), connect_code, gw.port);
    char *ctx = context_new(NULL);
    char *out = run_stdout(ctx, code);
    /* its own loopback answers nothing, and no other address is reachable */
    cr_assert(strncmp(out, "refused ", 8) == 0 && strstr(out, "open") == NULL, "without share_net: %s", out);
    free(out);
    char *shared = context_new("{\"sandbox\": {\"share_net\": true}}");
    out = run_stdout(shared, code);
    cr_assert(strncmp(out, "open ", 5) == 0, "with share_net, kgate's own port must be reachable: %s", out);
    free(out);
    free(ctx);
    free(shared);
    stop();
}

Test(sandbox, runtime_dir_and_other_contexts_are_hidden)
{
    char code[8192], entries[4096] = "";
    struct dirent *de;
    DIR *d;

    start(NULL);
    char *a = context_new(NULL), *b = context_new(NULL);
    /* what the runtime dir holds, seen from outside: both kernels' directories and kgate's instance record */
    cr_assert_not_null(d = opendir(gw.runtime_dir));
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.')
            snprintf(entries + strlen(entries), sizeof(entries) - strlen(entries), "'%s',", de->d_name);
    closedir(d);
    snprintf(code, sizeof(code),
             "import os\n"
             "rt = '%s'\n"
             "seen = os.listdir(rt)\n"
             "readable = []\n"
             "for e in [%s]:\n"
             "    for f in ['', '/connection.json']:\n"
             "        try:\n"
             "            open(rt + '/' + e + f).read() if f else os.listdir(rt + '/' + e)\n"
             "            readable.append(e + f)\n"
             "        except OSError:\n"
             "            pass\n"
             "print(len(seen), len(readable), os.environ.get('JPY_PARENT_PID'), os.environ.get('KGATE_ACCESS_TOKEN'))\n",
             gw.runtime_dir, entries);
    char *out = run_stdout(a, code);
    /* its own directory (and its connection file), nothing else */
    cr_assert_str_eq(out, "1 2 None None\n", "runtime dir entries outside: [%s]; inside: %s", entries, out);
    free(out);
    free(a);
    free(b);
    stop();
}

/* GET /healthz answered within a second each time, polled for `ms`; returns the slowest answer in ms. */
static int64_t healthz_worst(int64_t ms)
{
    int64_t worst = 0, end = ts_now_ms() + ms;

    while (ts_now_ms() < end) {
        ts_response_t r;
        int64_t t = ts_now_ms();
        int st = ts_http_request_until(gw.port, "GET", "/healthz", NULL, NULL, t + 10000, &r);
        ts_response_dispose(&r);
        cr_assert_eq(st, 200, "/healthz: HTTP %d after %lld ms", st, (long long)(ts_now_ms() - t));
        worst = ts_now_ms() - t > worst ? ts_now_ms() - t : worst;
        usleep(20 * 1000);
    }
    return worst;
}

/* A kernel that dies while it starts gets the tail of its kernel.log quoted in the error; that file is in the kernel's own
 * directory, which its sandbox writes. A FIFO in its place blocked kgate's open for good (measured: /healthz never answered
 * again). The start is the attacker's through the shared workspace: `python3 -m ipykernel_launcher` looks in its cwd first,
 * so a context whose cwd is the workspace runs a planted ipykernel_launcher.py. */
Test(sandbox, a_fifo_for_kernel_log_does_not_block_kgate)
{
    char code[1024];

    start(NULL);
    char *a = context_new(NULL);
    snprintf(code, sizeof(code),
             "open('%s/ipykernel_launcher.py', 'w').write('\\n'.join([\n"
             "    'import os, sys',\n"
             "    'd = os.path.dirname(sys.argv[sys.argv.index(\"-f\") + 1])',\n"
             "    'os.unlink(d + \"/kernel.log\")',\n"
             "    'os.mkfifo(d + \"/kernel.log\")',\n"
             "    'os._exit(3)']))\n"
             "print('planted')\n",
             ws);
    char *out = run_stdout(a, code);
    cr_assert_str_eq(out, "planted\n");
    free(out);
    json_t *body = json_pack("{s:s, s:s}", "language", "python", "cwd", ws);
    ts_response_t r;
    int st = ts_post_json(gw.port, "/code/context", NULL, body, &r);
    json_decref(body);
    cr_assert(st > 0, "POST /code/context of a kernel that plants a FIFO and dies: no answer (%s)", r.error);
    cr_assert_neq(st, 200, "%.400s", r.body);
    cr_assert_not_null(strstr(r.body, "exited with code 3"), "%.600s", r.body);
    ts_response_dispose(&r);
    healthz_worst(200);
    free(a);
    stop();
}

/* Code in a context can put a FIFO in the workspace, or take a lease on a file it wrote (its uid owns the file) and ignore
 * SIGIO: the files routes' open then waited on kgate's loop for a writer, or for the lease's break
 * (/proc/sys/fs/lease-break-time, 45 s here). Measured: GET /files/download of the FIFO and /healthz after it never
 * answered; of the leased file, 45 s. */
Test(sandbox, a_fifo_or_a_leased_file_does_not_hold_the_files_routes)
{
    static const struct {
        const char *method, *path, *body;
        int status;
    } calls[] = {
        {"GET", "/files/download?path=fifo", NULL, 400},
        {"POST", "/files/replace", "{\"fifo\": {\"old\": \"a\", \"new\": \"b\"}}", 400},
        {"POST", "/editor", "{\"command\": \"view\", \"path\": \"fifo\"}", 400},
        {"GET", "/files/download?path=leased", NULL, 409},
        {"POST", "/files/replace", "{\"leased\": {\"old\": \"x\", \"new\": \"y\"}}", 409},
        {"POST", "/editor", "{\"command\": \"view\", \"path\": \"leased\"}", 409},
    };
    char code[1024];

    start(NULL);
    char *ctx = context_new(NULL);
    snprintf(code, sizeof(code),
             "import fcntl, os, signal\n"
             "signal.signal(signal.SIGIO, signal.SIG_IGN)\n"
             "os.chdir('%s')\n"
             "os.mkfifo('fifo')\n"
             "open('leased', 'w').write('x')\n"
             "held = os.open('leased', os.O_RDONLY)\n"
             "fcntl.fcntl(held, fcntl.F_SETLEASE, fcntl.F_WRLCK)\n"
             "print('ready')\n",
             ws);
    char *out = run_stdout(ctx, code);
    cr_assert_str_eq(out, "ready\n");
    free(out);
    for (size_t i = 0; i != sizeof(calls) / sizeof(calls[0]); ++i) {
        ts_response_t r;
        int64_t t = ts_now_ms();
        int st = ts_http_request_until(gw.port, calls[i].method, calls[i].path, NULL, calls[i].body, t + 5000, &r);
        cr_log_info("%s %s: HTTP %d in %lld ms: %.300s", calls[i].method, calls[i].path, st, (long long)(ts_now_ms() - t),
                    r.body != NULL ? r.body : "");
        cr_assert_eq(st, calls[i].status, "%s %s %s: HTTP %d (%s) %.400s", calls[i].method, calls[i].path,
                     calls[i].body != NULL ? calls[i].body : "", st, r.error, r.body);
        ts_response_dispose(&r);
    }
    healthz_worst(200);
    free(ctx);
    stop();
}

/* A sandboxed kernel writes the directory of its ipc sockets, and can break its connections (garbage on them) to make kgate
 * connect again: kgate connected by path, on the host, so a link put in place of a socket led kgate (its uid, its
 * credentials) to any unix socket of the host (measured: 10 connections, each sent ZMTP's greeting, in 5 s). */
Test(sandbox, a_link_in_place_of_a_kernel_socket_leads_kgate_nowhere)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char code[2048], path[sizeof(sa.sun_path)];
    int lfd, got = 0;

    start(NULL);
    snprintf(path, sizeof(path), "%.90s-host.sock", ws);
    unlink(path);
    memcpy(sa.sun_path, path, sizeof(path));
    cr_assert_neq(lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), -1);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s", path);
    cr_assert_eq(listen(lfd, 64), 0);
    char *ctx = context_new(NULL);
    snprintf(code, sizeof(code),
             "import os, socket, sys, threading, time\n"
             "d = os.path.dirname(sys.argv[sys.argv.index('-f') + 1])\n"
             "for i in range(1, 6):\n"
             "    os.rename(f'{d}/ch-{i}', f'{d}/was-{i}')\n"
             "    os.symlink('%s', f'{d}/ch-{i}')\n"
             "def garble():\n"
             "    time.sleep(0.5)\n"
             "    for fd in range(3, 256):\n"
             "        try:\n"
             "            s = socket.socket(fileno=os.dup(fd))\n"
             "        except OSError:\n"
             "            continue\n"
             "        try:\n"
             "            if s.family == socket.AF_UNIX and s.type == socket.SOCK_STREAM:\n"
             "                s.send(b'\\0garbage' * 16)\n"
             "        except OSError:\n"
             "            pass\n"
             "        s.close()\n"
             "threading.Thread(target=garble).start()\n"
             "print('armed')\n",
             path);
    char *out = run_stdout(ctx, code);
    cr_assert_str_eq(out, "armed\n");
    free(out);
    for (int64_t end = ts_now_ms() + 3000; ts_now_ms() < end;) {
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (c != -1) {
            ++got;
            close(c);
        }
        usleep(20 * 1000);
    }
    close(lfd);
    unlink(path);
    cr_assert_eq(got, 0, "kgate connected %d time(s) to %s through the kernel's links", got, path);
    healthz_worst(200);
    free(ctx);
    stop();
}

/* A kernel may fill its own directory (in kgate's runtime dir) with files; removing them once it is gone ran on kgate's loop
 * (measured: /healthz stalled 3.8 s after the deletion of a context that made 300,000 empty files, 2.7 s for 200,000). */
Test(sandbox, a_kernel_dir_full_of_files_is_removed_off_the_loop)
{
    char path[512];
    struct stat st;

    start(NULL);
    char *ctx = context_new(NULL);
    /* 150,000 files take 5 s to make on an idle machine, a minute on a busy one */
    json_t *body = xh_body(ctx, "import os, sys\n"
                                "d = os.path.dirname(sys.argv[sys.argv.index('-f') + 1])\n"
                                "os.mkdir(d + '/filled')\n"
                                "for i in range(150000):\n"
                                "    os.close(os.open(f'{d}/filled/{i}', os.O_CREAT | os.O_WRONLY))\n"
                                "print(d)\n");
    ts_events_t evs;
    char sum[E2E_MSG_SIZE], dir[400];
    xh_run(gw.port, body, ts_now_ms() + 180000, &evs);
    json_decref(body);
    char *text = ts_events_text(&evs, "stdout");
    cr_assert_eq(ts_events_count(&evs, "error"), 0, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    snprintf(dir, sizeof(dir), "%s", text);
    dir[strcspn(dir, "\n")] = '\0';
    free(text);
    ts_events_dispose(&evs);
    cr_assert_eq(strncmp(dir, gw.runtime_dir, strlen(gw.runtime_dir)), 0, "%s is not in %s", dir, gw.runtime_dir);
    snprintf(path, sizeof(path), "%s/filled", dir);
    cr_assert_eq(stat(path, &st), 0, "%s is not on the host", path);
    cr_assert_eq(ts_context_delete(gw.port, NULL, ctx), 200);
    int64_t worst = healthz_worst(4000);
    cr_log_info("/healthz while a kernel directory of 150,000 files is removed: worst %lld ms", (long long)worst);
    cr_assert_lt(worst, 500, "/healthz took %lld ms while the kernel's directory was removed", (long long)worst);
    for (int64_t end = ts_now_ms() + 30000; stat(dir, &st) == 0 && ts_now_ms() < end;)
        usleep(100 * 1000);
    cr_assert_neq(stat(dir, &st), 0, "%s is still there 30 s after its context's deletion", dir);
    free(ctx);
    stop();
}

Test(sandbox, workspace_and_tmp_are_writable_the_system_is_not)
{
    char code[2048], path[400];
    struct stat st;

    start(NULL);
    char *ctx = context_new(NULL);
    snprintf(code, sizeof(code),
             "import os\n"
             "open('%s/from_sandbox.txt', 'w').write('ws')\n"
             "open('/tmp/kgate_sandbox_private', 'w').write('tmp')\n"
             "os.makedirs(os.path.expanduser('~/.cache'), exist_ok=True)\n"
             "try:\n"
             "    open('/usr/kgate_sandbox_probe', 'w')\n"
             "    print('usr writable')\n"
             "except OSError as e:\n"
             "    print('usr', e.errno == 30)\n",
             ws);
    char *out = run_stdout(ctx, code);
    cr_assert_str_eq(out, "usr True\n", "%s", out);
    free(out);
    snprintf(path, sizeof(path), "%s/from_sandbox.txt", ws);
    cr_assert_eq(stat(path, &st), 0, "the workspace file is not on the host");
    cr_assert_neq(stat("/tmp/kgate_sandbox_private", &st), 0, "the sandbox's /tmp must be private");
    free(ctx);
    stop();
}

Test(sandbox, memory_cap_ends_the_run_with_kernel_died_and_the_context_restarts)
{
    start((const char *const[]){"--max-memory-mb", "1024", NULL});
    char *ctx = context_new("{\"limits\": {\"memory_mb\": 256}}");
    ts_events_t evs;
    char sum[E2E_MSG_SIZE], path[256];

    json_t *big = xh_body(ctx, "x = bytearray(1 << 30)\nprint('survived')");
    xh_run(gw.port, big, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(big);
    const ts_event_t *err = xh_error_event(&evs, "KernelDied");
    const char *evalue = xh_str(json_object_get(err->json, "error"), "evalue");
    /* the kernel comes back on its own (--kernel-restart-limit), its state lost: the run says both */
    cr_assert_eq(strncmp(evalue, "out of memory (memory limit 256 MiB); ", 38), 0, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    cr_assert_not_null(strstr(evalue, "its state was lost"), "%s", evalue);
    ts_events_dispose(&evs);

    ts_response_t r;
    snprintf(path, sizeof(path), "/code/contexts/%s/restart", ctx);
    int st = ts_http_request(gw.port, "POST", path, NULL, "", &r);
    cr_assert_eq(st, 200, "restart: HTTP %d %.400s", st, r.body);
    ts_response_dispose(&r);
    char *out = run_stdout(ctx, "x = bytearray(64 << 20)\nprint(len(x) >> 20)");
    cr_assert_str_eq(out, "64\n");
    free(out);

    /* above the server's maximum: refused */
    json_t *body = json_pack("{s:s, s:{s:i}}", "language", "python", "limits", "memory_mb", 2048);
    st = ts_post_json(gw.port, "/code/context", NULL, body, &r);
    json_decref(body);
    cr_assert_eq(st, 400, "memory_mb above --max-memory-mb: HTTP %d %.400s", st, r.body);
    ts_response_dispose(&r);
    free(ctx);
    stop();
}

Test(sandbox, fork_bomb_is_capped_and_kgate_answers_meanwhile)
{
    start(NULL);
    char *ctx = context_new("{\"limits\": {\"pids\": 32}}");
    json_t *body = xh_body(ctx, "import os, time\n"
                                "me, end, failed = os.getpid(), time.time() + 4, 0\n"
                                "while time.time() < end:\n"
                                "    try:\n"
                                "        os.fork()\n"
                                "    except OSError:\n"
                                "        failed += 1\n"
                                "if os.getpid() != me:\n"
                                "    os._exit(0)\n"
                                "while True:\n"
                                "    try:\n"
                                "        os.waitpid(-1, 0)\n"
                                "    except ChildProcessError:\n"
                                "        break\n"
                                "print('capped', failed > 0)\n");
    int64_t t0 = ts_now_ms();
    ts_stream_t *s = xh_open(gw.port, body, t0 + XH_RUN_MS);
    json_decref(body);
    ts_events_t evs = {0};
    int64_t worst = 0;
    int polls = 0;
    size_t at_cap = 0, peak = 0, last = 0;
    ts_proc_t procs[256];

    /* /healthz while the bomb goes off (it runs for 4 s) until it has collapsed (kgate's descendants back under 8: bwrap,
     * the kernel), 20 s at most; one counts as answered at the cap when kgate had at least AT_CAP descendants both before it
     * was sent and once it was answered (the cap counts the kernel's threads too: its processes peak at 22 here) */
    enum { AT_CAP = 12 };
    while (ts_now_ms() < t0 + 20000 && !(peak >= AT_CAP && last < 8)) {
        ts_response_t r;
        size_t before = ts_descendants(gw.pid, procs, 256);
        int64_t t = ts_now_ms();
        int st = ts_http_request(gw.port, "GET", "/healthz", NULL, NULL, &r);
        int64_t took = ts_now_ms() - t;
        ts_response_dispose(&r);
        cr_assert_eq(st, 200, "/healthz during the fork bomb: HTTP %d", st);
        worst = took > worst ? took : worst;
        ++polls;
        last = ts_descendants(gw.pid, procs, 256);
        peak = before > peak ? before : last > peak ? last : peak;
        at_cap += before >= AT_CAP && last >= AT_CAP;
        usleep(50 * 1000);
    }
    cr_log_info("/healthz during a fork bomb capped at 32 processes: kgate's descendants peaked at %zu; %d polls, %zu answered "
                "at the cap, worst %lld ms",
                peak, polls, at_cap, (long long)worst);
    cr_assert(peak >= AT_CAP, "kgate's descendants peaked at %zu: the bomb did not go off", peak);
    /* kgate answers while the bomb holds the cap, not only once it is over; no bound on how fast: that belongs in bench/ */
    cr_assert(at_cap >= 1, "no /healthz sent with the bomb at %d processes or more was answered before it fell below (%d polls)",
              AT_CAP, polls);
    ts_stream_collect(s, t0 + XH_RUN_MS, 0, &evs);
    ts_stream_close(s);
    char sum[E2E_MSG_SIZE];
    E2E_ASSERT_TEXT(&evs, "stdout", "capped True\n");
    cr_assert_eq(ts_events_count(&evs, "error"), 0, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    ts_events_dispose(&evs);
    char *out = run_stdout(ctx, "print('alive')");
    cr_assert_str_eq(out, "alive\n");
    free(out);
    free(ctx);
    stop();
}

Test(sandbox, interrupt_timeout_stdin_and_restart_work_inside)
{
    start(NULL);
    char *ctx = context_new(NULL);
    ts_events_t evs = {0};
    char sum[E2E_MSG_SIZE], path[256];
    ts_response_t r;

    /* interrupt (over the control channel: SIGINT would kill bwrap) */
    json_t *body = xh_body(ctx, "kept = 7\nimport time\ntime.sleep(30)");
    int64_t t0 = ts_now_ms();
    ts_stream_t *s = xh_open(gw.port, body, t0 + XH_RUN_MS);
    json_decref(body);
    xh_wait_event(s, &evs, "execution_count", 0, t0 + XH_RUN_MS);
    usleep(300 * 1000);
    snprintf(path, sizeof(path), "/code?id=%s", ctx);
    cr_assert_eq(ts_http_request(gw.port, "DELETE", path, NULL, NULL, &r), 200, "DELETE %s: %.400s", path, r.body);
    ts_response_dispose(&r);
    ts_stream_collect(s, ts_now_ms() + 10000, 0, &evs);
    ts_stream_close(s);
    xh_error_event(&evs, "KeyboardInterrupt");
    cr_assert(evs.end_ms - t0 < 10000, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    ts_events_dispose(&evs);

    /* timeout: interrupted, the state kept */
    body = xh_body(ctx, "while True: pass");
    json_object_set_new(body, "timeout", json_integer(1000));
    xh_run(gw.port, body, ts_now_ms() + 20000, &evs);
    json_decref(body);
    xh_error_event(&evs, "TimeoutError");
    ts_events_dispose(&evs);
    char *out = run_stdout(ctx, "print(kept * 6)");
    cr_assert_str_eq(out, "42\n");
    free(out);

    /* stdin */
    body = xh_body(ctx, "print('hello', input('name? '))");
    json_object_set_new(body, "stdin", json_true());
    int64_t deadline = ts_now_ms() + XH_RUN_MS;
    s = xh_open(gw.port, body, deadline);
    json_decref(body);
    xh_wait_event(s, &evs, "input_request", 0, deadline);
    snprintf(path, sizeof(path), "/code/executions/%s/input", xh_execution_id(&evs));
    json_t *input = json_pack("{s:s}", "value", "sandbox");
    cr_assert_eq(ts_post_json(gw.port, path, NULL, input, &r), 200, "POST %s: %.400s", path, r.body);
    json_decref(input);
    ts_response_dispose(&r);
    ts_stream_collect(s, deadline, 0, &evs);
    ts_stream_close(s);
    E2E_ASSERT_TEXT(&evs, "stdout", "hello sandbox\n");
    ts_events_dispose(&evs);

    /* restart: the state is gone, the kernel answers */
    snprintf(path, sizeof(path), "/code/contexts/%s/restart", ctx);
    cr_assert_eq(ts_http_request(gw.port, "POST", path, NULL, "", &r), 200, "restart: %.400s", r.body);
    ts_response_dispose(&r);
    out = run_stdout(ctx, "print('kept' in globals())");
    cr_assert_str_eq(out, "False\n");
    free(out);
    free(ctx);
    stop();
}

/* ---- stateless runs, commands and PTY sessions --------------------------------------------------------------------- */

/* How many live processes run `cmdline` exactly (argv joined by spaces), zombies aside. */
static size_t count_running(const char *cmdline)
{
    DIR *d = opendir("/proc");
    struct dirent *de;
    size_t n = 0;

    cr_assert_not_null(d);
    while ((de = readdir(d)) != NULL) {
        char path[300], buf[512];
        ssize_t len;
        int fd;
        if (!isdigit((unsigned char)de->d_name[0]))
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
            continue;
        len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        for (ssize_t i = 0; i < len - 1; ++i)
            if (buf[i] == '\0')
                buf[i] = ' ';
        if (strcmp(buf, cmdline) == 0)
            ++n;
    }
    closedir(d);
    return n;
}

/* Waits (bounded) until no process runs `cmdline`; asserts it. */
static void expect_gone(const char *cmdline, const char *after)
{
    for (int i = 0; i != 100 && count_running(cmdline) != 0; ++i)
        usleep(50 * 1000);
    cr_assert_eq(count_running(cmdline), 0, "`%s` still runs after %s", cmdline, after);
}

/* Bash that prints one word per probe: the network (kgate's own port), kgate's runtime dir, the workspace, /usr, the token. */
static void shell_probes(char *buf, size_t size, const char *name)
{
    snprintf(buf, size,
             "(exec 3<>/dev/tcp/127.0.0.1/%u) 2>/dev/null && echo net-open || echo net-closed; "
             "echo rt-$(ls -A %s 2>/dev/null | wc -l); "
             "echo %s > %s/%s && echo ws-written; "
             "touch /usr/kgate_sandbox_probe 2>/dev/null && echo usr-writable || echo usr-ro; "
             "echo home-$HOME token-${KGATE_ACCESS_TOKEN:-none}",
             gw.port, gw.runtime_dir, name, ws, name);
}

static const char probes_expected[] = "net-closed\nrt-0\nws-written\nusr-ro\nhome-/tmp/home token-none\n";

/* The stdout of `evs` joined (per-read events of a stateless run, or per-line ones of a command with `lines`). */
static char *joined_stdout(const ts_events_t *evs, int lines)
{
    char *out = calloc(1, 1);
    size_t len = 0;

    for (size_t i = 0; i != evs->n; ++i) {
        const char *text = strcmp(evs->v[i].type, "stdout") == 0 ? xh_str(evs->v[i].json, "text") : NULL;
        if (text == NULL)
            continue;
        out = realloc(out, len + strlen(text) + 2);
        strcpy(out + len, text);
        len += strlen(text);
        if (lines)
            out[len++] = '\n', out[len] = '\0';
    }
    return out;
}

static void assert_file(const char *name, const char *content)
{
    char path[400], buf[64] = "";
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", ws, name);
    cr_assert_not_null(f = fopen(path, "r"), "%s was not written on the host", path);
    cr_assert_not_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    cr_assert_str_eq(buf, content);
}

/* POSTs `body` (stolen) to `path` on the private kgate and collects its stream; asserts 200. */
static void stream_post(const char *path, json_t *body, ts_events_t *out)
{
    char *text = json_dumps(body, JSON_COMPACT), err[256] = "";
    ts_stream_t *s;

    json_decref(body);
    memset(out, 0, sizeof(*out));
    s = ts_stream_open(gw.port, "POST", path, NULL, text, ts_now_ms() + XH_RUN_MS, err);
    cr_assert_not_null(s, "POST %s %s: %s", path, text, err);
    cr_assert_eq(ts_stream_response(s)->status, 200, "POST %s %s: HTTP %d %.400s", path, text, ts_stream_response(s)->status,
                 ts_stream_response(s)->body);
    free(text);
    ts_stream_collect(s, ts_now_ms() + XH_RUN_MS, 0, out);
    ts_stream_close(s);
}

Test(sandbox, stateless_run_is_sandboxed_and_its_interrupt_and_timeout_work)
{
    char code[2048], sum[E2E_MSG_SIZE];
    ts_events_t evs;
    ts_response_t r;

    start(NULL);
    shell_probes(code, sizeof(code), "from_run.txt");
    json_t *body = xh_body(NULL, code);
    xh_run(gw.port, body, ts_now_ms() + XH_RUN_MS, &evs);
    json_decref(body);
    char *out = joined_stdout(&evs, 0);
    cr_assert_str_eq(out, probes_expected, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    free(out);
    ts_events_dispose(&evs);
    assert_file("from_run.txt", "from_run.txt\n");

    /* DELETE /code?id= sends SIGINT: it reaches the shell's group inside (its trap runs, `sleep` ends), not bwrap */
    body = xh_body(NULL, "trap 'echo trapped' INT; sleep 3001 & wait; echo after $?");
    int64_t t0 = ts_now_ms();
    ts_stream_t *s = xh_open(gw.port, body, t0 + XH_RUN_MS);
    json_decref(body);
    memset(&evs, 0, sizeof(evs));
    xh_wait_event(s, &evs, "init", 0, t0 + XH_RUN_MS);
    for (int i = 0; i != 100 && count_running("sleep 3001") == 0; ++i)
        usleep(20 * 1000);
    char path[128];
    snprintf(path, sizeof(path), "/code?id=%s", xh_str(evs.v[0].json, "text"));
    cr_assert_eq(ts_http_request(gw.port, "DELETE", path, NULL, NULL, &r), 200, "DELETE %s: %.400s", path, r.body);
    ts_response_dispose(&r);
    ts_stream_collect(s, ts_now_ms() + 10000, 0, &evs);
    ts_stream_close(s);
    out = joined_stdout(&evs, 0);
    cr_assert(strncmp(out, "trapped\nafter ", 14) == 0, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    free(out);
    ts_events_dispose(&evs);
    expect_gone("sleep 3001", "an interrupted stateless run");

    /* a timeout kills the sandbox, background children included */
    body = xh_body(NULL, "sleep 3002 & sleep 3003");
    json_object_set_new(body, "timeout", json_integer(1000));
    xh_run(gw.port, body, ts_now_ms() + 20000, &evs);
    json_decref(body);
    xh_error_event(&evs, "TimeoutError");
    ts_events_dispose(&evs);
    expect_gone("sleep 3002", "a stateless run's timeout");
    expect_gone("sleep 3003", "a stateless run's timeout");
    stop();
}

Test(sandbox, command_is_sandboxed_and_delete_ends_it)
{
    char code[2048], sum[E2E_MSG_SIZE], path[300];
    ts_events_t evs;
    ts_response_t r;

    start(NULL);
    shell_probes(code, sizeof(code), "from_command.txt");
    stream_post("/command", json_pack("{s:s, s:s}", "command", code, "cwd", ws), &evs);
    char *out = joined_stdout(&evs, 1);
    cr_assert_str_eq(out, probes_expected, "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    free(out);
    ts_events_dispose(&evs);
    assert_file("from_command.txt", "from_command.txt\n");

    /* a cwd outside the workspace is shown read-only; kgate's runtime dir is refused */
    stream_post("/command", json_pack("{s:s, s:s}", "command", "pwd; touch x 2>/dev/null || echo ro", "cwd", "/usr/share"), &evs);
    out = joined_stdout(&evs, 1);
    cr_assert_str_eq(out, "/usr/share\nro\n", "%s", ts_events_summary(&evs, sum, sizeof(sum)));
    free(out);
    ts_events_dispose(&evs);
    json_t *body = json_pack("{s:s, s:s}", "command", "ls", "cwd", gw.runtime_dir);
    int st = ts_post_json(gw.port, "/command", NULL, body, &r);
    json_decref(body);
    cr_assert_eq(st, 400, "a cwd in the runtime dir: HTTP %d %.400s", st, r.body);
    cr_assert_not_null(strstr(r.body, "runtime dir"), "%s", r.body);
    ts_response_dispose(&r);

    /* a background command, ended by DELETE /command (SIGTERM into the sandbox): nothing of it stays */
    body = json_pack("{s:s, s:b}", "command", "sleep 3004 & sleep 3005", "background", 1);
    st = ts_post_json(gw.port, "/command", NULL, body, &r);
    json_decref(body);
    cr_assert_eq(st, 200, "%.400s", r.body);
    const char *init = strstr(r.body, "\"text\":\"");
    cr_assert_not_null(init, "%s", r.body);
    char id[64];
    snprintf(id, sizeof(id), "%.36s", init + 8);
    ts_response_dispose(&r);
    for (int i = 0; i != 100 && count_running("sleep 3005") == 0; ++i)
        usleep(20 * 1000);
    cr_assert_eq(count_running("sleep 3005"), 1);
    int64_t t0 = ts_now_ms();
    snprintf(path, sizeof(path), "/command?id=%s", id);
    cr_assert_eq(ts_http_request(gw.port, "DELETE", path, NULL, NULL, &r), 200, "DELETE %s: %.400s", path, r.body);
    ts_response_dispose(&r);
    expect_gone("sleep 3004", "DELETE /command");
    expect_gone("sleep 3005", "DELETE /command");
    cr_log_info("DELETE /command: the sandbox gone in %lld ms", (long long)(ts_now_ms() - t0));
    snprintf(path, sizeof(path), "/command/status/%s", id);
    json_t *status = NULL;
    for (int i = 0; i != 100; ++i, usleep(50 * 1000)) {
        cr_assert_eq(ts_http_request(gw.port, "GET", path, NULL, NULL, &r), 200);
        status = json_loads(r.body, 0, NULL);
        ts_response_dispose(&r);
        if (json_is_false(json_object_get(status, "running")))
            break;
        json_decref(status);
        status = NULL;
    }
    cr_assert_not_null(status, "the command still runs after DELETE");
    cr_assert_eq(json_integer_value(json_object_get(status, "exit_code")), 143); /* SIGTERM reached the shell */
    json_decref(status);

    /* one left running when kgate stops: stop() asserts that no descendant of kgate survives */
    body = json_pack("{s:s, s:b}", "command", "sleep 3006", "background", 1);
    cr_assert_eq(ts_post_json(gw.port, "/command", NULL, body, &r), 200);
    json_decref(body);
    ts_response_dispose(&r);
    for (int i = 0; i != 100 && count_running("sleep 3006") == 0; ++i)
        usleep(20 * 1000);
    stop();
    expect_gone("sleep 3006", "kgate stopped");
}

Test(sandbox, pty_session_has_a_terminal_inside_the_sandbox)
{
    char line[1024];
    ptc_t c;

    start(NULL);
    char *id = pt_create(gw.port, NULL, NULL);
    pt_attach(&c, gw.port, id, "", NULL);
    /* bwrap's fresh /dev has a devpts of its own (nested ptys work inside) and shows the session's terminal as
     * /dev/console: `tty` names that, the same pseudo-terminal (kgate holds its master) */
    ptc_stdin(&c, "tty && echo tty-ok-$(tty); stty size\n");
    pt_expect_output(&c, "tty-ok-/dev/console", 0);
    pt_expect_output(&c, "24 80", 0);
    ptc_text(&c, "{\"type\":\"resize\",\"cols\":123,\"rows\":45}");
    ptc_stdin(&c, "stty size\n");
    pt_expect_output(&c, "45 123", 0);
    snprintf(line, sizeof(line),
             "echo rt-$(ls -A %s 2>/dev/null | wc -l)-$(hostname); "
             "(exec 3<>/dev/tcp/127.0.0.1/%u) 2>/dev/null && echo net-open || echo net-closed\n",
             gw.runtime_dir, gw.port);
    ptc_stdin(&c, line);
    pt_expect_output(&c, "rt-0-sandbox", 0);
    pt_expect_output(&c, "net-closed", 0);
    /* job control works on the sandbox's terminal: ^C reaches the foreground job and the shell lives on */
    ptc_stdin(&c, "sleep 3007\n");
    for (int i = 0; i != 100 && count_running("sleep 3007") == 0; ++i)
        usleep(20 * 1000);
    ptc_stdin(&c, "\x03");
    ptc_stdin(&c, "echo after-$?\n");
    pt_expect_output(&c, "after-130", 0);
    expect_gone("sleep 3007", "^C");
    /* left running with a job when kgate stops */
    ptc_stdin(&c, "sleep 3008 &\n");
    for (int i = 0; i != 100 && count_running("sleep 3008") == 0; ++i)
        usleep(20 * 1000);
    ptc_disconnect(&c);
    ptc_dispose(&c);
    free(id);
    stop();
    expect_gone("sleep 3008", "kgate stopped");
}
