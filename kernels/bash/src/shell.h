/* kernels/bash/src/shell.h: the kernel's one persistent bash process, and how code reaches it. */
#ifndef BK_SHELL_H
#define BK_SHELL_H

#include <stddef.h>
#include <sys/types.h>

/*
 * Design (why it is built this way):
 *
 * - One interactive bash (`bash --norc --noprofile --noediting -i +m`) in its own process group,
 *   fed command lines on a pipe (its stdin), with stdout and stderr on two more pipes. Interactive,
 *   because only an interactive bash treats SIGINT as "abandon the whole command line and go back
 *   to the prompt" (a non-interactive one exits, or with a trap carries on with the next command,
 *   even inside `while :; do :; done`), and because it runs PROMPT_COMMAND before each prompt.
 *
 * - Completion marker: PROMPT_COMMAND (set through the environment, then made readonly) prints
 *   "<token> <seq> <status>" to fd 3, a pipe only the kernel reads. <token> is random per bash,
 *   <seq> names the command line that just ended (each line starts with `__kgate_seq=N;`), and
 *   <status> is $?. User code runs with fd 3 closed (`3>&-`; bash restores it afterwards), and
 *   the marker never travels on stdout or stderr, so no output can be mistaken for it. Because the
 *   marker comes from the prompt, it also arrives after an interrupt (status 130) or a syntax
 *   error; a stale marker (a SIGINT racing the end of a command) carries an old <seq> and is
 *   ignored. If bash exits (`exit 3`, `set -e`), fd 3 closes and the kernel reaps it; the next
 *   command starts a fresh bash. PROMPT_COMMAND also keeps $? in __kgate_rc, and each line first
 *   runs `__kgate_status "$__kgate_rc"` (a readonly function that returns it), so that `$?` in a
 *   cell is the previous cell's status, as at a terminal.
 *
 * - Code: each cell is written to a file in the kernel's private directory (mode 0700) and run with
 *   `. FILE`, so heredocs, multi-line constructs, `return` and syntax errors behave as in a script
 *   sourced by the shell, and the command line on bash's stdin stays one short line.
 *
 * - stdin of user code: `. FILE 0<SOURCE`. Without allow_stdin SOURCE is /dev/null, so `read`
 *   fails at once. With allow_stdin it is a FIFO in the private directory that the kernel holds
 *   open read-write (so opening it never blocks and a reader never sees EOF) and writes to only
 *   when the client answers an input_request. Nothing on a pipe says "someone is reading", so the
 *   kernel looks: while such a cell runs it periodically walks bash's process tree in /proc and
 *   asks for input when a process sits in read(2) on that FIFO and no input is queued in it
 *   (bk_shell_stdin_wanted). This works for `read`, `cat`, `head -1`, python's input() alike.
 *
 * - Interrupt: SIGINT to bash's process group (without job control, foreground commands share
 *   it; background jobs ignore SIGINT, as bash sets them up). The kernel itself never gets it.
 */

/** The persistent bash and the kernel's private directory. */
typedef struct st_bk_shell_t {
    char *dir;       /* private directory (0700) for cells, the FIFO, completion output */
    char *fifo_path; /* stdin FIFO for cells run with allow_stdin */
    int fifo_fd;     /* the kernel's read-write descriptor of the FIFO */
    pid_t pid;       /* bash, also its process group id; 0 when none */
    int in_fd;       /* write end of bash's stdin (command lines); -1 when none */
    int out_fd[2];   /* read ends of bash's stdout and stderr; -1 when closed */
    int status_fd;   /* read end of bash's fd 3 (markers); -1 when closed */
    int ready;       /* bash has run the set-up line; output before that is discarded */
    unsigned long ready_seq;
    unsigned long next_seq;
    char token[17];
    char status_line[128];
    size_t status_len;
    char *pending; /* a command line submitted before bash was ready */
} bk_shell_t;

/** Creates the private directory and the FIFO. Returns 0 or -errno. Starts no bash. */
int bk_shell_init(bk_shell_t *sh);
/** Kills bash's process group (SIGHUP, then SIGKILL), reaps it and removes the directory. */
void bk_shell_dispose(bk_shell_t *sh);

/** Starts a bash if there is none. Returns 0 or -errno. */
int bk_shell_ensure(bk_shell_t *sh);

/**
 * Submits one command line (no newline in it) to bash, starting one if needed; it is written as soon
 * as bash is ready. Stores the sequence number whose marker ends it in `*seq`. Returns 0 or -errno.
 */
int bk_shell_submit(bk_shell_t *sh, const char *line, unsigned long *seq);

/** Writes `code` to the cell file and submits `. CELL 0<SOURCE 3>&-`. Returns 0 or -errno. */
int bk_shell_run_cell(bk_shell_t *sh, const char *code, size_t len, int allow_stdin, unsigned long *seq);

/** Drops a submitted line that bash has not received yet; returns 1 if there was one. */
int bk_shell_cancel_pending(bk_shell_t *sh);

/**
 * Reads what fd 3 has. Returns 1 and stores a marker's seq and status when one is complete (call
 * again: more may be buffered), 0 when nothing more is there, -EPIPE once fd 3 is closed (bash is
 * exiting). A marker for the set-up line makes bash ready and writes the pending line, if any.
 */
int bk_shell_read_marker(bk_shell_t *sh, unsigned long *seq, int *status);

/**
 * Reads what bash wrote to its stdout (0) or stderr (1) into `buf`, without waiting. Returns the number
 * of bytes, 0 when the pipe is closed (at EOF it is closed here, and its out_fd becomes -1), or -1 with
 * errno set (EAGAIN: nothing there now).
 */
ssize_t bk_shell_read_output(bk_shell_t *sh, int which, char *buf, size_t size);

/** Sends SIGINT to bash's process group, if there is a bash. */
void bk_shell_interrupt(bk_shell_t *sh);

/**
 * Reaps bash if it has exited; returns 1 and stores the wait status, else 0. The output pipes stay
 * open so that the caller can drain them, then call bk_shell_forget.
 */
int bk_shell_reap(bk_shell_t *sh, int *wstatus);
/** After bash exited: closes its pipes and hangs up on what is left of its process group. */
void bk_shell_forget(bk_shell_t *sh);

/** 1 when a process of bash's tree is blocked reading the stdin FIFO and no input is queued. */
int bk_shell_stdin_wanted(bk_shell_t *sh);
/** Queues `len` bytes of input in the FIFO (never blocks; input beyond the pipe's room is lost). */
void bk_shell_feed_stdin(bk_shell_t *sh, const char *data, size_t len);
/** Discards input a cell did not read, so that it never reaches the next cell. */
void bk_shell_drop_stdin(bk_shell_t *sh);

#endif
