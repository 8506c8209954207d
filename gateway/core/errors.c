/* Descriptions of the gateway's error codes, from GW_ERRNO_MAP; other ranges are passed on. */
#include <string.h>
#include "ksys/errors.h"
#include "core/errors.h"

const char *gw_strerror(int err)
{
    switch (err) {
    case GW_OK:
        return "success";
#define GW_XX_STR(name, msg)                                                                                                       \
    case GW_E##name:                                                                                                               \
        return msg;
        GW_ERRNO_MAP(GW_XX_STR)
#undef GW_XX_STR
    default:
        break;
    }
    if (err > GW__ERR_FIRST && err < KSYS__ERR_FIRST + 50)
        return ksys_strerror(err);
    return err < 0 && err > -4096 ? strerror(-err) : "unknown error";
}
