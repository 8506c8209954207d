/* tests/gateway/test_isolation.c: an isolated session's request (procs/isolation.h): parsing and its checks, the profiles'
 * bubblewrap command line (mount order per mode), and the environment each profile passes. Pure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "ksys/sandbox.h"
#include "procs/isolation.h"
#include "procs/walls.h"
#include "gw_test.h"

TestSuite(isolation, .init = gw_test_init);

static int parse(const char *text, gw_iso_spec_t *spec, char *err, size_t errlen)
{
    json_t *body = json_loads(text, 0, NULL);
    int ret;

    cr_assert_not_null(body, "bad test JSON: %s", text);
    err[0] = '\0';
    ret = gw_iso_spec_parse(body, "/sandbox-root", "/run/kgate-rt", 1800, spec, err, errlen);
    json_decref(body);
    return ret;
}

/* The index of `arg` followed by `a1` (and `a2` when not NULL) in argv, or -1. */
static long find(char **argv, const char *arg, const char *a1, const char *a2)
{
    for (long i = 0; argv[i] != NULL; ++i)
        if (strcmp(argv[i], arg) == 0 && (a1 == NULL || (argv[i + 1] != NULL && strcmp(argv[i + 1], a1) == 0)) &&
            (a2 == NULL || (argv[i + 1] != NULL && argv[i + 2] != NULL && strcmp(argv[i + 2], a2) == 0)))
            return i;
    return -1;
}

static const gw_iso_paths_t paths = {.bwrap = "/usr/bin/bwrap",
                                     .unshare = "/usr/bin/unshare",
                                     .runtime_dir = "/run/kgate-rt",
                                     .ctl_dir = "/run/kgate-rt/isolated/S/ctl",
                                     .merged_dir = "/run/kgate-rt/isolated/S/merged",
                                     .upper_dir = "/run/kgate-rt/isolated/S/upper",
                                     .work_dir = "/run/kgate-rt/isolated/S/work",
                                     .as_root = 1};
static char *const cmd[] = {"/bin/bash", "--noprofile", "--norc", NULL};

Test(isolation, defaults_per_profile)
{
    gw_iso_spec_t spec;
    char err[256];

    cr_assert_eq(parse("{\"workspace\": {\"path\": \"/sandbox-root/ws/./a/..\"}}", &spec, err, sizeof(err)), 0, "%s", err);
    cr_assert_str_eq(spec.workspace, "/sandbox-root/ws");
    cr_assert_eq(spec.profile, GW_ISO_STRICT);
    cr_assert_eq(spec.mode, GW_ISO_OVERLAY);
    cr_assert_eq(spec.share_net, 0);
    cr_assert_eq(spec.idle_timeout_seconds, 1800);
    cr_assert_eq(spec.uid, -1);
    gw_iso_spec_dispose(&spec);
    cr_assert_eq(
        parse("{\"workspace\": {\"path\": \"/sandbox-root\"}, \"profile\": \"balanced\", \"share_net\": true, \"uid\": 1000, "
              "\"gid\": 100, \"idle_timeout_seconds\": 0}",
              &spec, err, sizeof(err)),
        0, "%s", err);
    cr_assert_eq(spec.mode, GW_ISO_RW);
    cr_assert_eq(spec.share_net, 1);
    cr_assert_eq(spec.uid, 1000);
    cr_assert_eq(spec.gid, 100);
    cr_assert_eq(spec.idle_timeout_seconds, 0);
    gw_iso_spec_dispose(&spec);
    /* OSEP-0013 nests the fields under "isolation" */
    cr_assert_eq(
        parse("{\"isolation\": {\"workspace\": {\"path\": \"/sandbox-root/x\", \"mode\": \"ro\"}}}", &spec, err, sizeof(err)), 0,
        "%s", err);
    cr_assert_eq(spec.mode, GW_ISO_RO);
    gw_iso_spec_dispose(&spec);
}

