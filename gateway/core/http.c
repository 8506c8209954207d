/* Response and request helpers shared by every route: JSON bodies, API errors, query strings. */
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "wire/text.h"
#include "core/config.h"
#include "core/http.h"
#include "core/json_out.h"

static const struct {
    const char *code;
    int status;
} error_table[] = {
#define GW_XX_ROW(name, status) {#name, status},
    GW_HTTP_ERROR_MAP(GW_XX_ROW)
#undef GW_XX_ROW
};

static const char *reason_phrase(int status)
{
    switch (status) {
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 413:
        return "Payload Too Large";
    case 416:
        return "Range Not Satisfiable";
    case 429:
        return "Too Many Requests";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    default:
        return status < 500 ? "Error" : "Internal Server Error";
    }
}

void gw_add_common_headers(h2o_req_t *req)
{
    h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("x-kgate-version"), 0, NULL, H2O_STRLIT(GW_VERSION));
}

static void send_body(h2o_req_t *req, int status, const char *content_type, char *body, size_t len)
{
    static h2o_generator_t generator = {NULL, NULL};
    h2o_iovec_t buf = h2o_iovec_init(body, len);

    req->res.status = status;
    req->res.reason = reason_phrase(status);
    /* a fixed Content-Length, never an empty chunked body: some SDKs fail to parse the latter */
    req->res.content_length = len;
    if (content_type != NULL)
        h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, NULL, content_type, strlen(content_type));
    gw_add_common_headers(req);
    h2o_start_response(req, &generator);
    h2o_send(req, &buf, len != 0 ? 1 : 0, H2O_SEND_STATE_FINAL);
}

void gw_send_json(h2o_req_t *req, int status, json_t *json)
{
    size_t len = gw_json_render(json, NULL);
    char *body = h2o_mem_alloc_pool(&req->pool, len + 1);

    gw_json_render(json, body);
    json_decref(json);
    send_body(req, status, "application/json", body, len);
}

void gw_send_error(h2o_req_t *req, gw_http_error_t err, const char *fmt, ...)
{
    /* room for a kernel's start-up failure with the tail of its output (KMGR_REASON_MAX) and the words around it */
    char message[4096];
    va_list args;
    int n;

    va_start(args, fmt);
    n = vsnprintf(message, sizeof(message), fmt, args);
    va_end(args);
    /* a message cut inside a UTF-8 character would not be JSON text: cut before the character instead */
    if (n >= (int)sizeof(message)) {
        size_t len = sizeof(message) - 1, lead = len;
        while (lead != 0 && ((unsigned char)message[lead - 1] & 0xc0) == 0x80)
            --lead;
        if (lead != 0 && ((unsigned char)message[lead - 1] & 0x80) != 0 &&
            wire_utf8_sequence((const unsigned char *)message + lead - 1, len - lead + 1) != (int)(len - lead + 1))
            message[lead - 1] = '\0';
    }
    /* and a message quoting a client's bytes that are no UTF-8 (a path, a value cut at "%.100s") gets U+FFFD for them */
    gw_send_json(req, error_table[err].status,
                 json_pack("{s:s, s:o}", "code", error_table[err].code, "message", gw_json_string_lossy(message, strlen(message))));
}

void gw_send_empty(h2o_req_t *req)
{
    send_body(req, 200, NULL, NULL, 0);
}

void gw_send_empty_status(h2o_req_t *req, int status)
{
    send_body(req, status, NULL, NULL, 0);
}

json_t *gw_parse_body_with(h2o_req_t *req, size_t flags)
{
    json_error_t error;
    json_t *body;

    if (req->entity.base == NULL || req->entity.len == 0) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "the request body must be a JSON object");
        return NULL;
    }
    body = json_loadb(req->entity.base, req->entity.len, flags, &error);
    if (body == NULL) {
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "malformed JSON at line %d, column %d: %s", error.line, error.column,
                      error.text);
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        gw_send_error(req, GW_HTTP_INVALID_REQUEST_BODY, "the request body must be a JSON object");
        return NULL;
    }
    return body;
}

