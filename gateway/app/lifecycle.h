/* app/lifecycle.h: OpenSandbox's sandbox lifecycle config (its preStart hook) and the startup status file (docs/execd.md). */
#ifndef GW_APP_LIFECYCLE_H
#define GW_APP_LIFECYCLE_H

#include <stddef.h>
#include <jansson.h>
#include "procs/shell.h"

/* A hook's timeout when its config gives none (upstream's 60 s). */
#define GW_LIFECYCLE_DEFAULT_TIMEOUT_S 60
/* The longest timeoutSeconds kgate takes: its timers count milliseconds in 32 bits (about 49 days). */
#define GW_LIFECYCLE_MAX_TIMEOUT_S 4294967u
/* The most argv words, and bytes in all, of one hook (a command line, not a data file). */
#define GW_LIFECYCLE_MAX_ARGS 1024
#define GW_LIFECYCLE_MAX_ARG_BYTES (256 * 1024)

/**
 * The part of upstream's lifecycle config (components/execd/pkg/lifecycle/config.go) kgate acts on: `{"version": 1,
 * "preStart": {"command": [argv...], "timeoutSeconds": N}, "periodic": [{"name", "schedule", "command",
 * "timeoutSeconds"}]}`. preStart runs once before user workloads (at startup, or in POST /internal/init); periodic
 * hooks are validated as far as their shape and logged as not run (kgate has no cron scheduler).
 */
typedef struct st_gw_lifecycle_t {
    char **prestart;             /* NULL-terminated argv; NULL: no preStart hook */
    unsigned prestart_timeout_s; /* the effective timeout (GW_LIFECYCLE_DEFAULT_TIMEOUT_S when 0 was given) */
    size_t num_periodic;
} gw_lifecycle_t;

/**
 * Pure: validates `config` (a JSON object, borrowed) as upstream does and fills `out` (released with
 * gw_lifecycle_dispose). `version` must be 1 (absent or 0: 1); unknown fields are ignored, as Go's decoder does. Returns
 * 0, or -1 with why in `err`.
 */
int gw_lifecycle_parse(json_t *config, gw_lifecycle_t *out, char *err, size_t errlen);
/** Releases what gw_lifecycle_parse filled; the struct is then empty (no hook). */
void gw_lifecycle_dispose(gw_lifecycle_t *lc);

/**
 * The template config, as upstream execd finds it: the JSON text of OPENSANDBOX_LIFECYCLE, else the file that
 * EXECD_LIFECYCLE_CONFIG names, else `$HOME/.execd/lifecycle.toml` when it exists (a file holding JSON; a TOML file is
 * refused with a message saying so: kgate reads no TOML). Both variables are then removed from kgate's environment, so
 * that no command sees them. Returns 0 (with `out` empty when there is no config), or -1 with why in `err`: kgate does not
 * start, as upstream.
 */
int gw_lifecycle_load(gw_lifecycle_t *out, char *err, size_t errlen);

/**
 * Appends `line` and a newline to the startup status file `path` (bootstrap.sh's: never created here, so that its
 * disappearance fails startup on both sides, as upstream). Returns 0, or -errno. `path` NULL: nothing, 0.
 */
int gw_lifecycle_append_status(const char *path, const char *line);

/** Called once when a preStart run ends: `ok`, or why it failed. */
typedef void (*gw_prestart_cb)(void *data, int ok, const char *why);

/**
 * Runs `lc`'s preStart hook, as upstream's startup does: appends `running <timeout s>` to `status_file` (may be NULL), runs
 * the argv through kgate's shell (`exec 'word'...`: kgate's environment, its output to kgate's stderr, the whole group killed
 * past the timeout), then appends `done 0` or `done 1` and calls `cb` once, from the loop, never inside this call. Without a
 * preStart hook it appends `done 0` only. A hook that cannot start fails (`done 1`). A status file that cannot be appended to
 * is logged; with `strict_status` (startup, where bootstrap.sh waits on it) it also fails the run, as upstream.
 */
void gw_prestart_start(gw_shells_t *shells, const gw_lifecycle_t *lc, const char *status_file, int strict_status, gw_prestart_cb cb,
                       void *data);

#endif