Test(isolation, refusals)
{
    static const char *const bad[] = {
        "{}",
        "{\"workspace\": {}}",
        "{\"workspace\": {\"path\": \"rel\"}}",
        "{\"workspace\": {\"path\": \"/sandbox-other\"}}",       /* outside the root */
        "{\"workspace\": {\"path\": \"/sandbox-root/../etc\"}}", /* lexically outside */
        "{\"workspace\": {\"path\": \"/sandbox-root\", \"mode\": \"cow\"}}",
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"profile\": \"open\"}",
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"share_net\": 1}",
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"extra_writable\": [\"/usr\"]}",
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"extra_writable\": \"/sandbox-root/a\"}",
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"binds\": [{\"source\": \"/usr\"}]}", /* writable, outside */
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"binds\": [{\"source\": \"/run/kgate-rt/k\", \"readonly\": true}]}",
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"binds\": [{\"source\": \"/usr\", \"readonly\": true, \"dest\": \"/\"}]}",
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"env_passthrough\": {\"mode\": \"some\"}}",
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"env_passthrough\": {\"keys\": [\"A=B\"]}}",
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"uid\": -1}",
        "{\"workspace\": {\"path\": \"/sandbox-root\"}, \"idle_timeout_seconds\": -5}",
        NULL,
    };
    gw_iso_spec_t spec;
    char err[256];

    for (const char *const *b = bad; *b != NULL; ++b) {
        cr_assert_eq(parse(*b, &spec, err, sizeof(err)), -1, "accepted: %s", *b);
        cr_assert(err[0] != '\0', "no message for %s", *b);
    }
    /* a read-only bind may come from anywhere but the runtime dir */
    cr_assert_eq(
        parse("{\"workspace\": {\"path\": \"/sandbox-root\"}, \"binds\": [{\"source\": \"/usr/share\", \"readonly\": true, "
              "\"dest\": \"/opt/share\"}]}",
              &spec, err, sizeof(err)),
        0, "%s", err);
    cr_assert_str_eq(spec.binds[0].dest, "/opt/share");
    gw_iso_spec_dispose(&spec);
}

Test(isolation, argv_rw_strict_order)
{
    gw_iso_spec_t spec;
    char err[256], **argv;

    cr_assert_eq(
        parse("{\"workspace\": {\"path\": \"/sandbox-root/ws\", \"mode\": \"rw\"}, \"extra_writable\": [\"/sandbox-root/cache\"], "
              "\"binds\": [{\"source\": \"/sandbox-root/shared\", \"dest\": \"/mnt/ro\", \"readonly\": true}], \"uid\": 1000}",
              &spec, err, sizeof(err)),
        0, "%s", err);
    argv = gw_iso_argv(&spec, &paths, cmd);
    cr_assert_str_eq(argv[0], "/usr/bin/bwrap");
    long net = find(argv, "--unshare-net", NULL, NULL), caps = find(argv, "--cap-drop", "ALL", NULL),
         uid = find(argv, "--uid", "1000", NULL), root = find(argv, "--ro-bind", "/", "/"),
         tmp = find(argv, "--tmpfs", "/tmp", NULL), hide = find(argv, "--tmpfs", "/run/kgate-rt", NULL),
         ctl = find(argv, "--ro-bind", paths.ctl_dir, "/run/kgate"),
         ws = find(argv, "--bind", "/sandbox-root/ws", "/sandbox-root/ws"),
         extra = find(argv, "--bind", "/sandbox-root/cache", "/sandbox-root/cache"),
         bind = find(argv, "--ro-bind", "/sandbox-root/shared", "/mnt/ro"), home = find(argv, "--dir", "/tmp/home", NULL),
         chdir_ = find(argv, "--chdir", "/sandbox-root/ws", NULL), sep = find(argv, "--", NULL, NULL);
    cr_assert(net > 0 && caps > 0 && uid > 0 && find(argv, "--disable-userns", NULL, NULL) > 0 &&
              find(argv, "--die-with-parent", NULL, NULL) > 0);
    /* each later mount lies over the earlier ones: the order is the contract */
    cr_assert(root < tmp && tmp < hide && hide < ctl && ctl < ws && ws < extra && extra < bind && bind < home && home < chdir_ &&
                  chdir_ < sep,
              "order: root %ld tmp %ld hide %ld ctl %ld ws %ld extra %ld bind %ld home %ld", root, tmp, hide, ctl, ws, extra, bind,
              home);
    cr_assert_str_eq(argv[sep + 1], "/bin/bash");
    cr_assert_null(argv[sep + 4]);
    ksys_strv_free(argv);
    gw_iso_spec_dispose(&spec);
}

