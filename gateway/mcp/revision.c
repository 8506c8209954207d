/* MCP revision 2026-07-28's request checks (headers against the body), its errors and context names: pure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "core/config.h"
#include "mcp/revision.h"

static int equals(const char *s, size_t len, const char *lit)
{
    return s != NULL && len == strlen(lit) && memcmp(s, lit, len) == 0;
}

static int is_session_revision(const char *v, size_t len)
{
    return gw_mcp_version_supported(v, len);
}

static json_t *meta_of(const gw_mcp_message_t *msg)
{
    return json_is_object(msg->params) ? json_object_get(msg->params, "_meta") : NULL;
}

int gw_mcp_is_stateless(const gw_mcp_headers_t *h, const gw_mcp_message_t *msg)
{
    json_t *meta = meta_of(msg);

    if (json_is_object(meta) && json_object_get(meta, GW_MCP_META_VERSION) != NULL)
        return 1;
    return h->version != NULL && !is_session_revision(h->version, h->version_len);
}

json_t *gw_mcp_unsupported_version(json_t *id, const char *requested, size_t len)
{
    json_t *error = gw_mcp_error(id, GW_MCP_UNSUPPORTED_VERSION, "Unsupported protocol version"), *data;
    const char *fmt = "{s:[s,s,s], s:s%}";

    /* a header's bytes need not be UTF-8: then the version requested is named by what it is not */
    if ((data = json_pack(fmt, "supported", GW_MCP_VERSION_STATELESS, GW_MCP_VERSION_LATEST, GW_MCP_VERSION_PREVIOUS, "requested",
                          requested, len)) == NULL)
        data = json_pack(fmt, "supported", GW_MCP_VERSION_STATELESS, GW_MCP_VERSION_LATEST, GW_MCP_VERSION_PREVIOUS, "requested",
                         "(not UTF-8)", (size_t)11);
    json_object_set_new(json_object_get(error, "error"), "data", data);
    return error;
}

/* `what` with the header's and the body's values quoted (each cut at 100 bytes: the message stays one line). */
static json_t *mismatch(json_t *id, const char *what, const char *header, size_t header_len, const char *body)
{
    char text[400];

    snprintf(text, sizeof(text), "Header mismatch: %s header value '%.*s' does not match body value '%.100s'", what,
             (int)(header_len < 100 ? header_len : 100), header != NULL ? header : "", body != NULL ? body : "");
    return gw_mcp_error(id, GW_MCP_HEADER_MISMATCH, text);
}

/* The body field Mcp-Name mirrors for `method`, or NULL when the method has none. */
static const char *name_field(const char *method)
{
    if (strcmp(method, "tools/call") == 0 || strcmp(method, "prompts/get") == 0)
        return "name";
    if (strcmp(method, "resources/read") == 0)
        return "uri";
    return NULL;
}

