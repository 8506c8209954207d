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
    char *stage; /* GW_RUNSTORE_BLOCK bytes: small writes gathered into one pwrite */
} gw_runstore_t;

/** One run's bytes in the store: a logical byte range [base, ...) in blocks, the oldest first. */
typedef struct st_gw_runstore_file_t {
    H2O_VECTOR(uint32_t) blocks; /* blocks.entries[i] holds [base + i * BLOCK, base + (i + 1) * BLOCK) */
    uint64_t base;               /* a multiple of GW_RUNSTORE_BLOCK */
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

/** Reads `len` bytes at logical offset `off` of `file` (written before). Returns 0, or -errno (-EIO for a short read). */
int gw_runstore_read(gw_runstore_t *store, const gw_runstore_file_t *file, uint64_t off, void *buf, size_t len);

/** Releases the blocks that lie wholly before logical offset `off`. */
void gw_runstore_release_before(gw_runstore_t *store, gw_runstore_file_t *file, uint64_t off);

/** Releases every block of `file` (and its block list). */
void gw_runstore_release(gw_runstore_t *store, gw_runstore_file_t *file);

#endif
