/* ksys/detach.h: work that may take unbounded time in the kernel (a big directory's removal, the last close of a big
 * file), done in a thread of its own so that the event loop never waits for it. */
#ifndef KSYS_DETACH_H
#define KSYS_DETACH_H

/**
 * Runs `fn(arg)` in a new detached thread that starts with every signal blocked (signals stay the loop thread's). The
 * thread must own everything `fn` touches: it shares nothing with the loop. At most 8 such threads run at once (work
 * clients can cause in numbers must not make a thread each). Returns 0, or EAGAIN (that many run already) or the
 * pthread_create error, in which case nothing ran (the caller decides whether to run `fn` itself).
 */
int ksys_detach(void (*fn)(void *arg), void *arg);

/**
 * Closes `fd` in a detached thread: for the last reference to a big file that is gone from its directory, whose close
 * frees its page cache and blocks (~200 ms per GiB measured here). Closes it at once when no thread can be had; -1 is
 * ignored.
 */
void ksys_close_detached(int fd);

#endif
