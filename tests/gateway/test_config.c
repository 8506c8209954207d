/* tests/gateway/test_config.c: defaults and the command line (listen address, token rules, limits, --help). */
#include <stdarg.h>
#include <stdio.h>
#include <criterion/criterion.h>
#include "core/config.h"
#include "gw_test.h"

static void config_test_init(void)
{
    gw_test_init();
    unsetenv("KGATE_ACCESS_TOKEN"); /* the environment of whoever runs the tests must not leak in */
}

TestSuite(config, .init = config_test_init);

typedef struct st_parsed_t {
    gw_config_t config;
    int rc;
    char *out, *err; /* what was printed */
} parsed_t;

/* Parses `kgate <args...>` (NULL-terminated) into `p`, capturing stdout and stderr text. */
static void parse(parsed_t *p, ...)
{
    char *argv[32], *copies[32];
    int argc = 0, i;
    size_t out_len, err_len;
    FILE *out = open_memstream(&p->out, &out_len), *err = open_memstream(&p->err, &err_len);
    const char *arg;
    va_list ap;

    argv[argc++] = copies[0] = strdup("kgate");
    va_start(ap, p);
    while ((arg = va_arg(ap, const char *)) != NULL) {
        cr_assert_lt(argc, 31);
        argv[argc] = copies[argc] = strdup(arg); /* getopt_long may permute argv: give it writable copies */
        ++argc;
    }
    va_end(ap);
    argv[argc] = NULL;
    gw_config_init(&p->config);
    p->rc = gw_config_parse_args(&p->config, argc, argv, out, err);
    fclose(out);
    fclose(err);
    for (i = 0; i != argc; ++i)
        free(copies[i]);
}

static void parsed_dispose(parsed_t *p)
{
    gw_config_dispose(&p->config);
    free(p->out);
    free(p->err);
}

/* The parse must fail with an error message naming `needle`. */
#define EXPECT_ERROR(needle, ...)                                                                                                  \
    do {                                                                                                                           \
        parsed_t p_;                                                                                                               \
        parse(&p_, __VA_ARGS__, NULL);                                                                                             \
        cr_assert_eq(p_.rc, -1, "should be refused (rc %d, err \"%s\")", p_.rc, p_.err);                                           \
        cr_assert(strstr(p_.err, needle) != NULL, "the error should name \"%s\": \"%s\"", needle, p_.err);                         \
        cr_assert_str_eq(p_.out, "", "errors go to err only");                                                                     \
        parsed_dispose(&p_);                                                                                                       \
    } while (0)

Test(config, defaults)
{
    gw_config_t c;

    gw_config_init(&c);
    cr_assert_str_eq(c.listen_host, "127.0.0.1");
    cr_assert_eq(c.listen_port, 44772);
    cr_assert_null(c.access_token);
    cr_assert_eq(c.allow_remote_without_token, 0);
    cr_assert_eq(c.num_kernel_paths, 0);
    cr_assert_eq(c.compat_execd, 0);
    cr_assert_eq(c.keep_ansi, 0);
    cr_assert_null(c.runtime_dir);
    cr_assert_str_eq(c.shell, "/bin/bash");
    cr_assert_eq(c.max_body_bytes, 8u << 20);
    cr_assert_eq(c.max_run_log_bytes, 64u << 20);
    cr_assert_eq(c.ping_interval_ms, 5000);
    cr_assert_eq(c.max_contexts, 64);
    cr_assert_gt(c.max_reader_batch_bytes, 0);
    cr_assert_gt(c.shutdown_grace_ms, 0);
    cr_assert_gt(c.kernel_start_timeout_ms, 0);
    gw_config_dispose(&c);
    gw_config_dispose(&c); /* dispose leaves an empty config behind */
}

