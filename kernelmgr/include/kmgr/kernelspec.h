/* kmgr/kernelspec.h: discovery of installed Jupyter kernelspecs. */
#ifndef KMGR_KERNELSPEC_H
#define KMGR_KERNELSPEC_H

#include <stddef.h>
#include <jansson.h>

typedef enum { KMGR_INTERRUPT_SIGNAL, KMGR_INTERRUPT_MESSAGE } kmgr_interrupt_mode_t;

/** One kernelspec (`<dir>/kernel.json`). Every member is owned by the spec. */
typedef struct st_kmgr_kernelspec_t {
    char *name;         /* the directory name, e.g. "python3" */
    char *resource_dir; /* the directory holding kernel.json */
    char *display_name;
    char *language; /* spec.language, e.g. "python" */
    char **argv;    /* NULL-terminated; "{connection_file}" not yet substituted */
    size_t argc;
    json_t *env; /* object of string values, or NULL */
    kmgr_interrupt_mode_t interrupt_mode;
    json_t *metadata; /* object, or NULL */
    /* Publishes output after its status idle: metadata.kgate.late_output true, or Deno's kernel (docs/kernels.md). */
    int late_output;
    /* Deno's kernel: its late output is known to have ended when a flush's marker arrives (docs/kernels.md, "Late output"). */
    int late_flush;
    /*
     * Deno's kernel (2.9): a cell interrupted while it awaits (a timer, a promise) acknowledges the interrupt and never
     * ends, not even once what it awaited is done; a busy cell ends at once. An interrupt not heeded soon never will be.
     */
    int interrupt_may_hang;
} kmgr_kernelspec_t;

/** The transport of a kernel's connection file. */
typedef enum { KMGR_TRANSPORT_TCP, KMGR_TRANSPORT_IPC } kmgr_transport_t;

/**
 * Pure: the transport kernelmgr gives a kernel of `spec`: metadata.kgate.transport ("tcp" or "ipc") when the spec
 * says; else ipc for ipykernel (its argv runs the module ipykernel_launcher or ipykernel), known to bind ipc endpoints,
 * which reach kgate's user alone and lose no port between pick and bind (docs/liveness.md); else TCP on 127.0.0.1, as
 * jupyter_client writes connection files, which every kernel can bind (Deno's kernel binds nothing else). `isolated_net`: the
 * kernel runs in a network namespace of its own (a sandbox without the host's network), whose loopback kgate cannot reach: ipc
 * whatever the spec says.
 */
kmgr_transport_t kmgr_kernelspec_transport(const kmgr_kernelspec_t *spec, int isolated_net);

/** The set of discovered kernelspecs, sorted by name; names are unique. */
typedef struct st_kmgr_kernelspecs_t {
    kmgr_kernelspec_t **entries;
    size_t size;
} kmgr_kernelspecs_t;

/**
 * Parses one kernel.json (`path`) into a new spec named `name`. Returns 0 and stores the spec in
 * `*out` (caller owns it; release with kmgr_kernelspec_destroy), or KSYS_EBADSPEC / KSYS_EIO.
 * A valid spec has a non-empty argv of strings, and a string `language`. Without `interrupt_mode` a spec is
 * interrupted by signal (Jupyter's rule), except Deno's kernel (`deno jupyter --kernel`), which exits on SIGINT
 * and is interrupted by message. `late_output` is metadata.kgate.late_output when a boolean, else whether the spec runs
 * Deno's kernel (which publishes output after idle); `late_flush` whether it runs Deno's kernel.
 */
int kmgr_kernelspec_load(const char *name, const char *resource_dir, kmgr_kernelspec_t **out);
/** Releases a spec; accepts NULL. */
void kmgr_kernelspec_destroy(kmgr_kernelspec_t *spec);

/**
 * Discovers kernelspecs, the first directory that holds a name winning, in this order:
 *  1. each of the `n_extra` directories in `extra_dirs` (each holds `<name>/kernel.json`);
 *  2. `$JUPYTER_PATH` entries (colon-separated), each + "/kernels";
 *  3. the user data dir: `$JUPYTER_DATA_DIR`, else `$XDG_DATA_HOME/jupyter`, else
 *     `$HOME/.local/share/jupyter`, + "/kernels";
 *  4. `/usr/local/share/jupyter/kernels`, then `/usr/share/jupyter/kernels`.
 * Missing directories and invalid specs are skipped (an invalid spec is reported through `warn`
 * when non-NULL). Fills `out` (zeroed by the callee first); always returns 0.
 */
int kmgr_kernelspecs_discover(const char *const *extra_dirs, size_t n_extra, kmgr_kernelspecs_t *out,
                              void (*warn)(const char *path, const char *why));

/** Releases every spec of the set. */
void kmgr_kernelspecs_dispose(kmgr_kernelspecs_t *specs);

/** The spec named exactly `name`, or NULL. */
const kmgr_kernelspec_t *kmgr_kernelspecs_find(const kmgr_kernelspecs_t *specs, const char *name);

/**
 * Resolves a caller's language: a spec whose name is `language`, else the first spec (by name)
 * whose spec.language equals it (case-insensitively), else the same two steps for what an alias
 * stands for, the first that matches (py: python; js: javascript, then deno; javascript: deno, Deno's
 * kernel, whose spec says typescript; ts: typescript; sh and shell: bash). NULL when nothing matches.
 */
const kmgr_kernelspec_t *kmgr_kernelspecs_resolve(const kmgr_kernelspecs_t *specs, const char *language);

#endif
