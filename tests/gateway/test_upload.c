/* tests/gateway/test_upload.c: the release of big bodies' files (their multipart parsing: test_multipart.c). */
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
