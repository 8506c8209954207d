/* tests/wire/test_codec.c: wire_encode / wire_decode against jupyter_client frames and bad input. */
#include <stdio.h>
#include <unistd.h>
#include <criterion/criterion.h>
#include "wire/codec.h"
#include "wire/errors.h"
#include "vectors_jupyter_client.h"
#include "wire_test.h"

TestSuite(codec, .init = wire_test_init);

/* Heap copies of a vector's frames (exact sizes), released with wire_frames_dispose. */
static void vector_frames(const jcv_vector_t *v, wire_frames_t *out)
{
    wire_frames_init(out);
    for (size_t i = 0; i != v->nframes; ++i)
        wire_frames_push_owned(out, wire_test_exact_copy(v->frames[i].base, v->frames[i].len), v->frames[i].len);
}

static void assert_same_frames(const wire_frames_t *a, const wire_frames_t *b)
{
    cr_assert_eq(a->size, b->size);
    for (size_t i = 0; i != a->size; ++i)
        cr_assert(wire_test_frame_eq(&a->entries[i], b->entries[i].base, b->entries[i].len), "frame %zu differs", i);
}

Test(codec, decodes_jupyter_client_messages)
{
    for (size_t i = 0; i != JCV_COUNT; ++i) {
        const jcv_vector_t *v = &jcv_vectors[i];
        wire_signer_t s;
        wire_frames_t frames;
        wire_msg_t *msg = NULL;

        wire_signer_init(&s, v->key.base, v->key.len);
        vector_frames(v, &frames);
        cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), 0, "%s", v->name);
        /* The message keeps copies: the caller's frames go away first. */
        wire_frames_dispose(&frames);

        cr_assert_str_eq(wire_msg_type(msg), v->msg_type);
        cr_assert_str_eq(wire_msg_id(msg), v->msg_id);
        cr_assert_str_eq(wire_msg_parent_id(msg), v->parent_msg_id);
        cr_assert_str_eq(json_string_value(json_object_get(msg->header, "session")), v->session);
        cr_assert_str_eq(json_string_value(json_object_get(msg->header, "username")), v->username);
        cr_assert_str_eq(json_string_value(json_object_get(msg->header, "version")), "5.3");
        cr_assert(json_is_object(msg->metadata));
        cr_assert(json_is_object(msg->content));
        cr_assert_eq(msg->identities.size, v->nidents);
        for (size_t k = 0; k != v->nidents; ++k)
            cr_assert(wire_test_frame_eq(&msg->identities.entries[k], v->frames[k].base, v->frames[k].len));
        cr_assert_eq(msg->buffers.size, v->nbuffers);
        for (size_t k = 0; k != v->nbuffers; ++k) {
            const jcv_bytes_t *b = &v->frames[v->nframes - v->nbuffers + k];
            cr_assert(wire_test_frame_eq(&msg->buffers.entries[k], b->base, b->len));
        }
        if (v->content_key != NULL) {
            json_t *value = json_object_get(msg->content, v->content_key);
            cr_assert(json_is_string(value), "%s", v->name);
            cr_assert_eq(json_string_length(value), v->content_value.len, "%s", v->name);
            cr_assert(memcmp(json_string_value(value), v->content_value.base, v->content_value.len) == 0, "%s", v->name);
        } else {
            cr_assert_eq(json_object_size(msg->content), 0);
        }
        wire_msg_destroy(msg);
        wire_signer_dispose(&s);
    }
}

Test(codec, specific_fields_of_jupyter_client_messages)
{
    const jcv_vector_t *v = &jcv_vectors[2]; /* execute_reply with metadata */
    wire_signer_t s;
    wire_msg_t *msg = NULL;
    wire_frames_t frames;

    cr_assert_str_eq(v->name, "execute_reply_buffers");
    wire_signer_init(&s, v->key.base, v->key.len);
    vector_frames(v, &frames);
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), 0);
    cr_assert_eq(json_integer_value(json_object_get(msg->content, "execution_count")), 7);
    cr_assert(json_is_true(json_object_get(msg->metadata, "dependencies_met")));
    cr_assert_str_eq(json_string_value(json_object_get(msg->parent_header, "msg_type")), "execute_request");
    wire_msg_destroy(msg);
    wire_frames_dispose(&frames);
    wire_signer_dispose(&s);
}

