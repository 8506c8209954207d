/* tests/gateway/test_auth.c: the access token in its three header forms, compared by length then content. */
#include <criterion/criterion.h>
#include "core/auth.h"
#include "gw_test.h"

TestSuite(auth, .init = gw_test_init);

#define TOKEN "s3cr3t-T0ken"

Test(auth, token_equal_compares_length_and_content)
{
    cr_assert(gw_auth_token_equal(TOKEN, TOKEN, strlen(TOKEN)));
    cr_assert_not(gw_auth_token_equal(TOKEN, "s3cr3t-T0ke", 11), "a prefix is not the token");
    cr_assert_not(gw_auth_token_equal(TOKEN, TOKEN "x", strlen(TOKEN) + 1), "nor is a longer string");
    cr_assert_not(gw_auth_token_equal(TOKEN, "s3cr3t-t0ken", strlen(TOKEN)), "tokens are case-sensitive");
    cr_assert_not(gw_auth_token_equal(TOKEN, "x3cr3t-T0ken", strlen(TOKEN)));
    cr_assert_not(gw_auth_token_equal(TOKEN, "s3cr3t-T0kex", strlen(TOKEN)));
    cr_assert_not(gw_auth_token_equal(TOKEN, "", 0));
    cr_assert(gw_auth_token_equal(TOKEN, TOKEN "trailing bytes not counted", strlen(TOKEN)), "only `len` bytes are read");
}

Test(auth, token_equal_reads_only_len_bytes)
{
    char *presented = gw_test_exact_copy(TOKEN, strlen(TOKEN)); /* not NUL-terminated: ASan sees an overread */

    cr_assert(gw_auth_token_equal(TOKEN, presented, strlen(TOKEN)));
    cr_assert_not(gw_auth_token_equal("s3cr3t-T0ken-longer", presented, strlen(TOKEN)));
    free(presented);
}

/* Builds a request carrying the header `name: value` (name NULL: none) and checks it against `token`. */
static int check(const char *token, const char *name, const char *value)
{
    gw_test_req_t t;
    int ok;

    gw_test_req_init(&t, "/code");
    gw_test_req_add_header(&t, "Host", "127.0.0.1:44772");
    if (name != NULL)
        gw_test_req_add_header(&t, name, value);
    gw_test_req_add_header(&t, "Content-Type", "application/json");
    ok = gw_auth_check(&t.req, token);
    gw_test_req_dispose(&t);
    return ok;
}

Test(auth, execd_header)
{
    cr_assert(check(TOKEN, "X-EXECD-ACCESS-TOKEN", TOKEN));
    cr_assert(check(TOKEN, "x-execd-access-token", TOKEN));
    cr_assert_not(check(TOKEN, "X-EXECD-ACCESS-TOKEN", "wrong"));
    cr_assert_not(check(TOKEN, "X-EXECD-ACCESS-TOKEN", ""));
    cr_assert_not(check(TOKEN, "X-EXECD-ACCESS-TOKEN", "Bearer " TOKEN), "no scheme in execd's header");
}

Test(auth, bearer)
{
    cr_assert(check(TOKEN, "Authorization", "Bearer " TOKEN));
    cr_assert(check(TOKEN, "Authorization", "bearer " TOKEN));
    cr_assert(check(TOKEN, "Authorization", "BEARER " TOKEN));
    cr_assert_not(check(TOKEN, "Authorization", "Bearer wrong"));
    cr_assert_not(check(TOKEN, "Authorization", "Bearer"));
    cr_assert_not(check(TOKEN, "Authorization", "Bearer "));
    cr_assert_not(check(TOKEN, "Authorization", "Bearer " TOKEN "x"));
    cr_assert_not(check(TOKEN, "Authorization", "Bearer" TOKEN), "the scheme needs its space");
}

Test(auth, jupyter_token)
{
    cr_assert(check(TOKEN, "Authorization", "token " TOKEN));
    cr_assert(check(TOKEN, "Authorization", "Token " TOKEN));
    cr_assert_not(check(TOKEN, "Authorization", "token nope"));
}

Test(auth, other_schemes_and_bare_tokens_are_refused)
{
    cr_assert_not(check(TOKEN, "Authorization", TOKEN));
    cr_assert_not(check(TOKEN, "Authorization", "Basic " TOKEN));
    cr_assert_not(check(TOKEN, "Authorization", "Bearerx " TOKEN));
    cr_assert_not(check(TOKEN, "X-Access-Token", TOKEN));
    cr_assert_not(check(TOKEN, "Cookie", "token=" TOKEN));
}

Test(auth, missing_token_is_refused)
{
    cr_assert_not(check(TOKEN, NULL, NULL));
}

Test(auth, null_token_admits_everyone)
{
    cr_assert(check(NULL, NULL, NULL));
    cr_assert(check(NULL, "Authorization", "Bearer anything"));
    cr_assert(check(NULL, "X-EXECD-ACCESS-TOKEN", "whatever"));
}

Test(auth, any_of_several_headers_may_carry_it)
{
    gw_test_req_t t;

    gw_test_req_init(&t, "/code");
    gw_test_req_add_header(&t, "Authorization", "Basic dXNlcjpwYXNz");
    gw_test_req_add_header(&t, "X-EXECD-ACCESS-TOKEN", "stale");
    cr_assert_not(gw_auth_check(&t.req, TOKEN));
    gw_test_req_add_header(&t, "Authorization", "Bearer " TOKEN);
    cr_assert(gw_auth_check(&t.req, TOKEN));
    gw_test_req_dispose(&t);

    gw_test_req_init(&t, "/code");
    gw_test_req_add_header(&t, "X-EXECD-ACCESS-TOKEN", "stale");
    gw_test_req_add_header(&t, "X-EXECD-ACCESS-TOKEN", TOKEN);
    cr_assert(gw_auth_check(&t.req, TOKEN));
    gw_test_req_dispose(&t);
}

