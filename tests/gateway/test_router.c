/* tests/gateway/test_router.c: the route matcher: literals, `{}` parameters, rest-of-path tails, any method, 404 versus 405. */
#include <criterion/criterion.h>
#include "core/router.h"
#include "gw_test.h"

TestSuite(router, .init = gw_test_init);

/* The shape of docs/API.md's table, plus a two-parameter route; the matcher never calls the handlers. */
static const gw_route_t routes[] = {
    {"GET", "/healthz", NULL, 1, 0, NULL, 0, NULL},
    {"GET", "/code/contexts", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/code/contexts", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/code/contexts/{}", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/code/contexts/{}", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/code/contexts/{}/restart", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/code", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/code", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/command/{}/logs/{}", NULL, 0, 0, NULL, 0, NULL},
    {GW_ROUTE_ANY_METHOD, "/proxy/{}" GW_ROUTE_REST, NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/static" GW_ROUTE_REST, NULL, 0, 0, NULL, 0, NULL},
};
#define NUM_ROUTES (sizeof(routes) / sizeof(routes[0]))

typedef struct st_match_t {
    gw_route_result_t result;
    const gw_route_t *route;
    gw_route_params_t params;
    char *path; /* exact-size copy the parameters point into */
} match_t;

static match_t match(const char *method, const char *path)
{
    match_t m;

    m.route = NULL;
    memset(&m.params, 0xa5, sizeof(m.params));
    m.path = gw_test_exact_copy(path, strlen(path));
    m.result = gw_route_match(routes, NUM_ROUTES, h2o_iovec_init(method, strlen(method)), h2o_iovec_init(m.path, strlen(path)),
                              &m.route, &m.params);
    return m;
}

static void check_param(const match_t *m, size_t i, const char *expected)
{
    cr_assert_lt(i, m->params.size);
    cr_assert_eq(m->params.values[i].len, strlen(expected));
    cr_assert(memcmp(m->params.values[i].base, expected, strlen(expected)) == 0, "param %zu is \"%.*s\", expected \"%s\"", i,
              (int)m->params.values[i].len, m->params.values[i].base, expected);
}

static void check_status(const char *method, const char *path, gw_route_result_t expected)
{
    match_t m = match(method, path);

    cr_assert_eq(m.result, expected, "%s %s: got %d, expected %d", method, path, m.result, expected);
    free(m.path);
}

Test(router, literal_routes)
{
    match_t m = match("GET", "/healthz");

    cr_assert_eq(m.result, GW_ROUTE_FOUND);
    cr_assert_eq(m.route, &routes[0]);
    cr_assert_eq(m.params.size, 0);
    cr_assert(m.route->is_public);
    free(m.path);

    m = match("DELETE", "/code");
    cr_assert_eq(m.result, GW_ROUTE_FOUND);
    cr_assert_eq(m.route, &routes[7], "the method picks among routes of one path");
    free(m.path);

    m = match("DELETE", "/code/contexts");
    cr_assert_eq(m.route, &routes[2]);
    free(m.path);
}

Test(router, one_parameter)
{
    match_t m = match("GET", "/code/contexts/3f2b6c1e-0d4e-4a8b-9c7d-123456789abc");

    cr_assert_eq(m.result, GW_ROUTE_FOUND);
    cr_assert_eq(m.route, &routes[3]);
    cr_assert_eq(m.params.size, 1);
    check_param(&m, 0, "3f2b6c1e-0d4e-4a8b-9c7d-123456789abc");
    free(m.path);

    m = match("POST", "/code/contexts/abc/restart");
    cr_assert_eq(m.result, GW_ROUTE_FOUND);
    cr_assert_eq(m.route, &routes[5]);
    cr_assert_eq(m.params.size, 1);
    check_param(&m, 0, "abc");
    free(m.path);
}

Test(router, two_parameters)
{
    match_t m = match("GET", "/command/cmd-1/logs/42");

    cr_assert_eq(m.result, GW_ROUTE_FOUND);
    cr_assert_eq(m.route, &routes[8]);
    cr_assert_eq(m.params.size, 2);
    check_param(&m, 0, "cmd-1");
    check_param(&m, 1, "42");
    free(m.path);
}

Test(router, parameters_point_into_the_path)
{
    match_t m = match("GET", "/command/xy/logs/z");

    cr_assert_eq(m.result, GW_ROUTE_FOUND);
    cr_assert_eq(m.params.values[0].base, m.path + strlen("/command/"));
    cr_assert_eq(m.params.values[1].base, m.path + strlen("/command/xy/logs/"));
    free(m.path);
}

Test(router, unknown_paths_are_404)
{
    check_status("GET", "/", GW_ROUTE_NO_PATH);
    check_status("GET", "", GW_ROUTE_NO_PATH);
    check_status("GET", "/nope", GW_ROUTE_NO_PATH);
    check_status("GET", "/health", GW_ROUTE_NO_PATH);
    check_status("GET", "/healthzz", GW_ROUTE_NO_PATH);
    check_status("POST", "/codes", GW_ROUTE_NO_PATH);
    check_status("POST", "/cod", GW_ROUTE_NO_PATH);
    check_status("GET", "/code/contexts/a/b", GW_ROUTE_NO_PATH);
    check_status("POST", "/code/contexts/a/restart/x", GW_ROUTE_NO_PATH);
    check_status("GET", "/command/a/logs", GW_ROUTE_NO_PATH);
}

Test(router, known_path_with_another_method_is_405)
{
    check_status("POST", "/healthz", GW_ROUTE_NO_METHOD);
    check_status("GET", "/code", GW_ROUTE_NO_METHOD);
    check_status("PUT", "/code/contexts", GW_ROUTE_NO_METHOD);
    check_status("POST", "/code/contexts/abc", GW_ROUTE_NO_METHOD);
    check_status("GET", "/code/contexts/abc/restart", GW_ROUTE_NO_METHOD);
    check_status("get", "/healthz", GW_ROUTE_NO_METHOD); /* methods are case-sensitive (RFC 9110 9.1) */
}

Test(router, trailing_slash_is_not_matched)
{
    check_status("GET", "/healthz/", GW_ROUTE_NO_PATH);
    check_status("POST", "/code/", GW_ROUTE_NO_PATH);
    check_status("GET", "/code/contexts/", GW_ROUTE_NO_PATH);
    check_status("GET", "/code/contexts/abc/", GW_ROUTE_NO_PATH);
    check_status("POST", "/code/contexts/abc/restart/", GW_ROUTE_NO_PATH);
}

Test(router, empty_segment_is_not_a_parameter)
{
    check_status("POST", "/code/contexts//restart", GW_ROUTE_NO_PATH);
    check_status("GET", "/command//logs/1", GW_ROUTE_NO_PATH);
    check_status("GET", "/command/a/logs/", GW_ROUTE_NO_PATH);
}

Test(router, method_is_matched_whole)
{
    check_status("GE", "/healthz", GW_ROUTE_NO_METHOD);
    check_status("GETX", "/healthz", GW_ROUTE_NO_METHOD);
}

Test(router, empty_table)
{
    const gw_route_t *route = NULL;
    gw_route_params_t params;

    cr_assert_eq(
        gw_route_match(routes, 0, h2o_iovec_init(H2O_STRLIT("GET")), h2o_iovec_init(H2O_STRLIT("/healthz")), &route, &params),
        GW_ROUTE_NO_PATH);
    cr_assert_null(route);
}

/* Checks that `method path` finds route `index` with parameters `p0` and `p1` (NULL: absent). */
static void check_found(const char *method, const char *path, size_t index, const char *p0, const char *p1)
{
    match_t m = match(method, path);

    cr_assert_eq(m.result, GW_ROUTE_FOUND, "%s %s: got %d", method, path, m.result);
    cr_assert_eq(m.route, &routes[index], "%s %s matched route %td", method, path, m.route - routes);
    cr_assert_eq(m.params.size, (p0 != NULL) + (p1 != NULL), "%s %s", method, path);
    if (p0 != NULL)
        check_param(&m, 0, p0);
    if (p1 != NULL)
        check_param(&m, 1, p1);
    free(m.path);
}

Test(router, rest_of_path_matches_nothing_or_a_slash_and_anything)
{
    check_found("GET", "/proxy/8080", 9, "8080", "");
    check_found("GET", "/proxy/8080/", 9, "8080", "");
    check_found("GET", "/proxy/8080/a", 9, "8080", "a");
    check_found("GET", "/proxy/8080/a/b/c.txt", 9, "8080", "a/b/c.txt");
    check_found("GET", "/proxy/8080//x/", 9, "8080", "/x/");
    check_found("GET", "/proxy/not-a-port/x", 9, "not-a-port", "x"); /* the handler judges the segment */
    check_found("GET", "/static", 10, "", NULL);
    check_found("GET", "/static/", 10, "", NULL);
    check_found("GET", "/static/css/site.css", 10, "css/site.css", NULL);
}

Test(router, rest_of_path_needs_its_prefix_whole)
{
    check_status("GET", "/proxy", GW_ROUTE_NO_PATH);
    check_status("GET", "/proxy/", GW_ROUTE_NO_PATH); /* the `{}` before the tail is one non-empty segment */
    check_status("GET", "/proxy//x", GW_ROUTE_NO_PATH);
    check_status("GET", "/proxyx/8080", GW_ROUTE_NO_PATH);
    check_status("GET", "/staticx", GW_ROUTE_NO_PATH);
    check_status("GET", "/stati", GW_ROUTE_NO_PATH);
}

Test(router, rest_parameter_points_into_the_path)
{
    match_t m = match("GET", "/proxy/1/a/b");

    cr_assert_eq(m.result, GW_ROUTE_FOUND);
    cr_assert_eq(m.params.values[1].base, m.path + strlen("/proxy/1/"));
    free(m.path);
    m = match("GET", "/proxy/1");
    cr_assert_eq(m.params.values[1].len, 0);
    cr_assert_eq(m.params.values[1].base, m.path + strlen("/proxy/1"), "an empty tail points at the end of the path");
    free(m.path);
}

Test(router, any_method_route_takes_every_method)
{
    static const char *const methods[] = {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "PROPFIND"};

    for (size_t i = 0; i != sizeof(methods) / sizeof(methods[0]); ++i)
        check_found(methods[i], "/proxy/3000/x", 9, "3000", "x");
    /* a literal method still decides between 404 and 405 on a tail route */
    check_status("POST", "/static/a", GW_ROUTE_NO_METHOD);
    check_status("*", "/healthz", GW_ROUTE_NO_METHOD); /* "*" in a request is no wildcard */
}