Test(codec, encode_of_decoded_message_reproduces_and_verifies)
{
    for (size_t i = 0; i != JCV_COUNT; ++i) {
        const jcv_vector_t *v = &jcv_vectors[i];
        wire_signer_t s;
        wire_frames_t in, out, again;
        wire_msg_t *msg = NULL, *back = NULL;

        wire_signer_init(&s, v->key.base, v->key.len);
        vector_frames(v, &in);
        cr_assert_eq(wire_decode(&s, in.entries, in.size, &msg), 0);
        wire_frames_init(&out);
        wire_encode(&s, msg, &out);
        cr_assert_eq(out.size, in.size, "%s", v->name);
        /* Identities, delimiter and buffers are byte-identical; JSON is re-serialised compactly. */
        for (size_t k = 0; k != v->nidents + 1; ++k)
            cr_assert(wire_test_frame_eq(&out.entries[k], in.entries[k].base, in.entries[k].len));
        for (size_t k = v->nframes - v->nbuffers; k != v->nframes; ++k)
            cr_assert(wire_test_frame_eq(&out.entries[k], in.entries[k].base, in.entries[k].len));
        cr_assert_eq(wire_decode(&s, out.entries, out.size, &back), 0, "%s", v->name);
        cr_assert(json_equal(back->header, msg->header));
        cr_assert(json_equal(back->parent_header, msg->parent_header));
        cr_assert(json_equal(back->metadata, msg->metadata));
        cr_assert(json_equal(back->content, msg->content));
        /* Encoding is deterministic: the same message gives the same bytes. */
        wire_frames_init(&again);
        wire_encode(&s, back, &again);
        assert_same_frames(&again, &out);
        wire_frames_dispose(&again);
        wire_msg_destroy(back);
        wire_msg_destroy(msg);
        wire_frames_dispose(&out);
        wire_frames_dispose(&in);
        wire_signer_dispose(&s);
    }
}

Test(codec, encode_layout_is_compact_and_signed_over_emitted_bytes)
{
    wire_signer_t s;
    wire_frames_t out;
    json_t *content = json_pack("{s:s, s:b, s:[i,i]}", "code", "1 + 1", "silent", 0, "list", 1, 2);
    wire_msg_t *msg = wire_msg_create("execute_request", "sess-1", content);
    char hex[WIRE_SIG_HEX_LEN + 1];

    wire_signer_init(&s, "k", 1);
    wire_frames_init(&out);
    wire_encode(&s, msg, &out);
    cr_assert_eq(out.size, 6);
    cr_assert(wire_test_frame_eq(&out.entries[0], "<IDS|MSG>", 9));
    cr_assert_eq(out.entries[1].len, WIRE_SIG_HEX_LEN);
    wire_signer_sign(&s, &out.entries[2], hex);
    cr_assert(memcmp(out.entries[1].base, hex, WIRE_SIG_HEX_LEN) == 0);
    static const char want[] = "{\"code\":\"1 + 1\",\"silent\":false,\"list\":[1,2]}";
    cr_assert(wire_test_frame_eq(&out.entries[5], want, sizeof(want) - 1));
    cr_assert(wire_test_frame_eq(&out.entries[3], "{}", 2));
    cr_assert(wire_test_frame_eq(&out.entries[4], "{}", 2));
    wire_frames_dispose(&out);
    wire_msg_destroy(msg);
    wire_signer_dispose(&s);
}

