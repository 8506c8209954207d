/* tests/gateway/test_multipart.c: multipart/form-data splitting (files/multipart.h): the parts, searched in windows of every
 * size and in steps of every budget, are those of one parse; a body cut at every offset before its close delimiter is
 * malformed; the bounds (boundary, part headers, part count) hold. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include <h2o.h>
#include "files/multipart.h"
#include "gw_test.h"

TestSuite(multipart, .init = gw_test_init);

Test(multipart, boundary)
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

Test(multipart, parse)
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

Test(multipart, too_many_parts)
{
    gw_multipart_part_t parts[1];
    size_t n, len = strlen(BODY);

    cr_assert_eq(gw_multipart_parse(BODY, len, "XyZ", parts, 1, &n, NULL, NULL), GW_EMULTIPART_TOOMANYPARTS);
}

Test(multipart, empty_file_part)
{
    static const char body[] = "--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n\r\n--b--\r\n";
    gw_multipart_part_t parts[2];
    size_t n;

    cr_assert_eq(gw_multipart_parse(body, sizeof(body) - 1, "b", parts, 2, &n, NULL, NULL), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(parts[0].data_len, 0);
}

/* A preamble line that starts with the boundary's text ("--bX") is preamble, as for Go's mime/multipart (execd's): the
 * parts are those after the first real delimiter. */
Test(multipart, preamble_starting_with_the_boundary_text)
{
    static const char body[] = "--bX preamble\r\n--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\nabc\r\n--b--\r\n";
    static const char *const no_parts[] = {
        "--bX\r\n--b--\r\n",         /* a preamble line, then the close delimiter alone */
        "--b junk\r\n\r\n\r\n--b--", /* the boundary's text and more than blanks: no delimiter either */
    };
    gw_multipart_part_t parts[2];
    size_t n;

    cr_assert_eq(gw_multipart_parse(body, sizeof(body) - 1, "b", parts, 2, &n, NULL, NULL), 0);
    cr_assert_eq(n, 1);
    cr_assert_str_eq(parts[0].name, "file");
    cr_assert_eq(parts[0].data_len, 3);
    cr_assert(memcmp(body + parts[0].data_off, "abc", 3) == 0);
    for (size_t i = 0; i != sizeof(no_parts) / sizeof(no_parts[0]); ++i) {
        char *copy = gw_test_exact_copy(no_parts[i], strlen(no_parts[i]));
        cr_assert_eq(gw_multipart_parse(copy, strlen(no_parts[i]), "b", parts, 2, &n, NULL, NULL), 0, "%zu", i);
        cr_assert_eq(n, 0, "%zu", i);
        free(copy);
    }
}

/* A body of several search windows parsed in steps gives what one parse gives, whatever the budget. */
Test(multipart, stepped_parse_agrees_with_one_parse)
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

/* Parses `body` searching in windows of `window` bytes, `budget` bytes per step. */
static int parse_in_windows(const char *body, size_t len, const char *boundary, size_t window, size_t budget,
                            gw_multipart_part_t *parts, size_t max_parts, size_t *n)
{
    gw_multipart_parser_t p;
    int ret;

    progress_last = 0;
    if ((ret = gw_multipart_parser_init(&p, body, len, boundary, parts, max_parts, on_progress, NULL)) != 0)
        return ret;
    p.window = window;
    while ((ret = gw_multipart_parser_step(&p, budget)) == 1)
        ;
    *n = p.num_parts;
    return ret;
}

/* A window edge at every offset of the body (every window size), each searched in 1-byte steps too: the same parts. */
Test(multipart, every_window_gives_the_same_parts)
{
    size_t len = strlen(BODY), n_one, n = 0;
    char *body = gw_test_exact_copy(BODY, len);
    gw_multipart_part_t one[4], parts[4];

    cr_assert_eq(gw_multipart_parse(body, len, "XyZ", one, 4, &n_one, NULL, NULL), 0);
    for (size_t window = 1; window <= len + 1; ++window) {
        const size_t budgets[] = {1, SIZE_MAX};
        for (size_t b = 0; b != 2; ++b) {
            cr_assert_eq(parse_in_windows(body, len, "XyZ", window, budgets[b], parts, 4, &n), 0, "window %zu", window);
            cr_assert_eq(n, n_one, "window %zu", window);
            cr_assert(memcmp(parts, one, n * sizeof(parts[0])) == 0, "window %zu, budget %zu: other parts", window, budgets[b]);
            cr_assert_eq(progress_last, len, "window %zu: the whole body is reported read", window);
        }
    }
    free(body);
}

/* Every prefix of the body: refused before the close delimiter is whole, the same parts after it (the epilogue is ignored),
 * whatever the window; nothing reads past the prefix's end (an exact-size copy under ASan). */
