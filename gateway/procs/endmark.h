/* procs/endmark.h: the end-of-run marker in an isolated session's output (pure: bytes in, output and the marker out).
 *
 * An isolated session's bash runs each run as `. run.sh; printf '\036KGATE:<nonce>:%d\036' "$?"` on stdout and
 * `printf '\036KGATE:<nonce>\036'` on stderr (procs/isolated.c): the run's output on a pipe ends where its marker
 * begins. The nonce is the session's secret, so that a program cannot end a run by printing a marker. A pipe delivers
 * the marker in pieces when it likes (a read may stop inside it), so the scan keeps back a tail that may be a marker's
 * start; text that begins like a marker but is not one (another nonce, no or too many digits, a wrong last byte) is
 * output like any other. */
#ifndef GW_PROCS_ENDMARK_H
#define GW_PROCS_ENDMARK_H

#include <stddef.h>

/* The nonce's length at most (the session's is 32 hex digits). */
#define GW_ENDMARK_NONCE_MAX 32
/* The exit status's digits at most: bash's $? is 0..255. */
#define GW_ENDMARK_STATUS_DIGITS 3
/* The longest marker, "\036KGATE:" nonce ":" status "\036": the scan never keeps back this many bytes. */
#define GW_ENDMARK_MAX_LEN (7 + GW_ENDMARK_NONCE_MAX + 1 + GW_ENDMARK_STATUS_DIGITS + 1)

/** One pipe's marker: stdout's carries the run's exit status, stderr's does not. */
typedef struct st_gw_endmark_t {
    char prefix[7 + GW_ENDMARK_NONCE_MAX + 1]; /* "\036KGATE:" nonce, NUL-terminated */
    size_t plen;
    int with_status;
} gw_endmark_t;

/** What gw_endmark_scan found. */
typedef struct st_gw_endmark_hit_t {
    size_t data_len;   /* the bytes at the front that are the run's output for certain */
    int found;         /* a whole marker follows them */
    size_t marker_len; /* found: its length (the bytes after it are no longer this run's) */
    int status;        /* found with_status: the exit status it carries */
} gw_endmark_hit_t;

/** Prepares the marker of `nonce` (at most GW_ENDMARK_NONCE_MAX bytes, longer ones are cut). */
void gw_endmark_init(gw_endmark_t *m, const char *nonce, int with_status);

/**
 * Looks for the first marker in buf[0, len): the bytes of a pipe not consumed yet, which the caller keeps between reads.
 * Sets hit->data_len to the output before the marker (found), or before a tail that may begin one (not found; the tail,
 * len - data_len < GW_ENDMARK_MAX_LEN bytes, is to be scanned again with what follows). With `final` (nothing follows:
 * end of file) no tail is kept: a partial marker is output. Reads nothing outside buf[0, len).
 */
void gw_endmark_scan(const gw_endmark_t *m, const char *buf, size_t len, int final, gw_endmark_hit_t *hit);

#endif
