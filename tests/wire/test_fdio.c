/* tests/wire/test_fdio.c: wire_write_all (wire/fdio.h): all of a buffer through short writes, errors as -errno. */
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
