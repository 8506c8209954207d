/* bench/common.c: error strings and outcomes shared by the bench clients. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "support/base.h"
#include "support/http.h"
#include "support/proc.h"
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

int bench_request_error(const char *what, int st, const ts_response_t *resp)
{
    if (st < 0) {
        bench_set_detail("%s: %s", what, resp->error);
        return st;
    }
    bench_set_detail("%s: HTTP %d %.300s", what, st, resp->body != NULL ? resp->body : "");
    return BENCH_ESTATUS;
}

void bench_outcome_dispose(bench_outcome_t *o)
{
    free(o->result_text);
    free(o->error);
    memset(o, 0, sizeof(*o));
}

long long bench_proc_kib(const char *path, const char *field)
{
    return ts_proc_kib(path, field);
}

long long bench_proc_status_kb(int pid, const char *field)
{
    return ts_proc_status_kib((pid_t)pid, field);
}

int bench_reset_hwm(int pid)
{
    return ts_proc_reset_hwm((pid_t)pid);
}

int bench_expect_result(const char *who, const char *expect, const bench_outcome_t *o)
{
    if (o->error == NULL && o->result_text != NULL && strcmp(o->result_text, expect) == 0)
        return 0;
    bench_set_detail("%s: expected result %s, got %s", who, expect,
                     o->error != NULL         ? o->error
                     : o->result_text != NULL ? o->result_text
                                              : "none");
    return BENCH_ERUN;
}
