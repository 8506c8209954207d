/* ksys/util.h: the clock of every kgate deadline (kernelmgr's and the gateway's host keep theirs in step with it), path
 * joining, closing descriptors. */
#ifndef KSYS_UTIL_H
#define KSYS_UTIL_H

#include <stdint.h>

/** Milliseconds of CLOCK_MONOTONIC; the clock every kgate deadline uses. */
uint64_t ksys_now_ms(void);

/** "a/b" in a new string (wire_malloc). */
char *ksys_path_join(const char *a, const char *b);

/** Closes every descriptor from `lowfd` up. Allocates nothing and touches no libc state: safe in a vfork child. */
void ksys_close_from(int lowfd);

#endif
