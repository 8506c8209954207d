/* tests/fuzz/fuzz_jframing.c: the Jupyter kernel WebSocket codec (gateway/jupyter/framing.h): decoding any message in
 * either framing, against a reference of the v1 layout, and encode/decode round trips of what decodes. */
#include "fuzz.h"
#include "wire/alloc.h"
#include "wire/json_in.h"
#include "core/errors.h"
#include "core/json_out.h"
#include "jupyter/framing.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_global_init();
    return 0;
}

/* 27 KiB: static rather than on the stack (one input at a time) */
static gw_jmsg_encoded_t encoded;

static int is_jmsg_error(int ret)
{
    switch (ret) {
    case GW_EJMSG_NOTBINARY:
    case GW_EJMSG_TRUNCATED:
    case GW_EJMSG_PARTCOUNT:
    case GW_EJMSG_TOOMANYBUFFERS:
    case GW_EJMSG_OFFSETS:
    case GW_EJMSG_NOTJSON:
    case GW_EJMSG_TEXTBUFFERS:
    case GW_EJMSG_HEADER:
    case GW_EJMSG_CHANNEL:
        return 1;
    default:
        return 0;
    }
}

static int is_framing_error(int ret)
{
    return ret == GW_EJMSG_NOTBINARY || ret == GW_EJMSG_TRUNCATED || ret == GW_EJMSG_PARTCOUNT || ret == GW_EJMSG_TOOMANYBUFFERS ||
           ret == GW_EJMSG_OFFSETS;
}

/* ---- reference: the v1 layout, read plainly (framing.h): 0 when the table is canonical, with its offsets in `offsets` ---- */

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i)
        v = v << 8 | p[i];
    return v;
}

static int reference_v1(const uint8_t *data, size_t len, uint64_t *offsets, size_t *n)
{
    if (len < 8)
        return GW_EJMSG_TRUNCATED;
    uint64_t count = le64(data);
    if (count < 6)
        return GW_EJMSG_PARTCOUNT;
    if (count > 6 + GW_JMSG_MAX_BUFFERS)
        return GW_EJMSG_TOOMANYBUFFERS;
    if ((count + 1) * 8 > len)
        return GW_EJMSG_TRUNCATED;
    for (size_t i = 0; i != count; ++i)
        offsets[i] = le64(data + 8 * (i + 1));
    if (offsets[0] != (count + 1) * 8 || offsets[count - 1] != len)
        return GW_EJMSG_OFFSETS;
    for (size_t i = 1; i != count; ++i)
        if (offsets[i] < offsets[i - 1])
            return GW_EJMSG_OFFSETS;
    *n = (size_t)count;
    return 0;
}

/* ---- checks ---- */

static int same_bytes(wire_frame_t a, wire_frame_t b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.base, b.base, a.len) == 0);
}

/* The compact rendering of a JSON text (malloc'ed), or NULL when it is no JSON object. */
static char *render(wire_frame_t part, size_t *len)
{
    json_t *json = wire_json_parse(part.base, part.len);
    char *out = NULL;

    if (json_is_object(json)) {
        *len = gw_json_render(json, NULL);
        out = malloc(*len + 1);
        gw_json_render(json, out);
    }
    json_decref(json);
    return out;
}

/* What holds of every decoded message; `rendered`: its parts are compact renderings (legacy). */
static void check_decoded(const gw_jmsg_t *msg, int rendered)
{
    FUZZ_CHECK(msg->channel == WIRE_CHANNEL_SHELL || msg->channel == WIRE_CHANNEL_CONTROL || msg->channel == WIRE_CHANNEL_STDIN,
               "channel %d", (int)msg->channel);
    size_t id_len = strnlen(msg->msg_id, sizeof(msg->msg_id)), type_len = strnlen(msg->msg_type, sizeof(msg->msg_type));
    FUZZ_CHECK(id_len != 0 && id_len <= GW_JMSG_ID_MAX && type_len != 0 && type_len <= GW_JMSG_TYPE_MAX, "ids of %zu and %zu bytes",
               id_len, type_len);
    FUZZ_CHECK(msg->nbuffers <= GW_JMSG_MAX_BUFFERS, "%zu buffers", msg->nbuffers);
    for (size_t i = 0; i != GW_JMSG_NUM_PARTS; ++i) {
        size_t len;
        char *text = render(msg->parts[i], &len);
        FUZZ_CHECK(text != NULL, "part %zu is no JSON object", i);
        FUZZ_CHECK(!rendered || same_bytes(msg->parts[i], (wire_frame_t){text, len}), "part %zu is not compact", i);
        free(text);
    }
}