Test(codec, identities_and_buffers_round_trip_exactly)
{
    wire_signer_t s;
    wire_frames_t out;
    wire_msg_t *msg = wire_msg_create("comm_msg", "sess-2", json_pack("{s:s}", "comm_id", "c1")), *back = NULL;
    static const char id2[] = {0, 1, 2, 'x', (char)0xff};
    static const char buf1[] = {0, 0, 0, 7, (char)0x80, '<', 'I', 'D', 'S', '|', 'M', 'S', 'G', '>'};

    wire_frames_push_copy(&msg->identities, "router-peer", 11);
    wire_frames_push_copy(&msg->identities, id2, sizeof(id2));
    wire_frames_push_copy(&msg->identities, "", 0);
    wire_frames_push_copy(&msg->buffers, buf1, sizeof(buf1));
    wire_frames_push_copy(&msg->buffers, "", 0);
    wire_frames_push_copy(&msg->buffers, "<IDS|MSG>", 9); /* a buffer may look like the delimiter */
    json_object_set_new(msg->metadata, "m", json_string("\xc3\xa9\xe2\x9c\x93"));

    wire_signer_init(&s, "a key of some length that is longer than sixty-four bytes, which HMAC hashes first", 82);
    wire_frames_init(&out);
    wire_encode(&s, msg, &out);
    cr_assert_eq(out.size, 3 + 1 + 5 + 3);
    cr_assert_eq(wire_decode(&s, out.entries, out.size, &back), 0);
    assert_same_frames(&back->identities, &msg->identities);
    assert_same_frames(&back->buffers, &msg->buffers);
    cr_assert(json_equal(back->header, msg->header));
    cr_assert(json_equal(back->parent_header, msg->parent_header));
    cr_assert(json_equal(back->metadata, msg->metadata));
    cr_assert(json_equal(back->content, msg->content));
    cr_assert_str_eq(wire_msg_id(back), wire_msg_id(msg));
    wire_msg_destroy(back);
    wire_frames_dispose(&out);
    wire_msg_destroy(msg);
    wire_signer_dispose(&s);
}

/* Builds identities + delimiter + signature + the four given JSON frames, signed with `s`. */
static void build(const wire_signer_t *s, const char *json[4], wire_frames_t *out)
{
    wire_frame_t parts[4];
    char sig[WIRE_SIG_HEX_LEN + 1];

    for (size_t i = 0; i != 4; ++i)
        parts[i] = wire_test_str(json[i]);
    wire_signer_sign(s, parts, sig);
    wire_frames_init(out);
    wire_frames_push_copy(out, "id", 2);
    wire_frames_push_copy(out, "<IDS|MSG>", 9);
    wire_frames_push_copy(out, sig, strlen(sig));
    for (size_t i = 0; i != 4; ++i)
        wire_frames_push_copy(out, parts[i].base, parts[i].len);
}

static int decode_json(const wire_signer_t *s, const char *h, const char *p, const char *m, const char *c)
{
    const char *json[4] = {h, p, m, c};
    wire_frames_t frames;
    wire_msg_t *msg = NULL;
    int ret;

    build(s, json, &frames);
    ret = wire_decode(s, frames.entries, frames.size, &msg);
    cr_assert_eq(msg == NULL, ret != 0, "out is set exactly on success");
    wire_msg_destroy(msg);
    wire_frames_dispose(&frames);
    return ret;
}

#define GOOD_HEADER "{\"msg_id\":\"a\",\"msg_type\":\"t\"}"

/* A content jansson cannot hold (an 82-digit integer) keeps its message: flagged, empty, routable by its parent. */
Test(codec, undecodable_content_is_flagged_not_dropped)
{
    /* apart: adjacent literals among an array's elements look like a missing comma to clang (-Wstring-concatenation) */
    static const char content[] = "{\"data\":{\"application/json\":{\"n\":"
                                  "1000000000000000000000000000000000000000000000000000000000000000000000000000000000}}}";
    const char *json[4] = {GOOD_HEADER, "{\"msg_id\":\"parent-1\"}", "{}", content};
    wire_signer_t s;
    wire_frames_t frames;
    wire_msg_t *msg = NULL;

    wire_signer_init(&s, "key", 3);
    build(&s, json, &frames);
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), 0);
    cr_assert(msg->content_undecodable);
    cr_assert(json_is_object(msg->content) && json_object_size(msg->content) == 0);
    cr_assert_str_eq(json_string_value(json_object_get(msg->parent_header, "msg_id")), "parent-1");
    wire_msg_destroy(msg);
    wire_frames_dispose(&frames);
    /* a decodable one is not flagged */
    json[3] = "{\"n\":1}";
    build(&s, json, &frames);
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), 0);
    cr_assert(!msg->content_undecodable);
    wire_msg_destroy(msg);
    wire_frames_dispose(&frames);
    wire_signer_dispose(&s);
}

