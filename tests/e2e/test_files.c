/* tests/e2e/test_files.c: execd's Files/Directories API on the real kgate, confined to a fresh --workspace-root. */
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
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"
#include "support/proc.h"

/* The 1 GiB transfer: kgate's resident memory must stay below this while it moves through. */
#define BIG_SIZE ((size_t)1 << 30)
#define RSS_LIMIT_KB (64 * 1024)

static ts_gateway_t gw;
static char tmp[256], root[300], outside[300];

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static char *read_file(const char *path)
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

static int exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* A workspace with files, a secret outside it, and symbolic links leading out and in. */
static void start(void)
{
    const char *args[] = {"--workspace-root", root, NULL};
    const char *env[] = {"ASAN_OPTIONS=quarantine_size_mb=0:detect_leaks=1", NULL};
    char path[600];

    snprintf(tmp, sizeof(tmp), "/tmp/kgate-e2e-files.XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    snprintf(root, sizeof(root), "%s/ws", tmp);
    snprintf(outside, sizeof(outside), "%s/outside", tmp);
    sh("mkdir -p '%s/dir/sub' '%s' && printf 'one\\ntwo\\nthree\\n' > '%s/a.txt' && printf 'x' > '%s/dir/b.txt'"
       " && printf 'y' > '%s/dir/sub/c.md' && printf 'secret' > '%s/secret' && ln -s '%s' '%s/out_dir'"
       " && ln -s '%s/secret' '%s/out_file' && ln -s a.txt '%s/in_link' && chmod 644 '%s/a.txt' '%s/secret'",
       root, outside, root, root, root, outside, outside, root, outside, root, root, root, outside);
    (void)path;
    ts_gateway_opts_t opts = {.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .env = env};
    cr_assert_eq(ts_gateway_start(&gw, &opts), 0, "kgate did not start: %s", gw.error);
}

static void stop(void)
{
    size_t survivors = 0;
    int rc = ts_gateway_stop_keep(&gw, &survivors);
    if (rc != 0)
        ts_gateway_dump_log(&gw, 8192);
    ts_gateway_cleanup(&gw);
    sh("rm -rf '%s'", tmp);
    cr_assert_eq(rc, 0, "kgate did not stop cleanly: %s", gw.error);
}

TestSuite(files, .init = start, .fini = stop, .timeout = 120);

static int req(const char *method, const char *path, const char *body, ts_response_t *r)
{
    return ts_http_request(gw.port, method, path, NULL, body, r);
}

static void expect(const char *method, const char *path, const char *body, int status, const char *code)
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

Test(files, info_map_of_fileinfo)
{
    ts_response_t r;
    json_t *a, *d;
    char abs[600];

    req("GET", "/files/info?path=a.txt&path=dir&path=in_link", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    a = json_object_get(r.json, "a.txt");
    d = json_object_get(r.json, "dir");
    cr_assert(json_is_object(a) && json_is_object(d), "%s", r.body);
    snprintf(abs, sizeof(abs), "%s/a.txt", root);
    cr_assert_str_eq(json_string_value(json_object_get(a, "path")), abs);
    cr_assert_str_eq(json_string_value(json_object_get(a, "type")), "file");
    cr_assert_eq(json_integer_value(json_object_get(a, "size")), 14);
    cr_assert_eq(json_integer_value(json_object_get(a, "mode")), 644, "mode is the octal digits as a decimal integer");
    cr_assert(json_is_string(json_object_get(a, "owner")) && json_is_string(json_object_get(a, "group")));
    cr_assert_not_null(strchr(json_string_value(json_object_get(a, "modified_at")), 'T'), "RFC 3339");
    cr_assert_eq(
        json_string_value(json_object_get(a, "modified_at"))[strlen(json_string_value(json_object_get(a, "modified_at"))) - 1],
        'Z');
    cr_assert(json_is_string(json_object_get(a, "created_at")));
    cr_assert_str_eq(json_string_value(json_object_get(d, "type")), "directory");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(r.json, "in_link"), "type")), "symlink");
    ts_response_dispose(&r);
    /* absolute paths inside the root work too */
    snprintf(abs, sizeof(abs), "/files/info?path=%s/dir/b.txt", root);
    expect("GET", abs, NULL, 200, NULL);
    expect("GET", "/files/info?path=missing", NULL, 404, "FILE_NOT_FOUND");
    req("GET", "/files/info", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert(json_is_object(r.json) && json_object_size(r.json) == 0, "execd answers {} without paths: %s", r.body);
    ts_response_dispose(&r);
}

