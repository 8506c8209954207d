/* The access token, accepted in execd's, OAuth's and Jupyter's header forms, compared in constant time. */
#include <string.h>
#include <strings.h>
#include <sodium.h>
#include "core/auth.h"
#include "core/http.h"

int gw_auth_token_equal(const char *token, const char *presented, size_t len)
{
    size_t token_len = strlen(token);

    /* the length is not secret (it is the same for every guess); the bytes are */
    if (len != token_len)
        return 0;
    return sodium_memcmp(token, presented, len) == 0;
}

/* `Authorization: <scheme> <token>` with the scheme compared case-insensitively. */
static int authorization_matches(const char *token, h2o_iovec_t value)
{
    static const char *const schemes[] = {"bearer ", "token "};
    size_t i;

    for (i = 0; i != sizeof(schemes) / sizeof(schemes[0]); ++i) {
        size_t slen = strlen(schemes[i]);
        if (value.len > slen && h2o_lcstris(value.base, slen, schemes[i], slen)) {
            const char *t = value.base + slen;
            size_t tlen = value.len - slen;
            while (tlen > 0 && *t == ' ')
                ++t, --tlen;
            return gw_auth_token_equal(token, t, tlen);
        }
    }
    return 0;
}

int gw_auth_check(h2o_req_t *req, const char *token)
{
    ssize_t i;

    if (token == NULL)
        return 1;
    for (i = -1; (i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-execd-access-token"), i)) != -1;)
        if (gw_auth_token_equal(token, req->headers.entries[i].value.base, req->headers.entries[i].value.len))
            return 1;
    for (i = -1; (i = h2o_find_header(&req->headers, H2O_TOKEN_AUTHORIZATION, i)) != -1;)
        if (authorization_matches(token, req->headers.entries[i].value))
            return 1;
    return 0;
}

/* Whether `origin` (`len` bytes) is one of the comma-separated entries of `allow`, or `allow` is "*". */
static int origin_listed(const char *allow, const char *origin, size_t len)
{
    const char *p = allow;

    if (strcmp(allow, "*") == 0)
        return 1;
    while (*p != '\0') {
        const char *comma = strchr(p, ','), *end = comma != NULL ? comma : p + strlen(p);
        while (p < end && *p == ' ')
            ++p;
        size_t n = (size_t)(end - p);
        while (n != 0 && p[n - 1] == ' ')
            --n;
        if (n == len && strncasecmp(p, origin, len) == 0)
            return 1;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    return 0;
}

int gw_auth_is_loopback_authority(const char *s, size_t len)
{
    size_t host_len = 0, i;
    int dots = 0;

    /* host[:port]: an IPv6 literal is bracketed */
    if (len != 0 && s[0] == '[') {
        while (host_len < len && s[host_len] != ']')
            ++host_len;
        if (host_len == len)
            return 0;
        ++host_len;
    } else {
        while (host_len < len && s[host_len] != ':')
            ++host_len;
    }
    for (i = host_len; i < len; ++i)
        if (!(i == host_len ? s[i] == ':' : s[i] >= '0' && s[i] <= '9'))
            return 0;
    if ((host_len == 9 && strncasecmp(s, "localhost", 9) == 0) || (host_len == 5 && memcmp(s, "[::1]", 5) == 0))
        return 1;
    if (host_len < 5 || memcmp(s, "127.", 4) != 0)
        return 0;
    for (i = 4; i != host_len; ++i) {
        if (s[i] == '.')
            ++dots;
        else if (s[i] < '0' || s[i] > '9')
            return 0;
    }
    return dots == 2;
}

int gw_auth_host_allowed(h2o_req_t *req, int loopback_listener)
{
    h2o_iovec_t host = req->authority;

    /* HTTP/1.0 without Host names nothing a rebound name could be */
    return !loopback_listener || host.len == 0 || gw_auth_is_loopback_authority(host.base, host.len);
}

int gw_auth_origin_allowed(h2o_req_t *req, const char *allow)
{
    ssize_t i = h2o_find_header_by_str(&req->headers, H2O_STRLIT("origin"), -1);
    h2o_iovec_t origin, host = req->authority;
    const char *authority;
    size_t alen;

    if (i == -1)
        return 1;
    origin = req->headers.entries[i].value;
    if (allow != NULL && origin_listed(allow, origin.base, origin.len))
        return 1;
    if (origin.len > 7 && strncasecmp(origin.base, "http://", 7) == 0)
        authority = origin.base + 7;
    else if (origin.len > 8 && strncasecmp(origin.base, "https://", 8) == 0)
        authority = origin.base + 8;
    else
        return 0; /* "null" (a sandboxed frame, a file: page) or garbage */
    alen = (size_t)(origin.base + origin.len - authority);
    /* a page of this machine (a local tool on another port), or one served from the address the request went to */
    return gw_auth_is_loopback_authority(authority, alen) ||
           (host.len != 0 && alen == host.len && strncasecmp(authority, host.base, host.len) == 0);
}

int gw_auth_check_query(h2o_req_t *req, const char *token)
{
    gw_query_value_t values[4];
    long n;

    if (token == NULL)
        return 1;
    if ((n = gw_query_values(req, "token", values, 4)) <= 0)
        return 0;
    for (long i = 0; i != n && i != 4; ++i)
        if (gw_auth_token_equal(token, values[i].s, values[i].len))
            return 1;
    return 0;
}

int gw_auth_check_headers(h2o_req_t *req, const char *token, const char *const *names)
{
    if (token == NULL)
        return 1;
    for (; names != NULL && *names != NULL; ++names)
        for (ssize_t i = -1; (i = h2o_find_header_by_str(&req->headers, *names, strlen(*names), i)) != -1;)
            if (gw_auth_token_equal(token, req->headers.entries[i].value.base, req->headers.entries[i].value.len))
                return 1;
    return 0;
}

int gw_auth_is_credential(const char *token, h2o_iovec_t name, h2o_iovec_t value)
{
    if (h2o_lcstris(name.base, name.len, H2O_STRLIT("x-execd-access-token")))
        return 1;
    return token != NULL && h2o_lcstris(name.base, name.len, H2O_STRLIT("authorization")) && authorization_matches(token, value);
}