Test(isolation, argv_modes)
{
    gw_iso_spec_t spec;
    char err[256], **argv;

    /* balanced, ro, share_net: the host's /tmp, the workspace read-only, the network kept */
    cr_assert_eq(
        parse("{\"workspace\": {\"path\": \"/sandbox-root/ws\", \"mode\": \"ro\"}, \"profile\": \"balanced\", \"share_net\": true}",
              &spec, err, sizeof(err)),
        0, "%s", err);
    argv = gw_iso_argv(&spec, &paths, cmd);
    cr_assert_eq(find(argv, "--unshare-net", NULL, NULL), -1);
    cr_assert(find(argv, "--bind", "/tmp", "/tmp") > 0);
    cr_assert(find(argv, "--ro-bind", "/sandbox-root/ws", "/sandbox-root/ws") > 0);
    cr_assert_eq(find(argv, "--bind", "/sandbox-root/ws", "/sandbox-root/ws"), -1);
    ksys_strv_free(argv);
    gw_iso_spec_dispose(&spec);

    /* overlay: unshare, a shell mounting the overlay, then bwrap binding the merged view at the workspace */
    cr_assert_eq(parse("{\"workspace\": {\"path\": \"/sandbox-root/ws\"}}", &spec, err, sizeof(err)), 0, "%s", err);
    argv = gw_iso_argv(&spec, &paths, cmd);
    cr_assert_str_eq(argv[0], "/usr/bin/unshare");
    cr_assert(find(argv, "--mount", NULL, NULL) > 0);
    cr_assert_eq(find(argv, "--map-root-user", NULL, NULL), -1, "kgate as root needs no user namespace of its own");
    long sh = find(argv, "/bin/sh", "-c", NULL);
    cr_assert(sh > 0);
    cr_assert(strstr(argv[sh + 2], "mount -t overlay") != NULL &&
                  strstr(argv[sh + 2], "lowerdir=/sandbox-root/ws,upperdir=") != NULL,
              "%s", argv[sh + 2]);
    cr_assert_str_eq(argv[sh + 4], "/usr/bin/bwrap");
    cr_assert(find(argv, "--bind", paths.merged_dir, "/sandbox-root/ws") > 0);
    ksys_strv_free(argv);
    gw_iso_paths_t user = paths;
    user.as_root = 0;
    argv = gw_iso_argv(&spec, &user, cmd);
    cr_assert(find(argv, "--map-root-user", NULL, NULL) > 0);
    ksys_strv_free(argv);
    gw_iso_spec_dispose(&spec);
}

static int has(char **env, const char *entry)
{
    for (; *env != NULL; ++env)
        if (strcmp(*env, entry) == 0)
            return 1;
    return 0;
}

