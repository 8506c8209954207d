/* Defaults and command-line parsing for every tunable of the gateway. */
#include <ctype.h>
#include <arpa/inet.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "ksys/log.h"
#include "core/config.h"

enum {
    OPT_LISTEN = 256,
    OPT_E2B_LISTEN,
    OPT_ACCESS_TOKEN,
    OPT_KERNEL_PATH,
    OPT_COMPAT,
    OPT_RUNTIME_DIR,
    OPT_ALLOW_REMOTE,
    OPT_KEEP_ANSI,
    OPT_SHELL,
    OPT_ACCESS_LOG,
    OPT_WORKSPACE_ROOT,
    OPT_ALLOW_HARDLINKS,
    OPT_AS_EXECD,
    OPT_RUNTIME_INIT,
    OPT_LOG_LEVEL,
    OPT_GRACEFUL_SHUTDOWN,
    OPT_LIFECYCLE_STATUS_FILE,
    OPT_INIT_CONTROL_FD,
    OPT_ALLOW_ORIGIN,
    OPT_SANDBOX,
    OPT_BWRAP,
    OPT_POOL,
    OPT_KERNEL_TEMPLATE,
    OPT_KERNEL_TEMPLATE_MERGE,
    OPT_KERNEL_TEMPLATE_IMPORTS_ONLY,
    OPT_HELP,
    OPT_VERSION,
#define GW_XX_OPT(field, type, def, opt, help) OPT_LIMIT_##field,
    GW_LIMITS_MAP(GW_XX_OPT)
#undef GW_XX_OPT
};

void gw_config_init(gw_config_t *config)
{
    memset(config, 0, sizeof(*config));
    config->listen_host = wire_strdup("127.0.0.1");
    config->listen_port = 44772;
    config->shell = wire_strdup("/bin/bash");
    config->pool = wire_malloc(sizeof(*config->pool));
    config->pool[0] = (gw_pool_size_t){wire_strdup(GW_POOL_DEFAULT_KERNEL), GW_POOL_DEFAULT_SIZE};
    config->num_pool = 1;
    config->kernel_template = wire_strdup(GW_KERNEL_TEMPLATE_DEFAULT);
    config->log_level = KSYS_LOG_DEFAULT;
    config->init_control_fd = -1;
#define GW_XX_DEFAULT(field, type, def, opt, help) config->field = (type)(def);
    GW_LIMITS_MAP(GW_XX_DEFAULT)
#undef GW_XX_DEFAULT
}

void gw_config_dispose(gw_config_t *config)
{
    size_t i;

    free(config->listen_host);
    free(config->lifecycle_status_file);
    free(config->e2b_listen_host);
    free(config->access_token);
    for (i = 0; i != config->num_kernel_paths; ++i)
        free(config->kernel_paths[i]);
    free(config->kernel_paths);
    free(config->runtime_dir);
    free(config->shell);
    free(config->access_log);
    free(config->workspace_root);
    free(config->allow_origin);
    free(config->bwrap_path);
    gw_config_pool_free(config->pool, config->num_pool);
    free(config->kernel_template);
    memset(config, 0, sizeof(*config));
}

void gw_config_pool_free(gw_pool_size_t *pool, size_t num)
{
    for (size_t i = 0; i != num; ++i)
        free(pool[i].kernel);
    free(pool);
}

static int is_kernel_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

int gw_config_parse_pool(const char *arg, gw_pool_size_t **out, size_t *num, char *err, size_t errlen)
{
    gw_pool_size_t *pool = NULL;
    size_t n = 0;
    const char *p = arg;

    *out = NULL;
    *num = 0;
    if (strcmp(arg, "none") == 0)
        return 0;
    for (;;) {
        const char *name = p, *end;
        char digits[16];
        uint64_t size;
        size_t len;
        while (is_kernel_name_char(*p))
            ++p;
        len = (size_t)(p - name);
        if (len == 0 || *p != '=') {
            snprintf(err, errlen, "--pool wants \"none\" or NAME=N[,NAME=N]... (such as python3=2,bash=0), got \"%s\"", arg);
            goto Error;
        }
        ++p;
        end = strchr(p, ',');
        if (end == NULL)
            end = p + strlen(p);
        if ((size_t)(end - p) >= sizeof(digits)) {
            snprintf(err, errlen, "--pool: the size of %.*s is not a number from 0 to %u", (int)len, name, GW_POOL_MAX_SIZE);
            goto Error;
        }
        memcpy(digits, p, (size_t)(end - p));
        digits[end - p] = '\0';
        if (wire_parse_decimal(digits, GW_POOL_MAX_SIZE, &size) != 0) {
            snprintf(err, errlen, "--pool: the size of %.*s is not a number from 0 to %u", (int)len, name, GW_POOL_MAX_SIZE);
            goto Error;
        }
        for (size_t i = 0; i != n; ++i) {
            if (strlen(pool[i].kernel) == len && memcmp(pool[i].kernel, name, len) == 0) {
                snprintf(err, errlen, "--pool names %.*s twice", (int)len, name);
                goto Error;
            }
        }
        pool = wire_realloc(pool, sizeof(*pool) * (n + 1));
        pool[n++] = (gw_pool_size_t){wire_strndup(name, len), (unsigned)size};
        if (*end == '\0')
            break;
        p = end + 1;
    }
    *out = pool;
    *num = n;
    return 0;
Error:
    gw_config_pool_free(pool, n);
    return -1;
}

