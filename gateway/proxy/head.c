/* The heads a relay rewrites: the request it sends upstream, and the upstream's answer as the client gets it. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include "core/auth.h"
#include "proxy/internal.h"

/* Headers a relay always writes itself (the client's values are replaced or appended to). */
static const char *const replaced[] = {"x-forwarded-for",    "x-forwarded-proto",        "x-forwarded-host",
                                       "x-forwarded-prefix", "sec-websocket-extensions", "cookie"};

static int name_is(const h2o_header_t *h, const char *name)
{
    return h2o_memis(h->name->base, h->name->len, name, strlen(name));
}

/* RFC 9110 7.6.1: a Connection header names further hop-by-hop headers of its message. */
static int listed_in_connection(const h2o_header_t *headers, size_t n, const h2o_header_t *h)
{
    for (size_t i = 0; i != n; ++i)
        if (headers[i].name == &H2O_TOKEN_CONNECTION->buf &&
            h2o_contains_token(headers[i].value.base, headers[i].value.len, h->name->base, h->name->len, ','))
            return 1;
    return 0;
}

static int is_hop_by_hop(const h2o_header_t *h, int for_request)
{
    const h2o_token_t *token;

    if (!h2o_iovec_is_token(h->name))
        return 0;
    token = H2O_STRUCT_FROM_MEMBER(h2o_token_t, buf, h->name);
    return for_request ? token->proxy_should_drop_for_req : token->proxy_should_drop_for_res;
}

static int keep_request_header(h2o_req_t *req, const h2o_header_t *h, const char *token)
{
    if (is_hop_by_hop(h, 1) || listed_in_connection(req->headers.entries, req->headers.size, h))
        return 0;
    for (size_t i = 0; i != sizeof(replaced) / sizeof(replaced[0]); ++i)
        if (name_is(h, replaced[i]))
            return 0;
    return !gw_auth_is_credential(token, *h->name, h->value);
}

/* Joins every value of header `name` with `sep` ("; " for cookies, ", " for lists); NULL base when absent. */
static h2o_iovec_t join_values(h2o_req_t *req, const char *name, const char *sep)
{
    h2o_iovec_t out = {NULL, 0};
    size_t seplen = strlen(sep);

    for (size_t i = 0; i != req->headers.size; ++i) {
        const h2o_header_t *h = req->headers.entries + i;
        char *p;
        if (!name_is(h, name))
            continue;
        p = h2o_mem_alloc_pool(&req->pool, out.len + seplen + h->value.len);
        if (out.base != NULL) {
            memcpy(p, out.base, out.len);
            memcpy(p + out.len, sep, seplen);
            out.len += seplen;
        }
        memcpy(p + out.len, h->value.base, h->value.len);
        out = h2o_iovec_init(p, out.len + h->value.len);
    }
    return out;
}

/* The client's address, numeric, into `buf` (NI_MAXHOST bytes); its length, or 0 when unknown. */
static size_t peer_address(h2o_req_t *req, char *buf)
{
    struct sockaddr_storage ss;
    socklen_t len = req->conn->callbacks->get_peername(req->conn, (struct sockaddr *)&ss);
    size_t n = len != 0 ? h2o_socket_getnumerichost((struct sockaddr *)&ss, len, buf) : SIZE_MAX;

    return n != SIZE_MAX ? n : 0;
}

typedef struct st_head_buf_t {
    char *p;
    size_t len;
} head_buf_t;

