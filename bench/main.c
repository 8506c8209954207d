/* bench/main.c: kgate_bench_execute: kgate's latency against a direct ZMQ client, in one interleaved run. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "common.h"
#include "cases.h"
#include "report.h"

#define MAX_EXTRA_ARGS 32

static volatile sig_atomic_t interrupted;
/* --ws-quickack, --mcp-sse-only: said beside the figures they change */
static int ws_quickack;
static int mcp_sse_only;

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: kgate_bench_execute [options]\n"
               "  --samples N        timed executes per client (default: per case: execute 300, stream 5, bash 200, jupyter 200,\n"
               "                     mcp 300)\n"
               "  --warmup N         untimed executes per client first (default: per case: execute 20, stream 1, bash 10,\n"
               "                     jupyter 20, mcp 20; concurrency cases: per client and round, 5)\n"
               "  --case NAME        run only this case (repeatable; default: all but those run by name only: idle)\n"
               "  --list             list the cases and exit\n"
               "  --json             print the figures as JSON instead of a table\n"
               "  --kgate PATH       kgate binary (default: ../gateway/kgate beside this binary)\n"
               "  --kgate-arg ARG    extra argument for kgate (repeatable)\n"
               "  --timeout MS       per-request timeout (default 60000)\n"
               "  --ws-quickack      kernel WebSocket clients acknowledge every read at once (TCP_QUICKACK): no\n"
               "                     delayed-ACK stalls with servers that leave Nagle on (Jupyter Server)\n"
               "  --rounds N         rounds of each kind in the cases that run in rounds (default: per case, 6 for the concurrency "
               "cases, 3 for upload-stall; at most 16)\n"
               "  --clients N        clients of the concurrency cases, each on a kernel of its own (default 8; at most 32)\n"
               "  --contexts N       the idle case's contexts alive at once (default 500; at most 4096)\n"
               "  --upload-mib N     upload-stall: MiB uploaded per upload round (default 1024)\n"
               "  --mcp-sse-only     the mcp case's client accepts only text/event-stream: kgate answers every call\n"
               "                     in an SSE stream whose head goes out at once, instead of JSON at the end\n"
               "  --verbose          progress on stderr\n");
}