static void usage(FILE *fp)
{
    fprintf(fp, "Usage: kgate [OPTION]...\n"
                "An HTTP gateway to Jupyter kernels: persistent REPL contexts, results streamed as Server-Sent Events.\n\n"
                "  --listen HOST:PORT          address to serve on (default 127.0.0.1:44772; IPv6 as [::1]:PORT)\n"
                "  --access-token TOKEN        require TOKEN on every route but /healthz, /readyz, /ping and E2B's /health\n"
                "                              (also KGATE_ACCESS_TOKEN)\n"
                "  --e2b-listen HOST:PORT      also serve on this address, for E2B's SDK (in debug mode it calls\n"
                "                              localhost:49999: --e2b-listen 127.0.0.1:49999); every route, as --listen\n"
                "  --allow-remote-without-token  listen on a non-loopback address without a token\n"
                "  --allow-origin ORIGINS      browser pages of these origins (scheme://host[:port], comma-separated,\n"
                "                              or *) may call kgate; others, which a page's Origin header names, are\n"
                "                              refused with 403 (default: kgate's own origin only)\n"
                "  --kernel-path DIR           extra kernelspec directory holding NAME/kernel.json (repeatable;\n"
                "                              searched before JUPYTER_PATH and the standard directories)\n"
                "  --compat execd              execd's exact stream framing (`<json>\\n\\n`) and results.text\n"
                "  --runtime-dir DIR           where connection files and per-kernel state live (default: a new\n"
                "                              temporary directory, removed at exit)\n"
                "  --keep-ansi                 keep ANSI colour codes in tracebacks\n"
                "  --shell PATH                shell for stateless runs (default /bin/bash)\n"
                "  --access-log PATH|-         one line per HTTP request (time, peer, method, path without its query,\n"
                "                              status, bytes, seconds, door; never a token) to PATH, or stderr for -\n"
                "  --workspace-root DIR        files and editor routes work beneath DIR (default: the current\n"
                "                              directory at start)\n"
                "  --as-execd                  be a sandbox's execd: files routes serve the whole filesystem\n"
                "                              (unless --workspace-root), commands start in kgate's cwd\n"
                "  --runtime-init              answer 503 on every route but /ping, /ready, /internal/init and the\n"
                "                              health routes until POST /internal/init (also EXECD_RUNTIME_INIT=true)\n"
                "  --log-level LEVEL           kgate's log lines at LEVEL and above: debug, info (default), warn, error,\n"
                "                              or execd's 0-7 (3 error, 4 warn, 6 info, 7 debug)\n"
                "  --graceful-shutdown-timeout DURATION  on SIGTERM, stop accepting and let requests and streams in\n"
                "                              flight finish for up to DURATION (Go's form: 500ms, 5s, 1m; default 0,\n"
                "                              5s with --as-execd; also EXECD_API_GRACE_SHUTDOWN), then stop\n"
                "  --lifecycle-startup-status-file FILE  append `running <secs>` and `done <status>` to FILE around\n"
                "                              the lifecycle's preStart hook, as execd does for bootstrap.sh\n"
                "  --init-control-fd N         (set by the drop-in's --init launcher) where to ask it to restart\n"
                "                              the entrypoint (POST /internal/init's entrypointPolicy=restart)\n"
                "  --allow-hardlinks           let the files routes read and chmod regular files with several\n"
                "                              hard links (refused by default: one may be outside the root)\n"
                "  --sandbox none|bwrap        run kernels as plain children (none, the default) or in bubblewrap:\n"
                "                              no network, the system read-only, the workspace writable, a private\n"
                "                              /tmp and HOME, kgate's runtime dir hidden (see docs/sandbox.md)\n"
                "  --bwrap PATH                the bubblewrap executable (default: bwrap on PATH)\n");
    fprintf(fp,
            "  --pool NAME=N[,NAME=N]...   kernels of each kernelspec started ahead, with the default sandbox\n"
            "                              and limits, so that a new context is ready at once (default\n"
            "                              " GW_POOL_DEFAULT_KERNEL
            "=%u; --pool none: no pool; see docs/operations.md, Warm pool)\n",
            GW_POOL_DEFAULT_SIZE);
    fprintf(fp, "  --kernel-template NAME[,NAME]...  ipykernel kernelspecs whose kernels are forked from a template\n"
                "                              process that imported ipykernel once (default " GW_KERNEL_TEMPLATE_DEFAULT
                "; none: every\n"
                "                              kernel is a fresh process; see docs/kernels.md)\n");
    fprintf(fp, "  --kernel-template-merge     let Linux's KSM merge identical pages of forked kernels (an opt-in:\n"
                "                              side channels between contexts; see docs/security.md)\n");
    fprintf(fp, "  --kernel-template-imports-only  fork kernels from the template's imports alone, each running\n"
                "                              ipykernel's start, not from a warm kernel (slower, more memory;\n"
                "                              see docs/kernels.md)\n");
#define GW_XX_USAGE(field, type, def, opt, help)                                                                                   \
    fprintf(fp, "  --%-26s %s (default %llu)\n", opt " N", help, (unsigned long long)(def));
    GW_LIMITS_MAP(GW_XX_USAGE)
#undef GW_XX_USAGE
    fprintf(fp, "  --help, --version\n");
}

