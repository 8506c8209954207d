/* tests/fuzz/fuzz_wire_decode.c: wire_decode on any frames, unsigned and with a key (fuzz_wire.h: the input's format), and
 * wire_decode_ex with the flags kernelmgr uses (raw stream and result content, skipped content). */
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
 * The flags kernelmgr decodes iopub with (WIRE_DECODE_*): the message the plain decode gave, but with an empty content,
 * flagged, under SKIP_CONTENT, and, under RAW_STREAM or RAW_RESULT for a message of their types, its content kept as the
 * content frame's bytes, which parse (wire_msg_raw_content_parse, wire_msg_parse_raw_content) to the plain decode's.
 */
static void check_flags(const wire_frames_t *frames, const wire_msg_t *plain, int flags)
{
    wire_msg_t *msg = NULL;
    int ret = wire_decode_ex(&unsigned_signer, frames->entries, frames->size, flags, &msg);

    FUZZ_CHECK((ret == 0) == (plain != NULL), "flags %d: %d where the plain decode %s", flags, ret, plain ? "passed" : "failed");
    if (ret != 0)
        return;
    FUZZ_CHECK(fuzz_wire_same_frames(&msg->identities, plain->identities.entries, plain->identities.size) &&
                   fuzz_wire_same_frames(&msg->buffers, plain->buffers.entries, plain->buffers.size) &&
                   json_agree_identical(msg->header, plain->header) &&
                   json_agree_identical(msg->parent_header, plain->parent_header) &&
                   json_agree_identical(msg->metadata, plain->metadata),
               "flags %d: another message", flags);
    const char *type = json_string_value(json_object_get(msg->header, "msg_type"));
    int result = strcmp(type, "execute_result") == 0 || strcmp(type, "display_data") == 0;
    int raw =
        ((flags & WIRE_DECODE_RAW_STREAM) != 0 && strcmp(type, "stream") == 0) || ((flags & WIRE_DECODE_RAW_RESULT) != 0 && result);
    if (flags & WIRE_DECODE_SKIP_CONTENT) {
        FUZZ_CHECK(msg->content_skipped && !msg->content_raw && json_object_size(msg->content) == 0, "flags %d: content kept",
                   flags);
    } else if (raw) {
        size_t delim = fuzz_wire_delimiter(frames->entries, frames->size);
        const wire_frame_t *content = &frames->entries[delim + 5];
        FUZZ_CHECK(msg->content_raw && !msg->content_undecodable && json_object_size(msg->content) == 0 &&
                       msg->raw_content.len == content->len &&
                       (content->len == 0 || memcmp(msg->raw_content.base, content->base, content->len) == 0),
                   "flags %d: a %s's content not kept as its bytes", flags, type);
        json_t *parsed = wire_msg_raw_content_parse(msg);
        FUZZ_CHECK(plain->content_undecodable ? parsed == NULL : parsed != NULL && json_agree_identical(parsed, plain->content),
                   "flags %d: the raw content parses otherwise", flags);
        json_decref(parsed);
        wire_msg_parse_raw_content(msg);
        FUZZ_CHECK(!msg->content_raw && msg->raw_storage == NULL && msg->content_undecodable == plain->content_undecodable &&
                       json_agree_identical(msg->content, plain->content),
                   "flags %d: wire_msg_parse_raw_content gives another content", flags);
    } else {
        FUZZ_CHECK(!msg->content_raw && !msg->content_skipped && msg->content_undecodable == plain->content_undecodable &&
                       json_agree_identical(msg->content, plain->content),
                   "flags %d: a %s's content decoded otherwise", flags, type);
    }
    wire_msg_destroy(msg);
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
    check_flags(&frames, plain, WIRE_DECODE_RAW_STREAM | WIRE_DECODE_RAW_RESULT);
    check_flags(&frames, plain, WIRE_DECODE_RAW_STREAM);
    check_flags(&frames, plain, WIRE_DECODE_SKIP_CONTENT | WIRE_DECODE_RAW_STREAM);
    wire_msg_destroy(plain);
    wire_msg_destroy(keyed);
    wire_frames_dispose(&frames);
    return 0;
}