Test(multipart, every_cut_of_the_body)
{
    size_t len = strlen(BODY), close_end = (size_t)(strstr(BODY, "--XyZ--") - BODY) + 7, n_one, n = 0;
    gw_multipart_part_t one[4], parts[4];

    cr_assert_eq(gw_multipart_parse(BODY, len, "XyZ", one, 4, &n_one, NULL, NULL), 0);
    for (size_t cut = 0; cut <= len; ++cut) {
        char *body = gw_test_exact_copy(BODY, cut);
        for (size_t window = 1; window <= 64; window *= 4) {
            int ret = parse_in_windows(body, cut, "XyZ", window, 1, parts, 4, &n);
            if (cut < close_end) {
                cr_assert_eq(ret, GW_EMULTIPART_MALFORMED, "a body cut at %zu of %zu: %d", cut, len, ret);
            } else {
                cr_assert_eq(ret, 0, "a body cut at %zu of %zu, after its close delimiter", cut, len);
                cr_assert(n == n_one && memcmp(parts, one, n * sizeof(parts[0])) == 0, "cut at %zu", cut);
            }
        }
        free(body);
    }
}

/* Malformed bodies get GW_EMULTIPART_MALFORMED, not a crash or a made-up part. */
Test(multipart, malformed_bodies)
{
    static const char *const bad[] = {
        "",                                                  /* nothing */
        "--b",                                               /* a delimiter and no more */
        "--bX\r\n\r\ndata\r\n--bY",                          /* the boundary's text, then not CRLF: no delimiter at all */
        "--b\r\nContent-Disposition: form-data; name=a\r\n", /* headers without their blank line */
        "--b\r\n\r\ndata",                                   /* a part that never ends */
        "--b\r\n\r\ndata\r\n--b",                            /* the last delimiter, neither CRLF nor "--" */
    };
    gw_multipart_part_t parts[4];
    size_t n;

    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        char *body = gw_test_exact_copy(bad[i], strlen(bad[i]));
        cr_assert_eq(gw_multipart_parse(body, strlen(bad[i]), "b", parts, 4, &n, NULL, NULL), GW_EMULTIPART_MALFORMED, "%zu", i);
        free(body);
    }
}

/* A part's header block up to GW_MULTIPART_HEADERS_MAX bytes (with its blank line) is read; one byte more is refused. */
Test(multipart, part_headers_are_bounded)
{
    static const char start[] = "--b\r\nX-Pad: ", end[] = "\r\n\r\ndata\r\n--b--\r\n";
    char *body = malloc(GW_MULTIPART_HEADERS_MAX + 64);
    gw_multipart_part_t parts[1];
    size_t n;

    for (size_t extra = 0; extra != 2; ++extra) {
        /* the headers: "X-Pad: " pad "\r\n\r\n", GW_MULTIPART_HEADERS_MAX + extra bytes in all */
        size_t pad = GW_MULTIPART_HEADERS_MAX + extra - (sizeof(start) - 1 - 5) - 4, len = 0;
        memcpy(body, start, sizeof(start) - 1);
        len += sizeof(start) - 1;
        memset(body + len, 'p', pad);
        len += pad;
        memcpy(body + len, end, sizeof(end) - 1);
        len += sizeof(end) - 1;
        int ret = gw_multipart_parse(body, len, "b", parts, 1, &n, NULL, NULL);
        cr_assert_eq(ret, extra == 0 ? 0 : GW_EMULTIPART_MALFORMED, "headers of %zu bytes: %d",
                     (size_t)GW_MULTIPART_HEADERS_MAX + extra, ret);
    }
    free(body);
}

/* A boundary longer than RFC 2046's 70 bytes is refused, as the Content-Type's parameter (cut to 70) and as the parser's. */
Test(multipart, boundary_is_bounded)
{
    char boundary[GW_MULTIPART_BOUNDARY_MAX + 2];
    gw_multipart_parser_t p;
    gw_multipart_part_t parts[1];

    memset(boundary, 'b', sizeof(boundary) - 1);
    boundary[sizeof(boundary) - 1] = '\0';
    cr_assert_eq(gw_multipart_parser_init(&p, "", 0, boundary, parts, 1, NULL, NULL), GW_EMULTIPART_NOBOUNDARY);
    boundary[GW_MULTIPART_BOUNDARY_MAX] = '\0';
    cr_assert_eq(gw_multipart_parser_init(&p, "", 0, boundary, parts, 1, NULL, NULL), 0);
    cr_assert_eq(gw_multipart_parser_init(&p, "", 0, "", parts, 1, NULL, NULL), GW_EMULTIPART_NOBOUNDARY);
}
