/* tests/sys/test_sandbox.c: the bwrap command line of each profile (ksys_bwrap_argv), its probe, byte formatting. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ksys/errors.h"
#include "ksys/sandbox.h"

TestSuite(sandbox, .timeout = 30);

/* The vector as one space-separated string, to compare with an expected command line. */
static char *joined(char **v)
{
    static char buf[4096];
    size_t o = 0;

    for (char **p = v; *p != NULL; ++p)
        o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", p == v ? "" : " ", *p);
    return buf;
}

#define ISOLATION                                                                                                                  \
    "bwrap --unshare-user --unshare-pid --unshare-ipc --unshare-uts --disable-userns --cap-drop ALL --die-with-parent "            \
    "--new-session --hostname sandbox"

/* what every sandbox gets after the system (read-only): private /tmp and /dev/shm, /dev read-only, fresh /proc, empty /run */
#define PRIVATE " --tmpfs /tmp --dev /dev --tmpfs /dev/shm --remount-ro /dev --proc /proc --tmpfs /run --dir /tmp/home"

static char *const cmd[] = {"/usr/bin/python3", "-m", "ipykernel_launcher", "-f", "/run/kg/k1/connection.json", NULL};

Test(sandbox, default_profile_has_no_network_and_hides_the_runtime_dir)
{
    ksys_bwrap_args_t a = {.bwrap = "bwrap",
                           .runtime_dir = "/run/kg",
                           .kernel_dir = "/run/kg/k1",
                           .workspace = "/srv/ws",
                           .resource_dir = "/usr/share/jupyter/kernels/python3",
                           .home = "/tmp/home"};
    char **v = ksys_bwrap_argv(&a, cmd);

    cr_assert_str_eq(joined(v), ISOLATION " --unshare-net --ro-bind / /" PRIVATE " --bind /srv/ws /srv/ws"
                                          " --tmpfs /run/kg --bind /run/kg/k1 /run/kg/k1 --remount-ro /run/kg"
                                          " --ro-bind-try /usr/share/jupyter/kernels/python3 /usr/share/jupyter/kernels/python3"
                                          " -- /usr/bin/python3 -m ipykernel_launcher -f /run/kg/k1/connection.json");
    ksys_strv_free(v);
}

Test(sandbox, share_net_keeps_the_network)
{
    ksys_bwrap_args_t a = {.bwrap = "/usr/bin/bwrap", .runtime_dir = "/run/kg", .kernel_dir = "/run/kg/k1", .share_net = 1};
    char **v = ksys_bwrap_argv(&a, cmd);

    cr_assert_null(strstr(joined(v), "--unshare-net"));
    cr_assert_str_eq(v[0], "/usr/bin/bwrap");
    cr_assert_not_null(strstr(joined(v), "--tmpfs /run/kg --bind /run/kg/k1 /run/kg/k1"));
    ksys_strv_free(v);
}

/* A workspace under /tmp is bound after the private /tmp (else the tmpfs would hide it); the runtime dir under /tmp is still
 * hidden. */
Test(sandbox, workspace_under_tmp_goes_on_the_private_tmp)
{
    ksys_bwrap_args_t a = {.bwrap = "bwrap",
                           .runtime_dir = "/tmp/kgate-x",
                           .kernel_dir = "/tmp/kgate-x/k1",
                           .workspace = "/tmp/ws",
                           .home = "/tmp/home"};
    char **v = ksys_bwrap_argv(&a, cmd);

    cr_assert_not_null(strstr(joined(v),
                              "--ro-bind / /" PRIVATE " --bind /tmp/ws /tmp/ws"
                              " --tmpfs /tmp/kgate-x --bind /tmp/kgate-x/k1 /tmp/kgate-x/k1 --remount-ro /tmp/kgate-x --"),
                       "%s", joined(v));
    ksys_strv_free(v);
}

/* A cwd outside the workspace is shown read-only; one inside the runtime dir is never bound (bwrap then fails to chdir). */
Test(sandbox, cwd_binding)
{
    ksys_bwrap_args_t a = {
        .bwrap = "bwrap", .runtime_dir = "/run/kg", .kernel_dir = "/run/kg/k1", .workspace = "/srv/ws", .cwd = "/srv/ws/sub"};
    char **v = ksys_bwrap_argv(&a, cmd);

    cr_assert_not_null(strstr(joined(v), "--bind /run/kg/k1 /run/kg/k1 --remount-ro /run/kg --chdir /srv/ws/sub --"), "%s",
                       joined(v));
    ksys_strv_free(v);
    a.cwd = "/tmp/elsewhere";
    v = ksys_bwrap_argv(&a, cmd);
    cr_assert_not_null(strstr(joined(v), "--ro-bind /tmp/elsewhere /tmp/elsewhere --chdir /tmp/elsewhere --"), "%s", joined(v));
    ksys_strv_free(v);
    a.cwd = "/run/kg/k2";
    v = ksys_bwrap_argv(&a, cmd);
    cr_assert_null(strstr(joined(v), "--ro-bind /run/kg/k2"), "%s", joined(v));
    cr_assert_not_null(strstr(joined(v), "--chdir /run/kg/k2 --"));
    ksys_strv_free(v);
    /* a cwd holding the runtime dir, the workspace or /tmp is never bound: the host's view would cover what is hidden */
    static const char *const ancestors[] = {"/", "/run", "/tmp", "/srv"};
    for (size_t i = 0; i != sizeof(ancestors) / sizeof(ancestors[0]); ++i) {
        a.cwd = ancestors[i];
        v = ksys_bwrap_argv(&a, cmd);
        const char *first = strstr(joined(v), "--ro-bind / / ");
        cr_assert(first != NULL && strstr(first + 1, "--ro-bind") == NULL, "%s", joined(v));
        cr_assert_not_null(strstr(joined(v), "--chdir"), "%s", joined(v));
        ksys_strv_free(v);
    }
    /* "/srv/wsx" is not within "/srv/ws" */
    a.cwd = "/srv/wsx";
    v = ksys_bwrap_argv(&a, cmd);
    cr_assert_not_null(strstr(joined(v), "--ro-bind /srv/wsx /srv/wsx"), "%s", joined(v));
    ksys_strv_free(v);
}

