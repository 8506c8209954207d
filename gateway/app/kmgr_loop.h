/* gateway/kmgr_loop.h: kmgr_loop_ops_t on h2o's evloop; the `loop` argument is the gw_server_t. */
#ifndef GW_KMGR_LOOP_H
#define GW_KMGR_LOOP_H

#include "kmgr/loop.h"

extern const kmgr_loop_ops_t gw_kmgr_loop_ops;

#endif
