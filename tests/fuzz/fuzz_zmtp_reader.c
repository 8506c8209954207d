/* tests/fuzz/fuzz_zmtp_reader.c: the ZMTP stream parser (wire/zmtp_reader.h) as a connection drives it, on any bytes in any
 * pieces: it never reads outside what it is given, never consumes more, the same bytes give the same items whole, and a
 * message passed over for its size reports the parent_header it had before the frame over the cap. */
#include "fuzz.h"
#include "wire/codec.h"
#include "wire/zmtp_reader.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* What the OVERSIZED item must report, worked out at OVER_START: the parent_header (the third frame after the first delimiter:
 * signature, header, parent_header) when it is among the whole frames and fits WIRE_ZMTP_PARENT_MAX (a copy: the frames
 * are gone at the next call). */
typedef struct st_parent_t {
    int kept;
    size_t len;
    char bytes[WIRE_ZMTP_PARENT_MAX];
} parent_t;

static void expect_parent(const wire_zmtp_item_t *it, parent_t *want)
{
    want->kept = 0;
    for (size_t i = 0; i + 3 < it->nframes; ++i) {
        const wire_frame_t *f = &it->frames[i];
        if (f->len != sizeof(WIRE_DELIMITER) - 1 || memcmp(f->base, WIRE_DELIMITER, f->len) != 0)
            continue;
        if (it->frames[i + 3].len <= WIRE_ZMTP_PARENT_MAX) {
            want->kept = 1;
            want->len = it->frames[i + 3].len;
            memcpy(want->bytes, it->frames[i + 3].base, want->len);
        }
        return;
    }
}

static uint64_t fold(uint64_t digest, const void *p, size_t len)
{
    for (size_t i = 0; i != len; ++i)
        digest = (digest ^ ((const uint8_t *)p)[i]) * 1099511628211ull;
    return digest;
}

/* Feeds `data` in pieces of `piece` bytes (0: whole) until it breaks; a digest of the items, and how many bytes they consumed. */
static uint64_t feed(const uint8_t *data, size_t size, uint64_t max_bytes, size_t piece, size_t *consumed)
{
    wire_zmtp_reader_t r;
    uint64_t digest = 1469598103934665603ull;
    size_t start = 0, end = 0;
    int broken = 0;
    parent_t *want = malloc(sizeof(*want));

    want->kept = 0;
    wire_zmtp_reader_init(&r, max_bytes, 6);
    while (end < size && !broken) {
        end = piece == 0 || end + piece > size ? size : end + piece;
        for (;;) {
            char *copy = fuzz_copy(data + start, end - start);
            wire_zmtp_item_t it;
            /* the handshake is the caller's: "ready" once 70 bytes went by, a stream-dependent point */
            wire_zmtp_reader_next(&r, (const uint8_t *)copy, end - start, start >= 70, &it);
            FUZZ_CHECK(it.consumed <= end - start, "consumed %zu of %zu", it.consumed, end - start);
            for (size_t i = 0; (it.kind == WIRE_ZMTP_MESSAGE || it.kind == WIRE_ZMTP_OVER_START) && i != it.nframes; ++i)
                FUZZ_CHECK((const char *)it.frames[i].base >= copy &&
                               (const char *)it.frames[i].base + it.frames[i].len <= copy + it.consumed,
                           "frame %zu lies outside the message", i);
            if (it.kind == WIRE_ZMTP_OVER_PIECE)
                FUZZ_CHECK(it.len != 0 && (const char *)it.body >= copy && (const char *)it.body + it.len <= copy + it.consumed,
                           "piece outside");
            if (it.kind == WIRE_ZMTP_CMD)
                FUZZ_CHECK((const char *)it.body >= copy && (const char *)it.body + it.len <= copy + it.consumed,
                           "command outside");
            if (it.kind == WIRE_ZMTP_OVER_START)
                expect_parent(&it, want);
            if (it.kind == WIRE_ZMTP_OVERSIZED) {
                FUZZ_CHECK((it.parent != NULL) == want->kept, "a parent_header %s, expected %s",
                           it.parent != NULL ? "kept" : "lost", want->kept ? "one" : "none");
                FUZZ_CHECK(it.parent == NULL || (it.parent_len == want->len && memcmp(it.parent, want->bytes, want->len) == 0),
                           "the parent_header kept is not the frame's bytes");
                FUZZ_CHECK(it.parent == NULL ||
                               (it.parent >= r.parent && it.parent_len <= sizeof(r.parent) - (size_t)(it.parent - r.parent)),
                           "the parent_header lies outside the reader");
                if (it.parent != NULL)
                    digest = fold(digest ^ it.parent_len, it.parent, it.parent_len);
            }
            /* what the caller sees: each item but NEED (how many there are depends on the pieces) and where it ends */
            if (it.kind == WIRE_ZMTP_BROKEN) /* found where the bytes were read: a message passed over reads ahead */
                digest = (digest ^ (uint64_t)it.kind) * 1099511628211ull;
            else if (it.kind != WIRE_ZMTP_NEED && it.kind != WIRE_ZMTP_OVER_PIECE) /* pieces: as many as reads */
                digest = (digest ^ (uint64_t)it.kind ^ ((uint64_t)(start + it.consumed) << 8)) * 1099511628211ull;
            free(copy);
            start += it.consumed;
            if (it.kind == WIRE_ZMTP_BROKEN)
                broken = 1;
            if (it.kind == WIRE_ZMTP_NEED || it.kind == WIRE_ZMTP_BROKEN)
                break;
        }
    }
    wire_zmtp_reader_dispose(&r);
    free(want);
    *consumed = broken ? SIZE_MAX : start;
    return digest;
}

/* The input: a byte whose low 7 bits give the pieces' size (modulo 17) and whose high bit a cap of 3000 bytes rather than 300
 * (so that a parent_header can pass WIRE_ZMTP_PARENT_MAX and still come before the cap), then the stream. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t piece = size != 0 ? (data[0] & 0x7f) % 17 : 0, whole_at, split_at;
    uint64_t max_bytes = size != 0 && (data[0] & 0x80) != 0 ? 3000 : 300;

    if (size != 0) {
        ++data;
        --size;
    }
    uint64_t whole = feed(data, size, max_bytes, 0, &whole_at), split = feed(data, size, max_bytes, piece, &split_at);
    FUZZ_CHECK(whole == split && whole_at == split_at, "in pieces of %zu: items differ or end at %zu, not %zu", piece, split_at,
               whole_at);
    return 0;
}
