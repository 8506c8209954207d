/* tests/e2e/test_files_transfer.c: uploads and downloads: multipart pairs, ranges and lines, 1 GiB in bounded memory. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
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

/* The 1 GiB transfer: kgate's resident memory must stay below this while it moves through. */
#define BIG_SIZE ((size_t)1 << 30)
#define RSS_LIMIT_KB (64 * 1024)

TestSuite(files_transfer, .init = start, .fini = stop, .timeout = 120);

Test(files_transfer, upload_pairs)
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

Test(files_transfer, download_whole_range_lines)
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

/* The 1 GiB transfers, in a suite of their own: beside the suite above, their longer timeouts would leave Criterion's
 * runner with a leak that fails the run under ASan (tests/lint/check_timeouts.py). */
TestSuite(files_transfer_big, .init = start, .fini = stop, .timeout = 600);

Test(files_transfer_big, one_gib_upload_and_download_in_bounded_memory)
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

/* The workspace path a descriptor of `pid` has open beneath `dir` (a file being written), or 0 when none. */
static int has_file_open_beneath(pid_t pid, const char *dir)
{
    char fd_dir[64], link[600], target[700];
    struct dirent *de;
    DIR *d;
    int found = 0;

    snprintf(fd_dir, sizeof(fd_dir), "/proc/%d/fd", (int)pid);
    if ((d = opendir(fd_dir)) == NULL)
        return 0;
    while (!found && (de = readdir(d)) != NULL) {
        ssize_t n;
        snprintf(link, sizeof(link), "%s/%s", fd_dir, de->d_name);
        if ((n = readlink(link, target, sizeof(target) - 1)) <= 0)
            continue;
        target[n] = '\0';
        found = strncmp(target, dir, strlen(dir)) == 0 && target[strlen(dir)] == '/';
    }
    closedir(d);
    return found;
}

/* Directory entries of `dir` whose name contains `needle`, counted (recursively with find). */
static unsigned count_named(const char *dir, const char *needle)
{
    char cmd[900], out[64] = "";
    FILE *p;

    snprintf(cmd, sizeof(cmd), "find '%s' -name '*%s*' | wc -l", dir, needle);
    cr_assert_not_null(p = popen(cmd, "r"));
    cr_assert_not_null(fgets(out, sizeof(out), p));
    pclose(p);
    return (unsigned)strtoul(out, NULL, 10);
}

/*
 * kgate killed (SIGKILL) while it copies a 1 GiB upload into the workspace: after a restart nothing of it is left, neither
 * a temporary file in the workspace (before: a ".blob.bin.kgate-*" of hundreds of MB) nor the dead kgate's directory of
 * body buffers in TMPDIR (before: one more "kgate-bodies.*" per killed kgate).
 */
Test(files_transfer_big, a_kgate_killed_mid_upload_leaves_nothing_after_a_restart, .timeout = 300)
{
    static const char head_part[] =
        "--bigB\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"path\":\"big/blob.bin\"}\r\n"
        "--bigB\r\nContent-Disposition: form-data; name=\"file\"; filename=\"blob.bin\"\r\n"
        "Content-Type: application/octet-stream\r\n\r\n";
    static const char tail_part[] = "\r\n--bigB--\r\n";
    size_t chunk = 4u << 20, total = sizeof(head_part) - 1 + BIG_SIZE + sizeof(tail_part) - 1;
    char tmpdir[400], env_tmpdir[420], head[512], big_dir[600];
    const char *args[] = {"--workspace-root", root, NULL}, *env[] = {env_tmpdir, "ASAN_OPTIONS=detect_leaks=0", NULL};
    ts_gateway_opts_t opts = {.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .env = env, .label = "killed"};
    unsigned char *buf = calloc(1, chunk);
    int64_t deadline;
    int fd;

    snprintf(tmpdir, sizeof(tmpdir), "%s/tmpdir", tmp);
    snprintf(env_tmpdir, sizeof(env_tmpdir), "TMPDIR=%s", tmpdir);
    snprintf(big_dir, sizeof(big_dir), "%s/big", root);
    xh_sh("mkdir -p '%s' '%s'", tmpdir, big_dir);
    ts_gateway_stop(&gw, NULL);
    ts_gateway_cleanup(&gw);
    cr_assert_eq(ts_gateway_start(&gw, &opts), 0, "kgate did not start: %s", gw.error);

    fd = connect_kgate();
    snprintf(head, sizeof(head),
             "POST /files/upload HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
             "Content-Type: multipart/form-data; boundary=bigB\r\nContent-Length: %zu\r\n\r\n",
             total);
    send_all(fd, head, strlen(head));
    send_all(fd, head_part, sizeof(head_part) - 1);
    for (size_t off = 0; off < BIG_SIZE; off += chunk)
        send_all(fd, buf, chunk);
    send_all(fd, tail_part, sizeof(tail_part) - 1);
    /* the copy into the workspace has begun once kgate holds a file open there: kill it then */
    for (deadline = ts_now_ms() + 60000; !has_file_open_beneath(gw.pid, big_dir);) {
        cr_assert_lt(ts_now_ms(), deadline, "kgate never opened a file in %s", big_dir);
        usleep(1000);
    }
    cr_assert_eq(kill(gw.pid, SIGKILL), 0);
    close(fd);
    free(buf);
    ts_gateway_stop(&gw, NULL);
    ts_gateway_cleanup(&gw);

    cr_assert_eq(ts_gateway_start(&gw, &opts), 0, "kgate did not restart: %s", gw.error);
    cr_assert_eq(count_named(root, ".kgate-"), 0, "a temporary file of the killed upload is still in the workspace");
    cr_assert_eq(count_named(root, "blob.bin"), 0, "a file of the killed upload is in the workspace");
    cr_assert_eq(count_named(tmpdir, "kgate-bodies."), 1,
                 "the killed kgate's body directory is still in TMPDIR beside the new one");
}
