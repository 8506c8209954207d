/* tests/e2e/files_fixture.c: the files suites' kgate on a fresh workspace, with a secret outside it and links out and in. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checks.h"
#include "exec_helpers.h"
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"

#include "files_fixture.h"

ts_gateway_t gw;
char tmp[256], root[300], outside[300];

char *read_file(const char *path)
{
    static char buf[65536];
    FILE *fp = fopen(path, "r");
    size_t n;

    if (fp == NULL)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A workspace with files, a secret outside it, and symbolic links leading out and in. */
void start(void)
{
    const char *args[] = {"--workspace-root", root, NULL};
    const char *env[] = {"ASAN_OPTIONS=quarantine_size_mb=0:detect_leaks=1", NULL};
    char path[600];

    snprintf(tmp, sizeof(tmp), "/tmp/kgate-e2e-files.XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    snprintf(root, sizeof(root), "%s/ws", tmp);
    snprintf(outside, sizeof(outside), "%s/outside", tmp);
    xh_sh("mkdir -p '%s/dir/sub' '%s' && printf 'one\\ntwo\\nthree\\n' > '%s/a.txt' && printf 'x' > '%s/dir/b.txt'"
          " && printf 'y' > '%s/dir/sub/c.md' && printf 'secret' > '%s/secret' && ln -s '%s' '%s/out_dir'"
          " && ln -s '%s/secret' '%s/out_file' && ln -s a.txt '%s/in_link' && chmod 644 '%s/a.txt' '%s/secret'",
          root, outside, root, root, root, outside, outside, root, outside, root, root, root, outside);
    (void)path;
    ts_gateway_opts_t opts = {.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .env = env};
    cr_assert_eq(ts_gateway_start(&gw, &opts), 0, "kgate did not start: %s", gw.error);
}

void stop(void)
{
    size_t survivors = 0;
    int rc = ts_gateway_stop_keep(&gw, &survivors);
    if (rc != 0)
        ts_gateway_dump_log(&gw, 8192);
    ts_gateway_cleanup(&gw);
    xh_sh("rm -rf '%s'", tmp);
    cr_assert_eq(rc, 0, "kgate did not stop cleanly: %s", gw.error);
}

int req(const char *method, const char *path, const char *body, ts_response_t *r)
{
    return ts_http_request(gw.port, method, path, NULL, body, r);
}

void expect(const char *method, const char *path, const char *body, int status, const char *code)
{
    ts_response_t r;

    req(method, path, body, &r);
    if (code != NULL || status >= 400)
        E2E_ASSERT_ERROR(&r, status, code);
    else
        E2E_ASSERT_STATUS(&r, status);
    ts_response_dispose(&r);
}

/* ---- info ------------------------------------------------------------------------------------- */
