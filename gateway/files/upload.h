/* gateway/upload.h: multipart/form-data parsing (pure) and keeping large buffered request bodies out of resident memory. */
#ifndef GW_UPLOAD_H
#define GW_UPLOAD_H

#include "core/errors.h"

#include <stddef.h>

#define GW_MULTIPART_BOUNDARY_MAX 70 /* RFC 2046 */
#define GW_MULTIPART_HEADERS_MAX 8192

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

/*
 * Large request bodies. h2o 2.2.5 buffers a whole request body before the handler runs; above a
 * threshold its buffers live in an unlinked temporary file mapped MAP_SHARED
 * (h2o_socket_buffer_mmap_settings). The pages of such a mapping still count as resident once
 * touched. Because the mapping is a shared file mapping, madvise(MADV_DONTNEED) drops them from the
 * process without losing data (the page cache holds it and writes it back), which is what keeps a
 * 1 GiB upload's resident memory small.
 */

/**
 * Points h2o's body buffers at unlinked files in a private directory (created under `tmpdir`) for
 * every body larger than `threshold` bytes. 0, or -errno. Process-wide (h2o's settings are).
 */
int gw_body_buffers_init(const char *tmpdir, size_t threshold);
/** Removes the private directory. */
void gw_body_buffers_dispose(void);

/**
 * Releases the resident pages of every body buffer being received. Cheap when idle (one stat of
 * the private directory); call it often from a timer. Returns 1 while some body buffer exists (call
 * again soon: every few ms), 0 when none does.
 */
int gw_body_buffers_trim(void);

/** The file-backed mapping holding a received body, if it is one of ours. */
typedef struct st_gw_body_pages_t {
    char *map_start, *map_end; /* NULL when the body is in ordinary memory: then nothing is released */
    int fd;                    /* our own reference to the body file, or -1 (see gw_body_pages_dispose) */
    unsigned file_dev_major, file_dev_minor;
    unsigned long file_ino;
} gw_body_pages_t;

/** Finds whether [base, base + len) lies in one of our body-buffer mappings, and takes a reference to its file. */
void gw_body_pages_init(gw_body_pages_t *pages, const char *base, size_t len);

/**
 * Ends the use of the body. Its file's last close (freeing a big unlinked file's page cache and blocks: ~200 ms per GiB
 * measured here) is kept out of the loop: the reference taken at init outlives h2o's unmapping of the buffer, and
 * gw_body_buffers_trim then closes it in a detached thread. Accepts a body in ordinary memory (nothing to do).
 */
void gw_body_pages_dispose(gw_body_pages_t *pages);

/**
 * Maps the pages of [from, to) back in one call (MADV_POPULATE_READ) before a write() copies them
 * to a file. Released pages are not mapped, and write()'s copy from an unmapped source comes up
 * short: ext4 then zeroes the rest of the destination folio and retries after faulting the
 * source in, page by page, which doubles the copy's CPU. Best effort; nothing outside the mapping.
 */
void gw_body_pages_populate(const gw_body_pages_t *pages, const char *from, const char *to);

/** Drops the resident pages wholly inside [from, to) when they belong to the mapping. */
void gw_body_pages_release(const gw_body_pages_t *pages, const char *from, const char *to);

#endif
