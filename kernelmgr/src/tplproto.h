/* kernelmgr/src/tplproto.h: the frames kgate and a kernel template (kernels/python-template) exchange; pure. */
#ifndef KMGR_TPLPROTO_H
#define KMGR_TPLPROTO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * A frame: a 4-byte big-endian length, then that many bytes of fields, each a 4-byte big-endian length and its bytes.
 * kgate -> template: ["fork", id, tagged fields...] (a tag byte, then the value: c cwd, l log path, a kernel argument in
 * order, e "KEY=VALUE" of the whole environment, r "RESOURCE=VALUE"). template -> kgate: ["ready", pid],
 * ["forked", id, pid], ["failed", id, message], ["exited", pid, wait status]. Numbers are decimal text.
 */

/** The largest frame either side sends or accepts (the template's MAX_FRAME): a bigger request is not sent. */
#define KMGR_TPL_MAX_FRAME ((size_t)1 << 20)
/** The longest failure message kept from a "failed" frame. */
#define KMGR_TPL_MAX_TEXT 512

typedef enum { KMGR_TPL_READY, KMGR_TPL_FORKED, KMGR_TPL_FAILED, KMGR_TPL_EXITED } kmgr_tpl_kind_t;

/** One frame from a template. */
typedef struct st_kmgr_tpl_reply_t {
    kmgr_tpl_kind_t kind;
    uint64_t id;                  /* forked, failed: the request's id */
    pid_t pid;                    /* ready (the template's), forked (the kernel's), exited */
    int wstatus;                  /* exited: as waitpid reports it */
    char text[KMGR_TPL_MAX_TEXT]; /* failed: why, NUL-terminated, cut to fit */
} kmgr_tpl_reply_t;

/**
 * Parses the frame at the head of `buf[0, len)`. Returns the bytes it took (> 0) with `*out` filled, 0 when the frame is not
 * complete yet, or -1 when the bytes are no valid reply (an unknown kind, a missing or bad number, a frame over
 * KMGR_TPL_MAX_FRAME, fields past the frame's end): the template is broken and is stopped.
 */
ssize_t kmgr_tpl_parse_reply(const uint8_t *buf, size_t len, kmgr_tpl_reply_t *out);

/** A request under construction. Zero-filled is empty; kmgr_tpl_request_free releases it. */
typedef struct st_kmgr_tpl_request_t {
    uint8_t *data;
    size_t len, cap;
} kmgr_tpl_request_t;

/** Starts a fork request with id `id` (what the "forked" or "failed" answer names). */
void kmgr_tpl_request_fork(kmgr_tpl_request_t *r, uint64_t id);
/** Adds a tagged field: `tag` ('c', 'l', 'a', 'e', 'r') and `value`. */
void kmgr_tpl_request_add(kmgr_tpl_request_t *r, char tag, const char *value);
/** Adds an rlimit field for `resource` (RLIMIT_AS, ...). Returns 0, or -1 for a resource the template does not know. */
int kmgr_tpl_request_rlimit(kmgr_tpl_request_t *r, int resource, unsigned long long value);
/** Writes the frame's length. Returns 0, or -1 when the frame is over KMGR_TPL_MAX_FRAME (it must not be sent). */
int kmgr_tpl_request_end(kmgr_tpl_request_t *r);
void kmgr_tpl_request_free(kmgr_tpl_request_t *r);

#endif
