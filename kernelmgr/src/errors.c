/* kernelmgr/src/errors.c: descriptions of the kernelmgr error codes, from KMGR_ERRNO_MAP. */
#include "wire/errors.h"
#include "kmgr/errors.h"

const char *kmgr_strerror(int err)
{
    switch (err) {
    case KMGR_OK:
        return "success";
#define KMGR_XX_STR(name, msg)                                                                                                     \
    case KMGR_E##name:                                                                                                             \
        return msg;
        KMGR_ERRNO_MAP(KMGR_XX_STR)
#undef KMGR_XX_STR
    default:
        /* Wire codes pass through kernelmgr unchanged (their ranges do not overlap). */
        return wire_strerror(err);
    }
}
