/* tests/deploy/test_helm.c: deploy/helm/kgate checked by helm itself (lint, template, values.schema.json) and its rendered
 * objects checked as a cluster would use them (check_helm.py): probes, token Secret, PodDisruptionBudget, NetworkPolicy. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHART KGATE_SOURCE_DIR "/deploy/helm/kgate"
#define CHECK KGATE_SOURCE_DIR "/tests/deploy/check_helm.py"
#define DEFAULT_HELM_DIR "/usr/local/lib/kgate/helm" /* where deploy/deps.sh unzips it */

TestSuite(helm, .timeout = 120);

static const char *helm(void)
{
    static char path[512];
    const char *dir = getenv("KGATE_HELM_DIR");
    snprintf(path, sizeof(path), "%s/bin/helm", dir != NULL && *dir != '\0' ? dir : DEFAULT_HELM_DIR);
    return path;
}

/* Runs `cmd` through sh (stderr with stdout); returns its exit status, its output in `out`. */
static int run(const char *cmd, char *out, size_t size)
{
    FILE *f = popen(cmd, "r");
    size_t n = 0;
    int status;

    cr_assert_not_null(f, "%s", cmd);
    while (n + 1 < size && !feof(f)) {
        size_t got = fread(out + n, 1, size - 1 - n, f);
        if (got == 0)
            break;
        n += got;
    }
    out[n] = '\0';
    status = pclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* helm template with `sets`, its objects checked by check_helm.py in `mode` (both must succeed) */
static void render_and_check(const char *sets, const char *mode, char *out, size_t size)
{
    char path[] = "/tmp/kgate-helm-XXXXXX", cmd[2048];
    int fd = mkstemp(path);

    cr_assert_geq(fd, 0);
    close(fd);
    snprintf(cmd, sizeof(cmd), "%s template kgate-test %s %s > %s 2>&1 && /usr/bin/python3 %s %s < %s 2>&1 || { cat %s; exit 1; }",
             helm(), CHART, sets, path, CHECK, mode, path, path);
    int status = run(cmd, out, size);
    unlink(path);
    cr_assert_eq(status, 0, "%s\n%s", cmd, out);
    cr_assert_eq(out[0], '\0', "%s", out);
}

Test(helm, lint_strict_passes)
{
    char cmd[1024], out[8192];

    snprintf(cmd, sizeof(cmd), "%s lint --strict %s 2>&1", helm(), CHART);
    cr_assert_eq(run(cmd, out, sizeof(out)), 0, "%s\n%s (deploy/deps.sh installs helm)", cmd, out);
    cr_assert_not_null(strstr(out, "0 chart(s) failed"), "%s", out);
}

Test(helm, default_objects_have_probes_secret_pdb_and_network_policy)
{
    char out[16384];

    render_and_check("", "default", out, sizeof(out));
}

Test(helm, bwrap_and_an_existing_secret)
{
    char out[16384];

    render_and_check("--set sandbox=bwrap --set accessToken.existingSecret=my-kgate-token", "bwrap", out, sizeof(out));
}

/* values.schema.json refuses what kgate or Kubernetes cannot use, and says where */
Test(helm, the_schema_refuses_bad_values)
{
    static const char *const bad[][2] = {{"sandbox=docker", "/sandbox"},
                                         {"service.port=0", "/service/port"},
                                         {"networkPolicy.enabled=maybe", "/networkPolicy/enabled"},
                                         {"replicaCount=-1", "/replicaCount"},
                                         {"unknownKey=1", "unknownKey"}};
    char cmd[1024], out[8192];

    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        snprintf(cmd, sizeof(cmd), "%s template kgate-test %s --set %s 2>&1", helm(), CHART, bad[i][0]);
        cr_expect_neq(run(cmd, out, sizeof(out)), 0, "--set %s was accepted", bad[i][0]);
        cr_expect_not_null(strstr(out, bad[i][1]), "--set %s: the error does not name %s:\n%s", bad[i][0], bad[i][1], out);
    }
}
