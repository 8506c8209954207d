/* kmgr/util.h: the clock of every kernelmgr deadline, for hosts that keep their own in step with it. */
#ifndef KMGR_UTIL_H
#define KMGR_UTIL_H

#include <stdint.h>

/** Milliseconds of CLOCK_MONOTONIC; the clock every kernelmgr deadline uses. */
uint64_t kmgr_now_ms(void);

#endif
