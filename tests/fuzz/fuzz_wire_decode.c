/* tests/fuzz/fuzz_wire_decode.c: wire_decode on any frames, unsigned and with a key (fuzz_wire.h: the input's format). */
#include "fuzz_wire.h"
#include "wire/alloc.h"

static wire_signer_t unsigned_signer, keyed_signer;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_global_init();
    wire_signer_init(&unsigned_signer, "", 0);
    wire_signer_init(&keyed_signer, FUZZ_WIRE_KEY, strlen(FUZZ_WIRE_KEY));
    return 0;
}

/*
 * Unsigned, every frame list reaches the JSON parser; keyed, only those whose signature frame is
 * right (the jupyter_client seed) get past the HMAC, and the rest must fail with WIRE_EBADSIG
 * before any JSON is parsed. A decoded message survives an encode/decode round trip.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    wire_frames_t frames;
    wire_msg_t *plain, *keyed;

    fuzz_wire_split(data, size, &frames);
    plain = fuzz_wire_decode_checked(&unsigned_signer, NULL, &frames);
    keyed = fuzz_wire_decode_checked(&keyed_signer, &keyed_signer, &frames);
    if (plain != NULL)
        fuzz_wire_check_round_trip(&keyed_signer, plain);
    wire_msg_destroy(plain);
    wire_msg_destroy(keyed);
    wire_frames_dispose(&frames);
    return 0;
}