/* A request from host `authority` carrying `Origin: origin` (NULL: none), checked against `allow`. */
static int origin_ok(const char *authority, const char *origin, const char *allow)
{
    gw_test_req_t t;
    int ok;

    gw_test_req_init(&t, "/code");
    t.req.authority = h2o_iovec_init(authority, strlen(authority));
    if (origin != NULL)
        gw_test_req_add_header(&t, "Origin", origin);
    ok = gw_auth_origin_allowed(&t.req, allow);
    gw_test_req_dispose(&t);
    return ok;
}

Test(auth, pages_of_other_origins_are_refused_unless_allowed)
{
    cr_assert(origin_ok("127.0.0.1:44772", NULL, NULL), "no Origin: not a browser's cross-site request");
    cr_assert(origin_ok("127.0.0.1:44772", "http://127.0.0.1:44772", NULL), "kgate's own origin");
    cr_assert(origin_ok("Localhost:44772", "http://localhost:44772", NULL), "hosts compare case-insensitively");
    cr_assert_not(origin_ok("127.0.0.1:44772", "https://evil.example", NULL), "a site's page posting to loopback");
    /* a page of this machine (a local tool such as MCP's inspector): no site can have such an origin */
    cr_assert(origin_ok("127.0.0.1:44772", "http://127.0.0.1:8888", NULL));
    cr_assert(origin_ok("127.0.0.1:44772", "http://localhost:6274", NULL));
    cr_assert(origin_ok("127.0.0.1:44772", "https://127.10.0.1:8443", NULL));
    cr_assert(origin_ok("127.0.0.1:44772", "http://[::1]:3000", NULL));
    cr_assert(origin_ok("sandbox.example:44772", "https://sandbox.example:44772", NULL), "served from the address asked");
    cr_assert_not(origin_ok("127.0.0.1:44772", "http://localhost.evil.example", NULL));
    cr_assert_not(origin_ok("127.0.0.1:44772", "http://127.0.0.1.evil.example", NULL));
    cr_assert_not(origin_ok("127.0.0.1:44772", "http://[::1", NULL));
    cr_assert_not(origin_ok("127.0.0.1:44772", "file://", NULL));
    cr_assert_not(origin_ok("127.0.0.1:44772", "null", NULL), "a sandboxed frame or a file: page");
    cr_assert_not(origin_ok("127.0.0.1:44772", "http://127.0.0.1:44772.evil.example", NULL));
    cr_assert_not(origin_ok("127.0.0.1:44772", "garbage", NULL));
    cr_assert(origin_ok("127.0.0.1:44772", "https://lab.example", "https://ide.example, https://lab.example"), "listed");
    cr_assert_not(origin_ok("127.0.0.1:44772", "https://lab.example.org", "https://lab.example"), "exact entries only");
    cr_assert(origin_ok("127.0.0.1:44772", "https://anything.example", "*"));
}

/* A request whose Host is `authority`, against a kgate listening on loopback or not. */
static int host_ok(const char *authority, int loopback_listener)
{
    gw_test_req_t t;
    int ok;

    gw_test_req_init(&t, "/code");
    t.req.authority = h2o_iovec_init(authority, strlen(authority));
    ok = gw_auth_host_allowed(&t.req, loopback_listener);
    gw_test_req_dispose(&t);
    return ok;
}

Test(auth, a_loopback_kgate_answers_only_requests_that_name_loopback)
{
    cr_assert(host_ok("127.0.0.1:44772", 1));
    cr_assert(host_ok("localhost:44772", 1));
    cr_assert(host_ok("[::1]:44772", 1));
    cr_assert(host_ok("127.0.0.1", 1));
    cr_assert(host_ok("", 1), "HTTP/1.0 without a Host names nothing");
    cr_assert_not(host_ok("attacker.example:44772", 1), "a rebound name");
    cr_assert_not(host_ok("127.0.0.1.attacker.example", 1));
    cr_assert_not(host_ok("localhost:44772x", 1));
    cr_assert(host_ok("sandbox.example:44772", 0), "a kgate on another address has a token to protect it");
}

/* Builds a request carrying `name: value` and checks it against `token` through a route's own headers (E2B's). */
static int check_route_headers(const char *token, const char *name, const char *value)
{
    static const char *const e2b[] = {"e2b-traffic-access-token", "x-access-token", NULL};
    gw_test_req_t t;
    int ok;

    gw_test_req_init(&t, "/execute");
    gw_test_req_add_header(&t, name, value);
    ok = gw_auth_check_headers(&t.req, token, e2b);
    gw_test_req_dispose(&t);
    return ok;
}

Test(auth, route_headers_carry_the_token_exactly)
{
    cr_assert(check_route_headers(TOKEN, "E2B-Traffic-Access-Token", TOKEN));
    cr_assert(check_route_headers(TOKEN, "X-Access-Token", TOKEN));
    cr_assert_not(check_route_headers(TOKEN, "E2B-Traffic-Access-Token", "wrong"));
    cr_assert_not(check_route_headers(TOKEN, "X-Access-Token", "Bearer " TOKEN), "no scheme in E2B's headers");
    cr_assert_not(check_route_headers(TOKEN, "X-Other-Token", TOKEN), "only the route's headers");
    cr_assert(check_route_headers(NULL, "X-Other-Token", "anything"), "no token configured: nothing is needed");
    cr_assert_not(check(TOKEN, "E2B-Traffic-Access-Token", TOKEN), "kgate's own check does not read E2B's headers");
}