/* A relay verifies a big message whole but parses only its headers; the signed parts come back verbatim. */
Test(codec, skipped_content_is_verified_not_parsed_and_parts_are_the_signed_bytes)
{
    const char *json[4] = {GOOD_HEADER, "{\"msg_id\":\"parent-2\"}", "{ \"m\": 1 }", "not json at all, and not parsed"};
    wire_signer_t s, other;
    wire_frames_t frames;
    wire_msg_t *msg = NULL;
    const wire_frame_t *parts;
    size_t nparts;

    wire_signer_init(&s, "key", 3);
    wire_signer_init(&other, "another key", 11);
    build(&s, json, &frames);
    wire_frames_push_copy(&frames, "buf", 3);
    cr_assert_eq(wire_decode_ex(&s, frames.entries, frames.size, WIRE_DECODE_SKIP_CONTENT, &msg), 0);
    cr_assert(msg->content_skipped && !msg->content_undecodable);
    cr_assert(json_is_object(msg->content) && json_object_size(msg->content) == 0);
    cr_assert_str_eq(wire_msg_parent_id(msg), "parent-2");
    parts = wire_signed_parts(msg, frames.entries, &nparts);
    cr_assert_eq(nparts, 5);
    for (size_t i = 0; i != 4; ++i) {
        cr_assert_eq(parts[i].len, strlen(json[i]));
        cr_assert(memcmp(parts[i].base, json[i], parts[i].len) == 0, "part %zu is the bytes as signed", i);
    }
    cr_assert(parts[4].len == 3 && memcmp(parts[4].base, "buf", 3) == 0);
    wire_msg_destroy(msg);
    msg = NULL;
    /* skipping the parse never skips the signature */
    cr_assert_eq(wire_decode_ex(&other, frames.entries, frames.size, WIRE_DECODE_SKIP_CONTENT, &msg), WIRE_EBADSIG);
    cr_assert_null(msg);
    wire_frames_dispose(&frames);
    wire_signer_dispose(&other);
    wire_signer_dispose(&s);
}

/* A relay of stream text gets the content's bytes, verified but not parsed; the parse on demand is wire_decode's. */
Test(codec, raw_stream_content_is_kept_as_bytes_and_parses_as_decode_would)
{
    static const char *const contents[] = {"{\"name\":\"stdout\",\"text\":\"caf\xc3\xa9 \\u001b[1m\\n\"}",
                                           "{\"name\":\"stdout\",\"text\":", ""};
    const char *stream_header = "{\"msg_id\":\"a\",\"msg_type\":\"stream\"}";
    wire_signer_t s, other;

    wire_signer_init(&s, "key", 3);
    wire_signer_init(&other, "another key", 11);
    for (size_t i = 0; i != sizeof(contents) / sizeof(contents[0]); ++i) {
        const char *json[4] = {stream_header, "{\"msg_id\":\"p\"}", "{}", contents[i]};
        wire_frames_t frames;
        wire_msg_t *msg = NULL, *plain = NULL, *forged = NULL;
        json_t *parsed;
        build(&s, json, &frames);
        cr_assert_eq(wire_decode_ex(&s, frames.entries, frames.size, WIRE_DECODE_RAW_STREAM, &msg), 0);
        cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &plain), 0);
        cr_assert_eq(wire_decode_ex(&other, frames.entries, frames.size, WIRE_DECODE_RAW_STREAM, &forged), WIRE_EBADSIG,
                     "raw is no excuse to skip the signature");
        cr_assert_null(forged);
        /* the frames go first: the message owns a copy */
        wire_frames_dispose(&frames);
        cr_assert(msg->content_raw && !msg->content_undecodable && json_object_size(msg->content) == 0);
        cr_assert_eq(msg->raw_content.len, strlen(contents[i]));
        cr_assert(memcmp(msg->raw_content.base, contents[i], msg->raw_content.len) == 0);
        parsed = wire_msg_raw_content_parse(msg);
        cr_assert_eq(parsed == NULL, plain->content_undecodable, "content %zu", i);
        cr_assert(parsed == NULL || json_equal(parsed, plain->content));
        json_decref(parsed);
        wire_msg_parse_raw_content(msg);
        cr_assert(!msg->content_raw && msg->raw_content.base == NULL);
        cr_assert_eq(msg->content_undecodable, plain->content_undecodable, "content %zu", i);
        cr_assert(json_equal(msg->content, plain->content), "content %zu", i);
        wire_msg_destroy(msg);
        wire_msg_destroy(plain);
    }
    wire_signer_dispose(&other);
    wire_signer_dispose(&s);
}