static char *default_kgate_path(void)
{
    char self[PATH_MAX], out[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return wire_strdup("gateway/kgate");
    self[n] = '\0';
    snprintf(out, sizeof(out), "%s/../gateway/kgate", dirname(self));
    return wire_strdup(out);
}

/* Kernelspecs the bench itself provides (bench/kernels, copied beside this binary by cmake): baselines to compare with. */
static char *bench_kernels_dir(void)
{
    char self[PATH_MAX], out[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return wire_strdup("bench/kernels");
    self[n] = '\0';
    snprintf(out, sizeof(out), "%s/kernels", dirname(self));
    return wire_strdup(out);
}

static int has_arg(char *const *args, size_t n, const char *name)
{
    for (size_t i = 0; i != n; ++i)
        if (strcmp(args[i], name) == 0 || (strncmp(args[i], name, strlen(name)) == 0 && args[i][strlen(name)] == '='))
            return 1;
    return 0;
}

/* A new dir $TMPDIR/kgate-bench-ws-XXXXXX in `out`; 0, or -1 with errno set (and the template in `out`). */
static int make_workspace(char *out, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(out, size, "%s/kgate-bench-ws-XXXXXX", tmp != NULL && tmp[0] != '\0' ? tmp : "/tmp");
    return mkdtemp(out) != NULL ? 0 : -1;
}

/* Removes the workspace and what is left in it, unless KGATE_BENCH_KEEP says to keep the temp dirs. */
static void remove_workspace(const char *dir)
{
    const char *keep = getenv("KGATE_BENCH_KEEP");
    if (keep != NULL && keep[0] != '\0' && strcmp(keep, "0") != 0) {
        fprintf(stderr, "kgate_bench_execute: kept the workspace %s\n", dir);
        return;
    }
    ts_remove_tree(dir);
}

/* The latency target of a case: its own, or the default. */
int main(int argc, char **argv)
{
    enum {
        OPT_SAMPLES = 256,
        OPT_WARMUP,
        OPT_CASE,
        OPT_LIST,
        OPT_JSON,
        OPT_KGATE,
        OPT_KGATE_ARG,
        OPT_TIMEOUT,
        OPT_VERBOSE,
        OPT_WS_QUICKACK,
        OPT_ROUNDS,
        OPT_UPLOAD_MIB,
        OPT_CLIENTS,
        OPT_CONTEXTS,
        OPT_MCP_SSE_ONLY
    };
    static const struct option longopts[] = {
        {"samples", required_argument, NULL, OPT_SAMPLES},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"case", required_argument, NULL, OPT_CASE},
        {"list", no_argument, NULL, OPT_LIST},
        {"json", no_argument, NULL, OPT_JSON},
        {"kgate", required_argument, NULL, OPT_KGATE},
        {"kgate-arg", required_argument, NULL, OPT_KGATE_ARG},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"verbose", no_argument, NULL, OPT_VERBOSE},
        {"ws-quickack", no_argument, NULL, OPT_WS_QUICKACK},
        {"rounds", required_argument, NULL, OPT_ROUNDS},
        {"upload-mib", required_argument, NULL, OPT_UPLOAD_MIB},
        {"clients", required_argument, NULL, OPT_CLIENTS},
        {"contexts", required_argument, NULL, OPT_CONTEXTS},
        {"mcp-sse-only", no_argument, NULL, OPT_MCP_SSE_ONLY},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const bench_case_t *selected[64];
    char *kernels_dir = NULL;
    bench_result_t results[64];
    char *extra_args[MAX_EXTRA_ARGS + 5] = {NULL};
    const bench_case_t *ran[64];
    size_t nselected = 0, nextra = 0, nresults = 0;
    size_t samples = 0, warmup = SIZE_MAX;
    unsigned rounds = 0, clients = 0, contexts = 0;
    uint64_t upload_mib = 0;
    char workspace[PATH_MAX] = "";
    unsigned timeout_ms = 60000;
    int json_out = 0, verbose = 0, opt, exit_code = 1, err = 0;
    char *kgate_path = NULL;

    wire_global_init();
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case OPT_ROUNDS:
        case OPT_CLIENTS:
        case OPT_CONTEXTS:
        case OPT_UPLOAD_MIB: {
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end != '\0' || v == 0 ||
                v > (opt == OPT_ROUNDS     ? 16
                     : opt == OPT_CLIENTS  ? 32
                     : opt == OPT_CONTEXTS ? 4096
                                           : 1u << 20)) {
                fprintf(stderr, "kgate_bench_execute: bad number: %s\n", optarg);
                exit_code = 2;
                goto Exit;
            }
            if (opt == OPT_ROUNDS)
                rounds = (unsigned)v;
            else if (opt == OPT_CLIENTS)
                clients = (unsigned)v;
            else if (opt == OPT_CONTEXTS)
                contexts = (unsigned)v;
            else
                upload_mib = v;
            break;
        }
        case OPT_SAMPLES:
        case OPT_WARMUP:
        case OPT_TIMEOUT: {
            unsigned long v = strtoul(optarg, &end, 10);
            if (end == optarg || *end != '\0' || (opt != OPT_WARMUP && v == 0) || v > 1000000) {
                fprintf(stderr, "kgate_bench_execute: bad number: %s\n", optarg);
                exit_code = 2;
                goto Exit;
            }
            if (opt == OPT_SAMPLES)
                samples = v;
            else if (opt == OPT_WARMUP)
                warmup = v;
            else
                timeout_ms = (unsigned)v;
            break;
        }
        case OPT_CASE: {
            const bench_case_t *c = bench_case_find(optarg);
            if (c == NULL) {
                fprintf(stderr, "kgate_bench_execute: no case named %s (try --list)\n", optarg);
                exit_code = 2;
                goto Exit;
            }
            if (nselected < sizeof(selected) / sizeof(selected[0]))
                selected[nselected++] = c;
            break;
        }
        case OPT_LIST:
            for (size_t i = 0; i < bench_num_cases; ++i)
                printf("%-12s %s\n", bench_cases[i].name, bench_cases[i].description);
            exit_code = 0;
            goto Exit;
        case OPT_JSON:
            json_out = 1;
            break;
        case OPT_KGATE:
            free(kgate_path);
            kgate_path = wire_strdup(optarg);
            break;
        case OPT_KGATE_ARG:
            if (nextra == MAX_EXTRA_ARGS) {
                fprintf(stderr, "kgate_bench_execute: at most %d --kgate-arg\n", MAX_EXTRA_ARGS);
                exit_code = 2;
                goto Exit;
            }
            extra_args[nextra++] = optarg;
            break;
        case OPT_VERBOSE:
            verbose = 1;
            break;
        case OPT_WS_QUICKACK:
            ws_quickack = 1;
            break;
        case OPT_MCP_SSE_ONLY:
            mcp_sse_only = 1;
            break;
        case 'h':
            usage(stdout);
            exit_code = 0;
            goto Exit;
        default:
            usage(stderr);
            exit_code = 2;
            goto Exit;
        }
    }
    if (optind != argc) {
        usage(stderr);
        exit_code = 2;
        goto Exit;
    }
    if (nselected == 0)
        for (size_t i = 0; i < bench_num_cases && i < sizeof(selected) / sizeof(selected[0]); ++i)
            if (!bench_cases[i].by_name_only)
                selected[nselected++] = &bench_cases[i];
    if (kgate_path == NULL)
        kgate_path = default_kgate_path();
    /* After the caller's --kgate-arg: a --kernel-path given there wins (the first directory holding a name does). */
    kernels_dir = bench_kernels_dir();
    extra_args[nextra++] = "--kernel-path";
    extra_args[nextra++] = kernels_dir;
    /* Files the cases write (upload-stall) go to a workspace of the bench's own, never kgate's cwd. */
    if (!has_arg(extra_args, nextra, "--workspace-root")) {
        if (make_workspace(workspace, sizeof(workspace)) != 0) {
            fprintf(stderr, "kgate_bench_execute: cannot create a workspace dir in %s: %s\n", workspace, strerror(errno));
            goto Exit;
        }
        extra_args[nextra++] = "--workspace-root";
        extra_args[nextra++] = workspace;
    }

    /* No SA_RESTART: a signal ends the sampling loop, and kgate is still stopped on the way out. */
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    ts_gateway_t kgate;
    ts_http_t http;
    ts_gateway_opts_t opts = {.exe = kgate_path,
                              .args = (const char *const *)extra_args,
                              .label = "bench",
                              .keep_env = "KGATE_BENCH_KEEP",
                              .startup_ms = 15000};
    if ((err = ts_gateway_start(&kgate, &opts)) != 0) {
        fprintf(stderr, "kgate_bench_execute: %s: %s\n", bench_strerror(err), kgate.error);
        goto Exit;
    }
    if (verbose)
        fprintf(stderr, "kgate pid %d on 127.0.0.1:%u, runtime dir %s\n", (int)kgate.pid, kgate.port, kgate.runtime_dir);
    ts_http_init(&http, kgate.port, 1);
    bench_env_t env = {.kgate = &kgate,
                       .kgate_exe = kgate_path,
                       .http = &http,
                       .samples = samples,
                       .warmup = warmup,
                       .timeout_ms = timeout_ms,
                       .verbose = verbose,
                       .ws_quickack = ws_quickack,
                       .rounds = rounds,
                       .clients = clients,
                       .contexts = contexts,
                       .upload_mib = upload_mib,
                       .mcp_sse_only = mcp_sse_only,
                       .interrupted = &interrupted};
    for (size_t i = 0; i < nselected; ++i) {
        if (verbose)
            fprintf(stderr, "[%s] %s\n", selected[i]->name, selected[i]->description);
        if ((err = selected[i]->run(selected[i], &env, &results[nresults])) == BENCH_ESKIPPED) {
            fprintf(stderr, "kgate_bench_execute: case %s skipped: %s\n", selected[i]->name, bench_detail());
            err = 0;
            continue;
        }
        if (err != 0) {
            fprintf(stderr, "kgate_bench_execute: case %s: %s: %s\n", selected[i]->name, bench_strerror(err), bench_detail());
            break;
        }
        ran[nresults++] = selected[i];
    }
    ts_http_dispose(&http);
    if (ts_gateway_stop(&kgate, NULL) != 0)
        fprintf(stderr, "kgate_bench_execute: warning: %s\n", kgate.error);
    if (verbose)
        fprintf(stderr, "kgate stopped (wait status %d)\n", kgate.exit_status);
    if (nresults > 0) {
        const bench_report_opts_t report_opts = {.ws_quickack = ws_quickack, .mcp_sse_only = mcp_sse_only};
        if (json_out)
            bench_print_json(ran, results, nresults, &report_opts);
        else
            bench_print_table(ran, results, nresults, kgate.port, &report_opts);
    }
    exit_code = err == BENCH_EINTERRUPTED ? 130 : err != 0 ? 1 : 0;

Exit:
    if (workspace[0] != '\0')
        remove_workspace(workspace);
    free(kernels_dir);
    free(kgate_path);
    return exit_code;
}