json_t *gw_parse_body(h2o_req_t *req)
{
    return gw_parse_body_with(req, JSON_REJECT_DUPLICATES);
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static long percent_decode(const char *s, size_t len, char *out, int plus_is_space, int allow_nul)
{
    size_t i, o = 0;

    for (i = 0; i < len; ++i) {
        char c = s[i];
        if (c == '%') {
            int hi, lo;
            if (i + 2 >= len)
                return -1;
            if ((hi = hex_value(s[i + 1])) < 0 || (lo = hex_value(s[i + 2])) < 0)
                return -1;
            c = (char)(hi << 4 | lo);
            i += 2;
        } else if (c == '+' && plus_is_space) {
            c = ' ';
        }
        if (c == '\0' && !allow_nul)
            return -1;
        out[o++] = c;
    }
    out[o] = '\0';
    return (long)o;
}

long gw_percent_decode(const char *s, size_t len, char *out, int plus_is_space)
{
    return percent_decode(s, len, out, plus_is_space, 0);
}

long gw_query_values(h2o_req_t *req, const char *name, gw_query_value_t *values, size_t max)
{
    size_t name_len = strlen(name), n = 0;
    const char *p, *end;

    if (req->query_at == SIZE_MAX)
        return 0;
    p = req->path.base + req->query_at + 1;
    end = req->path.base + req->path.len;
    while (p < end) {
        const char *amp = memchr(p, '&', (size_t)(end - p));
        const char *pair_end = amp != NULL ? amp : end;
        const char *eq = memchr(p, '=', (size_t)(pair_end - p));
        const char *key_end = eq != NULL ? eq : pair_end;
        if ((size_t)(key_end - p) == name_len && memcmp(p, name, name_len) == 0) {
            if (n < max) {
                const char *value = eq != NULL ? eq + 1 : pair_end;
                size_t value_len = (size_t)(pair_end - value);
                char *out = h2o_mem_alloc_pool(&req->pool, value_len + 1);
                long len = percent_decode(value, value_len, out, 1, 1);
                if (len < 0)
                    return -1;
                values[n].s = out;
                values[n].len = (size_t)len;
            }
            ++n;
        }
        p = pair_end + 1;
    }
    return (long)n;
}

char *gw_query_param(h2o_req_t *req, const char *name)
{
    gw_query_value_t value;

    if (gw_query_values(req, name, &value, 1) <= 0 || memchr(value.s, '\0', value.len) != NULL)
        return NULL;
    return value.s;
}

char *gw_path_param(h2o_req_t *req, const gw_route_params_t *params, size_t i)
{
    h2o_iovec_t value = params->values[i];
    char *out = h2o_mem_alloc_pool(&req->pool, value.len + 1);

    return gw_percent_decode(value.base, value.len, out, 0) < 0 ? NULL : out;
}

int gw_req_peer_gone(h2o_req_t *req)
{
    h2o_socket_t *sock = req->conn->callbacks->get_socket != NULL ? req->conn->callbacks->get_socket(req->conn) : NULL;
    struct pollfd pfd = {.events = POLLRDHUP};

    if (sock == NULL || (pfd.fd = h2o_socket_get_fd(sock)) < 0)
        return 0;
    return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

/* A header line's name is `name` (lower case), compared without regard to case. */
static int line_names(const char *line, size_t name_len, const char *name)
{
    return name_len == strlen(name) && strncasecmp(line, name, name_len) == 0;
}

/* A Content-Length value as a number (digits only, no overflow), or -1. */
static long long parse_length(const char *p, size_t len)
{
    long long v = 0;

    if (len == 0 || len > 18)
        return -1;
    for (size_t i = 0; i != len; ++i) {
        if (p[i] < '0' || p[i] > '9')
            return -1;
        v = v * 10 + (p[i] - '0');
    }
    return v;
}

const char *gw_http1_framing_error(const char *head, size_t len)
{
    const char *p = memchr(head, '\n', len), *end = head + len;
    long long length = -1;
    int has_te = 0;

    /* the request line is skipped; each header line until the empty one */
    for (p = p != NULL ? p + 1 : end; p < end;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p)), *colon, *v, *ve;
        size_t line_len;
        eol = eol != NULL ? eol : end;
        line_len = (size_t)(eol - p);
        if (line_len != 0 && p[line_len - 1] == '\r')
            --line_len;
        if (line_len == 0)
            break;
        if ((colon = memchr(p, ':', line_len)) != NULL && *p != ' ' && *p != '\t') {
            size_t name_len = (size_t)(colon - p);
            for (v = colon + 1, ve = p + line_len; v < ve && (*v == ' ' || *v == '\t'); ++v)
                ;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                --ve;
            if (line_names(p, name_len, "transfer-encoding")) {
                has_te = 1;
            } else if (line_names(p, name_len, "content-length")) {
                long long n = parse_length(v, (size_t)(ve - v));
                if (n < 0)
                    return "the request's Content-Length is not a number";
                if (length >= 0 && n != length)
                    return "the request has two different Content-Lengths";
                length = n;
            }
        }
        p = eol + 1;
    }
    if (has_te && length >= 0)
        return "the request has both Content-Length and Transfer-Encoding";
    return NULL;
}

const char *gw_req_framing_error(h2o_req_t *req)
{
    h2o_socket_t *sock;

    if (req->version >= 0x200 || req->conn->callbacks->get_socket == NULL ||
        (sock = req->conn->callbacks->get_socket(req->conn)) == NULL)
        return NULL;
    /* only a request that had a body header has one to frame (h2o's chosen header and its entity) */
    if (req->entity.base == NULL)
        return NULL;
    return gw_http1_framing_error(sock->input->bytes, sock->input->size < H2O_MAX_REQLEN ? sock->input->size : H2O_MAX_REQLEN);
}
