/* files/multipart.h: multipart/form-data (RFC 7578) split into its parts: pure, no I/O.
 *
 * The body is received whole before the handler runs (h2o 2.2.5 buffers it, in a file-backed mapping when large:
 * files/upload.h), so the parser works on one buffer and reports each part as offsets into it: a file's bytes are
 * never copied. What arrives in pieces is the parser's own reading: it searches in windows (`window` bytes) and in
 * steps (a budget per call), and any windows and any steps give the result of one parse in one go
 * (tests/gateway/test_multipart.c checks every window size; tests/fuzz/fuzz_multipart.c, windows of a few bytes).
 *
 * Bounds and errors: a boundary of 1..GW_MULTIPART_BOUNDARY_MAX bytes (else GW_EMULTIPART_NOBOUNDARY), a part's headers
 * within GW_MULTIPART_HEADERS_MAX bytes, at most `max_parts` parts (GW_EMULTIPART_TOOMANYPARTS), and a body that
 * ends before its close delimiter, or whose delimiter is followed by anything but CRLF or "--", is
 * GW_EMULTIPART_MALFORMED. The parser reads nothing outside the body and allocates nothing.
 */
#ifndef GW_FILES_MULTIPART_H
#define GW_FILES_MULTIPART_H

#include <stddef.h>
#include "core/errors.h"

#define GW_MULTIPART_BOUNDARY_MAX 70  /* RFC 2046 */
#define GW_MULTIPART_HEADERS_MAX 8192 /* one part's header block, its blank line included */
/* Bytes searched between two progress reports (and so at most resident at once while parsing a file-backed body). */
#define GW_MULTIPART_SEARCH_WINDOW ((size_t)8 << 20)

/** One part: its form field name and file name (copied, NUL-terminated, truncated to their arrays) and where its data lies. */
typedef struct st_gw_multipart_part_t {
    char name[64];
    char filename[256];
    int has_filename;
    size_t data_off, data_len; /* within the body */
} gw_multipart_part_t;

/**
 * Extracts the boundary parameter of a `multipart/form-data` Content-Type (quoted or not) into
 * `out` (GW_MULTIPART_BOUNDARY_MAX + 1 bytes). 0 or GW_EMULTIPART_NOBOUNDARY.
 */
int gw_multipart_boundary(const char *content_type, size_t len, char *out);

/**
 * Called as parsing moves forward: every byte of the body before `upto` has been read for the last
 * time by the parser (the caller may release those pages).
 */
typedef void (*gw_multipart_progress_cb)(void *ctx, size_t upto);

/**
 * Splits `body` into its parts (at most `max_parts`, else GW_EMULTIPART_TOOMANYPARTS). Searches
 * in windows and reports progress after each, so a body of any size is read once, front to back.
 * A preamble before the first delimiter and an epilogue after the last are ignored; part headers
 * are bounded by GW_MULTIPART_HEADERS_MAX. Returns 0 with *num_parts set, or GW_EMULTIPART_*.
 */
int gw_multipart_parse(const char *body, size_t len, const char *boundary, gw_multipart_part_t *parts, size_t max_parts,
                       size_t *num_parts, gw_multipart_progress_cb progress, void *ctx);

/** Where a gw_multipart_parser_t stands. */
typedef enum {
    GW_MULTIPART_FIRST_DELIMITER, /* looking for the first delimiter (after a preamble) */
    GW_MULTIPART_AT_DELIMITER,    /* just after a delimiter: a part's headers, or the close */
    GW_MULTIPART_IN_DATA,         /* looking for the delimiter that ends the last part's data */
    GW_MULTIPART_DONE,
} gw_multipart_state_t;

/**
 * gw_multipart_parse in steps, for a caller that must not hold its thread for the whole body (a
 * 1 GiB upload parsed in one go holds the event loop for hundreds of milliseconds). Every member is
 * the parser's; `num_parts` is read when a step returns 0.
 */
typedef struct st_gw_multipart_parser_t {
    const char *body;
    size_t len;
    char delim[GW_MULTIPART_BOUNDARY_MAX + 5]; /* "\r\n--" boundary */
    size_t dlen;
    gw_multipart_part_t *parts;
    size_t max_parts, num_parts;
    gw_multipart_progress_cb progress;
    void *ctx;
    gw_multipart_state_t state;
    size_t window;      /* bytes searched per progress report: GW_MULTIPART_SEARCH_WINDOW (a test may set a smaller one) */
    size_t pos;         /* just after the last delimiter found */
    size_t search_from; /* where the delimiter search goes on */
} gw_multipart_parser_t;

/** Prepares `p` for `body` (borrowed, like `parts`, until the last step). 0 or GW_EMULTIPART_NOBOUNDARY. */
int gw_multipart_parser_init(gw_multipart_parser_t *p, const char *body, size_t len, const char *boundary,
                             gw_multipart_part_t *parts, size_t max_parts, gw_multipart_progress_cb progress, void *ctx);
/**
 * Parses on, searching about `budget` bytes at most (whole windows; SIZE_MAX: to the end). Returns
 * 1 when there is more to do, 0 when the body is parsed (p->num_parts parts), or GW_EMULTIPART_*.
 * Any sequence of budgets gives gw_multipart_parse's result.
 */
int gw_multipart_parser_step(gw_multipart_parser_t *p, size_t budget);

#endif
