/* kernels/bash/src/main.c: kgate-bash-kernel, a Jupyter kernel for bash: `kgate-bash-kernel -f CONNECTION_FILE`. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/errors.h"
#include "kernel.h"

static void usage(FILE *fp)
{
    fprintf(fp, "usage: kgate-bash-kernel -f CONNECTION_FILE\n"
                "A Jupyter kernel (protocol 5.3) that runs code in one persistent bash.\n");
}

int main(int argc, char **argv)
{
    const char *path = NULL;
    wire_connection_t conn;
    bk_kernel_t *k;
    sigset_t set;
    int opt, err, sigfd, code;

    while ((opt = getopt(argc, argv, "f:h")) != -1) {
        switch (opt) {
        case 'f':
            path = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (path == NULL || optind != argc) {
        usage(stderr);
        return 2;
    }
    /* Descriptors 0-2 must exist, or the pipes to bash could land on them. */
    for (int fd = 0; fd != 3; ++fd)
        if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
            return 1;

    wire_global_init();
    /*
     * SIGINT interrupts the running code, never the kernel (interrupt_mode "signal" sends it to the
     * kernel's process group; bash has a group of its own). Signals arrive through a signalfd in the
     * poll loop, blocked before ZeroMQ starts its threads so that none of them takes one.
     */
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGCHLD);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if ((sigfd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0) {
        perror("kgate-bash: signalfd");
        return 1;
    }
    if ((err = wire_connection_read(path, &conn)) != 0) {
        fprintf(stderr, "kgate-bash: %s: %s\n", path, wire_strerror(err));
        close(sigfd);
        return 1;
    }
    k = bk_kernel_create(&conn, sigfd);
    wire_connection_dispose(&conn);
    if (k == NULL)
        return 1;
    code = bk_kernel_run(k);
    bk_kernel_destroy(k);
    return code;
}
