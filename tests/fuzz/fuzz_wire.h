/* tests/fuzz/fuzz_wire.h: frames from fuzzer bytes, and what the two wire_decode targets check of the result. */
#ifndef KGATE_TESTS_FUZZ_WIRE_H
#define KGATE_TESTS_FUZZ_WIRE_H

#include <strings.h>
#include "fuzz.h"
#include "wire/codec.h"
#include "wire/errors.h"
#include "wire/json_in.h"
#include "json_agree.h"

/* The key of the first jupyter_client vector (tests/wire/vectors_jupyter_client.h): its seed verifies as it is. */
#define FUZZ_WIRE_KEY "kgate-test-key"

/*
 * The input's frames: its bytes split at every '\n' (so "a\n\nb" is three frames, the middle one
 * empty), each an exact-size copy. No frame can hold a '\n' then, which costs nothing: the codec
 * only compares identities and buffers, and JSON needs no raw newline.
 */
static inline void fuzz_wire_split(const uint8_t *data, size_t size, wire_frames_t *out)
{
    const char *p = (const char *)data;
    size_t len = size;

    wire_frames_init(out);
    for (;;) {
        const char *line;
        size_t n;
        int last = memchr(p, '\n', len) == NULL;
        fuzz_take_line(&p, &len, &line, &n);
        wire_frames_push_copy(out, line, n);
        if (last)
            return;
    }
}

/* The first "<IDS|MSG>" frame, or n. */
static inline size_t fuzz_wire_delimiter(const wire_frame_t *frames, size_t n)
{
    size_t i;

    for (i = 0; i != n; ++i)
        if (frames[i].len == sizeof(WIRE_DELIMITER) - 1 && memcmp(frames[i].base, WIRE_DELIMITER, frames[i].len) == 0)
            break;
    return i;
}

/* Whether `sig` is the HMAC of the four frames at `parts` as hex (either case: libsodium decodes both). */
static inline int fuzz_wire_sig_valid(const wire_signer_t *signer, const wire_frame_t *sig, const wire_frame_t parts[4])
{
    char hex[WIRE_SIG_HEX_LEN + 1];

    wire_signer_sign(signer, parts, hex);
    return sig->len == WIRE_SIG_HEX_LEN && strncasecmp(sig->base, hex, WIRE_SIG_HEX_LEN) == 0;
}

/* What wire/codec.h says wire_decode returns for these frames (with `signer`, or unsigned if NULL). */
static inline int fuzz_wire_expected(const wire_signer_t *signer, const wire_frame_t *frames, size_t n)
{
    size_t delim = fuzz_wire_delimiter(frames, n);
    int ret = 0;

    if (delim == n)
        return WIRE_ENODELIM;
    if (n - delim < 6)
        return WIRE_ETRUNCATED;
    if (signer != NULL && !fuzz_wire_sig_valid(signer, &frames[delim + 1], &frames[delim + 2]))
        return WIRE_EBADSIG;
    json_t *header = wire_json_parse(frames[delim + 2].base, frames[delim + 2].len);
    /* header, parent header and metadata must be objects; an undecodable content is flagged, not an error */
    for (size_t i = 0; i != 3 && ret == 0; ++i) {
        json_t *json = wire_json_parse(frames[delim + 2 + i].base, frames[delim + 2 + i].len);
        if (!json_is_object(json))
            ret = WIRE_EBADJSON;
        json_decref(json);
    }
    /* the header's fields are looked at once all four frames are objects */
    if (ret == 0 && (!json_is_string(json_object_get(header, "msg_id")) || !json_is_string(json_object_get(header, "msg_type"))))
        ret = WIRE_EBADHEADER;
    json_decref(header);
    return ret;
}

static inline int fuzz_wire_same_frames(const wire_frames_t *a, const wire_frame_t *b, size_t n)
{
    if (a->size != n)
        return 0;
    for (size_t i = 0; i != n; ++i)
        if (a->entries[i].len != b[i].len || (b[i].len != 0 && memcmp(a->entries[i].base, b[i].base, b[i].len) != 0))
            return 0;
    return 1;
}

/* A decoded message is its frames: identities before the delimiter, the four JSON frames as parsed, buffers after them. */
static inline void fuzz_wire_check_decoded(const wire_msg_t *msg, const wire_frame_t *frames, size_t n)
{
    size_t delim = fuzz_wire_delimiter(frames, n);
    json_t *json[4] = {msg->header, msg->parent_header, msg->metadata, msg->content};

    FUZZ_CHECK(fuzz_wire_same_frames(&msg->identities, frames, delim), "identities are not the frames before the delimiter");
    FUZZ_CHECK(fuzz_wire_same_frames(&msg->buffers, frames + delim + 6, n - delim - 6), "buffers are not the frames after content");
    for (size_t i = 0; i != 4; ++i) {
        json_t *want = wire_json_parse(frames[delim + 2 + i].base, frames[delim + 2 + i].len);
        if (i == 3 && !json_is_object(want)) {
            /* codec.h: a content that is no object decodes as {} with content_undecodable set */
            FUZZ_CHECK(msg->content_undecodable && json_is_object(json[i]) && json_object_size(json[i]) == 0,
                       "an undecodable content was not flagged as such");
        } else {
            FUZZ_CHECK(want != NULL && json_agree_identical(want, json[i]), "JSON frame %zu decoded differently", i);
            FUZZ_CHECK(i != 3 || !msg->content_undecodable, "a decodable content was flagged");
        }
        json_decref(want);
    }
}

/* wire_encode, then wire_decode with the same signer: the same message again. */
static inline void fuzz_wire_check_round_trip(const wire_signer_t *signer, const wire_msg_t *msg)
{
    wire_frames_t frames;
    wire_msg_t *again = NULL;
    int ret;

    wire_frames_init(&frames);
    wire_encode(signer, msg, &frames);
    ret = wire_decode(signer, frames.entries, frames.size, &again);
    FUZZ_CHECK(ret == 0, "re-encoded message does not decode: %s", wire_strerror(ret));
    FUZZ_CHECK(fuzz_wire_same_frames(&again->identities, msg->identities.entries, msg->identities.size), "identities changed");
    FUZZ_CHECK(fuzz_wire_same_frames(&again->buffers, msg->buffers.entries, msg->buffers.size), "buffers changed");
    FUZZ_CHECK(json_agree_identical(again->header, msg->header) && json_agree_identical(again->parent_header, msg->parent_header) &&
                   json_agree_identical(again->metadata, msg->metadata) && json_agree_identical(again->content, msg->content),
               "JSON changed in an encode/decode round trip");
    wire_msg_destroy(again);
    wire_frames_dispose(&frames);
}

/* Decodes `frames` with `signer` and checks the result against fuzz_wire_expected (`expect_signer`). */
static inline wire_msg_t *fuzz_wire_decode_checked(const wire_signer_t *signer, const wire_signer_t *expect_signer,
                                                   const wire_frames_t *frames)
{
    static wire_msg_t untouched;
    wire_msg_t *msg = &untouched;
    int ret = wire_decode(signer, frames->entries, frames->size, &msg);
    int want = fuzz_wire_expected(expect_signer, frames->entries, frames->size);

    FUZZ_CHECK(ret == want, "wire_decode returned %d (%s), expected %d (%s)", ret, wire_strerror(ret), want, wire_strerror(want));
    if (ret != 0) {
        FUZZ_CHECK(msg == &untouched, "wire_decode wrote *out and failed");
        return NULL;
    }
    fuzz_wire_check_decoded(msg, frames->entries, frames->size);
    return msg;
}

#endif