static void put(head_buf_t *b, const void *s, size_t n)
{
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void put_header(head_buf_t *b, const char *name, size_t name_len, h2o_iovec_t value)
{
    put(b, name, name_len);
    put(b, ": ", 2);
    put(b, value.base, value.len);
    put(b, "\r\n", 2);
}

h2o_iovec_t gw_proxy_request_head(h2o_req_t *req, const gw_proxy_target_t *target, const char *token, int is_upgrade)
{
    static const char upgrade[] = "Connection: Upgrade\r\nUpgrade: websocket\r\n", close_[] = "Connection: close\r\n";
    char peer[NI_MAXHOST], fallback_host[sizeof("127.0.0.1:65535")], length[48];
    size_t peer_len = peer_address(req, peer), cap, i;
    h2o_iovec_t host = req->authority, xff = join_values(req, "x-forwarded-for", ", "), cookie = join_values(req, "cookie", "; ");
    h2o_iovec_t scheme = req->scheme != NULL ? req->scheme->name : h2o_iovec_init(H2O_STRLIT("http"));
    int has_length = req->entity.base != NULL || h2o_memis(req->method.base, req->method.len, H2O_STRLIT("POST")) ||
                     h2o_memis(req->method.base, req->method.len, H2O_STRLIT("PUT"));
    head_buf_t b = {NULL, 0};

    if (host.len == 0)
        host = h2o_iovec_init(fallback_host, (size_t)snprintf(fallback_host, sizeof(fallback_host), "127.0.0.1:%u", target->port));
    /* measure, then write once */
    cap = req->method.len + target->path_and_query.len + sizeof(" HTTP/1.1\r\n") + sizeof("Host: \r\n") + host.len +
          sizeof(length) + sizeof(upgrade) + sizeof("Cookie: \r\n") + cookie.len + sizeof("X-Forwarded-For: , \r\n") + xff.len +
          peer_len + sizeof("X-Forwarded-Proto: \r\n") + scheme.len + sizeof("X-Forwarded-Host: \r\n") + host.len +
          sizeof("X-Forwarded-Prefix: \r\n") + target->prefix.len + 2;
    for (i = 0; i != req->headers.size; ++i)
        cap += req->headers.entries[i].name->len + req->headers.entries[i].value.len + 4;
    b.p = h2o_mem_alloc_pool(&req->pool, cap);

    put(&b, req->method.base, req->method.len);
    put(&b, " ", 1);
    put(&b, target->path_and_query.base, target->path_and_query.len);
    put(&b, H2O_STRLIT(" HTTP/1.1\r\n"));
    put_header(&b, H2O_STRLIT("Host"), host);
    if (has_length)
        put(&b, length, (size_t)snprintf(length, sizeof(length), "Content-Length: %zu\r\n", req->entity.len));
    if (is_upgrade)
        put(&b, upgrade, sizeof(upgrade) - 1);
    else
        put(&b, close_, sizeof(close_) - 1);
    for (i = 0; i != req->headers.size; ++i) {
        const h2o_header_t *h = req->headers.entries + i;
        if (keep_request_header(req, h, token))
            put_header(&b, h->orig_name != NULL ? h->orig_name : h->name->base, h->name->len, h->value);
    }
    if (cookie.base != NULL)
        put_header(&b, H2O_STRLIT("Cookie"), cookie);
    /* RFC 7239's predecessors: the client's address appended to what earlier proxies said; the
     * scheme, host and prefix are kgate's own view, never what the client claims */
    put(&b, H2O_STRLIT("X-Forwarded-For: "));
    if (xff.base != NULL) {
        put(&b, xff.base, xff.len);
        if (peer_len != 0)
            put(&b, ", ", 2);
    }
    put(&b, peer, peer_len);
    put(&b, "\r\n", 2);
    put_header(&b, H2O_STRLIT("X-Forwarded-Proto"), scheme);
    put_header(&b, H2O_STRLIT("X-Forwarded-Host"), host);
    put_header(&b, H2O_STRLIT("X-Forwarded-Prefix"), target->prefix);
    put(&b, "\r\n", 2);
    if (b.p == NULL || b.len > cap)
        h2o_fatal("proxy request head overflow");
    return h2o_iovec_init(b.p, b.len);
}

h2o_iovec_t gw_proxy_find_header(const h2o_header_t *headers, size_t num_headers, const char *name)
{
    for (size_t i = 0; i != num_headers; ++i)
        if (name_is(headers + i, name))
            return headers[i].value;
    return h2o_iovec_init(NULL, 0);
}

int gw_proxy_response_head(h2o_req_t *req, int status, h2o_iovec_t reason, const h2o_header_t *headers, size_t num_headers)
{
    req->res.status = status;
    req->res.reason = h2o_strdup(&req->pool, reason.base, reason.len).base;
    for (size_t i = 0; i != num_headers; ++i) {
        const h2o_header_t *h = headers + i;
        h2o_iovec_t value;
        const char *orig;
        if (is_hop_by_hop(h, 0) || listed_in_connection(headers, num_headers, h) || h->name == &H2O_TOKEN_SERVER->buf)
            continue;
        if (h->name == &H2O_TOKEN_CONTENT_LENGTH->buf) {
            if (req->res.content_length != SIZE_MAX ||
                (req->res.content_length = h2o_strtosize(h->value.base, h->value.len)) == SIZE_MAX)
                return -1;
            continue;
        }
        /* the upstream's head is gone once its callback returns: everything is copied */
        value = h2o_strdup(&req->pool, h->value.base, h->value.len);
        orig = h->orig_name != NULL ? h2o_strdup(&req->pool, h->orig_name, h->name->len).base : NULL;
        if (h2o_iovec_is_token(h->name)) {
            h2o_add_header(&req->pool, &req->res.headers, H2O_STRUCT_FROM_MEMBER(h2o_token_t, buf, h->name), orig, value.base,
                           value.len);
        } else {
            h2o_iovec_t name = h2o_strdup(&req->pool, h->name->base, h->name->len);
            h2o_add_header_by_str(&req->pool, &req->res.headers, name.base, name.len, 0, orig, value.base, value.len);
        }
    }
    return 0;
}
