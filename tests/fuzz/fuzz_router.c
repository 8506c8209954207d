/* tests/fuzz/fuzz_router.c: the route matcher (rest-of-path and any-method rows too), query parameters and percent-decoding
 * against plain reference code. */
#include <ctype.h>
#include "fuzz.h"
#include "core/http.h"
#include "core/router.h"
#include "wire/alloc.h"

/* The route table kgate serves (gateway/app/routes.c, gateway/execd/routes.c, gateway/proxy/routes.c,
 * gateway/jupyter/routes.c, in that order), and rows of the shapes no route has yet; the matcher calls no handler. */
static const gw_route_t routes[] = {
    {"GET", "/healthz", NULL, 1, 0, NULL, 0, NULL},
    {"GET", "/readyz", NULL, 1, 0, NULL, 0, NULL},
    {"GET", "/ping", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/files/info", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/files", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/files/permissions", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/files/mv", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/files/search", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/files/replace", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/files/upload", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/files/download", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/directories/list", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/directories", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/directories", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/editor", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/code/languages", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/code/context", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/code/contexts", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/code/contexts", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/code/contexts/{}", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/code/contexts/{}", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/code/contexts/{}/restart", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/code", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/code", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/code/executions/{}", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/code/executions/{}", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/code/executions/{}/events", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/code/executions/{}/input", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/command", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/command", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/command/status/{}", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/command/{}/logs", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/session", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/session/{}/run", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/session/{}", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/metrics", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/metrics/watch", NULL, 0, 0, NULL, 0, NULL},
    {"POST", "/pty", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/pty/{}", NULL, 0, 0, NULL, 0, NULL},
    {"DELETE", "/pty/{}", NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/pty/{}/ws", NULL, 0, 0, NULL, 0, NULL},
    {GW_ROUTE_ANY_METHOD, "/proxy/{}" GW_ROUTE_REST, NULL, 0, 0, NULL, 0, NULL},
    {"GET", "/api", NULL, 0, 0, NULL, 1, NULL},
    {"GET", "/api/kernelspecs", NULL, 0, 0, NULL, 1, NULL},
    {"GET", "/api/kernelspecs/{}", NULL, 0, 0, NULL, 1, NULL},
    {"GET", "/kernelspecs/{}/{}", NULL, 0, 0, NULL, 1, NULL},
    {"GET", "/api/kernels", NULL, 0, 0, NULL, 1, NULL},
    {"POST", "/api/kernels", NULL, 0, 0, NULL, 1, NULL},
    {"GET", "/api/kernels/{}", NULL, 0, 0, NULL, 1, NULL},
    {"DELETE", "/api/kernels/{}", NULL, 0, 0, NULL, 1, NULL},
    {"POST", "/api/kernels/{}/interrupt", NULL, 0, 0, NULL, 1, NULL},
    {"POST", "/api/kernels/{}/restart", NULL, 0, 0, NULL, 1, NULL},
    {"GET", "/api/kernels/{}/channels", NULL, 0, 0, NULL, 1, NULL},
    {"GET", "/api/sessions", NULL, 0, 0, NULL, 1, NULL},
    {"POST", "/api/sessions", NULL, 0, 0, NULL, 1, NULL},
    {"GET", "/api/sessions/{}", NULL, 0, 0, NULL, 1, NULL},
    {"PATCH", "/api/sessions/{}", NULL, 0, 0, NULL, 1, NULL},
    {"DELETE", "/api/sessions/{}", NULL, 0, 0, NULL, 1, NULL},
    /* shapes no route has yet */
    {"GET", "/a/{}/b/{}", NULL, 0, 0, NULL, 0, NULL},               /* two parameters */
    {"GET", "/rest" GW_ROUTE_REST, NULL, 0, 0, NULL, 0, NULL},      /* a tail after a literal */
    {"DELETE", "/rest/x", NULL, 0, 0, NULL, 0, NULL},               /* shadowed by the tail for GET, not for DELETE: 405 or not */
    {GW_ROUTE_ANY_METHOD, "/any", NULL, 0, 0, NULL, 0, NULL},       /* any method, no tail */
    {"GET", "/two/{}/{}" GW_ROUTE_REST, NULL, 0, 0, NULL, 0, NULL}, /* a tail past GW_ROUTE_MAX_PARAMS: never matches */
    {"POST", "/tail/{}" GW_ROUTE_REST, NULL, 0, 0, NULL, 0, NULL},  /* an exact method before... */
    {GW_ROUTE_ANY_METHOD, "/tail/{}" GW_ROUTE_REST, NULL, 0, 0, NULL, 0, NULL}, /* ...any method on the same pattern */
};
#define NUM_ROUTES (sizeof(routes) / sizeof(routes[0]))

/* The query parameters kgate reads. */
static const char *const query_names[] = {"language", "id", "path", "cursor", "last_event_id", "token"};
#define MAX_VALUES 3

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_global_init();
    return 0;
}

/* ---- references: plain code written from the headers' contracts ---- */

/* Whether `path` matches `pattern` segment by segment ('{}' is one non-empty segment); the parameters in `params`. */
static int reference_segments(const char *pattern, size_t pattern_len, const char *path, size_t len, h2o_iovec_t *params, size_t *n)
{
    const char *p = pattern, *p_end = pattern + pattern_len, *s = path, *end = path + len;

    *n = 0;
    for (;;) {
        const char *p_slash = memchr(p, '/', (size_t)(p_end - p)), *s_slash = memchr(s, '/', (size_t)(end - s));
        size_t plen = p_slash != NULL ? (size_t)(p_slash - p) : (size_t)(p_end - p);
        size_t slen = s_slash != NULL ? (size_t)(s_slash - s) : (size_t)(end - s);
        if (plen == 2 && memcmp(p, "{}", 2) == 0) {
            if (slen == 0 || *n == GW_ROUTE_MAX_PARAMS)
                return 0;
            params[(*n)++] = h2o_iovec_init(s, slen);
        } else if (plen != slen || memcmp(p, s, plen) != 0) {
            return 0;
        }
        if ((p_slash == NULL) != (s_slash == NULL))
            return 0;
        if (p_slash == NULL)
            return 1;
        p = p_slash + 1;
        s = s_slash + 1;
    }
}

/*
 * As router.h's contract says: the segments, or, for a pattern ending in GW_ROUTE_REST, its head's
 * segments followed by nothing or by '/' and anything (the parameter: what follows that '/').
 */
static int reference_match(const char *pattern, const char *path, size_t len, h2o_iovec_t *params, size_t *n)
{
    size_t plen = strlen(pattern), rest_len = sizeof(GW_ROUTE_REST) - 1, slashes = 0, head_end;

    if (plen < rest_len || strcmp(pattern + plen - rest_len, GW_ROUTE_REST) != 0)
        return reference_segments(pattern, plen, path, len, params, n);
    plen -= rest_len;
    /* the head has as many segments as slashes: it ends at the path's next slash after as many, or at its end */
    for (size_t i = 0; i != plen; ++i)
        slashes += pattern[i] == '/';
    for (head_end = 0; head_end != len; ++head_end)
        if (path[head_end] == '/' && slashes-- == 0)
            break;
    if (!reference_segments(pattern, plen, path, head_end, params, n) || *n == GW_ROUTE_MAX_PARAMS)
        return 0;
    params[(*n)++] = head_end == len ? h2o_iovec_init(path + len, 0) : h2o_iovec_init(path + head_end + 1, len - head_end - 1);
    return 1;
}

static int reference_method(const char *route_method, h2o_iovec_t method)
{
    return strcmp(route_method, "*") == 0 || h2o_memis(method.base, method.len, route_method, strlen(route_method));
}

/* Percent-decoding as gw_percent_decode's contract says; NUL bytes refused unless `allow_nul`. */
static long reference_decode(const char *s, size_t len, char *out, int plus_is_space, int allow_nul)
{
    size_t o = 0;

    for (size_t i = 0; i != len; ++i) {
        unsigned char c = (unsigned char)s[i];
        if (c == '%') {
            if (len - i < 3 || !isxdigit((unsigned char)s[i + 1]) || !isxdigit((unsigned char)s[i + 2]))
                return -1;
            char hex[3] = {s[i + 1], s[i + 2], '\0'};
            c = (unsigned char)strtoul(hex, NULL, 16);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (c == '\0' && !allow_nul)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return (long)o;
}

/* ---- checks ---- */

static void check_route(h2o_iovec_t method, const char *path, size_t len)
{
    const gw_route_t *route = NULL;
    gw_route_params_t params;
    gw_route_result_t got = gw_route_match(routes, NUM_ROUTES, method, h2o_iovec_init(path, len), &route, &params);
    gw_route_result_t want = GW_ROUTE_NO_PATH;
    h2o_iovec_t want_params[GW_ROUTE_MAX_PARAMS];
    size_t i, want_n = 0;

    for (i = 0; i != NUM_ROUTES; ++i) {
        if (!reference_match(routes[i].pattern, path, len, want_params, &want_n))
            continue;
        if (reference_method(routes[i].method, method)) {
            want = GW_ROUTE_FOUND;
            break;
        }
        want = GW_ROUTE_NO_METHOD;
    }
    FUZZ_CHECK(got == want, "route result %d, expected %d", got, want);
    if (got != GW_ROUTE_FOUND)
        return;
    FUZZ_CHECK(route == &routes[i], "matched %s %s, expected %s %s", route->method, route->pattern, routes[i].method,
               routes[i].pattern);
    FUZZ_CHECK(params.size == want_n, "%zu parameters, expected %zu", params.size, want_n);
    for (size_t k = 0; k != want_n; ++k)
        FUZZ_CHECK(params.values[k].base == want_params[k].base && params.values[k].len == want_params[k].len, "parameter %zu", k);
}

static void check_decode(const char *s, size_t len)
{
    char *got = malloc(len + 1), *want = malloc(len + 1), *encoded = malloc(3 * len + 1);

    for (int plus = 0; plus != 2; ++plus) {
        long n = gw_percent_decode(s, len, got, plus), m = reference_decode(s, len, want, plus, 0);
        FUZZ_CHECK(n == m && (n < 0 || memcmp(got, want, (size_t)n + 1) == 0), "gw_percent_decode(plus %d): %ld, expected %ld",
                   plus, n, m);
    }
    /* every byte escaped (upper or lower case) decodes back to itself, or is refused for a NUL */
    for (size_t i = 0; i != len; ++i)
        snprintf(encoded + 3 * i, 4, i % 2 ? "%%%02X" : "%%%02x", (unsigned char)s[i]);
    long n = gw_percent_decode(encoded, 3 * len, got, 1);
    FUZZ_CHECK(memchr(s, '\0', len) != NULL ? n == -1 : n == (long)len && memcmp(got, s, len) == 0, "escaped bytes decode to %ld",
               n);
    free(got);
    free(want);
    free(encoded);
}

/* The values of the first `max` occurrences of `name` in the query (allocated into `values`), and how many there are. */
static long reference_query(const char *target, size_t len, size_t query_at, const char *name, char **values, size_t *lens,
                            size_t max)
{
    size_t name_len = strlen(name), n = 0, p = query_at + 1;

    while (query_at != SIZE_MAX && p < len) {
        const char *amp = memchr(target + p, '&', len - p);
        size_t pair_end = amp != NULL ? (size_t)(amp - target) : len, key_end = p;
        while (key_end != pair_end && target[key_end] != '=')
            ++key_end;
        if (key_end - p == name_len && memcmp(target + p, name, name_len) == 0) {
            if (n < max) {
                size_t v = key_end < pair_end ? key_end + 1 : pair_end;
                long got = reference_decode(target + v, pair_end - v, values[n] = malloc(pair_end - v + 1), 1, 1);
                if (got < 0)
                    return -1;
                lens[n] = (size_t)got;
            }
            ++n;
        }
        p = pair_end + 1;
    }
    return (long)n;
}

static void check_query(const char *target, size_t len, size_t query_at)
{
    h2o_req_t req;

    memset(&req, 0, sizeof(req));
    h2o_mem_init_pool(&req.pool);
    req.path = h2o_iovec_init(target, len);
    req.query_at = query_at;
    for (size_t k = 0; k != sizeof(query_names) / sizeof(query_names[0]); ++k) {
        gw_query_value_t values[MAX_VALUES];
        char *want[MAX_VALUES] = {NULL};
        size_t want_lens[MAX_VALUES];
        long n = gw_query_values(&req, query_names[k], values, MAX_VALUES);
        long m = reference_query(target, len, query_at, query_names[k], want, want_lens, MAX_VALUES);
        char *first = gw_query_param(&req, query_names[k]), *want_first = NULL;
        size_t want_first_len;

        FUZZ_CHECK(n == m, "%s: %ld values, expected %ld", query_names[k], n, m);
        for (long i = 0; i < n && i < MAX_VALUES; ++i)
            FUZZ_CHECK(values[i].len == want_lens[i] && memcmp(values[i].s, want[i], want_lens[i] + 1) == 0,
                       "%s: value %ld differs", query_names[k], i);
        /* the first value alone: later ones may be malformed */
        if (reference_query(target, len, query_at, query_names[k], &want_first, &want_first_len, 1) > 0 &&
            memchr(want_first, '\0', want_first_len) == NULL)
            FUZZ_CHECK(first != NULL && strcmp(first, want_first) == 0, "%s: gw_query_param differs", query_names[k]);
        else
            FUZZ_CHECK(first == NULL, "%s: gw_query_param found \"%s\"", query_names[k], first);
        free(want_first);
        for (size_t i = 0; i != MAX_VALUES; ++i)
            free(want[i]);
    }
    h2o_mem_clear_pool(&req.pool);
}

/*
 * The input is "METHOD TARGET": the method up to the first space, then the request target, whose
 * path (before any '?') is matched and percent-decoded and whose query is looked up for every
 * parameter name kgate reads.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *sp = memchr(data, ' ', size), *q;
    size_t method_len = sp != NULL ? (size_t)(sp - (const char *)data) : 0;
    size_t len = sp != NULL ? size - method_len - 1 : size, path_len;
    char *method = fuzz_copy(data, method_len), *target = fuzz_copy(sp != NULL ? sp + 1 : (const char *)data, len);

    q = memchr(target, '?', len);
    path_len = q != NULL ? (size_t)(q - target) : len;
    check_route(h2o_iovec_init(method, method_len), target, path_len);
    check_decode(target, path_len);
    check_query(target, len, q != NULL ? path_len : SIZE_MAX);
    free(method);
    free(target);
    return 0;
}
