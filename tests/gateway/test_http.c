/* tests/gateway/test_http.c: percent-decoding and query parameters. */
#include <criterion/criterion.h>
#include "core/http.h"
#include "gw_test.h"

TestSuite(http, .init = gw_test_init);

/* Decodes an exact-size copy of `in` into a buffer of exactly len + 1 bytes (ASan sees overruns). */
static long decode(const char *in, int plus_is_space, char **out)
{
    size_t len = strlen(in);
    char *copy = gw_test_exact_copy(in, len);
    long n;

    *out = malloc(len + 1);
    n = gw_percent_decode(copy, len, *out, plus_is_space);
    free(copy);
    return n;
}

static void check_decode(const char *in, int plus_is_space, const char *expected)
{
    char *out;
    long n = decode(in, plus_is_space, &out);

    cr_assert_eq(n, (long)strlen(expected), "\"%s\" decoded to %ld bytes, expected \"%s\"", in, n, expected);
    cr_assert_str_eq(out, expected);
    free(out);
}

static void check_refused(const char *in)
{
    char *out;

    cr_assert_eq(decode(in, 1, &out), -1, "\"%s\" should be refused", in);
    free(out);
}

Test(http, percent_decode_plain)
{
    check_decode("", 1, "");
    check_decode("python3", 1, "python3");
    check_decode("a-b_c.d~e", 0, "a-b_c.d~e");
}

Test(http, percent_decode_escapes)
{
    check_decode("%41", 1, "A");
    check_decode("%4a%4A", 1, "JJ");
    check_decode("a%2Fb%3Dc%26d", 1, "a/b=c&d");
    check_decode("%25", 1, "%");
    check_decode("%2541", 1, "%41"); /* decoded once only */
    check_decode("caf%C3%A9", 1, "caf\xc3\xa9");
    check_decode("%7e", 1, "~");
}

Test(http, percent_decode_plus)
{
    check_decode("a+b", 1, "a b");
    check_decode("a+b", 0, "a+b");
    check_decode("%2B", 1, "+");
    check_decode("%20+", 1, "  ");
}

Test(http, percent_decode_refuses_bad_escapes)
{
    check_refused("%");
    check_refused("%4");
    check_refused("ab%4");
    check_refused("%G1");
    check_refused("%1G");
    check_refused("%%41");
    check_refused("% 41");
    check_refused("%-1");
}

Test(http, percent_decode_refuses_a_decoded_nul)
{
    check_refused("%00");
    check_refused("abc%00def");
}

/* Looks `name` up in the query of `path` (a request path with or without '?'). */
static void check_query(const char *path, const char *name, const char *expected)
{
    gw_test_req_t t;
    char *value;

    gw_test_req_init(&t, path);
    value = gw_query_param(&t.req, name);
    if (expected == NULL) {
        cr_assert_null(value, "%s: \"%s\" should be absent, got \"%s\"", path, name, value);
    } else {
        cr_assert_not_null(value, "%s: \"%s\" should be \"%s\"", path, name, expected);
        cr_assert_str_eq(value, expected, "%s: \"%s\"", path, name);
    }
    gw_test_req_dispose(&t);
}

Test(http, query_present)
{
    check_query("/code/contexts?language=python", "language", "python");
    check_query("/code?id=abc&x=1", "id", "abc");
    check_query("/code?x=1&id=abc", "id", "abc");
    check_query("/code?x=1&id=abc&y=2", "id", "abc");
}

Test(http, query_absent)
{
    check_query("/code/contexts", "language", NULL);
    check_query("/code/contexts?", "language", NULL);
    check_query("/code/contexts?lang=python", "language", NULL);
    check_query("/code/contexts?x=language", "language", NULL);
    check_query("/code/contexts?&&", "language", NULL);
}

Test(http, query_empty_value)
{
    check_query("/code/contexts?language=", "language", "");
    check_query("/code/contexts?language", "language", "");
    check_query("/code/contexts?language&x=1", "language", "");
    check_query("/code/contexts?x=1&language=&y=2", "language", "");
}

Test(http, query_percent_encoded_value)
{
    check_query("/files/info?path=%2Ftmp%2Fa%20b", "path", "/tmp/a b");
    check_query("/files/info?path=a+b", "path", "a b");
    check_query("/files/info?path=caf%C3%A9", "path", "caf\xc3\xa9");
    check_query("/files/info?path=%ZZ", "path", NULL);
    check_query("/files/info?path=%00", "path", NULL);
}

Test(http, query_key_prefix_of_another_key)
{
    check_query("/x?language_version=3&language=python", "language", "python");
    check_query("/x?language=python&language_version=3", "language_version", "3");
    check_query("/x?lang=r&language=python", "lang", "r");
    check_query("/x?languagex=1", "language", NULL);
    check_query("/x?language_version=3", "language", NULL);
}

Test(http, query_first_occurrence_wins)
{
    check_query("/x?id=a&id=b", "id", "a");
}

Test(http, query_value_lives_in_the_request_pool)
{
    gw_test_req_t t;
    char *value;

    gw_test_req_init(&t, "/code?id=ctx-1");
    value = gw_query_param(&t.req, "id");
    cr_assert_str_eq(value, "ctx-1");
    free(t.path); /* the value must not point into the path */
    t.path = NULL;
    cr_assert_str_eq(value, "ctx-1");
    h2o_mem_clear_pool(&t.req.pool); /* and is released with the request (ASan checks it) */
}

/* ---- request framing (RFC 9112 6.3) ----------------------------------------------------------------------------- */

/* The verdict on an exact-size copy of `head` (ASan sees a read past its end). */
static const char *framing(const char *head)
{
    size_t len = strlen(head);
    char *copy = gw_test_exact_copy(head, len);
    const char *why = gw_http1_framing_error(copy, len);

    free(copy);
    return why;
}

Test(http, framing_refuses_length_with_chunked_and_two_lengths)
{
    cr_assert_not_null(framing("POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"));
    cr_assert_not_null(framing("POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\nCONTENT-LENGTH: 0\r\n\r\n"));
    cr_assert_not_null(framing("POST / HTTP/1.1\r\nContent-Length: 3\r\nHost: x\r\nContent-Length: 4\r\n\r\nabc"));
    cr_assert_not_null(framing("POST / HTTP/1.1\nContent-Length: 3\nContent-Length:4\n\n"), "bare LF line ends");
    cr_assert_not_null(framing("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: x\r\n\r\n"));
    cr_assert_null(framing("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length:  3 \r\n\r\nabc"), "the same length twice");
    cr_assert_null(framing("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"));
    cr_assert_null(framing("POST / HTTP/1.1\r\nX-Content-Length: 3\r\nContent-Length: 4\r\n\r\n"), "another header's name");
    /* what follows the head's empty line is body, not headers */
    cr_assert_null(framing("POST / HTTP/1.1\r\nContent-Length: 40\r\n\r\nTransfer-Encoding: chunked\r\nContent-Length: 1\r\n\r\n"));
    /* every prefix of a head is read within its bounds */
    {
        static const char head[] = "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
        for (size_t n = 0; n != sizeof(head); ++n) {
            char *copy = gw_test_exact_copy(head, n);
            gw_http1_framing_error(copy, n);
            free(copy);
        }
    }
}
