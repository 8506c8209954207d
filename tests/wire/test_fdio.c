/* tests/wire/test_fdio.c: wire_write_all and wire_pwrite_all (wire/fdio.h): all of a buffer through short writes, at an
 * offset without moving the descriptor's, errors as -errno. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "wire/fdio.h"

/* More than a pipe holds (64 KiB by default): the writer is cut short while a reader drains the other end. */
#define BIG (1u << 20)

Test(fdio, writes_all_through_short_writes, .timeout = 30)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    char *out = malloc(BIG), *in = malloc(BIG);
    for (size_t i = 0; i < BIG; i++)
        out[i] = (char)(i * 7 + 1);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(p[0]);
        _exit(wire_write_all(p[1], out, BIG) == 0 ? 0 : 1);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t n;
    while ((n = read(p[0], in + got, BIG - got)) > 0)
        got += (size_t)n;
    close(p[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    cr_assert_eq(got, BIG);
    cr_assert(memcmp(in, out, BIG) == 0);
    free(out);
    free(in);
}

Test(fdio, errors_are_negative_errno)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    close(p[0]);
    signal(SIGPIPE, SIG_IGN);
    cr_assert_eq(wire_write_all(p[1], "x", 1), -EPIPE);
    close(p[1]);
    cr_assert_eq(wire_write_all(p[1], "x", 1), -EBADF);
    cr_assert_eq(wire_write_all(-1, "", 0), 0, "nothing to write is no write");
}

Test(fdio, pwrite_writes_at_the_offset_and_leaves_the_descriptors_own)
{
    char path[] = "/tmp/kgate-fdio-XXXXXX", got[16] = {0};
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(wire_write_all(fd, "abcdefgh", 8), 0);
    cr_assert_eq(wire_pwrite_all(fd, "XY", 2, 3), 0);
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 8, "the descriptor's offset is where wire_write_all left it");
    cr_assert_eq(wire_pwrite_all(fd, "Z", 1, 10), 0);
    cr_assert_eq(pread(fd, got, sizeof(got), 0), 11);
    cr_expect(memcmp(got, "abcXYfgh\0\0Z", 11) == 0, "the file reads %.11s", got);
    cr_expect_eq(wire_pwrite_all(fd, "x", 1, -1), -EINVAL);
    close(fd);
    cr_expect_eq(wire_pwrite_all(fd, "x", 1, 0), -EBADF);
}
