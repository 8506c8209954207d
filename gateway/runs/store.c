/* The run-log store: one unlinked file of blocks, allocated to runs and reused, written and read with pwrite/pread. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "wire/alloc.h"
#include "wire/fdio.h"
#include "runs/store.h"

void gw_runstore_init(gw_runstore_t *store)
{
    memset(store, 0, sizeof(*store));
    store->fd = -1;
}

void gw_runstore_set_dir(gw_runstore_t *store, const char *dir)
{
    free(store->dir);
    store->dir = dir != NULL ? wire_strdup(dir) : NULL;
}

void gw_runstore_dispose(gw_runstore_t *store)
{
    if (store->fd != -1)
        close(store->fd);
    free(store->dir);
    free(store->free_blocks.entries);
    free(store->refs.entries);
    free(store->stage);
    gw_runstore_init(store);
}

static int open_file(gw_runstore_t *store)
{
    const char *dir = store->dir;
    char path[4096];
    int fd;

    if (dir == NULL && (dir = getenv("TMPDIR")) == NULL)
        dir = "/tmp";
    /* O_TMPFILE: never has a name; else a name that lives for the two calls below */
    if ((fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600)) == -1) {
        if (snprintf(path, sizeof(path), "%s/kgate-runlog-XXXXXX", dir) >= (int)sizeof(path))
            return -ENAMETOOLONG;
        if ((fd = mkostemp(path, O_CLOEXEC)) == -1)
            return -errno;
        unlink(path);
    }
    store->fd = fd;
    if (store->stage == NULL)
        store->stage = wire_malloc(GW_RUNSTORE_BLOCK);
    return 0;
}

/* A block with one reference. */
static uint32_t alloc_block(gw_runstore_t *store)
{
    uint32_t block = store->free_blocks.size != 0 ? store->free_blocks.entries[--store->free_blocks.size] : store->num_blocks++;

    if (store->refs.size < store->num_blocks) {
        h2o_vector_reserve(NULL, &store->refs, store->num_blocks);
        store->refs.size = store->num_blocks;
    }
    store->refs.entries[block] = 1;
    return block;
}

/*
 * A freed block keeps its disk and its pages in the page cache until it is reused: overwriting
 * cached pages costs a tenth of what writing fresh ones does (measured: 8 against 70-160 ms of
 * CPU per 50 MB on ext4, where fresh pages also wait for writeback), and the file never spans
 * more blocks than the runs held at once, which the bounds limit. Once no run holds a block the
 * file is emptied.
 */
static void free_block(gw_runstore_t *store, uint32_t block)
{
    if (--store->refs.entries[block] != 0)
        return;
    if (store->has_pack && block == store->pack_block)
        store->has_pack = 0;
    h2o_vector_reserve(NULL, &store->free_blocks, store->free_blocks.size + 1);
    store->free_blocks.entries[store->free_blocks.size++] = block;
    if (store->free_blocks.size == store->num_blocks) {
        if (store->fd != -1 && ftruncate(store->fd, 0) != 0) {
            /* the file keeps its size: the blocks are reused all the same */
        }
        store->free_blocks.size = 0;
        store->num_blocks = 0;
    }
}

/* The file offset of logical offset `off` of `file` (its block allocated here when `alloc`), or -1. */
static off_t file_offset(gw_runstore_t *store, gw_runstore_file_t *file, uint64_t off, int alloc)
{
    size_t i = (size_t)((off - file->base) / GW_RUNSTORE_BLOCK);

    if (file->packed_len != 0)
        return off >= file->base && off - file->base < file->packed_len ? (off_t)(file->pack_at + (off - file->base)) : -1;
    while (alloc && file->blocks.size <= i) {
        h2o_vector_reserve(NULL, &file->blocks, file->blocks.size + 1);
        file->blocks.entries[file->blocks.size++] = alloc_block(store);
    }
    if (off < file->base || i >= file->blocks.size)
        return -1;
    return (off_t)file->blocks.entries[i] * GW_RUNSTORE_BLOCK + (off_t)(off % GW_RUNSTORE_BLOCK);
}

/* Writes `len` bytes that lie within one block. */
static int write_piece(gw_runstore_t *store, gw_runstore_file_t *file, uint64_t off, const char *p, size_t len)
{
    return wire_pwrite_all(store->fd, p, len, file_offset(store, file, off, 1));
}

