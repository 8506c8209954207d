/* code/sandbox.h: a context's sandbox choices and limits as a request states them, checked against the server's maxima. */
#ifndef GW_CODE_SANDBOX_H
#define GW_CODE_SANDBOX_H

#include <stddef.h>
#include <jansson.h>
#include "ksys/sandbox.h"
#include "core/config.h"

/** What a context asks for beyond the server's profile (--sandbox). */
typedef struct st_gw_context_sandbox_t {
    int share_net;        /* keep the host's network (meaningful under --sandbox bwrap) */
    ksys_limits_t limits; /* 0: none */
    uint64_t tmp_bytes;   /* its sandbox's /tmp and /dev/shm, each (gw_config_tmp_bytes of its memory cap); 0: tmpfs's default */
} gw_context_sandbox_t;

/** The server's defaults: no network, every limit at its --max-* (0: none). */
void gw_context_sandbox_defaults(const gw_config_t *config, gw_context_sandbox_t *out);

/**
 * Pure: reads `body`'s optional "sandbox" ({"share_net": bool}) and "limits" ({"memory_mb", "pids",
 * "cpu_seconds", "open_files", "file_size_mb"}: positive integers, each at most its --max-* when that is
 * set) over gw_context_sandbox_defaults. Unknown keys are refused (a misspelt limit must not go
 * unenforced). Returns 0, or -1 with a message for the client in `err`.
 */
int gw_context_sandbox_parse(json_t *body, const gw_config_t *config, gw_context_sandbox_t *out, char *err, size_t errlen);

/** {"profile": "none"|"bwrap", "share_net": bool, "tmp_mb"?: n} and {"memory_mb": .., ...} (limits in force; 0 fields left out). */
json_t *gw_context_sandbox_to_json(const gw_context_sandbox_t *sb, int profile_bwrap);
json_t *gw_context_limits_to_json(const ksys_limits_t *limits);

#endif
