/* wire/errors.h: error codes of the wire module (negative integers, one table). */
#ifndef WIRE_ERRORS_H
#define WIRE_ERRORS_H

/* XX(name, message): every error the wire module returns. */
#define WIRE_ERRNO_MAP(XX)                                                                                                         \
    XX(BADSIG, "message signature does not match")                                                                                 \
    XX(NODELIM, "message has no <IDS|MSG> delimiter")                                                                              \
    XX(TRUNCATED, "message has too few frames")                                                                                    \
    XX(BADJSON, "message frame is not a JSON object")                                                                              \
    XX(BADHEADER, "message header lacks msg_id or msg_type")                                                                       \
    XX(IO, "input/output error")                                                                                                   \
    XX(BADCONN, "connection file is not valid")                                                                                    \
    XX(EXISTS, "file already exists")                                                                                              \
    XX(NOSPACE, "output buffer too small")                                                                                         \
    XX(ZMTP, "peer broke the ZMTP 3 protocol")

typedef enum {
    WIRE_OK = 0,
#define WIRE_XX_ENUM(name, msg) WIRE_E##name,
    WIRE__ERR_FIRST = -100,
    WIRE_ERRNO_MAP(WIRE_XX_ENUM)
#undef WIRE_XX_ENUM
} wire_err_t;

/**
 * Returns a static, human-readable description of a wire error code (or "unknown error").
 */
const char *wire_strerror(int err);

#endif
