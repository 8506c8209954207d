/* bench/common.c: error strings and outcomes shared by the bench clients. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/base.h"
#include "common.h"

static char detail[512];

const char *bench_strerror(int err)
{
    switch (err) {
#define BENCH_XX_STR(name, msg)                                                                                                    \
    case BENCH_E##name:                                                                                                            \
        return msg;
        BENCH_ERRNO_MAP(BENCH_XX_STR)
#undef BENCH_XX_STR
    default:
        return ts_strerror(err);
    }
}

void bench_set_detail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
}

const char *bench_detail(void)
{
    return detail;
}

void bench_outcome_dispose(bench_outcome_t *o)
{
    free(o->result_text);
    free(o->error);
    memset(o, 0, sizeof(*o));
}
