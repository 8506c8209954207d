/* bench/common.h: error codes and the per-execution outcome shared by the bench clients. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stddef.h>

/* XX(name, message): every error the bench itself returns (negative, one table, as in wire/). Talking
 * to kgate over HTTP and running it are the test-support library's (tests/support), whose TS_E*
 * codes (-99 and up) pass through bench functions unchanged; bench_strerror names them too. */
#define BENCH_ERRNO_MAP(XX)                                                                                                        \
    XX(TIMEDOUT, "timed out")                                                                                                      \
    XX(IO, "input/output error")                                                                                                   \
    XX(PROTO, "the peer broke its protocol")                                                                                       \
    XX(STATUS, "unexpected HTTP status")                                                                                           \
    XX(ZMQ, "ZeroMQ error")                                                                                                        \
    XX(WIRE, "bad kernel message")                                                                                                 \
    XX(NOKERNEL, "cannot find the context's kernel")                                                                               \
    XX(RUN, "the code did not run as expected")                                                                                    \
    XX(INTERRUPTED, "interrupted by a signal")                                                                                     \
    XX(SKIPPED, "case skipped")

typedef enum {
    BENCH_OK = 0,
#define BENCH_XX_ENUM(name, msg) BENCH_E##name,
    BENCH__ERR_FIRST = -200,
    BENCH_ERRNO_MAP(BENCH_XX_ENUM)
#undef BENCH_XX_ENUM
} bench_err_t;

/** A static description of a bench error code or of a TS_E* code (or "unknown error"). */
const char *bench_strerror(int err);

/**
 * Records a human-readable detail for the error about to be returned (printf format). The bench is
 * single-threaded: the detail is one static buffer, overwritten by the next call.
 */
void bench_set_detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/** The last detail recorded ("" if none). */
const char *bench_detail(void);

struct st_ts_response_t;
/**
 * A request that got status `st` (negative: the transport's error, returned as it is) where another was due: the detail
 * says `what` and the status with the start of the body (`resp->error` for a transport error). Returns `st` when negative,
 * else BENCH_ESTATUS.
 */
int bench_request_error(const char *what, int st, const struct st_ts_response_t *resp);

/** ts_proc_kib (support/proc.h), the one reader of a "<field>: N kB" line of a /proc file, as the bench names it. */
long long bench_proc_kib(const char *path, const char *field);
/** ts_proc_status_kib (support/proc.h): a field of /proc/<pid>/status in KiB ("VmRSS", "VmHWM"), -1 when unknown. */
long long bench_proc_status_kb(int pid, const char *field);
/** ts_proc_reset_hwm (support/proc.h): starts the process's VmHWM over from its VmRSS, so that it is the peak of what follows. 0 or
 * -1. */
int bench_reset_hwm(int pid);

/** What one execution produced, from either client. */
typedef struct st_bench_outcome_t {
    /** Milliseconds from writing the request to reading the completion (see each client). */
    double ms;
    /** Bytes of stdout text received. */
    size_t stdout_bytes;
    /** stdout/stderr messages (direct) or events (kgate) received. */
    size_t stream_messages;
    /** kgate only: a `status: output_truncated` event arrived (the run's output_limit was hit). */
    int output_truncated;
    /** text/plain of the first execute_result/display_data, owned; NULL if there was none. */
    char *result_text;
    /** "ename: evalue" when the run raised (or the reply was not ok), owned; NULL otherwise. */
    char *error;
} bench_outcome_t;

/** 0 when `o` raised no error and its result is `expect`; else BENCH_ERUN with the detail set (`who` names the side). */
int bench_expect_result(const char *who, const char *expect, const bench_outcome_t *o);

/** Frees the strings of `o` and zeroes it; accepts a zeroed outcome. */
void bench_outcome_dispose(bench_outcome_t *o);

#endif