int gw_runstore_write_packed(gw_runstore_t *store, gw_runstore_file_t *file, uint64_t off, const void *bytes, size_t len)
{
    off_t at;
    int ret;

    if (store->fd == -1 && (ret = open_file(store)) != 0)
        return ret;
    if (!store->has_pack || store->pack_fill + len > GW_RUNSTORE_BLOCK) {
        /* the block being filled is left to the runs in it; the first run in a new one takes its reference */
        store->pack_block = alloc_block(store);
        store->refs.entries[store->pack_block] = 0;
        store->pack_fill = 0;
        store->has_pack = 1;
    }
    at = (off_t)store->pack_block * GW_RUNSTORE_BLOCK + (off_t)store->pack_fill;
    if ((ret = wire_pwrite_all(store->fd, bytes, len, at)) != 0) {
        if (store->refs.entries[store->pack_block] == 0) {
            ++store->refs.entries[store->pack_block];
            free_block(store, store->pack_block);
        }
        return ret;
    }
    ++store->refs.entries[store->pack_block];
    h2o_vector_reserve(NULL, &file->blocks, 1);
    file->blocks.entries[0] = store->pack_block;
    file->blocks.size = 1;
    file->base = off;
    file->pack_at = (uint64_t)at;
    file->packed_len = len;
    store->pack_fill += len;
    return 0;
}

int gw_runstore_write(gw_runstore_t *store, gw_runstore_file_t *file, uint64_t off, const struct iovec *iov, size_t iovcnt)
{
    size_t staged = 0, i, done;
    uint64_t stage_off = off; /* where the staged bytes go */
    int ret;

    if (store->fd == -1 && (ret = open_file(store)) != 0)
        return ret;
    if (file->blocks.size == 0)
        file->base = off - off % GW_RUNSTORE_BLOCK;
    for (i = 0; i != iovcnt; ++i) {
        const char *p = iov[i].iov_base;
        for (done = 0; done != iov[i].iov_len;) {
            uint64_t pos = stage_off + staged;
            size_t room = GW_RUNSTORE_BLOCK - (size_t)(pos % GW_RUNSTORE_BLOCK), len = iov[i].iov_len - done;
            if (staged == 0 && len >= room) {
                /* a whole rest-of-block in one buffer: written from where it is */
                if ((ret = write_piece(store, file, pos, p + done, room)) != 0)
                    return ret;
                done += room;
                stage_off = pos + room;
                continue;
            }
            if (len > room)
                len = room;
            memcpy(store->stage + staged, p + done, len);
            staged += len;
            done += len;
            if (len == room) {
                if ((ret = write_piece(store, file, stage_off, store->stage, staged)) != 0)
                    return ret;
                stage_off += staged;
                staged = 0;
            }
        }
    }
    return staged != 0 ? write_piece(store, file, stage_off, store->stage, staged) : 0;
}

int gw_runstore_read(gw_runstore_t *store, const gw_runstore_file_t *file, uint64_t off, void *buf, size_t len)
{
    char *p = buf;

    while (len != 0) {
        size_t piece = GW_RUNSTORE_BLOCK - (size_t)(off % GW_RUNSTORE_BLOCK);
        off_t at = file_offset(store, (gw_runstore_file_t *)file, off, 0);
        ssize_t n;
        if (at < 0 || store->fd == -1)
            return -EIO;
        if (piece > len)
            piece = len;
        if ((n = pread(store->fd, p, piece, at)) < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            return -EIO;
        p += n, off += (uint64_t)n, len -= (size_t)n;
    }
    return 0;
}

void gw_runstore_release_before(gw_runstore_t *store, gw_runstore_file_t *file, uint64_t off)
{
    size_t n = 0;

    if (file->packed_len != 0)
        return; /* a finished run's: never trimmed */
    while (n < file->blocks.size && file->base + (n + 1) * GW_RUNSTORE_BLOCK <= off)
        free_block(store, file->blocks.entries[n++]);
    if (n != 0) {
        memmove(file->blocks.entries, file->blocks.entries + n, (file->blocks.size - n) * sizeof(file->blocks.entries[0]));
        file->blocks.size -= n;
        file->base += n * GW_RUNSTORE_BLOCK;
    }
    /* a log trimmed before it was ever written has no block to stand for the bytes it skipped */
    if (file->blocks.size == 0 && off - off % GW_RUNSTORE_BLOCK > file->base)
        file->base = off - off % GW_RUNSTORE_BLOCK;
}

void gw_runstore_release(gw_runstore_t *store, gw_runstore_file_t *file)
{
    for (size_t i = 0; i != file->blocks.size; ++i)
        free_block(store, file->blocks.entries[i]);
    free(file->blocks.entries);
    memset(file, 0, sizeof(*file));
}
