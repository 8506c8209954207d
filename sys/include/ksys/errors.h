/* ksys/errors.h: the error codes of kernels and of the processes kgate starts (negative integers, one table). They live in
 * the system layer, not in kernelmgr, because spawn returns them too and because gateway/core's gw_strerror describes them
 * without linking the kernel manager (the proxy door, for one, links only the core). */
#ifndef KSYS_ERRORS_H
#define KSYS_ERRORS_H

/* XX(name, message): every error the kernelmgr and sys modules return besides wire's codes. */
#define KSYS_ERRNO_MAP(XX)                                                                                                         \
    XX(NOSPEC, "no such kernelspec")                                                                                               \
    XX(BADSPEC, "kernelspec is not valid")                                                                                         \
    XX(SPAWN, "cannot start the kernel process")                                                                                   \
    XX(ZMQ, "cannot open the kernel's channels")                                                                                   \
    XX(IO, "input/output error")                                                                                                   \
    XX(DIED, "kernel died")                                                                                                        \
    XX(STARTTIMEOUT, "kernel did not become ready in time")                                                                        \
    XX(SHUTDOWN, "kernel is shutting down")                                                                                        \
    XX(NOINPUT, "no input is awaited")                                                                                             \
    XX(INVAL, "invalid argument")                                                                                                  \
    XX(MSGSIZE, "a kernel message was larger than the message cap and was dropped")                                                \
    XX(NOTREADY, "kernel is not ready yet")                                                                                        \
    XX(BACKLOG, "the kernel is not taking its messages as fast as they are sent")                                                  \
    XX(STARTQUEUE, "too many kernels are waiting to start")

typedef enum {
    KSYS_OK = 0,
#define KSYS_XX_ENUM(name, msg) KSYS_E##name,
    KSYS__ERR_FIRST = -200,
    KSYS_ERRNO_MAP(KSYS_XX_ENUM)
#undef KSYS_XX_ENUM
} ksys_err_t;

/** Returns a static description of a code of this table (or of a wire error code). */
const char *ksys_strerror(int err);

#endif