Test(isolation, environment)
{
    char *const host[] = {"PATH=/usr/bin",
                          "HOME=/root",
                          "OPENAI_API_KEY=k",
                          "AWS_REGION=r",
                          "GITHUB_TOKEN=t",
                          "PLAIN=p",
                          "KGATE_ACCESS_TOKEN=secret",
                          "KGATE_INSTANCE=old",
                          NULL};
    gw_iso_spec_t spec;
    char err[256], **env;

    cr_assert_eq(parse("{\"workspace\": {\"path\": \"/sandbox-root\"}}", &spec, err, sizeof(err)), 0);
    env = gw_iso_env(&spec, host, "KGATE_INSTANCE=tok");
    cr_assert(has(env, "PATH=/usr/bin") && has(env, "PLAIN=p") && has(env, "HOME=/tmp/home") && has(env, "KGATE_INSTANCE=tok"));
    cr_assert(!has(env, "OPENAI_API_KEY=k") && !has(env, "AWS_REGION=r") && !has(env, "GITHUB_TOKEN=t") &&
              !has(env, "HOME=/root") && !has(env, "KGATE_ACCESS_TOKEN=secret") && !has(env, "KGATE_INSTANCE=old"));
    ksys_strv_free(env);
    gw_iso_spec_dispose(&spec);

    cr_assert_eq(parse("{\"workspace\": {\"path\": \"/sandbox-root\"}, \"profile\": \"balanced\"}", &spec, err, sizeof(err)), 0);
    env = gw_iso_env(&spec, host, NULL);
    cr_assert(has(env, "OPENAI_API_KEY=k") && has(env, "HOME=/root") && !has(env, "KGATE_ACCESS_TOKEN=secret"));
    ksys_strv_free(env);
    gw_iso_spec_dispose(&spec);

    cr_assert_eq(
        parse("{\"workspace\": {\"path\": \"/sandbox-root\"}, \"profile\": \"balanced\", \"env_passthrough\": {\"mode\": \"deny\", "
              "\"keys\": [\"PLAIN\"]}}",
              &spec, err, sizeof(err)),
        0);
    env = gw_iso_env(&spec, host, NULL);
    cr_assert(!has(env, "PLAIN=p") && has(env, "AWS_REGION=r"));
    ksys_strv_free(env);
    gw_iso_spec_dispose(&spec);

    cr_assert_eq(parse("{\"workspace\": {\"path\": \"/sandbox-root\"}, \"env_passthrough\": {\"mode\": \"allow\", \"keys\": "
                       "[\"OPENAI_API_KEY\"]}}",
                       &spec, err, sizeof(err)),
                 0);
    env = gw_iso_env(&spec, host, NULL);
    cr_assert(has(env, "OPENAI_API_KEY=k") && has(env, "PATH=/usr/bin") && !has(env, "PLAIN=p"));
    ksys_strv_free(env);
    gw_iso_spec_dispose(&spec);
}

/* gw_walls_open's verdict: where `path` leads (caller frees), or NULL; the descriptor is closed. */
static char *walls_verdict(const char *path, const char *what, int writable, const char *root, const char *rt, char *err,
                           size_t errlen)
{
    char *real;
    int fd = gw_walls_open(path, what, writable, root, rt, &real, err, errlen);

    if (fd >= 0)
        close(fd);
    return fd >= 0 ? real : NULL;
}

/* gw_walls_open checks where a path leads, not how it is spelt (issue 28). */
Test(isolation, walls_resolve_links_and_proc)
{
    char base[] = "/tmp/kgate-walls-XXXXXX", rt[64], root[64], link[96], via_proc[160], err[512];
    char *real;

    cr_assert_not_null(mkdtemp(base));
    snprintf(rt, sizeof(rt), "%s/rt", base);
    snprintf(root, sizeof(root), "%s/root", base);
    cr_assert_eq(mkdir(rt, 0700), 0);
    cr_assert_eq(mkdir(root, 0700), 0);
    snprintf(link, sizeof(link), "%s/link", root);
    cr_assert_eq(symlink(rt, link), 0);
    snprintf(via_proc, sizeof(via_proc), "/proc/self/root%s", rt);

    cr_assert_null(walls_verdict(link, "binds[].source", 0, root, rt, err, sizeof(err)));
    cr_assert_not_null(strstr(err, "runtime directory"), "%s", err);
    cr_assert_null(walls_verdict(via_proc, "binds[].source", 0, root, rt, err, sizeof(err)));
    cr_assert_not_null(strstr(err, "runtime directory"), "%s", err);
    cr_assert_null(walls_verdict(base, "binds[].source", 0, root, rt, err, sizeof(err)), "a parent of the runtime dir");
    cr_assert_null(walls_verdict("/proc/self/root/proc/1", "binds[].source", 0, root, rt, err, sizeof(err)));
    cr_assert_not_null(strstr(err, "/proc"), "%s", err);
    cr_assert_null(walls_verdict("/usr", "extra_writable[]", 1, "/", rt, err, sizeof(err)));
    cr_assert_not_null(strstr(err, "system"), "%s", err);
    cr_assert_null(walls_verdict("/nonexistent-kgate", "binds[].source", 0, root, rt, err, sizeof(err)));
    /* read-only, anywhere else: fine, and resolved */
    cr_assert_not_null(real = walls_verdict("/usr/../etc", "binds[].source", 0, root, rt, err, sizeof(err)), "%s", err);
    cr_assert_str_eq(real, "/etc");
    free(real);
    cr_assert_not_null(real = walls_verdict(root, "extra_writable[]", 1, root, rt, err, sizeof(err)), "%s", err);
    free(real);
    cr_assert_eq(unlink(link), 0);
    cr_assert_eq(rmdir(rt), 0);
    cr_assert_eq(rmdir(root), 0);
    cr_assert_eq(rmdir(base), 0);
}