/* ---- escapes: refused with 403 and nothing touched ------------------------------------------- */

Test(files, escapes_refused_and_nothing_touched)
{
    static const char *const bad[] = {"../../etc/passwd", "..",           "/etc/passwd",          "out_file",
                                      "out_dir/secret",   "a.txt%00.png", "%2e%2e/outside/secret"};
    char path[1200], body[1200], victim[600];
    size_t i;

    snprintf(victim, sizeof(victim), "%s/secret", outside);
    for (i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        snprintf(path, sizeof(path), "/files/download?path=%s", bad[i]);
        expect("GET", path, NULL, 403, "PATH_OUTSIDE_WORKSPACE");
        snprintf(path, sizeof(path), "/files/info?path=%s", bad[i]);
        if (strcmp(bad[i], "out_file") != 0) /* info describes the link itself, which is inside */
            expect("GET", path, NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    }
    /* each mutating route, aimed at the secret outside the root */
    snprintf(path, sizeof(path), "/files?path=out_dir/secret");
    expect("DELETE", path, NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    snprintf(path, sizeof(path), "/files?path=%s", victim);
    expect("DELETE", path, NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    expect("DELETE", "/files?path=a.txt&path=../outside/secret", NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    cr_assert(exists(victim) && read_file(victim) != NULL, "the secret was removed");
    snprintf(path, sizeof(path), "%s/a.txt", root);
    cr_assert(exists(path), "a.txt was removed although the request was refused as a whole");

    expect("DELETE", "/directories?path=out_dir", NULL, 400, "NOT_A_DIRECTORY"); /* the link is not followed */
    expect("DELETE", "/directories?path=../outside", NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    expect("DELETE", "/directories?path=.", NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    cr_assert(exists(victim));

    expect("POST", "/files/permissions", "{\"out_file\":{\"mode\":777}}", 403, "PATH_OUTSIDE_WORKSPACE");
    expect("POST", "/files/permissions", "{\"../outside/secret\":{\"mode\":777}}", 403, "PATH_OUTSIDE_WORKSPACE");
    {
        struct stat st;
        cr_assert_eq(stat(victim, &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0644, "the secret's mode changed");
    }
    expect("POST", "/files/mv", "[{\"src\":\"a.txt\",\"dest\":\"out_dir/stolen\"}]", 403, "PATH_OUTSIDE_WORKSPACE");
    expect("POST", "/files/mv", "[{\"src\":\"../outside/secret\",\"dest\":\"mine\"}]", 403, "PATH_OUTSIDE_WORKSPACE");
    snprintf(path, sizeof(path), "%s/stolen", outside);
    cr_assert(!exists(path));
    expect("POST", "/files/replace", "{\"out_file\":{\"old\":\"secret\",\"new\":\"pwned\"}}", 403, "PATH_OUTSIDE_WORKSPACE");
    cr_assert_str_eq(read_file(victim), "secret");
    expect("POST", "/directories", "{\"out_dir/newdir\":{\"mode\":755}}", 403, "PATH_OUTSIDE_WORKSPACE");
    expect("POST", "/directories", "{\"../made\":{\"mode\":755}}", 403, "PATH_OUTSIDE_WORKSPACE");
    snprintf(path, sizeof(path), "%s/newdir", outside);
    cr_assert(!exists(path));
    snprintf(path, sizeof(path), "%s/made", tmp);
    cr_assert(!exists(path));
    expect("GET", "/files/search?path=out_dir", NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    expect("GET", "/directories/list?path=..", NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    /* an upload through a link out writes nothing outside (files before it in the same request are written) */
    snprintf(body, sizeof(body),
             "--B\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"path\":\"ok.txt\"}\r\n"
             "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\nfine\r\n"
             "--B\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"path\":\"out_dir/dropped\"}\r\n"
             "--B\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\nbad\r\n--B--\r\n");
    {
        const char *headers[] = {"Content-Type: multipart/form-data; boundary=B", NULL};
        ts_response_t r;
        ts_http_request(gw.port, "POST", "/files/upload", headers, body, &r);
        cr_assert(r.status == 403, "status %d: %s", r.status, r.body);
        ts_response_dispose(&r);
    }
    snprintf(path, sizeof(path), "%s/dropped", outside);
    cr_assert(!exists(path), "an upload wrote outside the root");
}

/* A hard link to a file outside the root (any code in a context can make one) is not served: not read, chmod'ed or rewritten. */
Test(files, hardlinked_outside_file_refused)
{
    char path[1200], victim[600];
    struct stat st;

    snprintf(victim, sizeof(victim), "%s/secret", outside);
    sh("ln '%s' '%s/hard'", victim, root);
    expect("GET", "/files/download?path=hard", NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    expect("POST", "/files/permissions", "{\"hard\":{\"mode\":777}}", 403, "PATH_OUTSIDE_WORKSPACE");
    expect("POST", "/files/replace", "{\"hard\":{\"old\":\"secret\",\"new\":\"pwned\"}}", 403, "PATH_OUTSIDE_WORKSPACE");
    expect("POST", "/editor", "{\"command\":\"view\",\"path\":\"hard\"}", 403, "PATH_OUTSIDE_WORKSPACE");
    cr_assert_eq(stat(victim, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0644, "the secret's mode changed through its hard link");
    cr_assert_str_eq(read_file(victim), "secret");
    /* removing the link is harmless (the outside name stays), so it is allowed */
    expect("DELETE", "/files?path=hard", NULL, 200, NULL);
    cr_assert(exists(victim));
    snprintf(path, sizeof(path), "%s/hard", root);
    cr_assert(!exists(path));
    /* a file with one name downloads as before */
    expect("GET", "/files/download?path=a.txt", NULL, 200, NULL);
}

Test(files, nul_byte_refused)
{
    expect("GET", "/files/info?path=a.txt%00", NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    expect("DELETE", "/files?path=a.txt%00/../x", NULL, 403, "PATH_OUTSIDE_WORKSPACE");
    expect("POST", "/directories", "{\"path\":\"x\\u0000y\"}", 403, "PATH_OUTSIDE_WORKSPACE");
    expect("POST", "/editor", "{\"command\":\"view\",\"path\":\"a.txt\\u0000\"}", 403, "PATH_OUTSIDE_WORKSPACE");
}

/* ---- delete, permissions, mv ------------------------------------------------------------------ */

Test(files, delete_files)
{
    char path[600];

    expect("DELETE", "/files?path=dir/b.txt&path=in_link", NULL, 200, NULL);
    snprintf(path, sizeof(path), "%s/dir/b.txt", root);
    cr_assert(!exists(path));
    snprintf(path, sizeof(path), "%s/a.txt", root);
    cr_assert(exists(path), "deleting a link must not delete its target");
    expect("DELETE", "/files?path=dir", NULL, 400, "IS_A_DIRECTORY");
    expect("DELETE", "/files?path=nope", NULL, 404, "FILE_NOT_FOUND");
    expect("DELETE", "/files", NULL, 400, "MISSING_QUERY");
}

Test(files, permissions)
{
    char path[600];
    struct stat st;

    expect("POST", "/files/permissions", "{\"a.txt\":{\"mode\":600},\"dir\":{\"mode\":700}}", 200, NULL);
    snprintf(path, sizeof(path), "%s/a.txt", root);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    expect("POST", "/files/permissions", "{\"path\":\"a.txt\",\"mode\":640}", 200, NULL);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0640);
    expect("POST", "/files/permissions", "{\"a.txt\":{\"mode\":999}}", 400, "INVALID_REQUEST_BODY");
    expect("POST", "/files/permissions", "{\"a.txt\":{\"mode\":644,\"owner\":\"no-such-user-kgate\"}}", 400, "INVALID_PARAMETER");
    /* -1 would mean "leave unchanged" to chown: as a number it is refused, not silently ignored */
    expect("POST", "/files/permissions", "{\"a.txt\":{\"mode\":644,\"owner\":\"-1\"}}", 400, "INVALID_PARAMETER");
    expect("POST", "/files/permissions", "{\"a.txt\":{\"mode\":644,\"group\":\"4294967295\"}}", 400, "INVALID_PARAMETER");
    expect("POST", "/files/permissions", "{\"missing\":{\"mode\":644}}", 404, "FILE_NOT_FOUND");
    expect("POST", "/files/permissions", "not json", 400, "INVALID_REQUEST_BODY");
}

Test(files, mv)
{
    char path[600];

    expect("POST", "/files/mv", "[{\"src\":\"a.txt\",\"dest\":\"dir/sub/a2.txt\"},{\"src\":\"dir/b.txt\",\"dest\":\"b.txt\"}]", 200,
           NULL);
    snprintf(path, sizeof(path), "%s/dir/sub/a2.txt", root);
    cr_assert_str_eq(read_file(path), "one\ntwo\nthree\n");
    snprintf(path, sizeof(path), "%s/b.txt", root);
    cr_assert(exists(path));
    expect("POST", "/files/mv", "{\"src\":\"b.txt\",\"dest\":\"c.txt\"}", 200, NULL);
    {
        /* a missing source is named in the 404 */
        ts_response_t r;
        req("POST", "/files/mv", "[{\"src\":\"missing\",\"dest\":\"x\"}]", &r);
        E2E_ASSERT_ERROR(&r, 404, "FILE_NOT_FOUND");
        cr_assert(strstr(r.body, "missing") != NULL, "the 404 names the source: %s", r.body);
        ts_response_dispose(&r);
    }
    /* execd creates the destination's missing parents (0755) */
    expect("POST", "/files/mv", "[{\"src\":\"c.txt\",\"dest\":\"new/deep/dir/x\"}]", 200, NULL);
    snprintf(path, sizeof(path), "%s/new/deep/dir/x", root);
    cr_assert(exists(path), "mv into a new directory did not create it");
    {
        struct stat st;
        snprintf(path, sizeof(path), "%s/new/deep", root);
        cr_assert_eq(stat(path, &st), 0);
        cr_assert_eq(st.st_mode & 0777, 0755 & ~(mode_t)022, "a created parent's mode: %o", st.st_mode & 0777);
    }
    /* and never replaces an existing destination: 409 naming it, both files untouched */
    {
        ts_response_t r;
        req("POST", "/files/mv", "[{\"src\":\"new/deep/dir/x\",\"dest\":\"dir/sub/a2.txt\"}]", &r);
        E2E_ASSERT_ERROR(&r, 409, "FILE_EXISTS");
        cr_assert(strstr(r.body, "dir/sub/a2.txt") != NULL, "the 409 names the destination: %s", r.body);
        ts_response_dispose(&r);
    }
    snprintf(path, sizeof(path), "%s/dir/sub/a2.txt", root);
    cr_assert_str_eq(read_file(path), "one\ntwo\nthree\n");
    snprintf(path, sizeof(path), "%s/new/deep/dir/x", root);
    cr_assert(exists(path));
    expect("POST", "/files/mv", "[{\"src\":\"c.txt\"}]", 400, "INVALID_REQUEST_BODY");
    expect("POST", "/files/mv", "[{\"src\":\".\",\"dest\":\"x\"}]", 400, "INVALID_PARAMETER");
}

/* ---- search, list ----------------------------------------------------------------------------- */

static int has_path(json_t *arr, const char *suffix)
{
    size_t i, n = strlen(suffix);
    json_t *v;

    json_array_foreach(arr, i, v)
    {
        const char *p = json_string_value(json_object_get(v, "path"));
        if (p != NULL && strlen(p) >= n && strcmp(p + strlen(p) - n, suffix) == 0)
            return 1;
    }
    return 0;
}

Test(files, search)
{
    ts_response_t r;

    req("GET", "/files/search?path=.&pattern=*.txt", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert(json_is_array(r.json), "%s", r.body);
    cr_assert(has_path(r.json, "/a.txt") && has_path(r.json, "/dir/b.txt"), "%s", r.body);
    cr_assert(!has_path(r.json, "/c.md") && !has_path(r.json, "/dir"), "%s", r.body);
    ts_response_dispose(&r);
    req("GET", "/files/search?path=dir", NULL, &r); /* default pattern ** */
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_eq(json_array_size(r.json), 2, "%s", r.body);
    ts_response_dispose(&r);
    req("GET", "/files/search?path=.&pattern=dir/*/*.md", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_eq(json_array_size(r.json), 1, "%s", r.body);
    ts_response_dispose(&r);
    expect("GET", "/files/search?pattern=*", NULL, 400, "MISSING_QUERY");
    expect("GET", "/files/search?path=nope", NULL, 404, "FILE_NOT_FOUND");
}

Test(files, directories_list)
{
    ts_response_t r;
    json_t *first;

    req("GET", "/directories/list?path=.", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_eq(json_array_size(r.json), 5, "depth 1: a.txt dir in_link out_dir out_file: %s", r.body);
    first = json_array_get(r.json, 0);
    cr_assert(has_path(r.json, "/out_dir") && !has_path(r.json, "/out_dir/secret"), "links are listed, never followed");
    cr_assert_str_eq(strrchr(json_string_value(json_object_get(first, "path")), '/'), "/a.txt", "lexical order");
    ts_response_dispose(&r);
    req("GET", "/directories/list?path=dir&depth=2", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_eq(json_array_size(r.json), 3, "b.txt sub sub/c.md: %s", r.body);
    cr_assert_str_eq(strrchr(json_string_value(json_object_get(json_array_get(r.json, 2), "path")), '/'), "/c.md",
                     "descendants follow their parent");
    ts_response_dispose(&r);
    expect("GET", "/directories/list?path=out_dir", NULL, 400, "INVALID_PARAMETER");
    expect("GET", "/directories/list?path=a.txt", NULL, 400, "NOT_A_DIRECTORY");
    expect("GET", "/directories/list?path=.&depth=x", NULL, 400, "INVALID_PARAMETER");
    expect("GET", "/directories/list", NULL, 400, "MISSING_QUERY");
}

/* ---- replace, directories --------------------------------------------------------------------- */

Test(files, replace)
{
    ts_response_t r;
    char path[600];

    expect("POST", "/files/replace", "{\"a.txt\":{\"old\":\"o\",\"new\":\"0\"}}", 200, NULL);
    snprintf(path, sizeof(path), "%s/a.txt", root);
    cr_assert_str_eq(read_file(path), "0ne\ntw0\nthree\n");
    req("POST", "/files/replace?verbose=true", "{\"path\":\"a.txt\",\"old\":\"e\",\"new\":\"E\"}", &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(r.json, "a.txt"), "replacedCount")), 3, "%s", r.body);
    ts_response_dispose(&r);
    expect("POST", "/files/replace", "{\"a.txt\":{\"old\":\"\",\"new\":\"x\"}}", 400, "INVALID_REQUEST_BODY");
    expect("POST", "/files/replace", "{\"missing\":{\"old\":\"a\",\"new\":\"b\"}}", 404, "FILE_NOT_FOUND");
}

Test(files, directories_create_and_delete)
{
    char path[600];
    struct stat st;

    expect("POST", "/directories", "{\"p/q/r\":{\"mode\":700},\"s\":{\"mode\":755}}", 200, NULL);
    snprintf(path, sizeof(path), "%s/p/q/r", root);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert(S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
    expect("POST", "/directories", "{\"path\":\"t\"}", 200, NULL);
    expect("POST", "/directories", "{\"a.txt/x\":{\"mode\":755}}", 400, "NOT_A_DIRECTORY");
    sh("printf z > '%s/p/q/r/file' && ln -s '%s' '%s/p/q/link'", root, outside, root);
    expect("DELETE", "/directories?path=p", NULL, 200, NULL);
    snprintf(path, sizeof(path), "%s/p", root);
    cr_assert(!exists(path));
    snprintf(path, sizeof(path), "%s/secret", outside);
    cr_assert(exists(path), "rm -rf followed a link out");
    expect("DELETE", "/directories?path=gone", NULL, 200, NULL); /* execd: a missing directory is removed */
    expect("DELETE", "/directories?path=a.txt", NULL, 400, "NOT_A_DIRECTORY");
    expect("DELETE", "/directories", NULL, 400, "MISSING_QUERY");
}

/* ---- upload, download ------------------------------------------------------------------------- */

Test(files, upload_pairs)
{
    const char *headers[] = {"Content-Type: multipart/form-data; boundary=----kgateB", NULL};
    const char *body = "------kgateB\r\nContent-Disposition: form-data; name=\"metadata\"; filename=\"metadata\"\r\n"
                       "Content-Type: application/json\r\n\r\n{\"path\":\"up/one.txt\",\"mode\":600}\r\n"
                       "------kgateB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"one.txt\"\r\n"
                       "Content-Type: application/octet-stream\r\n\r\nfirst file\n\r\n"
                       "------kgateB\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"path\":\"two.txt\"}\r\n"
                       "------kgateB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"two.txt\"\r\n\r\nsecond\r\n"
                       "------kgateB--\r\n";
    ts_response_t r;
    char path[600];
    struct stat st;

    ts_http_request(gw.port, "POST", "/files/upload", headers, body, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_eq(r.body_len, 0);
    ts_response_dispose(&r);
    snprintf(path, sizeof(path), "%s/up/one.txt", root);
    cr_assert_str_eq(read_file(path), "first file\n");
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600);
    snprintf(path, sizeof(path), "%s/two.txt", root);
    cr_assert_str_eq(read_file(path), "second");

    ts_http_request(gw.port, "POST", "/files/upload", NULL, "x", &r);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_FILE");
    ts_response_dispose(&r);
    ts_http_request(gw.port, "POST", "/files/upload", headers,
                    "------kgateB\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx\r\n------kgateB--\r\n", &r);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_FILE_METADATA");
    ts_response_dispose(&r);
    ts_http_request(gw.port, "POST", "/files/upload", headers,
                    "------kgateB\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{}\r\n"
                    "------kgateB\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nx\r\n------kgateB--\r\n",
                    &r);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_FILE_METADATA");
    ts_response_dispose(&r);
    ts_http_request(gw.port, "POST", "/files/upload", headers, "------kgateB\r\nno end", &r);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_FILE");
    ts_response_dispose(&r);
}

Test(files, download_whole_range_lines)
{
    ts_response_t r;
    const char *range5[] = {"Range: bytes=4-6", NULL}, *suffix[] = {"Range: bytes=-6", NULL},
               *open_end[] = {"Range: bytes=8-", NULL};
    const char *bad[] = {"Range: bytes=100-200", NULL}, *junk[] = {"Range: lines=1-2", NULL};

    req("GET", "/files/download?path=a.txt", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_str_eq(r.body, "one\ntwo\nthree\n");
    cr_assert_str_eq(ts_response_header(&r, "content-type"), "application/octet-stream");
    cr_assert_not_null(strstr(ts_response_header(&r, "content-disposition"), "filename=\"a.txt\""));
    cr_assert_str_eq(ts_response_header(&r, "content-length"), "14");
    ts_response_dispose(&r);

    ts_http_request(gw.port, "GET", "/files/download?path=a.txt", range5, NULL, &r);
    E2E_ASSERT_STATUS(&r, 206);
    cr_assert_str_eq(r.body, "two");
    cr_assert_str_eq(ts_response_header(&r, "content-range"), "bytes 4-6/14");
    ts_response_dispose(&r);
    ts_http_request(gw.port, "GET", "/files/download?path=a.txt", suffix, NULL, &r);
    E2E_ASSERT_STATUS(&r, 206);
    cr_assert_str_eq(r.body, "three\n");
    ts_response_dispose(&r);
    ts_http_request(gw.port, "GET", "/files/download?path=a.txt", open_end, NULL, &r);
    E2E_ASSERT_STATUS(&r, 206);
    cr_assert_str_eq(r.body, "three\n");
    cr_assert_str_eq(ts_response_header(&r, "content-range"), "bytes 8-13/14");
    ts_response_dispose(&r);
    ts_http_request(gw.port, "GET", "/files/download?path=a.txt", bad, NULL, &r);
    E2E_ASSERT_ERROR(&r, 416, "RANGE_NOT_SATISFIABLE");
    cr_assert_str_eq(ts_response_header(&r, "content-range"), "bytes */14");
    ts_response_dispose(&r);
    ts_http_request(gw.port, "GET", "/files/download?path=a.txt", junk, NULL, &r);
    E2E_ASSERT_ERROR(&r, 416, "RANGE_NOT_SATISFIABLE");
    ts_response_dispose(&r);

    req("GET", "/files/download?path=a.txt&offset=2&limit=1", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_str_eq(r.body, "two\n");
    cr_assert_not_null(strstr(ts_response_header(&r, "content-type"), "text/plain"));
    ts_response_dispose(&r);
    req("GET", "/files/download?path=a.txt&offset=2&limit=10", NULL, &r);
    cr_assert_str_eq(r.body, "two\nthree\n");
    ts_response_dispose(&r);
    req("GET", "/files/download?path=dir/b.txt&offset=1&limit=1", NULL, &r);
    cr_assert_str_eq(r.body, "x\n", "every returned line ends with a newline (execd)");
    ts_response_dispose(&r);
    req("GET", "/files/download?path=a.txt&offset=9&limit=1", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_eq(r.body_len, 0);
    ts_response_dispose(&r);
    expect("GET", "/files/download?path=a.txt&offset=0&limit=1", NULL, 400, "INVALID_PARAMETER");
    ts_http_request(gw.port, "GET", "/files/download?path=a.txt&offset=1&limit=1", range5, NULL, &r);
    E2E_ASSERT_ERROR(&r, 400, "INVALID_PARAMETER");
    ts_response_dispose(&r);
    expect("GET", "/files/download?path=dir", NULL, 400, "IS_A_DIRECTORY");
    expect("GET", "/files/download?path=missing", NULL, 404, "FILE_NOT_FOUND");
    expect("GET", "/files/download", NULL, 400, "MISSING_QUERY");
    req("GET", "/files/download?path=in_link", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_assert_str_eq(r.body, "one\ntwo\nthree\n", "a link inside the root is followed");
    ts_response_dispose(&r);
}

/* ---- 1 GiB through kgate, resident memory measured -------------------------------------------- */

typedef struct st_sampler_t {
    pid_t pid;
    volatile int stop;
    long peak_kb;
    pthread_t thread;
} sampler_t;

static void *sample(void *arg)
{
    sampler_t *s = arg;
    while (!s->stop) {
        long kb = ts_proc_rss_kb(s->pid);
        if (kb > s->peak_kb)
            s->peak_kb = kb;
        usleep(5000);
    }
    return NULL;
}

static int connect_kgate(void)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons(gw.port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static void send_all(int fd, const void *p, size_t len)
{
    while (len != 0) {
        ssize_t n = write(fd, p, len);
        cr_assert_gt(n, 0, "write: %s", strerror(errno));
        p = (const char *)p + n;
        len -= (size_t)n;
    }
}

/* The byte at offset i of the big file: a pattern a shifted copy would not reproduce. */
static unsigned char pattern_byte(size_t i)
{
    return (unsigned char)((i * 2654435761u) >> 13);
}

static void fill(unsigned char *buf, size_t off, size_t n)
{
    size_t i;
    for (i = 0; i != n; ++i)
        buf[i] = pattern_byte(off + i);
}

Test(files, one_gib_upload_and_download_in_bounded_memory, .timeout = 600)
{
    static const char head_part[] =
        "--bigB\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"path\":\"big/blob.bin\"}\r\n"
        "--bigB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"blob.bin\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n";
    static const char tail_part[] = "\r\n--bigB--\r\n";
    size_t chunk = 4u << 20, off, total = sizeof(head_part) - 1 + BIG_SIZE + sizeof(tail_part) - 1;
    unsigned char *buf = malloc(chunk), *expect_buf = malloc(chunk);
    char head[512], resp[4096], path[600];
    sampler_t s = {gw.pid, 0, 0, 0};
    long idle_kb = ts_proc_rss_kb(gw.pid), upload_peak, download_peak;
    int64_t t0, t1, t2;
    struct stat st;
    size_t got = 0, expect_off = 0;
    ssize_t n;
    int fd;

    pthread_create(&s.thread, NULL, sample, &s);
    t0 = ts_now_ms();
    fd = connect_kgate();
    snprintf(head, sizeof(head),
             "POST /files/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
             "Content-Type: multipart/form-data; boundary=bigB\r\nContent-Length: %zu\r\n\r\n",
             total);
    send_all(fd, head, strlen(head));
    send_all(fd, head_part, sizeof(head_part) - 1);
    for (off = 0; off < BIG_SIZE; off += chunk) {
        fill(buf, off, chunk);
        send_all(fd, buf, chunk);
    }
    send_all(fd, tail_part, sizeof(tail_part) - 1);
    n = read(fd, resp, sizeof(resp) - 1);
    cr_assert_gt(n, 0);
    resp[n] = '\0';
    close(fd);
    t1 = ts_now_ms();
    s.stop = 1;
    pthread_join(s.thread, NULL);
    upload_peak = s.peak_kb;
    cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "upload: %.300s", resp);
    snprintf(path, sizeof(path), "%s/big/blob.bin", root);
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq((size_t)st.st_size, BIG_SIZE);

    /* download it back, checking every byte, with the sampler running again */
    s.stop = 0;
    s.peak_kb = 0;
    pthread_create(&s.thread, NULL, sample, &s);
    fd = connect_kgate();
    snprintf(head, sizeof(head), "GET /files/download?path=big/blob.bin HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    send_all(fd, head, strlen(head));
    {
        /* the head, then the body checked against the pattern as it streams in */
        size_t hlen = 0;
        char *end = NULL;
        while (end == NULL) {
            n = read(fd, resp + hlen, sizeof(resp) - 1 - hlen);
            cr_assert_gt(n, 0);
            hlen += (size_t)n;
            resp[hlen] = '\0';
            end = strstr(resp, "\r\n\r\n");
        }
        cr_assert(strncmp(resp, "HTTP/1.1 200", 12) == 0, "download: %.300s", resp);
        cr_assert_not_null(strcasestr(resp, "content-length: 1073741824"), "%.500s", resp);
        got = hlen - (size_t)(end + 4 - resp);
        fill(expect_buf, 0, got);
        cr_assert(memcmp(end + 4, expect_buf, got) == 0);
        expect_off = got;
        while ((n = read(fd, buf, chunk)) > 0) {
            fill(expect_buf, expect_off, (size_t)n);
            cr_assert(memcmp(buf, expect_buf, (size_t)n) == 0, "byte mismatch near offset %zu", expect_off);
            expect_off += (size_t)n;
        }
    }
    close(fd);
    t2 = ts_now_ms();
    s.stop = 1;
    pthread_join(s.thread, NULL);
    download_peak = s.peak_kb;
    cr_assert_eq(expect_off, BIG_SIZE, "downloaded %zu bytes", expect_off);
    cr_log_info("1 GiB: kgate VmRSS idle %ld kB, upload peak %ld kB (%lld ms), download peak %ld kB (%lld ms)", idle_kb,
                upload_peak, (long long)(t1 - t0), download_peak, (long long)(t2 - t1));
    fprintf(stderr, "1 GiB: kgate VmRSS idle %ld kB, upload peak %ld kB (%lld ms), download peak %ld kB (%lld ms)\n", idle_kb,
            upload_peak, (long long)(t1 - t0), download_peak, (long long)(t2 - t1));
    cr_assert_lt(upload_peak, RSS_LIMIT_KB, "upload: kgate's resident memory peaked at %ld kB", upload_peak);
    cr_assert_lt(download_peak, RSS_LIMIT_KB, "download: kgate's resident memory peaked at %ld kB", download_peak);
    free(buf);
    free(expect_buf);
}