json_t *gw_mcp_stateless_check(const gw_mcp_headers_t *h, const gw_mcp_message_t *msg, int *status)
{
    json_t *meta = meta_of(msg), *v = json_is_object(meta) ? json_object_get(meta, GW_MCP_META_VERSION) : NULL;
    const char *body_version = json_string_value(v), *field = name_field(msg->method), *body_name;
    char text[256];

    *status = 400;
    if (h->version == NULL)
        return gw_mcp_error(msg->id, GW_MCP_HEADER_MISMATCH,
                            "Header mismatch: the MCP-Protocol-Version header is required (revision " GW_MCP_VERSION_STATELESS
                            " sends it on every request)");
    if (body_version == NULL) {
        /* a client of no revision kgate knows, without the envelope: the version is what it gets wrong first */
        if (!equals(h->version, h->version_len, GW_MCP_VERSION_STATELESS))
            return gw_mcp_unsupported_version(msg->id, h->version, h->version_len);
        return mismatch(msg->id, "MCP-Protocol-Version", h->version, h->version_len,
                        "(params._meta[\"" GW_MCP_META_VERSION "\"] absent)");
    }
    if (!equals(h->version, h->version_len, body_version) || strlen(body_version) != json_string_length(v))
        return mismatch(msg->id, "MCP-Protocol-Version", h->version, h->version_len, body_version);
    if (strcmp(body_version, GW_MCP_VERSION_STATELESS) != 0)
        return gw_mcp_unsupported_version(msg->id, body_version, json_string_length(v));
    if (h->method == NULL)
        return gw_mcp_error(msg->id, GW_MCP_HEADER_MISMATCH, "Header mismatch: the Mcp-Method header is required");
    if (!equals(h->method, h->method_len, msg->method))
        return mismatch(msg->id, "Mcp-Method", h->method, h->method_len, msg->method);
    if (field != NULL && (body_name = json_string_value(json_object_get(msg->params, field))) != NULL) {
        size_t len;
        char *name;
        int same;
        if (h->name == NULL) {
            snprintf(text, sizeof(text), "Header mismatch: the Mcp-Name header is required for %.60s (params.%s)", msg->method,
                     field);
            return gw_mcp_error(msg->id, GW_MCP_HEADER_MISMATCH, text);
        }
        if ((name = gw_mcp_header_value_decode(h->name, h->name_len, &len)) == NULL)
            return gw_mcp_error(
                msg->id, GW_MCP_HEADER_MISMATCH,
                "Header mismatch: the Mcp-Name header holds invalid characters or a malformed =?base64?...?= value");
        same = len == json_string_length(json_object_get(msg->params, field)) && memcmp(name, body_name, len) == 0;
        free(name);
        if (!same)
            return mismatch(msg->id, "Mcp-Name", h->name, h->name_len, body_name);
    }
    if (!json_is_object(json_object_get(meta, GW_MCP_META_CLIENT_CAPABILITIES)))
        return gw_mcp_error(msg->id, GW_MCP_INVALID_PARAMS,
                            "params._meta[\"" GW_MCP_META_CLIENT_CAPABILITIES
                            "\"] (an object) is required in revision " GW_MCP_VERSION_STATELESS);
    *status = 200;
    return NULL;
}

void gw_mcp_stateless_stamp(json_t *message)
{
    json_t *result = json_object_get(message, "result"), *meta;

    if (!json_is_object(result))
        return;
    if (json_object_get(result, "resultType") == NULL)
        json_object_set_new(result, "resultType", json_string("complete"));
    if (!json_is_object(meta = json_object_get(result, "_meta"))) {
        meta = json_object();
        json_object_set_new(result, "_meta", meta);
    }
    json_object_set_new(meta, GW_MCP_META_SERVER_INFO, json_pack("{s:s, s:s}", "name", "kgate", "version", GW_VERSION));
}

/* A Base64 digit's value (standard alphabet), or -1. */
static int b64_digit(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

static char *b64_decode(const char *s, size_t len, size_t *out_len)
{
    char *out;
    unsigned acc = 0, bits = 0;
    size_t n = 0;

    while (len != 0 && s[len - 1] == '=')
        --len;
    if (len % 4 == 1)
        return NULL;
    out = wire_malloc(len / 4 * 3 + 3);
    for (size_t i = 0; i != len; ++i) {
        int d = b64_digit(s[i]);
        if (d < 0) {
            free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)d;
        if ((bits += 6) >= 8) {
            bits -= 8;
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    /* the last digit's unused bits are zero in canonical Base64: one spelling per value */
    if ((acc & ((1u << bits) - 1)) != 0) {
        free(out);
        return NULL;
    }
    out[n] = '\0';
    *out_len = n;
    return out;
}

char *gw_mcp_header_value_decode(const char *value, size_t len, size_t *out_len)
{
    static const char prefix[] = "=?base64?", suffix[] = "?=";
    const size_t plen = sizeof(prefix) - 1, slen = sizeof(suffix) - 1;
    char *out;

    if (len >= plen + slen && memcmp(value, prefix, plen) == 0 && memcmp(value + len - slen, suffix, slen) == 0)
        return b64_decode(value + plen, len - plen - slen, out_len);
    for (size_t i = 0; i != len; ++i) {
        unsigned char c = (unsigned char)value[i];
        if (!(c == '\t' || (c >= 0x20 && c <= 0x7e)))
            return NULL;
    }
    out = wire_malloc(len + 1);
    memcpy(out, value, len);
    out[len] = '\0';
    *out_len = len;
    return out;
}

int gw_mcp_context_name_valid(const char *name, size_t len)
{
    if (len == 0 || len > GW_MCP_CONTEXT_NAME_MAX)
        return 0;
    for (size_t i = 0; i != len; ++i) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}