/* A shell, command or PTY has no kernel directory: the runtime dir is hidden whole. A PTY session keeps its terminal (no
 * --new-session); everything else about the profile stays. */
Test(sandbox, process_profile_and_own_terminal)
{
    static char *const sh[] = {"/bin/bash", "-c", "tty", NULL};
    ksys_bwrap_args_t a = {
        .bwrap = "bwrap", .runtime_dir = "/run/kg", .workspace = "/srv/ws", .cwd = "/srv/ws", .home = "/tmp/home"};
    char **v = ksys_bwrap_argv(&a, sh);

    cr_assert_str_eq(joined(v), ISOLATION " --unshare-net --ro-bind / /" PRIVATE " --bind /srv/ws /srv/ws"
                                          " --tmpfs /run/kg --remount-ro /run/kg --chdir /srv/ws -- /bin/bash -c tty");
    ksys_strv_free(v);
    a.own_terminal = 1;
    v = ksys_bwrap_argv(&a, sh);
    cr_assert_null(strstr(joined(v), "--new-session"), "%s", joined(v));
    cr_assert_not_null(strstr(joined(v), "--die-with-parent --hostname sandbox --unshare-net --ro-bind / / "), "%s", joined(v));
    cr_assert_not_null(strstr(joined(v), "--tmpfs /run/kg --remount-ro /run/kg --chdir /srv/ws -- /bin/bash -c tty"), "%s",
                       joined(v));
    ksys_strv_free(v);
}

/* A workspace of `/`, or one holding a system directory, is not bound: the system stays read-only (issue 28: --as-execd and
 * kgate started from / once bound `/` read-write); one inside a system directory is the caller's choice. */
Test(sandbox, workspace_holding_the_system_stays_read_only)
{
    static const char *const refused[] = {"/", "/usr", "/var", "/opt", "/etc"};
    ksys_bwrap_args_t a = {.bwrap = "bwrap", .runtime_dir = "/run/kg", .kernel_dir = "/run/kg/k1"};

    for (size_t i = 0; i != sizeof(refused) / sizeof(refused[0]); ++i) {
        a.workspace = refused[i];
        char **v = ksys_bwrap_argv(&a, cmd);
        const char *first = strstr(joined(v), " --bind ");
        cr_assert(first != NULL && strncmp(first, " --bind /run/kg/k1", 18) == 0, "workspace %s: %s", refused[i], joined(v));
        ksys_strv_free(v);
    }
    a.workspace = "/srv/data/ws";
    char **v = ksys_bwrap_argv(&a, cmd);
    cr_assert_not_null(strstr(joined(v), "--bind /srv/data/ws /srv/data/ws"), "%s", joined(v));
    ksys_strv_free(v);
    cr_assert(ksys_path_holds_system("/") && ksys_path_holds_system("/usr") && !ksys_path_holds_system("/usr/local/ws") &&
              !ksys_path_holds_system("/home") && !ksys_path_holds_system("/srvx"));
}

/* tmp_bytes sizes /tmp, /dev/shm and /run (nothing writable is a tmpfs of no size). */
Test(sandbox, tmp_and_shm_are_sized)
{
    ksys_bwrap_args_t a = {.bwrap = "bwrap", .runtime_dir = "/run/kg", .tmp_bytes = 64 << 20};
    char **v = ksys_bwrap_argv(&a, cmd);

    cr_assert_not_null(
        strstr(joined(v), "--size 67108864 --tmpfs /tmp --dev /dev --size 67108864 --tmpfs /dev/shm --remount-ro /dev --proc /proc "
                          "--size 67108864 --tmpfs /run"),
        "%s", joined(v));
    ksys_strv_free(v);
}

Test(sandbox, probe)
{
    char why[512] = "";

    cr_assert_eq(ksys_bwrap_probe("/nonexistent/bwrap", why, sizeof(why)), KSYS_ESPAWN);
    cr_assert_not_null(strstr(why, "/nonexistent/bwrap"), "%s", why);
    if (access("/usr/bin/bwrap", X_OK) == 0 && ksys_bwrap_probe("/usr/bin/bwrap", why, sizeof(why)) != 0)
        cr_log_warn("bwrap cannot create namespaces on this host: %s", why);
}

Test(sandbox, format_bytes)
{
    char buf[32];

    ksys_format_bytes(256u << 20, buf, sizeof(buf));
    cr_assert_str_eq(buf, "256 MiB");
    ksys_format_bytes(1ull << 30, buf, sizeof(buf));
    cr_assert_str_eq(buf, "1 GiB");
    ksys_format_bytes(1000, buf, sizeof(buf));
    cr_assert_str_eq(buf, "1000 B");
    ksys_format_bytes(3u << 19, buf, sizeof(buf));
    cr_assert_str_eq(buf, "1536 KiB");
}
