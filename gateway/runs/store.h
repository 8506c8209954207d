/* runs/store.h: one unlinked file under the runtime dir holding every run's log, in blocks (private to runs/). */
#ifndef GW_RUNS_STORE_H
#define GW_RUNS_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <h2o/memory.h>

/* A run's log occupies whole blocks of the store; a run's first block is allocated on its first write. */
#define GW_RUNSTORE_BLOCK ((size_t)64 << 10)

/**
 * The store: one file for all runs, so that a thousand retained runs cost one descriptor. The file
 * is unlinked as soon as it is created (nothing is left behind however kgate ends). Freed blocks
 * are reused (the most recently freed first); the file spans at most as many blocks as the runs
 * held at once, and is emptied whenever no run holds any. Single-threaded, like the loop.
 */
typedef struct st_gw_runstore_t {
    char *dir; /* NULL: $TMPDIR, else /tmp */
    int fd;    /* -1 until the first write */
    uint32_t num_blocks;
    H2O_VECTOR(uint32_t) free_blocks;
    H2O_VECTOR(uint32_t) refs; /* per block: the runs holding it (several for a packed block) */
    uint32_t pack_block;       /* the block small finished runs are packed into, while has_pack */
    size_t pack_fill;
    int has_pack;
    char *stage; /* GW_RUNSTORE_BLOCK bytes: small writes gathered into one pwrite */
} gw_runstore_t;

/* A finished run whose records fit in this many bytes shares a block with others (gw_runstore_write_packed). */
#define GW_RUNSTORE_PACK_MAX ((size_t)16 << 10)

/** One run's bytes in the store: a logical byte range [base, ...) in blocks, the oldest first. */
typedef struct st_gw_runstore_file_t {
    H2O_VECTOR(uint32_t) blocks; /* blocks.entries[i] holds [base + i * BLOCK, base + (i + 1) * BLOCK) */
    uint64_t base;               /* a multiple of GW_RUNSTORE_BLOCK, unless packed */
    size_t packed_len;           /* packed: [base, base + packed_len) is at file offset pack_at, in blocks.entries[0] */
    uint64_t pack_at;
} gw_runstore_file_t;

void gw_runstore_init(gw_runstore_t *store);
/** Sets the directory the file is created in (copied; NULL: $TMPDIR or /tmp). Before the first write only. */
void gw_runstore_set_dir(gw_runstore_t *store, const char *dir);
/** Closes the file (every run's file must have been released). */
void gw_runstore_dispose(gw_runstore_t *store);

/**
 * Writes the `iovcnt` buffers at logical offset `off` of `file`, allocating its blocks as needed
 * (`off` may skip bytes never written, which then read as zeros). Returns 0, or -errno (ENOSPC,
 * EIO, EFBIG, or why the file could not be created): the bytes may then be partly written.
 */
int gw_runstore_write(gw_runstore_t *store, gw_runstore_file_t *file, uint64_t off, const struct iovec *iov, size_t iovcnt);

/**
 * Writes the whole log of a finished run that never needed a block of its own (`file` has none;
 * `len` <= GW_RUNSTORE_PACK_MAX) into a block shared with other such runs, at logical offset
 * `off`: a thousand small runs take a few blocks, not a thousand. The file is read-only
 * afterwards. Returns 0, or -errno (then `file` is left empty).
 */
int gw_runstore_write_packed(gw_runstore_t *store, gw_runstore_file_t *file, uint64_t off, const void *bytes, size_t len);

/** Reads `len` bytes at logical offset `off` of `file` (written before). Returns 0, or -errno (-EIO for a short read). */
int gw_runstore_read(gw_runstore_t *store, const gw_runstore_file_t *file, uint64_t off, void *buf, size_t len);

/** Releases the blocks that lie wholly before logical offset `off`. */
void gw_runstore_release_before(gw_runstore_t *store, gw_runstore_file_t *file, uint64_t off);

/** Releases every block of `file` (and its block list). */
void gw_runstore_release(gw_runstore_t *store, gw_runstore_file_t *file);

#endif