/* By descriptor: the workspace, extra_writable and binds are bound from the child's descriptors 3, 4, ... in that order;
 * an overlay's wrapper enters the workspace through descriptor 3, closes it, and mounts "." as the lower layer. */
Test(isolation, sources_by_descriptor)
{
    gw_iso_spec_t spec = {.workspace = "/srv/ws",
                          .mode = GW_ISO_RW,
                          .profile = GW_ISO_STRICT,
                          .extra_writable = (char *[]){"/srv/extra", NULL},
                          .num_extra_writable = 1,
                          .binds = (gw_iso_bind_t[]){{"/data/a", "/a", 1}, {"/data/b", "/b", 0}},
                          .num_binds = 2,
                          .uid = -1,
                          .gid = -1};
    gw_iso_paths_t by_fd = paths;
    char line[4096] = "";
    char **v;

    by_fd.source_fd_base = 3;
    v = gw_iso_argv(&spec, &by_fd, cmd);

    for (char **p = v; *p != NULL; ++p)
        snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s", p == v ? "" : " ", *p);
    cr_assert_not_null(strstr(line,
                              "--bind-fd 3 /srv/ws --bind-fd 4 /srv/extra --ro-bind-fd 5 /a --bind-fd 6 /b --tmpfs /run/kgate-rt "
                              "--remount-ro /run/kgate-rt "),
                       "%s", line);
    cr_assert_null(strstr(line, "--bind /srv/ws"), "%s", line);
    ksys_strv_free(v);

    spec.mode = GW_ISO_OVERLAY;
    line[0] = '\0';
    v = gw_iso_argv(&spec, &by_fd, cmd);
    for (char **p = v; *p != NULL; ++p)
        snprintf(line + strlen(line), sizeof(line) - strlen(line), "%s%s", p == v ? "" : " ", *p);
    static const char enter[] = "/bin/sh -c cd /proc/self/fd/3 && exec \"$@\" 3>&- kgate-isolated-workspace /usr/bin/unshare ";
    cr_assert(strncmp(line, enter, strlen(enter)) == 0, "%s", line);
    cr_assert_not_null(strstr(line, "'lowerdir=.,upperdir=/run/kgate-rt/isolated/S/upper,"), "%s", line);
    cr_assert_not_null(strstr(line, "--bind /run/kgate-rt/isolated/S/merged /srv/ws --bind-fd 4 /srv/extra"), "%s", line);
    ksys_strv_free(v);
}

/* An isolated session starts with the very walls of every other sandbox (ksys_bwrap_walls: one place for the hardening),
 * then its own mounts; strict's /tmp and /dev/shm are sized, balanced's /tmp is the host's. */
Test(isolation, sessions_share_the_walls_of_every_sandbox)
{
    gw_iso_spec_t spec = {.workspace = "/srv/ws", .mode = GW_ISO_RW, .profile = GW_ISO_STRICT, .uid = -1, .gid = -1};
    gw_iso_paths_t sized = paths;
    char **v, **walls;
    size_t i;

    sized.tmp_bytes = 64 << 20;
    for (int balanced = 0; balanced != 2; ++balanced) {
        spec.profile = balanced ? GW_ISO_BALANCED : GW_ISO_STRICT;
        v = gw_iso_argv(&spec, &sized, cmd);
        walls = ksys_bwrap_walls(&(ksys_bwrap_walls_t){.host_tmp = balanced, .tmp_bytes = 64 << 20});
        cr_assert_str_eq(v[0], "/usr/bin/bwrap");
        for (i = 0; walls[i] != NULL; ++i)
            cr_assert_str_eq(v[1 + i], walls[i], "argument %zu", 1 + i);
        cr_assert_str_eq(v[1 + i], "--tmpfs", "the session's own mounts follow: %s", v[1 + i]);
        cr_assert_str_eq(v[2 + i], "/run/kgate-rt");
        ksys_strv_free(walls);
        ksys_strv_free(v);
    }
}
