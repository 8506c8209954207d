/* tests/gateway/test_upload.c: multipart/form-data splitting (every split point of the body's end, malformed bodies), and the
 * release of big bodies' files. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include <h2o.h>
#include "files/upload.h"
#include "support/proc.h"
#include "gw_test.h"

TestSuite(upload, .init = gw_test_init);

Test(upload, boundary)
{
    char b[GW_MULTIPART_BOUNDARY_MAX + 1];
    static const char *const bad[] = {"application/json", "multipart/form-data", "multipart/form-data; charset=x",
                                      "text/plain; boundary=x"};
    size_t i;

    cr_assert_eq(gw_multipart_boundary(H2O_STRLIT("multipart/form-data; boundary=abc123"), b), 0);
    cr_assert_str_eq(b, "abc123");
    cr_assert_eq(gw_multipart_boundary(H2O_STRLIT("Multipart/Form-Data;charset=utf-8; boundary=\"a b\""), b), 0);
    cr_assert_str_eq(b, "a b");
    for (i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i)
        cr_assert_eq(gw_multipart_boundary(bad[i], strlen(bad[i]), b), GW_EMULTIPART_NOBOUNDARY, "%s", bad[i]);
}

#define BODY                                                                                                                       \
    "preamble\r\n"                                                                                                                 \
    "--XyZ\r\n"                                                                                                                    \
    "Content-Disposition: form-data; name=\"metadata\"; filename=\"blob\"\r\n"                                                     \
    "Content-Type: application/json\r\n"                                                                                           \
    "\r\n"                                                                                                                         \
    "{\"path\":\"a.txt\"}\r\n"                                                                                                     \
    "--XyZ\r\n"                                                                                                                    \
    "Content-Disposition: form-data; name=file; filename=\"a.txt\"\r\n"                                                            \
    "\r\n"                                                                                                                         \
    "line1\r\n--XyZnot a delimiter\r\nline2\r\n"                                                                                   \
    "--XyZ--\r\n"                                                                                                                  \
    "epilogue"

static size_t progress_calls, progress_last;

static void on_progress(void *ctx, size_t upto)
{
    (void)ctx;
    cr_assert_geq(upto, progress_last, "progress goes forward");
    progress_last = upto;
    ++progress_calls;
}

Test(upload, parse)
{
    gw_multipart_part_t parts[4];
    size_t n, len = strlen(BODY);
    char *body = gw_test_exact_copy(BODY, len);

    cr_assert_eq(gw_multipart_parse(body, len, "XyZ", parts, 4, &n, on_progress, NULL), 0);
    cr_assert_eq(n, 2);
    cr_assert_str_eq(parts[0].name, "metadata");
    cr_assert(parts[0].has_filename);
    cr_assert_eq(parts[0].data_len, strlen("{\"path\":\"a.txt\"}"));
    cr_assert(memcmp(body + parts[0].data_off, "{\"path\":\"a.txt\"}", parts[0].data_len) == 0);
    cr_assert_str_eq(parts[1].name, "file");
    cr_assert_str_eq(parts[1].filename, "a.txt");
    cr_assert_eq(parts[1].data_len, strlen("line1\r\n--XyZnot a delimiter\r\nline2"));
    cr_assert(memcmp(body + parts[1].data_off, "line1\r\n--XyZnot", 15) == 0);
    cr_assert_eq(progress_last, len);
    free(body);
}

Test(upload, truncated_bodies_are_malformed)
{
    gw_multipart_part_t parts[4];
    size_t n, len = strlen(BODY), cut;

    /* every prefix that stops before the close delimiter is refused, and nothing reads past its end */
    for (cut = 0; cut < (size_t)(strstr(BODY, "--XyZ--") - BODY) + 2; ++cut) {
        char *body = gw_test_exact_copy(BODY, cut);
        int ret = gw_multipart_parse(body, cut, "XyZ", parts, 4, &n, NULL, NULL);
        cr_assert_neq(ret, 0, "a body cut at %zu of %zu was accepted", cut, len);
        free(body);
    }
}

Test(upload, too_many_parts)
{
    gw_multipart_part_t parts[1];
    size_t n, len = strlen(BODY);

    cr_assert_eq(gw_multipart_parse(BODY, len, "XyZ", parts, 1, &n, NULL, NULL), GW_EMULTIPART_TOOMANYPARTS);
}