int gw_config_valid_template_list(const char *arg)
{
    size_t len = 0;

    if (strcmp(arg, "none") == 0)
        return 1;
    for (const char *p = arg;; ++p) {
        if (*p == ',' || *p == '\0') {
            if (len == 0)
                return 0;
            if (*p == '\0')
                return 1;
            len = 0;
        } else if (isalnum((unsigned char)*p) || *p == '.' || *p == '_' || *p == '-') {
            ++len;
        } else {
            return 0;
        }
    }
}

/* Splits HOST:PORT or [HOST]:PORT into *out_host (replaced) and *out_port. */
static int parse_listen(char **out_host, uint16_t *out_port, const char *arg)
{
    const char *colon, *host = arg;
    size_t host_len;
    uint64_t port;

    if (arg[0] == '[') {
        const char *close = strchr(arg, ']');
        if (close == NULL || close[1] != ':')
            return -1;
        host = arg + 1;
        host_len = (size_t)(close - host);
        colon = close + 1;
    } else {
        if ((colon = strrchr(arg, ':')) == NULL)
            return -1;
        host_len = (size_t)(colon - arg);
    }
    if (wire_parse_decimal(colon + 1, 65535, &port) != 0 || host_len == 0)
        return -1;
    free(*out_host);
    *out_host = wire_strndup(host, host_len);
    *out_port = (uint16_t)port;
    return 0;
}

static int is_loopback(const char *host);

int gw_config_listens_on_loopback(const gw_config_t *config)
{
    return config->listen_host != NULL && is_loopback(config->listen_host) &&
           (config->e2b_listen_host == NULL || is_loopback(config->e2b_listen_host));
}

