/* procs/pty.h: interactive shells on a pseudo-terminal (or pipes), their output in a replay ring, one client at a time. */
#ifndef GW_PTY_H
#define GW_PTY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <h2o.h>
#include "wire/ids.h"
#include "core/host.h"
#include "procs/ring.h"

typedef struct st_gw_pty_t gw_pty_t;

/** Every PTY session, and the shells of deleted ones not yet reaped. */
typedef struct st_gw_ptys_t {
    gw_host_t *host;      /* config: shell, max_ptys, pty_ring_bytes, pty_idle_ms, pty_stdin_bytes */
    h2o_linklist_t list;  /* gw_pty_t, findable */
    h2o_linklist_t dying; /* gw_pty_t deleted while their shell was alive: freed once it is reaped */
    size_t count;         /* in `list` (bounded by config->max_ptys) */
} gw_ptys_t;

/**
 * What the attached client hears. Called from the loop (a socket's callback or gw_ptys_tick), never
 * from inside a call the client makes.
 */
typedef struct st_gw_pty_sink_t {
    /** Output as it is read (already in the ring): `offset` is the absolute offset of its first byte. */
    void (*on_output)(void *data, int is_stderr, uint64_t offset, const char *bytes, size_t len);
    /** Writing queued stdin failed (`err` -errno); what was queued is dropped. */
    void (*on_stdin_error)(void *data, int err);
    /** The shell exited and its output is drained (pty->exit_code). Called once per session. */
    void (*on_exit)(void *data);
} gw_pty_sink_t;

/**
 * One session: created by gw_pty_create, its shell started by gw_pty_start (the first client),
 * then alive until gw_pty_destroy or until it has been idle (no client, no output) for
 * config->pty_idle_ms. Its fields are read elsewhere, written here only.
 */
struct st_gw_pty_t {
    char id[WIRE_UUID_STRLEN + 1];
    gw_ptys_t *ptys;
    char *cwd;     /* NULL: kgate's working directory */
    char *command; /* NULL: an interactive shell; else `<shell> -c command` */
    unsigned started : 1;
    unsigned is_pipe : 1;   /* once started: pipes (stderr apart) rather than a terminal */
    unsigned exited : 1;    /* the shell was reaped */
    unsigned finished : 1;  /* exited and its output drained: exit_code is final, on_exit was called */
    unsigned sandboxed : 1; /* --sandbox bwrap: pid is bwrap's, and the shell runs inside it (gw_spawn) */
    int exit_code;          /* the exit status, 128+N for signal N */
    pid_t pid;              /* the shell (or its bwrap): leader of its session and process group */
    gw_ring_t output;       /* stdout and stderr as they arrived; output.total is the output offset */
    h2o_socket_t *out[2];   /* the terminal's master side (or stdout), stderr (pipe mode); NULL once closed */
    h2o_socket_t *in;       /* stdin: out[0] itself for a terminal, a pipe otherwise; NULL once closed */
    char *stdin_pending, *stdin_sending;
    size_t pending_len, sending_len;
    const gw_pty_sink_t *sink;
    void *sink_data;
    int64_t exited_at_ms;
    int64_t active_at_ms; /* last output, attach or detach: the idle clock */
    h2o_linklist_t link;  /* in ptys->list, then ptys->dying */
};

/**
 * A new session (nothing runs yet). `cwd` and `command` are copied (either may be NULL). Returns 0
 * and the session in `*out`, GW_ETOOMANYPTYS (config->max_ptys alive) or GW_ESHUTTINGDOWN.
 */
int gw_pty_create(gw_ptys_t *ptys, const char *cwd, const char *command, gw_pty_t **out);

/** The session with `id`, or NULL. */
gw_pty_t *gw_pty_find(gw_ptys_t *ptys, const char *id);

/**
 * Starts the session's shell (no-op once started): `<shell> [--norc --noprofile] [-c command]` in
 * its own session, on a new pseudo-terminal of 80x24 as its controlling terminal, or with
 * stdin/stdout/stderr pipes when `pipe_mode`; it dies with kgate. Under --sandbox bwrap it runs inside
 * the server's sandbox (gw_spawn_sandbox_of), on the same terminal. Returns 0, or GW_ESPAWN with
 * the reason in `err` (the session stays unstarted).
 */
int gw_pty_start(gw_pty_t *pty, int pipe_mode, char *err, size_t err_size);

/** Makes `sink` (with `data`) the session's one client. Returns 0, or GW_EPTYBUSY when one is attached. */
int gw_pty_attach(gw_pty_t *pty, const gw_pty_sink_t *sink, void *data);
/** Detaches the client; the shell keeps running and its output goes to the ring only. */
void gw_pty_detach(gw_pty_t *pty);
/** The attached client's data, or NULL. */
void *gw_pty_client(gw_pty_t *pty);

/** True while the shell runs (started and not reaped). */
int gw_pty_is_running(const gw_pty_t *pty);

/**
 * Queues `len` bytes for the shell's stdin. Returns 0; GW_ENOTRUNNING when the shell is not running;
 * GW_ESTDINFULL when more than config->pty_stdin_bytes would wait (nothing queued).
 */
int gw_pty_write(gw_pty_t *pty, const void *bytes, size_t len);

/** Sets the terminal's size (the foreground job gets SIGWINCH). Returns 0, GW_ENOTRUNNING, GW_ENOTTY (pipe mode) or -errno. */
int gw_pty_resize(gw_pty_t *pty, unsigned cols, unsigned rows);

/**
 * Sends `sig` to the terminal's foreground process group (tcgetpgrp), or to the shell's process
 * group in pipe mode. Returns 0, GW_ENOTRUNNING or -errno.
 */
int gw_pty_signal(gw_pty_t *pty, int sig);

/**
 * Ends the session: SIGKILL to every process of the shell's session, its descriptors closed, its
 * ring freed; it is no longer found. The client, if any, is detached without being told (the
 * caller ends it). The shell is reaped by gw_ptys_tick.
 */
void gw_pty_destroy(gw_pty_t *pty);

/** Initialises an empty set. */
void gw_ptys_init(gw_ptys_t *ptys, gw_host_t *host);
/** Reaps shells, drains and finishes exited ones, deletes idle sessions (server tick). */
void gw_ptys_tick(gw_ptys_t *ptys);
/** Kills every session's processes and frees every session (server shutdown; clients detached unheard). */
void gw_ptys_kill_all(gw_ptys_t *ptys);
/** True when no session and no unreaped shell remains. */
int gw_ptys_is_empty(gw_ptys_t *ptys);

#endif