/* Only stream messages stay raw: every other type is parsed as without the flag. */
Test(codec, raw_stream_flag_parses_other_types)
{
    const char *json[4] = {GOOD_HEADER, "{}", "{}", "{\"name\":\"stdout\",\"text\":\"x\"}"};
    wire_signer_t s;
    wire_frames_t frames;
    wire_msg_t *msg = NULL;

    wire_signer_init(&s, "key", 3);
    build(&s, json, &frames);
    cr_assert_eq(wire_decode_ex(&s, frames.entries, frames.size, WIRE_DECODE_RAW_STREAM, &msg), 0);
    cr_assert(!msg->content_raw && msg->raw_content.base == NULL);
    cr_assert_str_eq(json_string_value(json_object_get(msg->content, "text")), "x");
    wire_msg_destroy(msg);
    wire_frames_dispose(&frames);
    wire_signer_dispose(&s);
}

Test(codec, decode_rejects_non_object_json)
{
    static const char *const bad[] = {"[]",       "1", "\"s\"", "null",     "true", "{",
                                      "{\"a\":}", "",  "{} {}", "{\"a\":1", "\xff", "{\"a\":\"\xc3\"}"};
    wire_signer_t s;

    wire_signer_init(&s, "key", 3);
    cr_assert_eq(decode_json(&s, GOOD_HEADER, "{}", "{}", "{}"), 0);
    for (size_t i = 0; i != sizeof(bad) / sizeof(bad[0]); ++i) {
        cr_assert_eq(decode_json(&s, bad[i], "{}", "{}", "{}"), WIRE_EBADJSON, "header %s", bad[i]);
        cr_assert_eq(decode_json(&s, GOOD_HEADER, bad[i], "{}", "{}"), WIRE_EBADJSON, "parent %s", bad[i]);
        cr_assert_eq(decode_json(&s, GOOD_HEADER, "{}", bad[i], "{}"), WIRE_EBADJSON, "metadata %s", bad[i]);
        /* an undecodable content keeps the message (its headers route it), flagged, with an empty content */
        cr_assert_eq(decode_json(&s, GOOD_HEADER, "{}", "{}", bad[i]), 0, "content %s", bad[i]);
    }
    wire_signer_dispose(&s);
}

Test(codec, decode_rejects_header_without_string_id_or_type)
{
    wire_signer_t s;

    wire_signer_init(&s, "key", 3);
    cr_assert_eq(decode_json(&s, "{\"msg_type\":\"t\"}", "{}", "{}", "{}"), WIRE_EBADHEADER);
    cr_assert_eq(decode_json(&s, "{\"msg_id\":\"a\"}", "{}", "{}", "{}"), WIRE_EBADHEADER);
    cr_assert_eq(decode_json(&s, "{\"msg_id\":1,\"msg_type\":\"t\"}", "{}", "{}", "{}"), WIRE_EBADHEADER);
    cr_assert_eq(decode_json(&s, "{\"msg_id\":\"a\",\"msg_type\":null}", "{}", "{}", "{}"), WIRE_EBADHEADER);
    cr_assert_eq(decode_json(&s, "{}", "{}", "{}", "{}"), WIRE_EBADHEADER);
    wire_signer_dispose(&s);
}