static int is_loopback(const char *host)
{
    struct in_addr v4;
    struct in6_addr v6;

    if (strcmp(host, "localhost") == 0)
        return 1;
    if (inet_pton(AF_INET, host, &v4) == 1)
        return (ntohl(v4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &v6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&v6);
    return 0;
}

/* Limits whose 0 means "none" although their default is not 0 (every other such limit must be positive). */
static int zero_means_none(const char *opt)
{
    return strcmp(opt, "kernel-restart-limit") == 0;
}

int gw_config_parse_args(gw_config_t *config, int argc, char **argv, void *out_fp, void *err_fp)
{
    static const struct option options[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"e2b-listen", required_argument, NULL, OPT_E2B_LISTEN},
        {"access-token", required_argument, NULL, OPT_ACCESS_TOKEN},
        {"kernel-path", required_argument, NULL, OPT_KERNEL_PATH},
        {"compat", required_argument, NULL, OPT_COMPAT},
        {"runtime-dir", required_argument, NULL, OPT_RUNTIME_DIR},
        {"allow-remote-without-token", no_argument, NULL, OPT_ALLOW_REMOTE},
        {"keep-ansi", no_argument, NULL, OPT_KEEP_ANSI},
        {"shell", required_argument, NULL, OPT_SHELL},
        {"access-log", required_argument, NULL, OPT_ACCESS_LOG},
        {"workspace-root", required_argument, NULL, OPT_WORKSPACE_ROOT},
        {"allow-origin", required_argument, NULL, OPT_ALLOW_ORIGIN},
        {"allow-hardlinks", no_argument, NULL, OPT_ALLOW_HARDLINKS},
        {"as-execd", no_argument, NULL, OPT_AS_EXECD},
        {"runtime-init", no_argument, NULL, OPT_RUNTIME_INIT},
        {"log-level", required_argument, NULL, OPT_LOG_LEVEL},
        {"graceful-shutdown-timeout", required_argument, NULL, OPT_GRACEFUL_SHUTDOWN},
        {"lifecycle-startup-status-file", required_argument, NULL, OPT_LIFECYCLE_STATUS_FILE},
        {"init-control-fd", required_argument, NULL, OPT_INIT_CONTROL_FD},
        {"sandbox", required_argument, NULL, OPT_SANDBOX},
        {"bwrap", required_argument, NULL, OPT_BWRAP},
        {"pool", required_argument, NULL, OPT_POOL},
        {"kernel-template", required_argument, NULL, OPT_KERNEL_TEMPLATE},
        {"kernel-template-merge", no_argument, NULL, OPT_KERNEL_TEMPLATE_MERGE},
        {"kernel-template-imports-only", no_argument, NULL, OPT_KERNEL_TEMPLATE_IMPORTS_ONLY},
        {"help", no_argument, NULL, OPT_HELP},
        {"version", no_argument, NULL, OPT_VERSION},
#define GW_XX_LONGOPT(field, type, def, opt, help) {opt, required_argument, NULL, OPT_LIMIT_##field},
        GW_LIMITS_MAP(GW_XX_LONGOPT)
#undef GW_XX_LONGOPT
            {NULL, 0, NULL, 0},
    };
    FILE *out = out_fp, *err = err_fp;
    const char *env_token = getenv("KGATE_ACCESS_TOKEN");
    uint64_t n;
    int c;

    const char *env_init = getenv("EXECD_RUNTIME_INIT"), *env_grace = getenv("EXECD_API_GRACE_SHUTDOWN");

    if (env_token != NULL && env_token[0] != '\0')
        config->access_token = wire_strdup(env_token);
    if (env_init != NULL && (strcasecmp(env_init, "true") == 0 || strcmp(env_init, "1") == 0 || strcasecmp(env_init, "yes") == 0 ||
                             strcasecmp(env_init, "on") == 0))
        config->runtime_init = 1;
    if (env_grace != NULL && env_grace[0] != '\0') {
        if (gw_config_parse_duration_ms(env_grace, &config->graceful_shutdown_ms) != 0) {
            fprintf(err, "kgate: EXECD_API_GRACE_SHUTDOWN wants a duration (500ms, 5s, 1m), got \"%s\"\n", env_grace);
            return -1;
        }
        config->graceful_shutdown_given = 1;
    }
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
        switch (c) {
        case OPT_LISTEN:
            if (parse_listen(&config->listen_host, &config->listen_port, optarg) != 0) {
                fprintf(err, "kgate: --listen wants HOST:PORT or [HOST]:PORT, got \"%s\"\n", optarg);
                return -1;
            }
            break;
        case OPT_E2B_LISTEN:
            if (parse_listen(&config->e2b_listen_host, &config->e2b_listen_port, optarg) != 0) {
                fprintf(err, "kgate: --e2b-listen wants HOST:PORT or [HOST]:PORT, got \"%s\"\n", optarg);
                return -1;
            }
            break;
        case OPT_ACCESS_TOKEN:
            free(config->access_token);
            config->access_token = optarg[0] != '\0' ? wire_strdup(optarg) : NULL;
            break;
        case OPT_KERNEL_PATH:
            config->kernel_paths = wire_realloc(config->kernel_paths, sizeof(char *) * (config->num_kernel_paths + 1));
            config->kernel_paths[config->num_kernel_paths++] = wire_strdup(optarg);
            break;
        case OPT_COMPAT:
            if (strcmp(optarg, "execd") != 0) {
                fprintf(err, "kgate: --compat knows only \"execd\", got \"%s\"\n", optarg);
                return -1;
            }
            config->compat_execd = 1;
            break;
        case OPT_RUNTIME_DIR:
            free(config->runtime_dir);
            config->runtime_dir = wire_strdup(optarg);
            break;
        case OPT_ALLOW_REMOTE:
            config->allow_remote_without_token = 1;
            break;
        case OPT_KEEP_ANSI:
            config->keep_ansi = 1;
            break;
        case OPT_SHELL:
            free(config->shell);
            config->shell = wire_strdup(optarg);
            break;
        case OPT_ACCESS_LOG:
            free(config->access_log);
            config->access_log = optarg[0] != '\0' ? wire_strdup(optarg) : NULL;
            break;
        case OPT_WORKSPACE_ROOT:
            free(config->workspace_root);
            config->workspace_root = wire_strdup(optarg);
            break;
        case OPT_ALLOW_ORIGIN:
            free(config->allow_origin);
            config->allow_origin = optarg[0] != '\0' ? wire_strdup(optarg) : NULL;
            break;
        case OPT_ALLOW_HARDLINKS:
            config->allow_hardlinks = 1;
            break;
        case OPT_AS_EXECD:
            config->as_execd = 1;
            break;
        case OPT_RUNTIME_INIT:
            config->runtime_init = 1;
            break;
        case OPT_LOG_LEVEL: {
            ksys_log_level_t level;
            if (ksys_log_parse_level(optarg, &level) != 0) {
                fprintf(err, "kgate: --log-level wants debug, info, warn, error or 0-7, got \"%s\"\n", optarg);
                return -1;
            }
            config->log_level = (int)level;
            break;
        }
        case OPT_GRACEFUL_SHUTDOWN:
            if (gw_config_parse_duration_ms(optarg, &config->graceful_shutdown_ms) != 0) {
                fprintf(err, "kgate: --graceful-shutdown-timeout wants a duration (500ms, 5s, 1m), got \"%s\"\n", optarg);
                return -1;
            }
            config->graceful_shutdown_given = 1;
            break;
        case OPT_LIFECYCLE_STATUS_FILE:
            free(config->lifecycle_status_file);
            config->lifecycle_status_file = optarg[0] != '\0' ? wire_strdup(optarg) : NULL;
            break;
        case OPT_INIT_CONTROL_FD:
            if (wire_parse_decimal(optarg, 65535, &n) != 0 || n < 3) {
                fprintf(err, "kgate: --init-control-fd wants a descriptor number above 2, got \"%s\"\n", optarg);
                return -1;
            }
            config->init_control_fd = (int)n;
            break;
        case OPT_SANDBOX:
            if (strcmp(optarg, "none") == 0) {
                config->sandbox = 0;
            } else if (strcmp(optarg, "bwrap") == 0) {
                config->sandbox = 1;
            } else {
                fprintf(err, "kgate: --sandbox wants \"none\" or \"bwrap\", got \"%s\"\n", optarg);
                return -1;
            }
            break;
        case OPT_BWRAP:
            free(config->bwrap_path);
            config->bwrap_path = wire_strdup(optarg);
            break;
        case OPT_POOL: {
            gw_pool_size_t *pool;
            size_t num;
            char why[256];
            if (gw_config_parse_pool(optarg, &pool, &num, why, sizeof(why)) != 0) {
                fprintf(err, "kgate: %s\n", why);
                return -1;
            }
            gw_config_pool_free(config->pool, config->num_pool);
            config->pool = pool;
            config->num_pool = num;
            break;
        }
        case OPT_KERNEL_TEMPLATE:
            if (!gw_config_valid_template_list(optarg)) {
                fprintf(err, "kgate: --kernel-template wants \"none\" or NAME[,NAME]... (kernelspec names), got \"%s\"\n", optarg);
                return -1;
            }
            free(config->kernel_template);
            config->kernel_template = strcmp(optarg, "none") == 0 ? NULL : wire_strdup(optarg);
            break;
        case OPT_KERNEL_TEMPLATE_MERGE:
            config->kernel_template_merge = 1;
            break;
        case OPT_KERNEL_TEMPLATE_IMPORTS_ONLY:
            config->kernel_template_imports_only = 1;
            break;
        case OPT_HELP:
            usage(out);
            return 1;
        case OPT_VERSION:
            fprintf(out, "kgate %s\n", GW_VERSION);
            return 1;
#define GW_XX_CASE(field, type, def, opt, help)                                                                                    \
    case OPT_LIMIT_##field:                                                                                                        \
        if (wire_parse_decimal(optarg, (type)-1, &n) != 0 || (n == 0 && (def) != 0 && !zero_means_none(opt))) {                    \
            fprintf(err, "kgate: --%s wants a positive integer, got \"%s\"\n", opt, optarg);                                       \
            return -1;                                                                                                             \
        }                                                                                                                          \
        config->field = (type)n;                                                                                                   \
        config->field##_given = 1;                                                                                                 \
        break;
            GW_LIMITS_MAP(GW_XX_CASE)
#undef GW_XX_CASE
        default:
            fprintf(err, "kgate: unknown or incomplete option \"%s\" (see --help)\n", argv[optind - 1]);
            return -1;
        }
    }
    if (optind != argc) {
        fprintf(err, "kgate: unexpected argument \"%s\" (see --help)\n", argv[optind]);
        return -1;
    }
    for (int i = 0; i != 2; ++i) {
        const char *host = i == 0 ? config->listen_host : config->e2b_listen_host;
        if (host != NULL && config->access_token == NULL && !is_loopback(host) && !config->allow_remote_without_token) {
            fprintf(err,
                    "kgate: refusing to serve %s without an access token: anyone who can reach it could run code.\n"
                    "       Set --access-token (or KGATE_ACCESS_TOKEN), or pass --allow-remote-without-token.\n",
                    host);
            return -1;
        }
    }
    if (config->as_execd && config->workspace_root == NULL)
        config->workspace_root = wire_strdup("/");
    /* upstream execd's HTTP server gives requests in flight 5 s on SIGTERM (server.Shutdown) */
    if (config->as_execd && !config->graceful_shutdown_given)
        config->graceful_shutdown_ms = 5000;
    return 0;
}

