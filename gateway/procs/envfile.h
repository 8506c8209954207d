/* procs/envfile.h: the EXECD_ENVS file (docs/API.md 6.3) parsed as upstream execd parses it; pure, no I/O. */
#ifndef GW_PROCS_ENVFILE_H
#define GW_PROCS_ENVFILE_H

#include <stddef.h>
#include <jansson.h>

/* The bound on the file kgate reads for each command (a KEY=VALUE list, not a data file). */
#define GW_ENVFILE_MAX_BYTES (256 * 1024)
/*
 * The bound on one variable, `NAME=value` after expansion, in bytes: Linux's MAX_ARG_STRLEN (32 pages) less the NUL.
 * execve refuses a longer environment string with E2BIG, so such a variable could never reach a command; it is skipped
 * (and said) instead of failing every command.
 */
#define GW_ENVFILE_MAX_VAR_BYTES (128 * 1024 - 1)

/** The value of variable `name` in the environment the file is expanded against, or NULL when it is not set. */
typedef const char *(*gw_envfile_lookup_cb)(const char *name, void *ctx);
/** Told of a line that is skipped: its number (from 1) and why. */
typedef void (*gw_envfile_skip_cb)(size_t lineno, const char *why, void *ctx);

/**
 * Parses `text` (`len` bytes, NULs included: a line holding one is skipped) as upstream execd reads EXECD_ENVS
 * (components/execd/pkg/runtime/env.go): lines split at '\n'; each trimmed of surrounding blanks (space, \t, \r, \v,
 * \f); blank lines and lines starting with '#' skipped; a line without '=' skipped (`on_skip`); the name is what comes
 * before the first '=' (kept as written: upstream does not trim it), the value what follows, with `$NAME`, `${NAME}` and
 * the one-character `$0`..`$9`, `$*`, `$#`, `$$`, `$@`, `$!`, `$?`, `$-` expanded through `lookup` exactly as Go's
 * os.ExpandEnv does: an unset variable expands to nothing, `${}` and an unclosed `${` are dropped, a `$` followed by
 * anything else (or at the end) stays. Nothing else is interpreted, as upstream: quotes stay part of the value, a
 * backslash is an ordinary character, `#` after the start of a line is part of the value, and variables defined earlier
 * in the file are not seen by later lines (only `lookup`'s environment is). A later line wins over an earlier one of the
 * same name. Where kgate differs from upstream, it skips (and says why) rather than passing on what no command could
 * get: an empty name, a name or value holding a NUL, and a variable over GW_ENVFILE_MAX_VAR_BYTES.
 *
 * Returns a new object (the caller owns it) of name -> string value. `on_skip` may be NULL.
 */
json_t *gw_envfile_parse(const char *text, size_t len, gw_envfile_lookup_cb lookup, void *lookup_ctx, gw_envfile_skip_cb on_skip,
                         void *skip_ctx);

/**
 * Expands `value` (NUL-terminated) as above into a new string (the caller frees it), or returns NULL when the result would be
 * longer than `max` bytes.
 */
char *gw_envfile_expand(const char *value, gw_envfile_lookup_cb lookup, void *ctx, size_t max);

#endif