Test(codec, decode_rejects_bad_signatures_before_parsing)
{
    const jcv_vector_t *v = &jcv_vectors[0];
    size_t sigat = v->nidents + 1;
    wire_signer_t s;
    wire_frames_t frames;
    wire_msg_t *msg = NULL;
    char *sig;

    wire_signer_init(&s, v->key.base, v->key.len);
    vector_frames(v, &frames);
    sig = frames.entries[sigat].base;

    sig[17] = sig[17] == 'a' ? 'b' : 'a';
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), WIRE_EBADSIG);
    sig[17] = v->frames[sigat].base[17];
    sig[5] = 'g';
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), WIRE_EBADSIG);
    sig[5] = v->frames[sigat].base[5];
    frames.entries[sigat].len = 63;
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), WIRE_EBADSIG);
    frames.entries[sigat].len = 0;
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), WIRE_EBADSIG);
    frames.entries[sigat].len = 64;
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), 0);
    wire_msg_destroy(msg);
    msg = NULL;

    /* A tampered content frame: one changed byte anywhere in the signed frames fails. */
    char *content = frames.entries[sigat + 4].base;
    content[3] ^= 1;
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), WIRE_EBADSIG);
    content[3] ^= 1;

    /* Unparseable JSON with a bad signature reports the signature: the parser never ran. */
    static const char garbage[] = "not json at all";
    wire_frame_t saved = frames.entries[sigat + 1];
    frames.entries[sigat + 1] = wire_test_str(garbage);
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), WIRE_EBADSIG);
    frames.entries[sigat + 1] = saved;
    cr_assert_null(msg);

    wire_frames_dispose(&frames);
    wire_signer_dispose(&s);
}

Test(codec, unsigned_signer_accepts_any_signature)
{
    wire_signer_t s;
    const char *json[4] = {GOOD_HEADER, "{}", "{}", "{}"};
    wire_frames_t frames;
    wire_msg_t *msg = NULL;

    wire_signer_init(&s, NULL, 0);
    build(&s, json, &frames);
    cr_assert_eq(frames.entries[2].len, 0);
    free(frames.entries[2].base);
    frames.entries[2] = (wire_frame_t){wire_strdup("whatever"), 8};
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), 0);
    cr_assert_str_eq(wire_msg_id(msg), "a");
    wire_msg_destroy(msg);
    wire_frames_dispose(&frames);
    wire_signer_dispose(&s);
}

Test(codec, decode_requires_delimiter_and_five_frames_after_it)
{
    const jcv_vector_t *v = &jcv_vectors[0]; /* one identity, no buffers */
    wire_signer_t s;
    wire_frames_t frames;
    wire_msg_t *msg = NULL;

    wire_signer_init(&s, v->key.base, v->key.len);
    vector_frames(v, &frames);
    cr_assert_eq(frames.size, 7);
    /* 0..4 frames after the delimiter. */
    for (size_t n = 2; n != 7; ++n)
        cr_assert_eq(wire_decode(&s, frames.entries, n, &msg), WIRE_ETRUNCATED, "%zu frames", n);
    cr_assert_eq(wire_decode(&s, frames.entries, 0, &msg), WIRE_ENODELIM);
    cr_assert_eq(wire_decode(&s, frames.entries, 1, &msg), WIRE_ENODELIM);
    /* Without the delimiter frame (here: one byte short, or absent) nothing decodes. */
    frames.entries[1].len = 8;
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), WIRE_ENODELIM);
    frames.entries[1].len = 9;
    cr_assert_eq(wire_decode(&s, frames.entries + 2, frames.size - 2, &msg), WIRE_ENODELIM);
    cr_assert_null(msg);
    cr_assert_eq(wire_decode(&s, frames.entries, frames.size, &msg), 0);
    wire_msg_destroy(msg);
    wire_frames_dispose(&frames);
    wire_signer_dispose(&s);
}

/*
 * picohttpparser style: every prefix of the frame list and every byte-truncation of every frame,
 * each truncated frame in an exact-size allocation so AddressSanitizer catches any over-read and
 * LeakSanitizer any leak. Signed, every such message must fail; unsigned, the JSON parser sees
 * every truncation of every JSON frame.
 */
