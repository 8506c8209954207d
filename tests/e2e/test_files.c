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
#include "files_fixture.h"

TestSuite(files, .init = start, .fini = stop, .timeout = 120);

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
    xh_sh("ln '%s' '%s/hard'", victim, root);
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

/*
 * A file name need not be UTF-8 (code in a context can make any): such an entry is listed, found and described with its bytes
 * that are no UTF-8 as U+FFFD, as execd's Go encoder writes them. Before, listings and searches left it out without a word
 * and /files/info answered 500 "RUNTIME_ERROR ...: Success".
 */
Test(files, names_that_are_no_utf8_are_listed_with_replacement_characters)
{
    char path[400];
    ts_response_t r;
    int fd;

    snprintf(path, sizeof(path), "%s/dir/caf\xe9.txt", root); /* "café" in Latin-1 */
    cr_assert((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) != -1, "%s", strerror(errno));
    close(fd);
    req("GET", "/directories/list?path=dir", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_expect(has_path(r.json, "/dir/caf\xef\xbf\xbd.txt"), "the entry is not listed: %s", r.body);
    ts_response_dispose(&r);
    req("GET", "/files/search?path=dir&pattern=*.txt", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    cr_expect(has_path(r.json, "/dir/caf\xef\xbf\xbd.txt") && has_path(r.json, "/dir/b.txt"), "not found: %s", r.body);
    ts_response_dispose(&r);
    req("GET", "/files/info?path=dir/caf%E9.txt", NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    json_t *info = json_object_get(r.json, "dir/caf\xef\xbf\xbd.txt");
    cr_expect(json_is_object(info), "no info under the path asked, made valid: %s", r.body);
    cr_expect_str_eq(json_string_value(json_object_get(info, "type")), "file");
    ts_response_dispose(&r);
    unlink(path);
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
    xh_sh("printf z > '%s/p/q/r/file' && ln -s '%s' '%s/p/q/link'", root, outside, root);
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
