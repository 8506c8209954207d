/* kernelmgr/src/instance.h: this kgate's mark on its descendants, its record in the runtime dir, and the sweep of what a dead one
 * left. */
#ifndef KMGR_INSTANCE_H
#define KMGR_INSTANCE_H

#include <stddef.h>
#include <sys/types.h>

/* The environment variable every child gets: "KGATE_INSTANCE=<token>". Descendants inherit it, so that
 * it proves descent even for processes that left their process group and session (a double fork). */
#define KMGR_INSTANCE_VAR "KGATE_INSTANCE"
#define KMGR_INSTANCE_TOKEN_LEN 32

typedef struct st_kmgr_instance_t {
    char token[KMGR_INSTANCE_TOKEN_LEN + 1]; /* random, hex */
    char env[sizeof(KMGR_INSTANCE_VAR "=") + KMGR_INSTANCE_TOKEN_LEN];
    char *record_path; /* <runtime_dir>/kgate-<token>.instance, NULL when none was written */
    size_t swept;      /* leftover processes of dead instances killed by kmgr_instance_init */
} kmgr_instance_t;

/**
 * Picks a token, kills what dead kgates recorded in `runtime_dir` left running (only if the directory
 * is ours: owned by this user, writable by nobody else), removes their records and, when no live
 * kgate shares the directory, their stale kernel directories and logs; then writes this kgate's
 * record (pid, start time, boot id, pid namespace, token). Returns 0, or KMGR_EIO when the record
 * cannot be written.
 */
int kmgr_instance_init(kmgr_instance_t *inst, const char *runtime_dir);

/** Kills every live process that carries this instance's token (SIGKILL), then removes the record. */
void kmgr_instance_dispose(kmgr_instance_t *inst);

#endif