static void feed_truncations(const jcv_vector_t *v, const wire_signer_t *s, int is_signed)
{
    wire_frames_t frames;
    size_t ok = 0, total = 0;

    vector_frames(v, &frames);
    for (size_t n = 0; n <= frames.size; ++n) {
        wire_msg_t *msg = NULL;
        int ret = wire_decode(s, frames.entries, n, &msg);
        /* Dropping trailing buffers leaves a valid message; anything shorter is truncated. */
        cr_assert_eq(ret == 0, n >= frames.size - v->nbuffers, "%s: %zu of %zu frames gave %d", v->name, n, frames.size, ret);
        wire_msg_destroy(msg);
    }
    for (size_t i = 0; i != frames.size; ++i) {
        wire_frame_t orig = frames.entries[i];
        for (size_t len = 0; len < orig.len; ++len) {
            wire_msg_t *msg = NULL;
            frames.entries[i] = (wire_frame_t){wire_test_exact_copy(orig.base, len), len};
            int ret = wire_decode(s, frames.entries, frames.size, &msg);
            cr_assert(ret <= 0);
            cr_assert_eq(msg == NULL, ret != 0);
            if (ret == 0) {
                /* Only frames outside the signed part may change: identities and buffers. */
                size_t signed_from = v->nidents + 1, signed_to = v->nidents + 6;
                cr_assert(i < signed_from - 1 || i >= signed_to || !is_signed, "%s: frame %zu len %zu accepted", v->name, i, len);
                ++ok;
            }
            ++total;
            wire_msg_destroy(msg);
            free(frames.entries[i].base);
        }
        frames.entries[i] = orig;
    }
    cr_assert_gt(total, 0);
    (void)ok;
    wire_frames_dispose(&frames);
}

Test(codec, every_truncation_fails_cleanly)
{
    for (size_t i = 0; i != JCV_COUNT; ++i) {
        const jcv_vector_t *v = &jcv_vectors[i];
        wire_signer_t s;

        wire_signer_init(&s, v->key.base, v->key.len);
        feed_truncations(v, &s, s.enabled);
        wire_signer_dispose(&s);
        wire_signer_init(&s, NULL, 0);
        feed_truncations(v, &s, 0);
        wire_signer_dispose(&s);
    }
    cr_assert_eq(wire_test_leaks(), 0, "wire_decode leaked on some truncation");
}

/*
 * Optional cross-check: jupyter_client.Session itself verifies what wire_encode produced. Skipped
 * where Debian's /usr/bin/python3 with jupyter_client is not installed.
 */
Test(codec, jupyter_client_accepts_encoded_messages)
{
    static const char py[] = "/usr/bin/python3";
    char path[] = "/tmp/kgate-wire-frames-XXXXXX", cmd[512];
    wire_signer_t s;
    wire_frames_t out;
    wire_msg_t *msg = wire_msg_create("execute_request", "sess-x", json_pack("{s:s}", "code", "print('h\xc3\xa9')"));
    FILE *f;
    int fd;

    cr_assert(system("/usr/bin/python3 -c 'import jupyter_client' >/dev/null 2>&1") == 0,
              "%s cannot import jupyter_client: deploy/deps.sh installs python3-jupyter-client", py);
    wire_frames_push_copy(&msg->identities, "ident", 5);
    wire_frames_push_copy(&msg->buffers, "\x00\x01", 2);
    wire_signer_init(&s, "kgate-cross-check-key", 21);
    wire_frames_init(&out);
    wire_encode(&s, msg, &out);

    cr_assert_geq(fd = mkstemp(path), 0);
    cr_assert_not_null(f = fdopen(fd, "w"));
    for (size_t i = 0; i != out.size; ++i) {
        for (size_t k = 0; k != out.entries[i].len; ++k)
            fprintf(f, "%02x", ((unsigned char *)out.entries[i].base)[k]);
        fputc('\n', f);
    }
    fclose(f);
    snprintf(cmd, sizeof(cmd),
             "%s -c 'import sys\n"
             "from jupyter_client.session import Session\n"
             "frames = [bytes.fromhex(l.strip()) for l in open(sys.argv[1])]\n"
             "s = Session(key=b\"kgate-cross-check-key\")\n"
             "idents, rest = s.feed_identities(frames, copy=True)\n"
             "m = s.deserialize(rest, content=True, copy=True)\n"
             "assert idents == [b\"ident\"], idents\n"
             "assert m[\"header\"][\"msg_type\"] == \"execute_request\"\n"
             "assert m[\"content\"][\"code\"] == \"print(\\x27h\\xe9\\x27)\", m[\"content\"]\n"
             "assert m[\"buffers\"][0] == b\"\\x00\\x01\"\n"
             "' %s",
             py, path);
    int status = system(cmd);
    unlink(path);
    cr_assert_eq(status, 0, "jupyter_client rejected wire_encode's frames");
    wire_frames_dispose(&out);
    wire_msg_destroy(msg);
    wire_signer_dispose(&s);
}
