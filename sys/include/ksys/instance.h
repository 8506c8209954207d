/* ksys/instance.h: this kgate's mark on its descendants, its record in the runtime dir, and the sweep of what a dead one
 * left. */
#ifndef KSYS_INSTANCE_H
#define KSYS_INSTANCE_H

#include <stddef.h>
#include <sys/types.h>

/* The environment variable every child gets: "KGATE_INSTANCE=<token>". Descendants inherit it, so that
 * it proves descent even for processes that left their process group and session (a double fork). */
#define KSYS_INSTANCE_VAR "KGATE_INSTANCE"
#define KSYS_INSTANCE_TOKEN_LEN 32

typedef struct st_ksys_instance_t {
    char token[KSYS_INSTANCE_TOKEN_LEN + 1]; /* random, hex */
    char env[sizeof(KSYS_INSTANCE_VAR "=") + KSYS_INSTANCE_TOKEN_LEN];
    char *record_path; /* <runtime_dir>/kgate-<token>.instance, NULL when none was written */
    size_t swept;      /* leftover processes of dead instances killed by ksys_instance_init */
    pid_t watchdog;    /* the watchdog process (a child), 0 when none runs */
    int watchdog_fd;   /* the write end of its pipe, -1 when none */
} ksys_instance_t;

/* The watchdog's name (/proc/<pid>/comm). */
#define KSYS_WATCHDOG_NAME "kgate-watchdog"

/**
 * Picks a token, kills what dead kgates recorded in `runtime_dir` left running (only if the directory
 * is ours: owned by this user, writable by nobody else), removes their records and, when no live
 * kgate shares the directory, their stale kernel directories and logs; then writes this kgate's
 * record (pid, start time, boot id, pid namespace, token); last, starts the watchdog: a child of its
 * own (a fork, no exec, in a session of its own, no parent-death signal, deaf to every signal but
 * SIGKILL and SIGSTOP) that holds the read end of a pipe whose write end only this process holds.
 * When that pipe reaches end-of-file, this process has died however it died: the watchdog kills
 * every process carrying the mark (as ksys_instance_dispose does), removes the cgroups of kgates now
 * gone (ksys_cgroups_sweep) and exits. Fork it before any
 * thread exists. Returns 0, or KSYS_EIO when the record cannot be written or the watchdog started
 * (nothing is left behind then).
 */
int ksys_instance_init(ksys_instance_t *inst, const char *runtime_dir);

/** Kills every live process that carries this instance's token (SIGKILL), stops and reaps the watchdog, then removes the record. */
void ksys_instance_dispose(ksys_instance_t *inst);

/**
 * A process named so that a reused pid is never taken for it: its pid, its start time (clock ticks
 * since boot, /proc/<pid>/stat field 22) and the pid namespace these mean something in (the inode of
 * /proc/self/ns/pid of whoever wrote them down). What a record, and a kgate's cgroup name, hold.
 */
typedef struct st_ksys_process_id_t {
    int pid;
    unsigned long long starttime;
    unsigned long long pid_ns;
} ksys_process_id_t;

/** This process's identity in `*id`: 0, or KSYS_EIO when /proc cannot tell. */
int ksys_process_id_self(ksys_process_id_t *id);

/**
 * 1 when the process `id` names has provably gone: in this pid namespace, its pid holds no process,
 * a zombie, or one that started at another time (the pid was reused). 0 when it lives or nobody can
 * tell (another pid namespace, /proc unreadable).
 */
int ksys_process_id_gone(const ksys_process_id_t *id);

#endif
