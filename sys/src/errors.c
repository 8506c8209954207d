/* sys/src/errors.c: descriptions of the codes of ksys/errors.h, from KSYS_ERRNO_MAP (wire's pass through). */
#include "wire/errors.h"
#include "ksys/errors.h"

const char *ksys_strerror(int err)
{
    switch (err) {
    case KSYS_OK:
        return "success";
#define KSYS_XX_STR(name, msg)                                                                                                     \
    case KSYS_E##name:                                                                                                             \
        return msg;
        KSYS_ERRNO_MAP(KSYS_XX_STR)
#undef KSYS_XX_STR
    default:
        /* Wire codes pass through kernelmgr unchanged (their ranges do not overlap). */
        return wire_strerror(err);
    }
}
