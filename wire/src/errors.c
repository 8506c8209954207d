/* wire/src/errors.c: descriptions of the wire error codes, from WIRE_ERRNO_MAP. */
#include "wire/errors.h"

const char *wire_strerror(int err)
{
    switch (err) {
    case WIRE_OK:
        return "success";
#define WIRE_XX_STR(name, msg)                                                                                                     \
    case WIRE_E##name:                                                                                                             \
        return msg;
        WIRE_ERRNO_MAP(WIRE_XX_STR)
#undef WIRE_XX_STR
    default:
        return "unknown error";
    }
}