Test(upload, empty_file_part)
{
    static const char body[] = "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n\r\n--b--\r\n";
    gw_multipart_part_t parts[2];
    size_t n;

    cr_assert_eq(gw_multipart_parse(body, sizeof(body) - 1, "b", parts, 2, &n, NULL, NULL), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(parts[0].data_len, 0);
}

/* A body of several search windows parsed in steps gives what one parse gives, whatever the budget. */
Test(upload, stepped_parse_agrees_with_one_parse)
{
    const char *boundary = "XyZ";
    size_t big = (size_t)20 << 20, len = 0;
    char *body = malloc(big + 1024);
    gw_multipart_part_t one[4], stepped[4];
    size_t n_one = 0;

    len += (size_t)sprintf(body + len,
                           "--XyZ\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"path\":\"a\"}\r\n--XyZ\r\n"
                           "Content-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n");
    memset(body + len, 'q', big);
    /* the boundary's text inside the data, not at a line start: no delimiter */
    memcpy(body + len + big / 2, "\r\n--XyZnot", 10);
    len += big;
    len += (size_t)sprintf(body + len, "\r\n--XyZ--\r\n");
    cr_assert_eq(gw_multipart_parse(body, len, boundary, one, 4, &n_one, NULL, NULL), 0);
    cr_assert_eq(n_one, 2);
    cr_assert_eq(one[1].data_len, big);
    const size_t budgets[] = {1, (size_t)8 << 20, (size_t)16 << 20, SIZE_MAX};
    for (size_t b = 0; b != sizeof(budgets) / sizeof(budgets[0]); ++b) {
        gw_multipart_parser_t p;
        int ret, steps = 0;
        cr_assert_eq(gw_multipart_parser_init(&p, body, len, boundary, stepped, 4, NULL, NULL), 0);
        while ((ret = gw_multipart_parser_step(&p, budgets[b])) == 1)
            ++steps;
        cr_assert_eq(ret, 0, "budget %zu", budgets[b]);
        cr_assert_eq(p.num_parts, n_one);
        for (size_t i = 0; i != n_one; ++i) {
            cr_expect_eq(stepped[i].data_off, one[i].data_off);
            cr_expect_eq(stepped[i].data_len, one[i].data_len);
            cr_expect_str_eq(stepped[i].name, one[i].name);
        }
        if (budgets[b] == 1)
            cr_expect_geq(steps, 2, "a small budget takes several steps for 20 MiB");
        if (budgets[b] == SIZE_MAX)
            cr_expect_eq(steps, 0);
    }
    /* a body cut in the middle of the data fails in steps as in one go */
    gw_multipart_parser_t p;
    int ret;
    cr_assert_eq(gw_multipart_parser_init(&p, body, len - 12, boundary, stepped, 4, NULL, NULL), 0);
    while ((ret = gw_multipart_parser_step(&p, 1)) == 1)
        ;
    cr_expect_eq(ret, GW_EMULTIPART_MALFORMED);
    free(body);
}

/*
 * A big body's file as h2o keeps it (an unlinked file, mapped shared): once its upload is done, kgate's own reference
 * keeps the file's last close (~200 ms per GiB of page cache and blocks) away from h2o's munmap in the loop, and is
 * itself closed, in a thread, as soon as nothing maps the file any more.
 */
Test(upload, a_finished_bodys_file_is_closed_once_h2o_unmapped_it)
{
    enum { SIZE = 4 << 20 };
    char fn[sizeof(h2o_socket_buffer_mmap_settings.fn_template)];
    gw_body_pages_t pages;
    struct stat st;
    char *map;
    int fd;

    cr_assert_eq(gw_body_buffers_init(getenv("TMPDIR"), 1 << 20), 0);
    memcpy(fn, h2o_socket_buffer_mmap_settings.fn_template, sizeof(fn));
    cr_assert_neq(fd = mkstemp(fn), -1);
    unlink(fn);
    cr_assert_eq(ftruncate(fd, SIZE), 0);
    cr_assert_neq(map = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
    cr_assert_eq(fstat(fd, &st), 0);
    memset(map, 'b', SIZE);

    gw_body_pages_init(&pages, map + 4096, SIZE - 4096);
    cr_assert_eq(pages.map_start, map, "the body's mapping was not found");
    cr_assert_neq(pages.fd, -1, "no reference to the body's file was taken");
    gw_body_pages_dispose(&pages);
    cr_expect_eq(pages.fd, -1);
    close(fd); /* h2o's descriptor goes first; its mapping is still there */
    cr_expect(gw_body_buffers_trim(), "a held body file must keep the trim timer going");
    cr_expect((ts_fd_of_file(&st) != -1), "the held reference was closed while h2o still mapped the file");

    munmap(map, SIZE);
    for (int waited = 0; waited < 2000 && (gw_body_buffers_trim() || (ts_fd_of_file(&st) != -1)); waited += 5)
        usleep(5000);
    cr_expect_not((ts_fd_of_file(&st) != -1), "the body file stayed open after h2o unmapped it");
    cr_expect_not(gw_body_buffers_trim(), "the trim timer stays busy with nothing to do");
    gw_body_buffers_dispose();
}
