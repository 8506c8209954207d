/* files/upload.h: keeping large buffered request bodies out of resident memory (their multipart parsing: files/multipart.h). */
#ifndef GW_UPLOAD_H
#define GW_UPLOAD_H

#include <stddef.h>

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
