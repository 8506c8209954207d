/* tests/fuzz/fuzz_wire_decode_signed.c: wire_decode of frames signed with a fixed key, so that fuzzed JSON gets past the HMAC,
 * and the streaming HMAC of over-cap messages on the same frames in pieces. */
#include <ctype.h>
#include "fuzz_wire.h"
#include "wire/alloc.h"

static wire_signer_t openssl_signer, sodium_signer;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_global_init();
    wire_signer_init_impl(&openssl_signer, WIRE_HMAC_OPENSSL, FUZZ_WIRE_KEY, strlen(FUZZ_WIRE_KEY));
    wire_signer_init_impl(&sodium_signer, WIRE_HMAC_SODIUM, FUZZ_WIRE_KEY, strlen(FUZZ_WIRE_KEY));
    return 0;
}

/* Replaces frame `i` with `len` bytes at `base`. */
static void replace_frame(wire_frames_t *frames, size_t i, const void *base, size_t len)
{
    free(frames->entries[i].base);
    frames->entries[i].base = fuzz_copy(base, len);
    frames->entries[i].len = len;
}

/*
 * The streaming HMAC of an over-cap message (kernelmgr/src/overcap.c): the four frames at `parts`, fed in pieces of
 * `piece` bytes that run across the frames' edges, verify `sig` as wire_decode does.
 */
static int stream_verify(const wire_signer_t *signer, const wire_frame_t *parts, size_t piece, const char *sig, size_t siglen)
{
    wire_signer_stream_t st;
    size_t total = 0, at = 0;
    char *all;

    for (size_t i = 0; i != 4; ++i)
        total += parts[i].len;
    all = malloc(total != 0 ? total : 1);
    for (size_t i = 0; i != 4; at += parts[i].len, ++i)
        if (parts[i].len != 0)
            memcpy(all + at, parts[i].base, parts[i].len);
    wire_signer_stream_begin(&st, signer);
    for (size_t off = 0; off < total; off += piece) {
        size_t n = total - off < piece ? total - off : piece;
        char *copy = fuzz_copy(all + off, n);
        wire_signer_stream_update(&st, copy, n);
        free(copy);
    }
    free(all);
    return wire_signer_stream_verify(&st, sig, siglen);
}

/*
 * The input is a frame list as in fuzz_wire_decode; the frame after the first delimiter is replaced
 * by the signature of the four after it (upper-case hex when the fuzzed one starts with 'U'). Both
 * HMAC implementations must then accept it and decode the same message; a signature with one
 * digit changed, or one character short, must fail with WIRE_EBADSIG.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wire_frames_t frames;
    wire_msg_t *a, *b;
    size_t delim;

    fuzz_wire_split(data, size, &frames);
    delim = fuzz_wire_delimiter(frames.entries, frames.size);
    if (frames.size - delim >= 6) {
        wire_frame_t *sig = &frames.entries[delim + 1];
        char hex[WIRE_SIG_HEX_LEN + 1], wrong[WIRE_SIG_HEX_LEN];
        int upper = sig->len != 0 && ((char *)sig->base)[0] == 'U';
        size_t flip = sig->len % WIRE_SIG_HEX_LEN;
        wire_msg_t *msg = NULL;

        wire_signer_sign(&openssl_signer, &frames.entries[delim + 2], hex);
        for (size_t i = 0; upper && i != WIRE_SIG_HEX_LEN; ++i)
            hex[i] = (char)toupper((unsigned char)hex[i]);
        memcpy(wrong, hex, WIRE_SIG_HEX_LEN);
        wrong[flip] = wrong[flip] == '0' ? '1' : '0';
        for (size_t k = 0; k != 2; ++k) {
            const wire_signer_t *signer = k == 0 ? &openssl_signer : &sodium_signer;
            const wire_frame_t *parts = &frames.entries[delim + 2];
            size_t piece = 1 + sig->len % 61;
            FUZZ_CHECK(stream_verify(signer, parts, piece, hex, WIRE_SIG_HEX_LEN) == 0, "the stream does not verify (pieces %zu)",
                       piece);
            FUZZ_CHECK(stream_verify(signer, parts, piece, wrong, WIRE_SIG_HEX_LEN) == WIRE_EBADSIG, "a wrong digit verified");
            FUZZ_CHECK(stream_verify(signer, parts, piece, hex, WIRE_SIG_HEX_LEN - 1) == WIRE_EBADSIG,
                       "a short signature verified");
        }
        replace_frame(&frames, delim + 1, wrong, WIRE_SIG_HEX_LEN);
        FUZZ_CHECK(wire_decode(&openssl_signer, frames.entries, frames.size, &msg) == WIRE_EBADSIG, "a wrong digit verified");
        FUZZ_CHECK(wire_decode(&sodium_signer, frames.entries, frames.size, &msg) == WIRE_EBADSIG, "a wrong digit verified");
        replace_frame(&frames, delim + 1, hex, WIRE_SIG_HEX_LEN - 1);
        FUZZ_CHECK(wire_decode(&openssl_signer, frames.entries, frames.size, &msg) == WIRE_EBADSIG, "a short signature verified");
        replace_frame(&frames, delim + 1, hex, WIRE_SIG_HEX_LEN);
    }
    a = fuzz_wire_decode_checked(&openssl_signer, &openssl_signer, &frames);
    b = fuzz_wire_decode_checked(&sodium_signer, &openssl_signer, &frames);
    FUZZ_CHECK((a == NULL) == (b == NULL), "the HMAC implementations disagree");
    if (a != NULL) {
        FUZZ_CHECK(json_agree_identical(a->header, b->header) && json_agree_identical(a->content, b->content),
                   "decoded differently");
        fuzz_wire_check_round_trip(&sodium_signer, a);
    }
    wire_msg_destroy(a);
    wire_msg_destroy(b);
    wire_frames_dispose(&frames);
    return 0;
}
