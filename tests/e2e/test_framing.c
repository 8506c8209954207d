/* tests/e2e/test_framing.c: what the real kgate does with requests framed to deceive (RFC 9112 6.3) or sent too slowly. */
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "support/base.h"
#include "support/gateway.h"
#include "support/http.h"

static ts_gateway_t own;

static void fini(void)
{
    ts_gateway_stop(&own, NULL);
}

TestSuite(framing, .fini = fini, .timeout = 120);

static void start_own(const char *const *args)
{
    int rc = ts_gateway_start(&own, &(ts_gateway_opts_t){.exe = ts_kgate_path(KGATE_BINARY_DIR), .args = args, .label = "framing"});
    cr_assert_eq(rc, 0, "kgate did not start: %s", own.error);
}

static int connect_own(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(own.port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s", strerror(errno));
    return fd;
}

/* Everything the connection brings until kgate closes it (or `ms` pass: then *closed is 0), NUL-terminated into out. */
static size_t read_until_closed(int fd, char *out, size_t cap, int ms, int *closed)
{
    size_t len = 0;
    int64_t deadline = ts_now_ms() + ms;

    *closed = 0;
    while (len + 1 < cap && ts_now_ms() < deadline) {
        struct pollfd pfd = {fd, POLLIN, 0};
        ssize_t n;
        if (poll(&pfd, 1, (int)(deadline - ts_now_ms())) != 1)
            continue;
        if ((n = read(fd, out + len, cap - 1 - len)) <= 0) {
            *closed = 1;
            break;
        }
        len += (size_t)n;
    }
    out[len] = '\0';
    return len;
}

/* `attack` (a request whose body's end is in doubt, then a pipelined GET /healthz): one 400, then the connection closes. */
static void check_refused(const char *attack)
{
    char answer[8192];
    int fd = connect_own(), closed;
    const char *second;

    cr_assert_eq(write(fd, attack, strlen(attack)), (ssize_t)strlen(attack));
    read_until_closed(fd, answer, sizeof(answer), 5000, &closed);
    close(fd);
    cr_assert(strncmp(answer, "HTTP/1.1 400 ", 13) == 0, "the answer to:\n%s\nwas:\n%s", attack, answer);
    cr_assert_not_null(strstr(answer, "AMBIGUOUS_FRAMING"), "%s", answer);
    cr_assert(closed, "the connection stayed open after:\n%s", answer);
    second = strstr(answer + 13, "HTTP/1.1 ");
    cr_assert_null(second, "the pipelined request was answered too:\n%s", answer);
}

Test(framing, content_length_with_transfer_encoding_or_two_lengths_is_400_and_closes)
{
    start_own(NULL);
    check_refused("POST /code HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
                  "0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    check_refused("POST /code HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\ncontent-length: 0\r\n\r\n"
                  "0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    check_refused("POST /code HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nContent-Length: 40\r\n\r\n"
                  "abcGET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");

    /* the honest forms still work, pipelined: one length said twice, then a plain request */
    {
        static const char ok[] = "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\n{}"
                                 "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
        char answer[8192];
        int fd = connect_own(), closed;
        const char *second;
        cr_assert_eq(write(fd, ok, sizeof(ok) - 1), (ssize_t)sizeof(ok) - 1);
        read_until_closed(fd, answer, sizeof(answer), 5000, &closed);
        close(fd);
        cr_assert_null(strstr(answer, "AMBIGUOUS_FRAMING"), "%s", answer);
        second = strstr(answer + 1, "HTTP/1.1 200 ");
        cr_assert_not_null(second, "the second request was not answered:\n%s", answer);
    }
}

/*
 * Clients sending their request head a byte every 300 ms: kgate closes them once --header-timeout-ms passes (before, they
 * held their connections for --request-timeout-ms, two minutes by default); a request whose head is whole and whose body
 * arrives as slowly is not cut, and kgate answers others meanwhile.
 */
Test(framing, a_head_sent_a_byte_at_a_time_is_cut_at_the_header_timeout)
{
    enum { NSLOW = 20 };
    static const char head[] =
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
    static const char upload[] = "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 16\r\nConnection: close\r\n\r\n";
    const char *args[] = {"--header-timeout-ms", "2000", NULL};
    int fds[NSLOW], cut[NSLOW] = {0}, body_fd, num_cut = 0, closed;
    char answer[4096];
    ts_response_t r;

    start_own(args);
    for (int i = 0; i != NSLOW; ++i)
        fds[i] = connect_own();
    body_fd = connect_own();
    cr_assert_eq(write(body_fd, upload, sizeof(upload) - 1), (ssize_t)sizeof(upload) - 1);
    /* 16 steps of 300 ms: 4.8 s, more than twice the deadline, less than the head's length */
    for (size_t step = 0; step != 16; ++step) {
        for (int i = 0; i != NSLOW; ++i)
            if (!cut[i] && send(fds[i], head + step, 1, MSG_NOSIGNAL) != 1)
                cut[i] = 1;
        cr_assert_eq(send(body_fd, "b", 1, MSG_NOSIGNAL), 1, "the slow body's connection was cut after %zu bytes", step);
        usleep(300 * 1000);
    }
    for (int i = 0; i != NSLOW; ++i) {
        struct pollfd pfd = {fds[i], POLLIN, 0};
        char c;
        if (cut[i] || (poll(&pfd, 1, 1000) == 1 && recv(fds[i], &c, 1, 0) <= 0))
            ++num_cut;
        close(fds[i]);
    }
    read_until_closed(body_fd, answer, sizeof(answer), 5000, &closed);
    close(body_fd);
    cr_assert_eq(num_cut, NSLOW, "%d of %d connections sending their head a byte at a time were closed after 4.8 s", num_cut,
                 NSLOW);
    cr_assert(strncmp(answer, "HTTP/1.1 ", 9) == 0 && strstr(answer, "AMBIGUOUS") == NULL,
              "the request whose body came slowly got:\n%s", answer);
    ts_http_request(own.port, "GET", "/healthz", NULL, NULL, &r);
    E2E_ASSERT_STATUS(&r, 200);
    ts_response_dispose(&r);
}
