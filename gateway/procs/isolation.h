/* procs/isolation.h: an isolated session's sandbox as a request states it (execd's /v1/isolated/session, OSEP-0013), its
 * bubblewrap command line and its environment, all built purely. */
#ifndef GW_ISOLATION_H
#define GW_ISOLATION_H

#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

/** How the session sees its workspace. */
typedef enum {
    GW_ISO_RW,      /* bound read-write: writes land in the workspace */
    GW_ISO_OVERLAY, /* an overlay over it: writes land in the session's upper layer, the workspace is untouched */
    GW_ISO_RO,      /* bound read-only: writes fail with EROFS */
} gw_iso_mode_t;

/**
 * Profiles (kgate's definitions):
 *  - strict: workspace overlay unless stated; a private /tmp (tmpfs) holding HOME (/tmp/home); kgate's environment minus
 *    secrets (GW_ISO_SECRET_PATTERNS) and whatever env_passthrough denies.
 *  - balanced: workspace rw unless stated; the host's /tmp bound read-write (HOME as kgate's); kgate's environment as it
 *    is (but kgate's own access token), unless env_passthrough says otherwise.
 * Both: new user, pid, ipc and uts namespaces, no network unless share_net, every capability dropped, no nested user
 * namespaces, a new session, the system read-only, fresh /dev, /proc and /run, kgate's runtime dir hidden.
 */
typedef enum { GW_ISO_STRICT, GW_ISO_BALANCED } gw_iso_profile_t;

/** Environment names strict drops (shell globs, case-insensitive). */
#define GW_ISO_SECRET_PATTERNS                                                                                                     \
    "*_API_KEY", "*_TOKEN", "*_SECRET", "*_PASSWORD", "*_CREDENTIALS", "AWS_*", "ALI_*", "ALIYUN_*", "K8S_*", "KUBE_*", "KGATE_*"

typedef struct st_gw_iso_bind_t {
    char *source, *dest;
    int readonly;
} gw_iso_bind_t;

/** A session's isolation, as parsed (gw_iso_spec_parse); every string owned. */
typedef struct st_gw_iso_spec_t {
    char *workspace; /* absolute, lexically normal, never "/" */
    gw_iso_mode_t mode;
    gw_iso_profile_t profile;
    char **extra_writable; /* absolute paths bound read-write at the same place */
    size_t num_extra_writable;
    gw_iso_bind_t *binds;
    size_t num_binds;
    int share_net;
    int env_allow;    /* env_passthrough.mode "allow": only env_keys pass; else "deny": every variable but env_keys */
    int env_explicit; /* env_passthrough was given */
    char **env_keys;
    size_t num_env_keys;
    long uid, gid;                 /* >= 0: the ids inside the sandbox (bwrap --uid/--gid); -1: kgate's */
    unsigned idle_timeout_seconds; /* 0: no idle expiry */
} gw_iso_spec_t;

/** Bounds of a request (items of each list). */
#define GW_ISO_MAX_ITEMS 64

/**
 * Pure: reads a POST /v1/isolated/session body (docs/API.md 5.1; OSEP-0013's nesting under "isolation" is read too). Paths
 * must be absolute and are normalised lexically ("." and ".." applied; gw_walls_open_spec then checks them as bwrap
 * will resolve them); `root` (the files root, "/" for none) must hold
 * the workspace, extra_writable and the sources of writable binds; nothing may name `hidden` (kgate's runtime dir) or lie
 * in it. `default_idle` is idle_timeout_seconds when absent. Returns 0, or -1 with a message for the client in `err`
 * (then `out` holds nothing to free).
 */
int gw_iso_spec_parse(json_t *body, const char *root, const char *hidden, unsigned default_idle, gw_iso_spec_t *out, char *err,
                      size_t errlen);
/** Frees what the spec owns; accepts a zeroed spec. */
void gw_iso_spec_dispose(gw_iso_spec_t *spec);
/** The creation fields as the API echoes them: {workspace: {path, mode}, profile, extra_writable, binds, ...}. */
json_t *gw_iso_spec_to_json(const gw_iso_spec_t *spec);
const char *gw_iso_mode_name(gw_iso_mode_t mode);

/** Where a session's sandbox finds its parts on the host; every string borrowed for the call. */
typedef struct st_gw_iso_paths_t {
    const char *bwrap;
    const char *unshare;              /* util-linux unshare (overlay only) */
    const char *runtime_dir;          /* hidden inside (an empty tmpfs over it) */
    const char *ctl_dir;              /* the session's run scripts: bound read-only at GW_ISO_CTL_DIR */
    const char *merged_dir;           /* overlay: where the wrapper mounts the overlay (bound at the workspace) */
    const char *upper_dir, *work_dir; /* overlay: the session's upper layer and overlayfs's work dir */
    int as_root;                      /* kgate runs as root: the wrapper needs no user namespace of its own */
    uint64_t tmp_bytes;               /* the size of strict's private /tmp, and of /dev/shm; 0: tmpfs's default */
    /* > 0: the spec's host paths are bound by descriptor (gw_walls_open_spec): the child holds the one of the path at index i
     * (GW_ISO_SOURCE_*) as descriptor source_fd_base + i (ksys_spawn_options_t.keep_fds); 0: by path */
    int source_fd_base;
} gw_iso_paths_t;

/** The index of each host path of a spec, in the order gw_walls_open_spec opens them: the workspace, extra_writable, binds. */
#define GW_ISO_SOURCE_WORKSPACE 0
#define GW_ISO_SOURCE_EXTRA(i) (1 + (i))
#define GW_ISO_SOURCE_BIND(spec, i) (1 + (spec)->num_extra_writable + (i))

/** Where the session's run scripts appear inside the sandbox. */
#define GW_ISO_CTL_DIR "/run/kgate"

/**
 * Builds the session's command line around `cmd`: bwrap with the profile's mounts in a fixed order (the system read-only,
 * /tmp, /dev (read-only but for its devices, a sized /dev/shm), /proc, /run, the runtime dir hidden, the control dir, the
 * workspace per mode, extra_writable, binds, the runtime dir hidden again over whatever a bind laid there, HOME),
 * `--chdir` the workspace; for overlay, `unshare` (a private mount namespace; a user namespace too when kgate is not
 * root) and `sh -c` that mounts the overlay at merged_dir and execs bwrap, so that the mount dies with the session.
 * With source_fd_base, bwrap binds descriptors (--bind-fd) and the overlay's wrapper enters the workspace through its
 * descriptor (`sh -c 'cd /proc/self/fd/N'`, which closes it) and mounts "." as the lower layer.
 * The process run keeps its pid from wrapper to bwrap (exec all along). Pure; NULL-terminated, owned by the caller
 * (ksys_strv_free).
 */
char **gw_iso_argv(const gw_iso_spec_t *spec, const gw_iso_paths_t *paths, char *const *cmd);

/**
 * The session's environment from `environ_` (kgate's): filtered by env_passthrough and the profile (strict drops
 * GW_ISO_SECRET_PATTERNS; both drop KGATE_ACCESS_TOKEN), then HOME=/tmp/home under strict, then `mark` (kgate's
 * instance mark, "NAME=value"; NULL: none) last. PATH always passes. Pure; NULL-terminated, owned by the caller
 * (ksys_strv_free).
 */
char **gw_iso_env(const gw_iso_spec_t *spec, char *const *environ_, const char *mark);

/** Whether `name` matches one of GW_ISO_SECRET_PATTERNS. */
int gw_iso_is_secret(const char *name);

#endif
