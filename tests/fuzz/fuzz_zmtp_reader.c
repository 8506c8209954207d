/* tests/fuzz/fuzz_zmtp_reader.c: the ZMTP stream parser (wire/zmtp_reader.h) as a connection drives it, on any bytes in any
 * pieces: it never reads outside what it is given, never consumes more, and the same bytes give the same items whole. */
#include "fuzz.h"
#include "wire/zmtp_reader.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* Feeds `data` in pieces of `piece` bytes (0: whole) until it breaks; a digest of the items, and how many bytes they consumed. */
static uint64_t feed(const uint8_t *data, size_t size, size_t piece, size_t *consumed)
{
    wire_zmtp_reader_t r;
    uint64_t digest = 1469598103934665603ull;
    size_t start = 0, end = 0;
    int broken = 0;

    wire_zmtp_reader_init(&r, 300, 6);
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
    *consumed = broken ? SIZE_MAX : start;
    return digest;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t piece = size != 0 ? data[0] % 17 : 0, whole_at, split_at;

    if (size != 0) {
        ++data;
        --size;
    }
    uint64_t whole = feed(data, size, 0, &whole_at), split = feed(data, size, piece, &split_at);
    FUZZ_CHECK(whole == split && whole_at == split_at, "in pieces of %zu: items differ or end at %zu, not %zu", piece, split_at,
               whole_at);
    return 0;
}