int gw_config_parse_duration_ms(const char *s, unsigned *ms)
{
    static const struct {
        const char *unit;
        double ms;
    } units[] = {{"ns", 1e-6}, {"us", 1e-3}, {"\xc2\xb5s", 1e-3}, {"\xce\xbcs", 1e-3},
                 {"ms", 1},    {"s", 1e3},   {"m", 6e4},          {"h", 3.6e6}};
    double total = 0;

    if (s == NULL || s[0] == '\0')
        return -1;
    if (strcmp(s, "0") == 0) {
        *ms = 0;
        return 0;
    }
    while (*s != '\0') {
        double value = 0, scale = 1;
        int digits = 0;
        size_t i, best = 0, best_len = 0;
        for (; *s >= '0' && *s <= '9'; ++s, ++digits)
            value = value * 10 + (*s - '0');
        if (*s == '.')
            for (++s; *s >= '0' && *s <= '9'; ++s, ++digits)
                value += (*s - '0') * (scale /= 10);
        if (digits == 0)
            return -1;
        /* the longest unit that matches: "ms" before "m" */
        for (i = 0; i != sizeof(units) / sizeof(units[0]); ++i) {
            size_t n = strlen(units[i].unit);
            if (strncmp(s, units[i].unit, n) == 0 && n > best_len)
                best = i, best_len = n;
        }
        if (best_len == 0)
            return -1;
        total += value * units[best].ms;
        s += best_len;
        if (total > 4294967295.0)
            return -1;
    }
    *ms = (unsigned)total;
    return 0;
}

void gw_config_derive_sandbox_caps(gw_config_t *config, uint64_t ram_bytes, unsigned ncpu)
{
    uint64_t pids = (uint64_t)ncpu * 128;

    if (!config->sandbox)
        return;
    /* the most trusted sandboxes ship safe defaults: one context alone cannot take the machine's memory or process table */
    if (!config->max_memory_mb_given)
        config->max_memory_mb = (unsigned)(ram_bytes / 4 >> 20);
    if (!config->max_pids_given)
        config->max_pids = (unsigned)(pids < 256 ? 256 : pids > 4096 ? 4096 : pids);
}

uint64_t gw_config_tmp_bytes(const gw_config_t *config, uint64_t memory_bytes)
{
    if (config->max_tmp_mb != 0)
        return (uint64_t)config->max_tmp_mb << 20;
    return memory_bytes / 2;
}
