/* wire/src/zmtp.c: ZMTP 3.0 greeting, READY, frame headers and commands (ZeroMQ RFC 23), as bytes. */
#include <string.h>
#include <strings.h>
#include "wire/errors.h"
#include "wire/zmtp.h"

#define MECHANISM_OFFSET 12
#define MECHANISM_LEN 20
#define PING_CONTEXT_MAX 16

void wire_zmtp_greeting(uint8_t out[WIRE_ZMTP_GREETING_LEN])
{
    memset(out, 0, WIRE_ZMTP_GREETING_LEN);
    out[0] = 0xff; /* signature: 0xff, 8 bytes of padding, 0x7f */
    out[9] = 0x7f;
    out[10] = 3; /* version 3.0: subscriptions travel as messages, which every libzmq 4 PUB reads */
    out[11] = 0;
    memcpy(out + MECHANISM_OFFSET, "NULL", 4);
    /* as-server 0 and the filler stay zero */
}

int wire_zmtp_check_greeting(const uint8_t in[WIRE_ZMTP_GREETING_LEN])
{
    static const uint8_t null_mechanism[MECHANISM_LEN] = {'N', 'U', 'L', 'L'};

    /* ZMTP 1.0 peers clear the low bit of byte 9; 2.0 peers say major version 1 */
    if (in[0] != 0xff || (in[9] & 1) == 0 || in[10] < 3)
        return WIRE_EZMTP;
    return memcmp(in + MECHANISM_OFFSET, null_mechanism, MECHANISM_LEN) == 0 ? 0 : WIRE_EZMTP;
}

size_t wire_zmtp_write_head(uint8_t out[WIRE_ZMTP_HEAD_MAX], uint64_t size, unsigned flags)
{
    flags &= WIRE_ZMTP_MORE | WIRE_ZMTP_COMMAND;
    if (size <= 255) {
        out[0] = (uint8_t)flags;
        out[1] = (uint8_t)size;
        return 2;
    }
    out[0] = (uint8_t)(flags | WIRE_ZMTP_LONG);
    for (int i = 0; i != 8; ++i)
        out[1 + i] = (uint8_t)(size >> (56 - 8 * i));
    return 9;
}

int wire_zmtp_read_head(const uint8_t *p, size_t len, wire_zmtp_head_t *out)
{
    if (len < 1)
        return 0;
    unsigned flags = p[0];
    if ((flags & ~(unsigned)(WIRE_ZMTP_MORE | WIRE_ZMTP_LONG | WIRE_ZMTP_COMMAND)) != 0 ||
        (flags & (WIRE_ZMTP_MORE | WIRE_ZMTP_COMMAND)) == (WIRE_ZMTP_MORE | WIRE_ZMTP_COMMAND))
        return WIRE_EZMTP;
    if ((flags & WIRE_ZMTP_LONG) == 0) {
        if (len < 2)
            return 0;
        out->size = p[1];
        out->head_len = 2;
    } else {
        if (len < 9)
            return 0;
        out->size = 0;
        for (int i = 0; i != 8; ++i)
            out->size = out->size << 8 | p[1 + i];
        out->head_len = 9;
    }
    out->flags = flags;
    return 1;
}

int wire_zmtp_parse_command(const uint8_t *body, size_t len, wire_zmtp_command_t *out)
{
    if (len < 1 || body[0] == 0 || (size_t)body[0] + 1 > len)
        return WIRE_EZMTP;
    out->name = body + 1;
    out->name_len = body[0];
    out->data = body + 1 + out->name_len;
    out->data_len = len - 1 - out->name_len;
    return 0;
}

int wire_zmtp_command_is(const wire_zmtp_command_t *cmd, const char *name)
{
    size_t n = strlen(name);
    return cmd->name_len == n && memcmp(cmd->name, name, n) == 0;
}