/* `b` decoded from an encoding of `a`: the same message; `a`'s parts rendered compactly when `b`'s were re-rendered. */
static void check_same(const gw_jmsg_t *a, const gw_jmsg_t *b, int b_rendered)
{
    FUZZ_CHECK(a->channel == b->channel, "channel %d became %d", (int)a->channel, (int)b->channel);
    FUZZ_CHECK(strcmp(a->msg_id, b->msg_id) == 0 && strcmp(a->msg_type, b->msg_type) == 0, "ids changed");
    for (size_t i = 0; i != GW_JMSG_NUM_PARTS; ++i) {
        size_t len;
        char *text = b_rendered ? render(a->parts[i], &len) : NULL;
        wire_frame_t want = b_rendered ? (wire_frame_t){text, len} : a->parts[i];
        FUZZ_CHECK(same_bytes(want, b->parts[i]), "part %zu changed", i);
        free(text);
    }
    FUZZ_CHECK(a->nbuffers == b->nbuffers, "%zu buffers became %zu", a->nbuffers, b->nbuffers);
    for (size_t i = 0; i != a->nbuffers; ++i)
        FUZZ_CHECK(same_bytes(a->buffers[i], b->buffers[i]), "buffer %zu changed", i);
}

/* Encodes `msg` in `framing` into a new exact-size buffer. */
static uint8_t *encode(gw_jframing_t framing, const gw_jmsg_t *msg, int *is_binary, size_t *len)
{
    int ret = gw_jmsg_encode(framing, msg, &encoded);
    size_t n = 0, at = 0;

    FUZZ_CHECK(ret == 0, "encoding a decoded message failed: %d", ret);
    for (size_t i = 0; i != encoded.iovcnt; ++i)
        n += encoded.iov[i].len;
    uint8_t *out = malloc(n != 0 ? n : 1);
    for (size_t i = 0; i != encoded.iovcnt; ++i) {
        if (encoded.iov[i].len != 0)
            memcpy(out + at, encoded.iov[i].base, encoded.iov[i].len);
        at += encoded.iov[i].len;
    }
    *is_binary = encoded.is_binary;
    *len = n;
    return out;
}

/* Encodes `msg` in `framing` and decodes the result: the same message. */
static void check_round_trip(gw_jframing_t framing, const gw_jmsg_t *msg, const uint8_t *input, size_t input_len, int input_v1)
{
    int is_binary;
    size_t len;
    uint8_t *bytes = encode(framing, msg, &is_binary, &len);
    gw_jmsg_t again;
    int ret;

    FUZZ_CHECK(is_binary == (framing == GW_JFRAMING_V1 || msg->nbuffers != 0), "frame type");
    /* the v1 layout is canonical: a v1 message decodes only when re-encoding it gives its bytes back */
    if (framing == GW_JFRAMING_V1 && input_v1)
        FUZZ_CHECK(len == input_len && memcmp(bytes, input, len) == 0, "re-encoded v1 message differs from its input");
    ret = gw_jmsg_decode(framing, is_binary, bytes, len, &again);
    FUZZ_CHECK(ret == 0, "a re-encoded message does not decode: %d", ret);
    check_decoded(&again, framing == GW_JFRAMING_LEGACY);
    check_same(msg, &again, framing == GW_JFRAMING_LEGACY);
    gw_jmsg_dispose(&again);
    free(bytes);
}

/*
 * The input is one byte of mode, then the WebSocket message: bit 0 of the mode selects v1 (else
 * legacy), bit 1 a binary frame (else text).
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint64_t offsets[6 + GW_JMSG_MAX_BUFFERS];
    gw_jframing_t framing = size != 0 && (data[0] & 1) ? GW_JFRAMING_V1 : GW_JFRAMING_LEGACY;
    int is_binary = size != 0 && (data[0] & 2) != 0, ret, want = 0;
    size_t len = size != 0 ? size - 1 : 0, n = 0;
    uint8_t *msg_bytes = (uint8_t *)fuzz_copy(size != 0 ? data + 1 : data, len);
    gw_jmsg_t msg;

    ret = gw_jmsg_decode(framing, is_binary, msg_bytes, len, &msg);
    FUZZ_CHECK(ret == 0 || is_jmsg_error(ret), "unexpected result %d", ret);
    if (framing == GW_JFRAMING_V1) {
        want = is_binary ? reference_v1(msg_bytes, len, offsets, &n) : GW_EJMSG_NOTBINARY;
        FUZZ_CHECK(want != 0 ? ret == want : !is_framing_error(ret), "result %d, the reference says %d", ret, want);
    }
    if (ret != 0) {
        free(msg_bytes);
        return 0;
    }
    check_decoded(&msg, framing == GW_JFRAMING_LEGACY);
    if (framing == GW_JFRAMING_V1) {
        /* views of exactly the reference's slices */
        FUZZ_CHECK(msg.nbuffers == n - 6, "%zu buffers, the reference says %zu", msg.nbuffers, n - 6);
        for (size_t i = 0; i != GW_JMSG_NUM_PARTS + msg.nbuffers; ++i) {
            wire_frame_t got = i < GW_JMSG_NUM_PARTS ? msg.parts[i] : msg.buffers[i - GW_JMSG_NUM_PARTS];
            FUZZ_CHECK((uint8_t *)got.base == msg_bytes + offsets[i + 1] && got.len == offsets[i + 2] - offsets[i + 1],
                       "part %zu is not the reference's slice", i);
        }
    }
    check_round_trip(framing, &msg, msg_bytes, len, framing == GW_JFRAMING_V1);
    check_round_trip(framing == GW_JFRAMING_V1 ? GW_JFRAMING_LEGACY : GW_JFRAMING_V1, &msg, msg_bytes, len, 0);
    gw_jmsg_dispose(&msg);
    free(msg_bytes);
    return 0;
}
