/* kmgr/errors.h: error codes of the kernel manager (negative integers, one table). */
#ifndef KMGR_ERRORS_H
#define KMGR_ERRORS_H

/* XX(name, message): every error the kernelmgr module returns. */
#define KMGR_ERRNO_MAP(XX)                                                                                                         \
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
    KMGR_OK = 0,
#define KMGR_XX_ENUM(name, msg) KMGR_E##name,
    KMGR__ERR_FIRST = -200,
    KMGR_ERRNO_MAP(KMGR_XX_ENUM)
#undef KMGR_XX_ENUM
} kmgr_err_t;

/** Returns a static description of a kernelmgr error code (or of a wire error code). */
const char *kmgr_strerror(int err);

#endif