int wire_zmtp_property(const wire_zmtp_command_t *ready, const char *name, const uint8_t **value, size_t *value_len)
{
    const uint8_t *p = ready->data, *end = ready->data + ready->data_len;
    size_t want = strlen(name);

    while (p != end) {
        size_t name_len = p[0], len;
        if ((size_t)(end - p) < 1 + name_len + 4)
            return WIRE_EZMTP;
        const uint8_t *at = p + 1 + name_len;
        len = (size_t)at[0] << 24 | (size_t)at[1] << 16 | (size_t)at[2] << 8 | at[3];
        if ((size_t)(end - at - 4) < len)
            return WIRE_EZMTP;
        if (name_len == want && strncasecmp((const char *)p + 1, name, want) == 0) {
            *value = at + 4;
            *value_len = len;
            return 1;
        }
        p = at + 4 + len;
    }
    return 0;
}

/* Appends a property (name, four-byte big-endian length, value) at `*at`; 0, or WIRE_ENOSPACE. */
static int put_property(uint8_t **at, const uint8_t *end, const char *name, const char *value)
{
    size_t name_len = strlen(name), len = strlen(value);

    if (name_len > 255 || (size_t)(end - *at) < 1 + name_len + 4 + len)
        return WIRE_ENOSPACE;
    *(*at)++ = (uint8_t)name_len;
    memcpy(*at, name, name_len);
    *at += name_len;
    for (int i = 0; i != 4; ++i)
        *(*at)++ = (uint8_t)(len >> (24 - 8 * i));
    memcpy(*at, value, len);
    *at += len;
    return 0;
}

/* Writes a command frame, header included, whose body is `name` then `body`; its length or WIRE_ENOSPACE. */
static int put_command(uint8_t *out, size_t cap, const char *name, const uint8_t *body, size_t len)
{
    size_t name_len = strlen(name), size = 1 + name_len + len;
    uint8_t head[WIRE_ZMTP_HEAD_MAX];
    size_t head_len = wire_zmtp_write_head(head, size, WIRE_ZMTP_COMMAND);

    if (cap < head_len + size)
        return WIRE_ENOSPACE;
    memcpy(out, head, head_len);
    out[head_len] = (uint8_t)name_len;
    memcpy(out + head_len + 1, name, name_len);
    if (len != 0)
        memcpy(out + head_len + 1 + name_len, body, len);
    return (int)(head_len + size);
}

int wire_zmtp_ready(uint8_t *out, size_t cap, const char *socket_type, const char *identity)
{
    uint8_t props[512], *at = props, *end = props + sizeof(props);

    if (identity != NULL && (identity[0] == '\0' || strlen(identity) > 255))
        return WIRE_ENOSPACE;
    if (put_property(&at, end, "Socket-Type", socket_type) != 0 ||
        (identity != NULL && put_property(&at, end, "Identity", identity) != 0))
        return WIRE_ENOSPACE;
    return put_command(out, cap, "READY", props, (size_t)(at - props));
}

int wire_zmtp_pong(uint8_t *out, size_t cap, const wire_zmtp_command_t *ping)
{
    /* PING's data: a two-byte TTL, then up to 16 bytes of context that PONG echoes */
    if (ping->data_len < 2 || ping->data_len - 2 > PING_CONTEXT_MAX)
        return WIRE_EZMTP;
    return put_command(out, cap, "PONG", ping->data + 2, ping->data_len - 2);
}

int wire_zmtp_socket_types_match(const char *ours, const uint8_t *peer, size_t peer_len)
{
    /* each type, then the types it may talk to (RFC 28 and 29; PAIR is RFC 31's) */
    static const char *const pairs[][4] = {
        {"REQ", "REP", "ROUTER"},
        {"REP", "REQ", "DEALER"},
        {"DEALER", "REP", "DEALER", "ROUTER"},
        {"ROUTER", "REQ", "DEALER", "ROUTER"},
        {"PUB", "SUB", "XSUB"},
        {"XPUB", "SUB", "XSUB"},
        {"SUB", "PUB", "XPUB"},
        {"XSUB", "PUB", "XPUB"},
        {"PAIR", "PAIR"},
    };

    for (size_t i = 0; i != sizeof(pairs) / sizeof(pairs[0]); ++i) {
        if (strcmp(pairs[i][0], ours) != 0)
            continue;
        for (size_t j = 1; j != 4 && pairs[i][j] != NULL; ++j)
            if (strlen(pairs[i][j]) == peer_len && memcmp(pairs[i][j], peer, peer_len) == 0)
                return 1;
        return 0;
    }
    return 0;
}