Test(config, no_arguments_runs_with_the_defaults)
{
    parsed_t p;

    parse(&p, NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert_str_eq(p.config.listen_host, "127.0.0.1");
    cr_assert_eq(p.config.listen_port, 44772);
    cr_assert_str_eq(p.out, "");
    cr_assert_str_eq(p.err, "");
    parsed_dispose(&p);
}

Test(config, listen_host_port)
{
    parsed_t p;

    parse(&p, "--listen", "127.0.0.1:8080", NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert_str_eq(p.config.listen_host, "127.0.0.1");
    cr_assert_eq(p.config.listen_port, 8080);
    parsed_dispose(&p);

    parse(&p, "--listen=localhost:65535", NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert_str_eq(p.config.listen_host, "localhost");
    cr_assert_eq(p.config.listen_port, 65535);
    parsed_dispose(&p);

    parse(&p, "--listen", "127.8.9.10:1", NULL);
    cr_assert_eq(p.rc, 0, "all of 127/8 is loopback");
    cr_assert_str_eq(p.config.listen_host, "127.8.9.10");
    parsed_dispose(&p);

    static const char *const bad_ports[] = {"127.0.0.1:65536", "127.0.0.1:+80", "127.0.0.1: 80", "127.0.0.1:-1", "127.0.0.1:"};
    for (size_t i = 0; i != sizeof(bad_ports) / sizeof(bad_ports[0]); ++i) {
        parse(&p, "--listen", bad_ports[i], NULL);
        cr_expect_neq(p.rc, 0, "--listen %s is refused", bad_ports[i]);
        parsed_dispose(&p);
    }
}

Test(config, listen_ipv6)
{
    parsed_t p;

    parse(&p, "--listen", "[::1]:44773", NULL);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_str_eq(p.config.listen_host, "::1");
    cr_assert_eq(p.config.listen_port, 44773);
    parsed_dispose(&p);
}

Test(config, listen_bad_forms)
{
    EXPECT_ERROR("--listen", "--listen", "127.0.0.1");
    EXPECT_ERROR("127.0.0.1:", "--listen", "127.0.0.1:");
    EXPECT_ERROR("--listen", "--listen", ":8080");
    EXPECT_ERROR("--listen", "--listen", "127.0.0.1:65536");
    EXPECT_ERROR("--listen", "--listen", "127.0.0.1:80x");
    EXPECT_ERROR("--listen", "--listen", "127.0.0.1:99999999999999999999999");
    EXPECT_ERROR("--listen", "--listen", "[::1]");
    EXPECT_ERROR("--listen", "--listen", "[::1]8080");
    EXPECT_ERROR("--listen", "--listen", "[::1:8080");
    EXPECT_ERROR("--listen", "--listen", "[]:8080");
    EXPECT_ERROR("--listen", "--listen", "");
}

Test(config, non_loopback_without_token_is_refused)
{
    EXPECT_ERROR("0.0.0.0", "--listen", "0.0.0.0:44772");
    EXPECT_ERROR("access token", "--listen", "0.0.0.0:44772");
    EXPECT_ERROR("--allow-remote-without-token", "--listen", "192.168.1.5:80");
    EXPECT_ERROR("::", "--listen", "[::]:44772");
    EXPECT_ERROR("example.com", "--listen", "example.com:80");
}

Test(config, non_loopback_allowed_when_asked)
{
    parsed_t p;

    parse(&p, "--listen", "0.0.0.0:44772", "--allow-remote-without-token", NULL);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_str_eq(p.config.listen_host, "0.0.0.0");
    cr_assert(p.config.allow_remote_without_token);
    cr_assert_null(p.config.access_token);
    parsed_dispose(&p);

    parse(&p, "--allow-remote-without-token", "--listen", "[::]:1", NULL);
    cr_assert_eq(p.rc, 0, "the order of the options does not matter: %s", p.err);
    parsed_dispose(&p);
}

Test(config, non_loopback_allowed_with_a_token)
{
    parsed_t p;

    parse(&p, "--listen", "0.0.0.0:44772", "--access-token", "tok", NULL);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_str_eq(p.config.access_token, "tok");
    cr_assert_eq(p.config.allow_remote_without_token, 0);
    parsed_dispose(&p);
}

Test(config, empty_access_token_is_no_token)
{
    EXPECT_ERROR("access token", "--access-token", "", "--listen", "0.0.0.0:1");
}

Test(config, token_from_the_environment)
{
    parsed_t p;

    setenv("KGATE_ACCESS_TOKEN", "from-env", 1);
    parse(&p, "--listen", "0.0.0.0:44772", NULL);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_str_eq(p.config.access_token, "from-env");
    parsed_dispose(&p);

    parse(&p, "--access-token", "from-flag", NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert_str_eq(p.config.access_token, "from-flag", "the flag wins over the environment");
    parsed_dispose(&p);

    setenv("KGATE_ACCESS_TOKEN", "", 1);
    parse(&p, NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert_null(p.config.access_token, "an empty variable is no token");
    parsed_dispose(&p);
}

Test(config, kernel_path_is_repeatable)
{
    parsed_t p;

    parse(&p, "--kernel-path", "a/kernels", "--kernel-path=b", "--kernel-path", "c d", NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert_eq(p.config.num_kernel_paths, 3);
    cr_assert_str_eq(p.config.kernel_paths[0], "a/kernels");
    cr_assert_str_eq(p.config.kernel_paths[1], "b");
    cr_assert_str_eq(p.config.kernel_paths[2], "c d");
    parsed_dispose(&p);
}

Test(config, compat_execd_only)
{
    parsed_t p;

    parse(&p, "--compat", "execd", NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert(p.config.compat_execd);
    parsed_dispose(&p);

    EXPECT_ERROR("jupyter", "--compat", "jupyter");
    EXPECT_ERROR("--compat", "--compat", "EXECD");
    EXPECT_ERROR("--compat", "--compat");
}

Test(config, flags_and_strings)
{
    parsed_t p;

    parse(&p, "--keep-ansi", "--shell", "/bin/sh", "--runtime-dir", "run/dir", NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert(p.config.keep_ansi);
    cr_assert_str_eq(p.config.shell, "/bin/sh");
    cr_assert_str_eq(p.config.runtime_dir, "run/dir");
    cr_assert_eq(p.config.kernel_template_merge, 0);
    cr_assert_eq(p.config.kernel_template_imports_only, 0, "kernels are forked from a warm kernel unless told otherwise");
    parsed_dispose(&p);

    parse(&p, "--kernel-template-merge", "--kernel-template-imports-only", NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert(p.config.kernel_template_merge);
    cr_assert(p.config.kernel_template_imports_only);
    parsed_dispose(&p);
}

/* A sandbox's execd serves the whole filesystem unless told otherwise; hard links stay refused unless allowed. */
Test(config, as_execd_and_hardlinks)
{
    parsed_t p;

    parse(&p, NULL);
    cr_assert(!p.config.as_execd && !p.config.allow_hardlinks);
    cr_assert_null(p.config.workspace_root, "by default the workspace is kgate's cwd");
    parsed_dispose(&p);
    parse(&p, "--as-execd", NULL);
    cr_assert(p.config.as_execd);
    cr_assert_str_eq(p.config.workspace_root, "/");
    parsed_dispose(&p);
    parse(&p, "--as-execd", "--workspace-root", "/srv/ws", "--allow-hardlinks", NULL);
    cr_assert_str_eq(p.config.workspace_root, "/srv/ws", "an explicit root wins");
    cr_assert(p.config.allow_hardlinks);
    parsed_dispose(&p);
}

Test(config, limits)
{
    parsed_t p;

    parse(&p, "--max-body-bytes", "1024", "--max-contexts", "3", "--ping-interval-ms=250", "--max-run-log-bytes",
          "18446744073709551615", NULL);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.config.max_body_bytes, 1024);
    cr_assert_eq(p.config.max_contexts, 3);
    cr_assert_eq(p.config.ping_interval_ms, 250);
    cr_assert_eq(p.config.max_run_log_bytes, SIZE_MAX);
    parsed_dispose(&p);
}

Test(config, bad_limits_are_refused)
{
    EXPECT_ERROR("--max-body-bytes", "--max-body-bytes", "0");
    EXPECT_ERROR("--max-body-bytes", "--max-body-bytes", "-1");
    EXPECT_ERROR("--max-body-bytes", "--max-body-bytes", "junk");
    EXPECT_ERROR("--max-body-bytes", "--max-body-bytes", "12k");
    EXPECT_ERROR("--max-body-bytes", "--max-body-bytes", "");
    EXPECT_ERROR("--max-body-bytes", "--max-body-bytes", " -1");
    EXPECT_ERROR("--max-body-bytes", "--max-body-bytes", "99999999999999999999999");
    EXPECT_ERROR("--max-contexts", "--max-contexts", "4294967296"); /* does not fit the unsigned field */
    EXPECT_ERROR("--ping-interval-ms", "--ping-interval-ms", "0");
    EXPECT_ERROR("--max-body-bytes", "--max-body-bytes");
}

Test(config, unknown_options_and_arguments_are_refused)
{
    EXPECT_ERROR("--frobnicate", "--frobnicate");
    EXPECT_ERROR("stray", "stray");
    EXPECT_ERROR("-x", "-x");
}

Test(config, help_prints_usage_and_returns_1)
{
    parsed_t p;

    parse(&p, "--help", NULL);
    cr_assert_eq(p.rc, 1);
    cr_assert(strstr(p.out, "--listen") != NULL, "%s", p.out);
    cr_assert(strstr(p.out, "--max-body-bytes") != NULL, "every limit is documented");
    cr_assert(strstr(p.out, "--kernel-start-timeout-ms") != NULL);
    cr_assert_str_eq(p.err, "");
    parsed_dispose(&p);
}

Test(config, version_prints_and_returns_1)
{
    parsed_t p;

    parse(&p, "--version", NULL);
    cr_assert_eq(p.rc, 1);
    cr_assert(strstr(p.out, GW_VERSION) != NULL);
    parsed_dispose(&p);
}

/* A second parse must not look at the first one's argv: a caller (a test, a reload) may have
 * reused or freed those strings. */
Test(config, a_second_parse_forgets_the_first_argv)
{
    char arg[32] = "--keep-ansi", *argv1[] = {"kgate", arg, NULL};
    char opt[] = "--compat", val[] = "execd", *argv2[] = {"kgate", opt, val, NULL};
    gw_config_t c;

    gw_config_init(&c);
    cr_assert_eq(gw_config_parse_args(&c, 2, argv1, stdout, stderr), 0);
    cr_assert(c.keep_ansi);
    gw_config_dispose(&c);
    strcpy(arg, "--keep-ansi-and-more"); /* the first argv's buffer is reused for something else */
    gw_config_init(&c);
    cr_assert_eq(gw_config_parse_args(&c, 3, argv2, stdout, stderr), 0);
    cr_assert(c.compat_execd);
    cr_assert_eq(c.keep_ansi, 0);
    gw_config_dispose(&c);
}

Test(config, pool_defaults_to_python3_and_takes_a_list_or_none)
{
    parsed_t p;

    parse(&p, NULL);
    cr_assert_eq(p.rc, 0);
    cr_assert_eq(p.config.num_pool, 1, "on by default");
    cr_assert_str_eq(p.config.pool[0].kernel, "python3");
    cr_assert_eq(p.config.pool[0].size, GW_POOL_DEFAULT_SIZE);
    parsed_dispose(&p);

    parse(&p, "--pool", "python3=2,bash=0,my-kernel.v_2=5", NULL);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.config.num_pool, 3);
    cr_assert_str_eq(p.config.pool[0].kernel, "python3");
    cr_assert_eq(p.config.pool[0].size, 2);
    cr_assert_str_eq(p.config.pool[1].kernel, "bash");
    cr_assert_eq(p.config.pool[1].size, 0);
    cr_assert_str_eq(p.config.pool[2].kernel, "my-kernel.v_2");
    cr_assert_eq(p.config.pool[2].size, 5);
    parsed_dispose(&p);

    parse(&p, "--pool", "python3=3", "--pool", "none", NULL);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.config.num_pool, 0, "the last --pool wins");
    cr_assert_null(p.config.pool);
    parsed_dispose(&p);
}

Test(config, bad_pools_are_refused)
{
    EXPECT_ERROR("NAME=N", "--pool", "python3");
    EXPECT_ERROR("NAME=N", "--pool", "");
    EXPECT_ERROR("NAME=N", "--pool", "=2");
    EXPECT_ERROR("NAME=N", "--pool", "python3=2,");
    EXPECT_ERROR("NAME=N", "--pool", "py thon=2");
    EXPECT_ERROR("size of python3", "--pool", "python3=");
    EXPECT_ERROR("size of python3", "--pool", "python3=-1");
    EXPECT_ERROR("size of python3", "--pool", "python3=65");
    EXPECT_ERROR("size of python3", "--pool", "python3=99999999999999999999");
    EXPECT_ERROR("twice", "--pool", "python3=1,bash=1,python3=2");
}

/* Under --sandbox bwrap, unset caps are derived from the machine (issue 27); a flag given, 0 included, is kept; without a
 * sandbox nothing changes. */
Test(config, sandbox_caps_are_derived_when_unset)
{
    parsed_t p;

    parse(&p, "--sandbox", "bwrap", NULL);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    gw_config_derive_sandbox_caps(&p.config, (uint64_t)24 << 30, 2);
    cr_assert_eq(p.config.max_memory_mb, 6 << 10);
    cr_assert_eq(p.config.max_pids, 256);
    cr_assert_eq(gw_config_tmp_bytes(&p.config, (uint64_t)p.config.max_memory_mb << 20), (uint64_t)3 << 30);
    parsed_dispose(&p);

    parse(&p, "--sandbox", "bwrap", "--max-memory-mb", "0", "--max-pids", "100", "--max-tmp-mb", "64", NULL);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    gw_config_derive_sandbox_caps(&p.config, (uint64_t)24 << 30, 64);
    cr_assert_eq(p.config.max_memory_mb, 0, "0 given means none");
    cr_assert_eq(p.config.max_pids, 100);
    cr_assert_eq(gw_config_tmp_bytes(&p.config, 0), (uint64_t)64 << 20);
    parsed_dispose(&p);

    parse(&p, "--sandbox", "bwrap", NULL);
    gw_config_derive_sandbox_caps(&p.config, (uint64_t)1 << 40, 64);
    cr_assert_eq(p.config.max_pids, 4096, "at most 4096");
    parsed_dispose(&p);

    parse(&p, NULL);
    gw_config_derive_sandbox_caps(&p.config, (uint64_t)24 << 30, 2);
    cr_assert_eq(p.config.max_memory_mb, 0);
    cr_assert_eq(p.config.max_pids, 0);
    cr_assert_eq(gw_config_tmp_bytes(&p.config, 0), 0);
    parsed_dispose(&p);
}

/* execd's duration flags take Go's form (time.ParseDuration). */
Test(config, go_durations)
{
    static const struct {
        const char *in;
        unsigned ms;
    } ok[] = {{"0", 0},     {"200ms", 200},   {"1s", 1000},     {"1.5s", 1500}, {"1m30s", 90000}, {"2h", 7200000},
              {"500us", 0}, {"1500000ns", 1}, {"\xc2\xb5s", 0}, {"0s", 0},      {".5s", 500},     {"1h1m1s1ms", 3661001}};
    static const char *const bad[] = {"", "5", "s", "-1s", "1x", "1.s5", "1s ", " 1s", "1e3s", "5000000h"};
    unsigned ms;

    for (size_t i = 0; i != sizeof(ok) / sizeof(ok[0]); ++i) {
        if (strcmp(ok[i].in, "\xc2\xb5s") == 0)
            continue; /* a unit without a number: below */
        ms = 12345;
        cr_assert_eq(gw_config_parse_duration_ms(ok[i].in, &ms), 0, "%s", ok[i].in);
        cr_assert_eq(ms, ok[i].ms, "%s: %u", ok[i].in, ms);
    }
    cr_assert_eq(gw_config_parse_duration_ms("1500\xc2\xb5s", &ms), 0);
    cr_assert_eq(ms, 1);
    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i)
        cr_assert_eq(gw_config_parse_duration_ms(bad[i], &ms), -1, "[%s]", bad[i]);
}

/* --log-level, --graceful-shutdown-timeout (and its variable), --lifecycle-startup-status-file; the execd default grace. */
Test(config, execd_flags)
{
    parsed_t p;

    parse(&p, "--log-level", "warn", "--graceful-shutdown-timeout", "2s", "--lifecycle-startup-status-file", "/s", NULL);
    cr_assert_eq(p.rc, 0, "%s", p.err);
    cr_assert_eq(p.config.log_level, 2);
    cr_assert_eq(p.config.graceful_shutdown_ms, 2000);
    cr_assert_str_eq(p.config.lifecycle_status_file, "/s");
    parsed_dispose(&p);
    parse(&p, "--log-level", "7", NULL);
    cr_assert_eq(p.config.log_level, 0);
    cr_assert_eq(p.config.graceful_shutdown_ms, 0, "no drain by default");
    parsed_dispose(&p);
    parse(&p, "--as-execd", NULL);
    cr_assert_eq(p.config.graceful_shutdown_ms, 5000, "execd's own 5 s");
    parsed_dispose(&p);
    setenv("EXECD_API_GRACE_SHUTDOWN", "750ms", 1);
    parse(&p, "--as-execd", NULL);
    cr_assert_eq(p.config.graceful_shutdown_ms, 750);
    parsed_dispose(&p);
    parse(&p, "--graceful-shutdown-timeout", "0", NULL);
    cr_assert_eq(p.config.graceful_shutdown_ms, 0, "the flag wins over the variable");
    parsed_dispose(&p);
    setenv("EXECD_API_GRACE_SHUTDOWN", "soon", 1);
    EXPECT_ERROR("EXECD_API_GRACE_SHUTDOWN", "--as-execd");
    unsetenv("EXECD_API_GRACE_SHUTDOWN");
    EXPECT_ERROR("--log-level", "--log-level", "loud");
    EXPECT_ERROR("--graceful-shutdown-timeout", "--graceful-shutdown-timeout", "5");
}
