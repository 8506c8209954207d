/* tests/gateway/test_jframing.c: the Jupyter kernel WebSocket codec (jupyter/framing.h) against Jupyter Server's framings.
 * Over 600 lines on purpose: one table-driven test per framing rule, each small, against the same generated vectors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "wire/json_in.h"
#include "wire/message.h"
#include "core/errors.h"
#include "jupyter/framing.h"
#include "gw_test.h"
#include "vectors_jframing.h"

TestSuite(jframing, .init = gw_test_init);

#define LIT(s) s, sizeof(s) - 1

/* ---- helpers ---- */

/* A decoded message and the exact-size copy of the input its views point into. */
typedef struct st_decoded_t {
    gw_jmsg_t msg;
    char *data;
    size_t len;
} decoded_t;

static int decode(gw_jframing_t framing, int is_binary, const void *data, size_t len, decoded_t *out)
{
    out->data = gw_test_exact_copy(data, len);
    out->len = len;
    int ret = gw_jmsg_decode(framing, is_binary, (const uint8_t *)out->data, len, &out->msg);
    if (ret != 0) {
        gw_jmsg_t zero;
        memset(&zero, 0, sizeof(zero));
        cr_expect_eq(memcmp(&out->msg, &zero, sizeof(zero)), 0, "a failed decode left something in out");
    }
    return ret;
}

static void decoded_dispose(decoded_t *d)
{
    gw_jmsg_dispose(&d->msg);
    free(d->data);
}

/* The concatenated iovecs of an encoding (malloc'ed, exact size). */
static char *join(const gw_jmsg_encoded_t *enc, size_t *len)
{
    size_t n = 0, at = 0;
    for (size_t i = 0; i != enc->iovcnt; ++i)
        n += enc->iov[i].len;
    char *out = malloc(n != 0 ? n : 1);
    for (size_t i = 0; i != enc->iovcnt; ++i) {
        if (enc->iov[i].len != 0)
            memcpy(out + at, enc->iov[i].base, enc->iov[i].len);
        at += enc->iov[i].len;
    }
    *len = n;
    return out;
}

static char *encode(gw_jframing_t framing, const gw_jmsg_t *msg, int *is_binary, size_t *len)
{
    static gw_jmsg_encoded_t enc; /* 27 KiB: off the test's stack */
    int ret = gw_jmsg_encode(framing, msg, &enc);
    cr_assert_eq(ret, 0, "encode: %s", gw_strerror(ret));
    *is_binary = enc.is_binary;
    return join(&enc, len);
}

static void expect_bytes(const void *got, size_t got_len, const void *want, size_t want_len, const char *what)
{
    cr_expect_eq(got_len, want_len, "%s: %zu bytes, expected %zu", what, got_len, want_len);
    if (got_len == want_len)
        cr_expect_eq(memcmp(got, want, want_len), 0, "%s: bytes differ", what);
}

static void expect_frame(wire_frame_t f, const char *want, size_t want_len, const char *what)
{
    expect_bytes(f.base, f.len, want, want_len, what);
}

static const wire_frame_t kir_parts[GW_JMSG_NUM_PARTS] = {
    {JFV_KIR_HEADER, sizeof(JFV_KIR_HEADER) - 1},
    {JFV_KIR_PARENT, sizeof(JFV_KIR_PARENT) - 1},
    {JFV_KIR_METADATA, sizeof(JFV_KIR_METADATA) - 1},
    {JFV_KIR_CONTENT, sizeof(JFV_KIR_CONTENT) - 1},
};
static const wire_frame_t comm_parts[GW_JMSG_NUM_PARTS] = {
    {JFV_COMM_HEADER, sizeof(JFV_COMM_HEADER) - 1},
    {JFV_COMM_PARENT, sizeof(JFV_COMM_PARENT) - 1},
    {JFV_COMM_METADATA, sizeof(JFV_COMM_METADATA) - 1},
    {JFV_COMM_CONTENT, sizeof(JFV_COMM_CONTENT) - 1},
};
static const wire_frame_t comm_buffers[3] = {
    {JFV_COMM_BUFFER0, sizeof(JFV_COMM_BUFFER0) - 1},
    {JFV_COMM_BUFFER1, sizeof(JFV_COMM_BUFFER1) - 1},
    {JFV_COMM_BUFFER2, sizeof(JFV_COMM_BUFFER2) - 1},
};

static int json_text_equal(const void *a, size_t alen, const void *b, size_t blen);

/* Two messages agree: channel, ids, parts (byte for byte, or as JSON when `a`'s were rendered) and buffers. */
static void expect_same_msg(const gw_jmsg_t *a, const gw_jmsg_t *b, int parts_as_json)
{
    cr_expect_eq(a->channel, b->channel);
    cr_expect_str_eq(a->msg_id, b->msg_id);
    cr_expect_str_eq(a->msg_type, b->msg_type);
    for (size_t i = 0; i != GW_JMSG_NUM_PARTS; ++i) {
        if (parts_as_json)
            cr_expect(json_text_equal(a->parts[i].base, a->parts[i].len, b->parts[i].base, b->parts[i].len), "part %zu", i);
        else
            expect_frame(a->parts[i], b->parts[i].base, b->parts[i].len, "part");
    }
    cr_assert_eq(a->nbuffers, b->nbuffers);
    for (size_t i = 0; i != a->nbuffers; ++i)
        expect_frame(a->buffers[i], b->buffers[i].base, b->buffers[i].len, "buffer");
}

static int json_text_equal(const void *a, size_t alen, const void *b, size_t blen)
{
    json_t *x = wire_json_parse(a, alen), *y = wire_json_parse(b, blen);
    int eq = x != NULL && y != NULL && json_equal(x, y);
    json_decref(x);
    json_decref(y);
    return eq;
}

/* ---- known answers: kgate's encodings, written by hand, and Jupyter Server's (vectors_jframing.h) ---- */

/*
 * The v1 offsets table of the kernel_info_reply, by hand: 6 offsets (channel and four parts, no
 * buffer), each 8 bytes little-endian after the count; the table ends at 8 * 7 = 56.
 */
#define KIR_V1_TABLE                                                                                                               \
    "\x06\0\0\0\0\0\0\0"   /* 6 offsets */                                                                                         \
    "\x38\0\0\0\0\0\0\0"   /* 56: "shell" starts at the table's end */                                                             \
    "\x3d\0\0\0\0\0\0\0"   /* 61 = 56 + 5: the header starts */                                                                    \
    "\xef\0\0\0\0\0\0\0"   /* 239 = 61 + 178: the parent header starts */                                                          \
    "\xa1\x01\0\0\0\0\0\0" /* 417 = 239 + 178: the metadata start */                                                               \
    "\xa3\x01\0\0\0\0\0\0" /* 419 = 417 + 2: the content starts */                                                                 \
    "\x92\x02\0\0\0\0\0\0" /* 658 = 419 + 239: the end */

Test(jframing, v1_kernel_info_reply_known_bytes)
{
    static const char want[] = KIR_V1_TABLE "shell" JFV_KIR_HEADER JFV_KIR_PARENT JFV_KIR_METADATA JFV_KIR_CONTENT;
    gw_jmsg_t msg;
    int is_binary;
    size_t len;

    cr_assert_eq(sizeof(JFV_KIR_HEADER) - 1, 178);
    cr_assert_eq(sizeof(JFV_KIR_PARENT) - 1, 178);
    cr_assert_eq(sizeof(JFV_KIR_CONTENT) - 1, 239);
    cr_assert_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_SHELL, kir_parts, NULL, 0), 0);
    cr_expect_str_eq(msg.msg_id, "f3b1c2d4-0001-4a6b-9c1e-2d3f4a5b6c7d");
    cr_expect_str_eq(msg.msg_type, "kernel_info_reply");
    char *got = encode(GW_JFRAMING_V1, &msg, &is_binary, &len);
    cr_expect(is_binary);
    expect_bytes(got, len, want, sizeof(want) - 1, "by hand");
    /* what Jupyter Server's serialize_msg_to_ws_v1 sends for the same frames */
    expect_bytes(got, len, LIT(JFV_PY_V1_KIR), "jupyter_server");
    free(got);
    gw_jmsg_dispose(&msg);
}

Test(jframing, legacy_kernel_info_reply_known_text)
{
    static const char want[] =
        "{\"header\":" JFV_KIR_HEADER ",\"msg_id\":\"f3b1c2d4-0001-4a6b-9c1e-2d3f4a5b6c7d\",\"msg_type\":\"kernel_info_reply\""
        ",\"parent_header\":" JFV_KIR_PARENT ",\"metadata\":" JFV_KIR_METADATA ",\"content\":" JFV_KIR_CONTENT
        ",\"buffers\":[],\"channel\":\"shell\"}";
    gw_jmsg_t msg;
    int is_binary;
    size_t len;

    cr_assert_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_SHELL, kir_parts, NULL, 0), 0);
    char *got = encode(GW_JFRAMING_LEGACY, &msg, &is_binary, &len);
    cr_expect_not(is_binary);
    expect_bytes(got, len, want, sizeof(want) - 1, "by hand");

    /* Jupyter Server re-serializes with Python's json.dumps (", " and ": ", \u escapes, its member order, which
     * kgate follows) and re-formats dates it parsed ("05.000000Z" becomes "05Z"); kgate relays the kernel's bytes.
     * Same JSON once the one re-formatted date is put back. */
    json_t *ours = wire_json_parse(got, len), *theirs = wire_json_parse(LIT(JFV_PY_LEGACY_KIR));
    cr_assert_not_null(ours);
    cr_assert_not_null(theirs);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(theirs, "parent_header"), "date")), "2024-01-02T03:04:05Z");
    json_object_set(json_object_get(theirs, "parent_header"), "date",
                    json_object_get(json_object_get(ours, "parent_header"), "date"));
    cr_expect(json_equal(ours, theirs), "kgate's legacy text is not Jupyter Server's JSON");
    /* and the members come in Jupyter Server's order */
    void *mine = json_object_iter(ours), *iter = json_object_iter(theirs);
    for (; iter != NULL && mine != NULL; iter = json_object_iter_next(theirs, iter), mine = json_object_iter_next(ours, mine))
        cr_expect_str_eq(json_object_iter_key(mine), json_object_iter_key(iter));
    cr_expect(iter == NULL && mine == NULL);
    json_decref(ours);
    json_decref(theirs);
    free(got);
    gw_jmsg_dispose(&msg);
}

/* The comm_msg on iopub with buffers of 4, 0 and 3 bytes: 9 offsets, the table ends at 8 * 10 = 80. */
#define COMM_V1_TABLE                                                                                                              \
    "\x09\0\0\0\0\0\0\0"   /* 9 offsets */                                                                                         \
    "\x50\0\0\0\0\0\0\0"   /* 80: "iopub" */                                                                                       \
    "\x55\0\0\0\0\0\0\0"   /* 85: the header (146 bytes) */                                                                        \
    "\xe7\0\0\0\0\0\0\0"   /* 231: the parent header {} */                                                                         \
    "\xe9\0\0\0\0\0\0\0"   /* 233: the metadata {} */                                                                              \
    "\xeb\0\0\0\0\0\0\0"   /* 235: the content (78 bytes) */                                                                       \
    "\x39\x01\0\0\0\0\0\0" /* 313: buffer 0 (4 bytes) */                                                                           \
    "\x3d\x01\0\0\0\0\0\0" /* 317: buffer 1 (empty) */                                                                             \
    "\x3d\x01\0\0\0\0\0\0" /* 317: buffer 2 (3 bytes) */                                                                           \
    "\x40\x01\0\0\0\0\0\0" /* 320: the end */

Test(jframing, v1_buffers_known_bytes)
{
    static const char want[] = COMM_V1_TABLE "iopub" JFV_COMM_HEADER JFV_COMM_PARENT JFV_COMM_METADATA JFV_COMM_CONTENT
        JFV_COMM_BUFFER0 JFV_COMM_BUFFER1 JFV_COMM_BUFFER2;
    gw_jmsg_t msg;
    int is_binary;
    size_t len;

    cr_assert_eq(sizeof(JFV_COMM_HEADER) - 1, 146);
    cr_assert_eq(sizeof(JFV_COMM_CONTENT) - 1, 78);
    cr_assert_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_IOPUB, comm_parts, comm_buffers, 3), 0);
    char *got = encode(GW_JFRAMING_V1, &msg, &is_binary, &len);
    cr_expect(is_binary);
    expect_bytes(got, len, want, sizeof(want) - 1, "by hand");
    expect_bytes(got, len, LIT(JFV_PY_V1_COMM), "jupyter_server");
    free(got);
    gw_jmsg_dispose(&msg);
}

Test(jframing, legacy_buffers_known_bytes)
{
    /* 4 parts (the JSON object and 3 buffers): a table of 4 * 5 = 20 bytes, big-endian, the last part's end unwritten */
    static const char want[] = "\0\0\0\x04"   /* 4 parts */
                               "\0\0\0\x14"   /* 20: the JSON object (344 bytes) */
                               "\0\0\x01\x6c" /* 364: buffer 0 */
                               "\0\0\x01\x70" /* 368: buffer 1 (empty) */
                               "\0\0\x01\x70" /* 368: buffer 2, to the end */
                               "{\"header\":" JFV_COMM_HEADER ",\"msg_id\":\"c0ffee00-0003\",\"msg_type\":\"comm_msg\""
                               ",\"parent_header\":{},\"metadata\":{},\"content\":" JFV_COMM_CONTENT
                               ",\"channel\":\"iopub\"}" JFV_COMM_BUFFER0 JFV_COMM_BUFFER1 JFV_COMM_BUFFER2;
    gw_jmsg_t msg;
    int is_binary;
    size_t len;

    cr_assert_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_IOPUB, comm_parts, comm_buffers, 3), 0);
    char *got = encode(GW_JFRAMING_LEGACY, &msg, &is_binary, &len);
    cr_expect(is_binary);
    expect_bytes(got, len, want, sizeof(want) - 1, "by hand");

    /* Jupyter Server's serialize_binary_message of the same message: the same layout, its JSON differs as in the text
     * case (spacing, the re-formatted date) */
    static const char theirs[] = JFV_PY_LEGACY_COMM;
    cr_expect_eq(memcmp(theirs, "\0\0\0\x04\0\0\0\x14", 8), 0);
    cr_expect_eq(memcmp(theirs + sizeof(theirs) - 1 - 7, JFV_COMM_BUFFER0 JFV_COMM_BUFFER1 JFV_COMM_BUFFER2, 7), 0);
    free(got);
    gw_jmsg_dispose(&msg);
}

/* ---- decoding what clients send ---- */

Test(jframing, decode_v1_client_message_is_views)
{
    decoded_t d;

    cr_assert_eq(decode(GW_JFRAMING_V1, 1, LIT(JFV_PY_V1_CLIENT_COMM), &d), 0);
    cr_expect_eq(d.msg.channel, WIRE_CHANNEL_SHELL);
    cr_expect_str_eq(d.msg.msg_id, "c0ffee00-0003");
    cr_expect_str_eq(d.msg.msg_type, "comm_msg");
    for (size_t i = 0; i != GW_JMSG_NUM_PARTS; ++i) {
        expect_frame(d.msg.parts[i], comm_parts[i].base, comm_parts[i].len, "part");
        cr_expect((char *)d.msg.parts[i].base >= d.data && (char *)d.msg.parts[i].base + d.msg.parts[i].len <= d.data + d.len,
                  "part %zu is not a view into the message", i);
    }
    cr_assert_eq(d.msg.nbuffers, 3);
    for (size_t i = 0; i != 3; ++i) {
        expect_frame(d.msg.buffers[i], comm_buffers[i].base, comm_buffers[i].len, "buffer");
        cr_expect((char *)d.msg.buffers[i].base >= d.data && (char *)d.msg.buffers[i].base <= d.data + d.len);
    }
    cr_expect_null(d.msg._storage, "v1 decoding copies nothing");
    decoded_dispose(&d);
}

Test(jframing, decode_legacy_binary_client_message)
{
    decoded_t d;

    cr_assert_eq(decode(GW_JFRAMING_LEGACY, 1, LIT(JFV_PY_LEGACY_CLIENT_COMM), &d), 0);
    cr_expect_eq(d.msg.channel, WIRE_CHANNEL_SHELL);
    cr_expect_str_eq(d.msg.msg_id, "c0ffee00-0003");
    /* each part rendered compactly: the kernel's compact frames again */
    for (size_t i = 0; i != GW_JMSG_NUM_PARTS; ++i)
        expect_frame(d.msg.parts[i], comm_parts[i].base, comm_parts[i].len, "part");
    cr_assert_eq(d.msg.nbuffers, 3);
    for (size_t i = 0; i != 3; ++i)
        expect_frame(d.msg.buffers[i], comm_buffers[i].base, comm_buffers[i].len, "buffer");
    decoded_dispose(&d);
}

Test(jframing, decode_jupyterlab_legacy_text)
{
    /* JSON.stringify of JupyterLab's message object: its member order, "buffers": [] included */
    static const char text[] =
        "{\"buffers\":[],\"channel\":\"shell\",\"content\":{\"code\":\"print(\\\"h\\u00e9\\\")\",\"silent\":false},"
        "\"header\":{\"date\":\"2024-01-02T03:04:05.000Z\",\"msg_id\":\"5c0f6e1a-7b1e-4d32-9e36-0a6c1c8f0b1e\","
        "\"msg_type\":\"execute_request\",\"session\":\"s\",\"username\":\"\",\"version\":\"5.2\"},"
        "\"metadata\":{\"deletedCells\":[],\"cellId\":\"c1\"},\"parent_header\":{}}";
    decoded_t d;

    cr_assert_eq(decode(GW_JFRAMING_LEGACY, 0, LIT(text), &d), 0);
    cr_expect_eq(d.msg.channel, WIRE_CHANNEL_SHELL);
    cr_expect_str_eq(d.msg.msg_id, "5c0f6e1a-7b1e-4d32-9e36-0a6c1c8f0b1e");
    cr_expect_str_eq(d.msg.msg_type, "execute_request");
    expect_frame(d.msg.parts[GW_JMSG_PART_CONTENT], LIT("{\"code\":\"print(\\\"h\xc3\xa9\\\")\",\"silent\":false}"), "content");
    expect_frame(d.msg.parts[GW_JMSG_PART_PARENT_HEADER], LIT("{}"), "parent");
    expect_frame(d.msg.parts[GW_JMSG_PART_METADATA], LIT("{\"deletedCells\":[],\"cellId\":\"c1\"}"), "metadata");
    cr_expect_eq(d.msg.nbuffers, 0);
    decoded_dispose(&d);
}

Test(jframing, decode_jupyter_server_legacy_text)
{
    /* Jupyter Server's own legacy text (spaces, \u escapes, top-level msg_id and msg_type), had it come from a client */
    decoded_t d;

    cr_assert_eq(decode(GW_JFRAMING_LEGACY, 0, LIT(JFV_PY_LEGACY_KIR), &d), 0);
    cr_expect_eq(d.msg.channel, WIRE_CHANNEL_SHELL);
    expect_frame(d.msg.parts[GW_JMSG_PART_HEADER], LIT(JFV_KIR_HEADER), "header");
    expect_frame(d.msg.parts[GW_JMSG_PART_CONTENT], LIT(JFV_KIR_CONTENT), "content");
    decoded_dispose(&d);
}

Test(jframing, legacy_defaults_as_jupyter_server)
{
    static const char text[] = "{\"header\":{\"msg_id\":\"m\",\"msg_type\":\"kernel_info_request\"},\"parent_header\":null,"
                               "\"msg_id\":\"ignored\",\"buffers\":null}";
    decoded_t d;

    cr_assert_eq(decode(GW_JFRAMING_LEGACY, 0, LIT(text), &d), 0);
    cr_expect_eq(d.msg.channel, WIRE_CHANNEL_SHELL, "no channel: shell, as Jupyter Server assumes");
    cr_expect_str_eq(d.msg.msg_id, "m");
    for (size_t i = GW_JMSG_PART_PARENT_HEADER; i != GW_JMSG_NUM_PARTS; ++i)
        expect_frame(d.msg.parts[i], LIT("{}"), "absent or null member");
    decoded_dispose(&d);

    static const char *const channels[] = {"control", "stdin", "shell"};
    static const wire_channel_t want[] = {WIRE_CHANNEL_CONTROL, WIRE_CHANNEL_STDIN, WIRE_CHANNEL_SHELL};
    for (size_t i = 0; i != 3; ++i) {
        char buf[256];
        int n = snprintf(buf, sizeof(buf), "{\"channel\":\"%s\",\"header\":{\"msg_type\":\"t\",\"msg_id\":\"i\"},\"content\":{}}",
                         channels[i]);
        cr_assert_eq(decode(GW_JFRAMING_LEGACY, 0, buf, (size_t)n, &d), 0);
        cr_expect_eq(d.msg.channel, want[i]);
        decoded_dispose(&d);
    }
}

/* ---- round trips ---- */

static void round_trip(gw_jframing_t framing, const gw_jmsg_t *msg)
{
    int is_binary;
    size_t len;
    decoded_t d;
    char *bytes = encode(framing, msg, &is_binary, &len);

    cr_expect_eq(is_binary, framing == GW_JFRAMING_V1 || msg->nbuffers != 0);
    cr_assert_eq(decode(framing, is_binary, bytes, len, &d), 0, "framing %d", (int)framing);
    /* legacy decoding renders the parts compactly: the same JSON, the same bytes when they were compact already */
    expect_same_msg(&d.msg, msg, framing == GW_JFRAMING_LEGACY);
    decoded_dispose(&d);
    free(bytes);
}

Test(jframing, round_trips_both_framings)
{
    static const wire_frame_t empty_buffers[2] = {{"", 0}, {"", 0}};
    /* a msg_id of GW_JMSG_ID_MAX bytes with every kind of escape: 13 bytes decoded from the escapes, then 'x's */
    char long_id[512];
    int n = snprintf(long_id, sizeof(long_id), "{\"msg_id\":\"q\\\"b\\\\n\\nt\\tu\\u0001e\\u00e9%0*d\",\"msg_type\":\"t\"}",
                     GW_JMSG_ID_MAX - 13, 0);
    const wire_frame_t long_parts[GW_JMSG_NUM_PARTS] = {{long_id, (size_t)n}, {"{}", 2}, {"{}", 2}, {"{}", 2}};
    gw_jmsg_t msg;

    cr_assert_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_SHELL, kir_parts, NULL, 0), 0);
    round_trip(GW_JFRAMING_V1, &msg);
    round_trip(GW_JFRAMING_LEGACY, &msg);
    gw_jmsg_dispose(&msg);
    for (wire_channel_t ch = WIRE_CHANNEL_SHELL; ch != WIRE_CHANNEL_HB; ++ch) {
        if (ch == WIRE_CHANNEL_IOPUB)
            continue; /* decodable from kernels only */
        cr_assert_eq(gw_jmsg_from_parts(&msg, ch, comm_parts, comm_buffers, 3), 0);
        round_trip(GW_JFRAMING_V1, &msg);
        round_trip(GW_JFRAMING_LEGACY, &msg);
        gw_jmsg_dispose(&msg);
    }
    cr_assert_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_STDIN, comm_parts, empty_buffers, 2), 0);
    round_trip(GW_JFRAMING_V1, &msg);
    round_trip(GW_JFRAMING_LEGACY, &msg);
    gw_jmsg_dispose(&msg);
    cr_assert_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_CONTROL, long_parts, NULL, 0), 0);
    cr_expect_eq(strlen(msg.msg_id), 255);
    cr_expect_eq(memcmp(msg.msg_id,
                        "q\"b\\n\nt\tu\x01"
                        "e\xc3\xa9"
                        "000",
                        16),
                 0);
    round_trip(GW_JFRAMING_V1, &msg);
    round_trip(GW_JFRAMING_LEGACY, &msg);
    gw_jmsg_dispose(&msg);
}

Test(jframing, legacy_top_level_ids_are_escaped_json)
{
    static const char header[] = "{\"msg_id\":\"a\\\"b\\\\c\\n\\u001f\\/\",\"msg_type\":\"x\\ty\"}";
    const wire_frame_t parts[GW_JMSG_NUM_PARTS] = {{(void *)header, sizeof(header) - 1}, {"{}", 2}, {"{}", 2}, {"{}", 2}};
    gw_jmsg_t msg;
    int is_binary;
    size_t len;

    cr_assert_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_IOPUB, parts, NULL, 0), 0);
    char *text = encode(GW_JFRAMING_LEGACY, &msg, &is_binary, &len);
    json_t *json = wire_json_parse(text, len);
    cr_assert_not_null(json, "%.*s", (int)len, text);
    cr_expect_str_eq(json_string_value(json_object_get(json, "msg_id")), "a\"b\\c\n\x1f/");
    cr_expect_str_eq(json_string_value(json_object_get(json, "msg_type")), "x\ty");
    cr_expect_str_eq(json_string_value(json_object_get(json, "channel")), "iopub");
    json_decref(json);
    free(text);
    gw_jmsg_dispose(&msg);
}

/* ---- messages kgate makes ---- */

Test(jframing, status_restarting_from_wire)
{
    wire_msg_t *wmsg = wire_msg_create("status", "kgate-session", json_pack("{s:s}", "execution_state", "restarting"));
    static const char blob[] = "\x01\x02";
    gw_jmsg_t msg;
    int is_binary;
    size_t len;

    cr_assert_eq(gw_jmsg_from_wire(&msg, WIRE_CHANNEL_IOPUB, wmsg), 0);
    cr_expect_str_eq(msg.msg_type, "status");
    cr_expect_str_eq(msg.msg_id, wire_msg_id(wmsg));
    expect_frame(msg.parts[GW_JMSG_PART_CONTENT], LIT("{\"execution_state\":\"restarting\"}"), "content");
    expect_frame(msg.parts[GW_JMSG_PART_PARENT_HEADER], LIT("{}"), "parent");

    char *text = encode(GW_JFRAMING_LEGACY, &msg, &is_binary, &len);
    cr_expect_not(is_binary);
    json_t *json = wire_json_parse(text, len);
    cr_assert_not_null(json);
    cr_expect_str_eq(json_string_value(json_object_get(json, "channel")), "iopub");
    cr_expect_str_eq(json_string_value(json_object_get(json, "msg_id")), wire_msg_id(wmsg));
    cr_expect(json_equal(json_object_get(json, "header"), wmsg->header));
    cr_expect(json_equal(json_object_get(json, "content"), wmsg->content));
    json_decref(json);
    free(text);

    char *bin = encode(GW_JFRAMING_V1, &msg, &is_binary, &len);
    cr_expect(is_binary);
    cr_assert_gt(len, 56 + 5);
    cr_expect_eq(memcmp(bin + 56, "iopub", 5), 0);
    cr_expect(json_text_equal(bin + 61, msg.parts[0].len, msg.parts[0].base, msg.parts[0].len));
    free(bin);
    gw_jmsg_dispose(&msg);

    /* buffers of a wire message are views */
    wire_frames_push_copy(&wmsg->buffers, blob, 2);
    cr_assert_eq(gw_jmsg_from_wire(&msg, WIRE_CHANNEL_SHELL, wmsg), 0);
    cr_assert_eq(msg.nbuffers, 1);
    cr_expect_eq(msg.buffers[0].base, wmsg->buffers.entries[0].base);
    round_trip(GW_JFRAMING_LEGACY, &msg);
    gw_jmsg_dispose(&msg);
    gw_jmsg_dispose(&msg); /* twice is fine */
    wire_msg_destroy(wmsg);
}

Test(jframing, from_parts_and_wire_refuse)
{
    const wire_frame_t not_object[GW_JMSG_NUM_PARTS] = {{"[]", 2}, {"{}", 2}, {"{}", 2}, {"{}", 2}};
    const wire_frame_t no_type[GW_JMSG_NUM_PARTS] = {{LIT("{\"msg_id\":\"x\"}")}, {"{}", 2}, {"{}", 2}, {"{}", 2}};
    gw_jmsg_t msg;

    cr_expect_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_SHELL, not_object, NULL, 0), GW_EJMSG_NOTJSON);
    cr_expect_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_SHELL, no_type, NULL, 0), GW_EJMSG_HEADER);
    cr_expect_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_HB, kir_parts, NULL, 0), GW_EJMSG_CHANNEL);
    cr_expect_eq(gw_jmsg_from_parts(&msg, (wire_channel_t)-1, kir_parts, NULL, 0), GW_EJMSG_CHANNEL);
    cr_expect_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_COUNT, kir_parts, NULL, 0), GW_EJMSG_CHANNEL);
    wire_msg_t *wmsg = wire_msg_create("status", "s", NULL);
    cr_expect_eq(gw_jmsg_from_wire(&msg, WIRE_CHANNEL_HB, wmsg), GW_EJMSG_CHANNEL);
    json_object_set_new(wmsg->header, "msg_type", json_integer(1));
    cr_expect_eq(gw_jmsg_from_wire(&msg, WIRE_CHANNEL_IOPUB, wmsg), GW_EJMSG_HEADER);
    wire_msg_destroy(wmsg);
}

Test(jframing, encode_refuses)
{
    static gw_jmsg_encoded_t enc;
    static wire_frame_t buffers[GW_JMSG_MAX_BUFFERS + 1];
    gw_jmsg_t msg;

    cr_assert_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_SHELL, kir_parts, buffers, GW_JMSG_MAX_BUFFERS + 1), 0);
    cr_expect_eq(gw_jmsg_encode(GW_JFRAMING_V1, &msg, &enc), GW_EJMSG_TOOMANYBUFFERS);
    cr_expect_eq(gw_jmsg_encode(GW_JFRAMING_LEGACY, &msg, &enc), GW_EJMSG_TOOMANYBUFFERS);
    /* the most buffers: the scratch holds their table */
    msg.nbuffers = GW_JMSG_MAX_BUFFERS;
    cr_expect_eq(gw_jmsg_encode(GW_JFRAMING_V1, &msg, &enc), 0);
    cr_expect_eq(enc.iovcnt, 5 + GW_JMSG_MAX_BUFFERS);
    cr_expect_eq(gw_jmsg_encode(GW_JFRAMING_LEGACY, &msg, &enc), 0);
    cr_expect_eq(enc.iovcnt, GW_JMSG_ENCODED_IOV_MAX);
    msg.channel = WIRE_CHANNEL_HB;
    cr_expect_eq(gw_jmsg_encode(GW_JFRAMING_V1, &msg, &enc), GW_EJMSG_CHANNEL);
    gw_jmsg_dispose(&msg);

    /* a buffer starting past 4 GiB cannot be written in the legacy binary table (lengths only: nothing is read) */
    buffers[0] = (wire_frame_t){NULL, (size_t)UINT32_MAX};
    buffers[1] = (wire_frame_t){NULL, 1};
    cr_assert_eq(gw_jmsg_from_parts(&msg, WIRE_CHANNEL_SHELL, kir_parts, buffers, 2), 0);
    cr_expect_eq(gw_jmsg_encode(GW_JFRAMING_LEGACY, &msg, &enc), GW_EJMSG_TOOBIG);
    cr_expect_eq(enc.iovcnt, 0);
    cr_expect_eq(gw_jmsg_encode(GW_JFRAMING_V1, &msg, &enc), 0, "v1's offsets have 64 bits");
    gw_jmsg_dispose(&msg);
}

/* ---- malformed input ---- */

/* A v1 message built here, independently of the encoder: the channel, the four parts, then the buffers. */
static char *v1_build(const char *channel, const char *const parts[4], size_t nbuffers, size_t *len)
{
    size_t n = 6 + nbuffers, at = 8 * (n + 1), total = at + strlen(channel), off = at;
    for (size_t i = 0; i != 4; ++i)
        total += strlen(parts[i]);
    for (size_t i = 0; i != nbuffers; ++i)
        total += i + 1; /* buffer i: i + 1 bytes of 'b' */
    char *out = malloc(total);
    uint64_t offsets[64];
    size_t k = 0;
    offsets[k++] = off;
    offsets[k++] = off += strlen(channel);
    for (size_t i = 0; i != 4; ++i)
        offsets[k++] = off += strlen(parts[i]);
    for (size_t i = 0; i != nbuffers; ++i)
        offsets[k++] = off += i + 1;
    for (size_t i = 0; i != 8; ++i)
        out[i] = (char)(n >> 8 * i);
    for (size_t j = 0; j != k; ++j)
        for (size_t i = 0; i != 8; ++i)
            out[8 * (j + 1) + i] = (char)(offsets[j] >> 8 * i);
    memcpy(out + at, channel, strlen(channel));
    at += strlen(channel);
    for (size_t i = 0; i != 4; ++i) {
        memcpy(out + at, parts[i], strlen(parts[i]));
        at += strlen(parts[i]);
    }
    for (size_t i = 0; i != nbuffers; ++i) {
        memset(out + at, 'b', i + 1);
        at += i + 1;
    }
    *len = total;
    return out;
}

static void put_le64(char *p, uint64_t v)
{
    for (size_t i = 0; i != 8; ++i)
        p[i] = (char)(v >> 8 * i);
}

static void expect_decode_error(gw_jframing_t framing, int is_binary, const void *data, size_t len, int want, const char *what)
{
    decoded_t d;
    int ret = decode(framing, is_binary, data, len, &d);
    cr_expect_eq(ret, want, "%s: %d (%s), expected %d (%s)", what, ret, gw_strerror(ret), want, gw_strerror(want));
    if (ret == 0)
        gw_jmsg_dispose(&d.msg);
    free(d.data);
}

#define H_OK "{\"msg_id\":\"i\",\"msg_type\":\"t\"}"

Test(jframing, v1_malformed_framing)
{
    static const char *const parts[4] = {H_OK, "{}", "{}", "{}"};
    size_t len;
    char *good = v1_build("shell", parts, 2, &len), *bad = malloc(len + 8);
    decoded_t d;

    cr_assert_eq(decode(GW_JFRAMING_V1, 1, good, len, &d), 0);
    cr_expect_eq(d.msg.nbuffers, 2);
    decoded_dispose(&d);

    expect_decode_error(GW_JFRAMING_V1, 0, good, len, GW_EJMSG_NOTBINARY, "text frame");
    expect_decode_error(GW_JFRAMING_V1, 1, "", 0, GW_EJMSG_TRUNCATED, "empty");
    expect_decode_error(GW_JFRAMING_V1, 1, "\x06\0\0\0\0\0\0", 7, GW_EJMSG_TRUNCATED, "7 bytes");
    expect_decode_error(GW_JFRAMING_V1, 1, "\x06\0\0\0\0\0\0\0", 8, GW_EJMSG_TRUNCATED, "a count alone");
    /* every proper prefix: too short for the table, or ending before the last offset */
    for (size_t n = 0; n != len; ++n) {
        decoded_t p;
        cr_expect_neq(decode(GW_JFRAMING_V1, 1, good, n, &p), 0, "prefix of %zu bytes", n);
        free(p.data);
    }
    /* a byte after the last part */
    memcpy(bad, good, len);
    bad[len] = 'x';
    expect_decode_error(GW_JFRAMING_V1, 1, bad, len + 1, GW_EJMSG_OFFSETS, "trailing byte");

    static const struct {
        uint64_t count;
        int want;
    } counts[] = {
        {0, GW_EJMSG_PARTCOUNT},
        {5, GW_EJMSG_PARTCOUNT},
        {6 + GW_JMSG_MAX_BUFFERS + 1, GW_EJMSG_TOOMANYBUFFERS},
        {UINT64_MAX, GW_EJMSG_TOOMANYBUFFERS},
        {UINT64_MAX / 8, GW_EJMSG_TOOMANYBUFFERS}, /* 8 * (n + 1) would wrap */
        {(uint64_t)1 << 61, GW_EJMSG_TOOMANYBUFFERS},
        {6 + GW_JMSG_MAX_BUFFERS, GW_EJMSG_TRUNCATED}, /* the table passes the end */
        {9, GW_EJMSG_OFFSETS},                         /* one more than there are: the first offset is not the table's end */
    };
    for (size_t i = 0; i != sizeof(counts) / sizeof(counts[0]); ++i) {
        memcpy(bad, good, len);
        put_le64(bad, counts[i].count);
        expect_decode_error(GW_JFRAMING_V1, 1, bad, len, counts[i].want, "count");
    }
    /* a count of 7 reads the table of one buffer fewer: its first offset is not the table's end */
    memcpy(bad, good, len);
    put_le64(bad, 7);
    expect_decode_error(GW_JFRAMING_V1, 1, bad, len, GW_EJMSG_OFFSETS, "count one short");

    /* the offset at `index` moved by `delta`, or set to `value` */
    static const struct {
        size_t index;
        int64_t delta; /* added to the good value */
        int absolute;  /* or this value */
        uint64_t value;
    } offsets[] = {
        {0, 1, 0, 0},          /* the channel does not start at the table's end */
        {0, -1, 0, 0},         /* inside the table */
        {1, -6, 0, 0},         /* the channel ends before it starts */
        {3, 1000, 0, 0},       /* past the end */
        {4, -100, 0, 0},       /* before the previous one */
        {7, 1, 0, 0},          /* the last one past the end */
        {7, -1, 0, 0},         /* the last one before the end */
        {2, 0, 1, UINT64_MAX}, /* absurd */
        {5, 0, 1, 1ull << 63}, /* absurd */
        {0, 0, 1, UINT64_MAX}, /* absurd first */
    };
    for (size_t i = 0; i != sizeof(offsets) / sizeof(offsets[0]); ++i) {
        char *p;
        uint64_t v = 0;
        memcpy(bad, good, len);
        p = bad + 8 * (offsets[i].index + 1);
        for (size_t b = 8; b-- != 0;)
            v = v << 8 | (unsigned char)p[b];
        put_le64(p, offsets[i].absolute ? offsets[i].value : v + (uint64_t)offsets[i].delta);
        expect_decode_error(GW_JFRAMING_V1, 1, bad, len, GW_EJMSG_OFFSETS, "offset");
    }
    free(good);
    free(bad);
}

Test(jframing, v1_malformed_parts_and_channels)
{
    static const struct {
        const char *channel, *parts[4];
        int want;
    } cases[] = {
        {"shell", {"[]", "{}", "{}", "{}"}, GW_EJMSG_NOTJSON},
        {"shell", {H_OK, "null", "{}", "{}"}, GW_EJMSG_NOTJSON},
        {"shell", {H_OK, "{}", "", "{}"}, GW_EJMSG_NOTJSON},
        {"shell", {H_OK, "{}", "{}", "{\"a\":1"}, GW_EJMSG_NOTJSON},
        {"shell", {H_OK, "{}", "{}", "{\"a\":\"\xff\"}"}, GW_EJMSG_NOTJSON},         /* invalid UTF-8 */
        {"shell", {H_OK, "{}", "{}", "{\"a\":\"\xed\xa0\x80\"}"}, GW_EJMSG_NOTJSON}, /* a surrogate in UTF-8 */
        {"shell", {H_OK, "{}", "{}", "{} {}"}, GW_EJMSG_NOTJSON},
        {"iopub", {"[]", "{}", "{}", "{}"}, GW_EJMSG_NOTJSON}, /* JSON is checked before the channel */
        {"shell", {"{\"msg_type\":\"t\"}", "{}", "{}", "{}"}, GW_EJMSG_HEADER},
        {"shell", {"{\"msg_id\":\"i\"}", "{}", "{}", "{}"}, GW_EJMSG_HEADER},
        {"shell", {"{\"msg_id\":1,\"msg_type\":\"t\"}", "{}", "{}", "{}"}, GW_EJMSG_HEADER},
        {"shell", {"{\"msg_id\":\"\",\"msg_type\":\"t\"}", "{}", "{}", "{}"}, GW_EJMSG_HEADER},
        {"shell", {"{\"msg_id\":\"i\",\"msg_type\":\"\"}", "{}", "{}", "{}"}, GW_EJMSG_HEADER},
        {"shell", {"{\"msg_id\":\"a\\u0000b\",\"msg_type\":\"t\"}", "{}", "{}", "{}"}, GW_EJMSG_HEADER},
        {"shell", {"{\"msg_id\":\"i\",\"msg_type\":null}", "{}", "{}", "{}"}, GW_EJMSG_HEADER},
        {"iopub", {H_OK, "{}", "{}", "{}"}, GW_EJMSG_CHANNEL},
        {"hb", {H_OK, "{}", "{}", "{}"}, GW_EJMSG_CHANNEL},
        {"", {H_OK, "{}", "{}", "{}"}, GW_EJMSG_CHANNEL},
        {"Shell", {H_OK, "{}", "{}", "{}"}, GW_EJMSG_CHANNEL},
        {"shell ", {H_OK, "{}", "{}", "{}"}, GW_EJMSG_CHANNEL},
        {"shel", {H_OK, "{}", "{}", "{}"}, GW_EJMSG_CHANNEL},
        {"control", {H_OK, "{}", "{}", "{}"}, 0},
        {"stdin", {H_OK, " {} ", "\n{}", "{\"a\":[1,2.5,null,true]}"}, 0},
    };
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        size_t len;
        char *bytes = v1_build(cases[i].channel, cases[i].parts, 0, &len), what[64];
        snprintf(what, sizeof(what), "case %zu", i);
        expect_decode_error(GW_JFRAMING_V1, 1, bytes, len, cases[i].want, what);
        free(bytes);
    }

    /* a NUL byte in the channel name */
    static const char *const ok_parts[4] = {H_OK, "{}", "{}", "{}"};
    size_t len;
    char *bytes = v1_build("shellx", ok_parts, 0, &len);
    bytes[8 * 7 + 5] = '\0';
    expect_decode_error(GW_JFRAMING_V1, 1, bytes, len, GW_EJMSG_CHANNEL, "NUL in the channel");
    free(bytes);
}

Test(jframing, ids_bounds)
{
    char header[1024];
    size_t len;
    static const struct {
        size_t id_len, type_len;
        int want;
    } cases[] = {
        {GW_JMSG_ID_MAX, GW_JMSG_TYPE_MAX, 0},
        {GW_JMSG_ID_MAX + 1, 1, GW_EJMSG_HEADER},
        {1, GW_JMSG_TYPE_MAX + 1, GW_EJMSG_HEADER},
    };
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        int n = snprintf(header, sizeof(header), "{\"msg_id\":\"%0*d\",\"msg_type\":\"%0*d\"}", (int)cases[i].id_len, 0,
                         (int)cases[i].type_len, 0);
        const char *const parts[4] = {header, "{}", "{}", "{}"};
        char *bytes = v1_build("shell", parts, 0, &len);
        expect_decode_error(GW_JFRAMING_V1, 1, bytes, len, cases[i].want, "v1 ids");
        free(bytes);
        char text[1200];
        n = snprintf(text, sizeof(text), "{\"header\":%s}", header);
        expect_decode_error(GW_JFRAMING_LEGACY, 0, text, (size_t)n, cases[i].want, "legacy ids");
    }
}

Test(jframing, legacy_text_malformed)
{
    static const struct {
        const char *text;
        int want;
    } cases[] = {
        {"", GW_EJMSG_NOTJSON},
        {"not json", GW_EJMSG_NOTJSON},
        {"[]", GW_EJMSG_NOTJSON},
        {"{}", GW_EJMSG_NOTJSON},
        {"{\"header\":[]}", GW_EJMSG_NOTJSON},
        {"{\"header\":" H_OK ",\"parent_header\":[]}", GW_EJMSG_NOTJSON},
        {"{\"header\":" H_OK ",\"metadata\":1}", GW_EJMSG_NOTJSON},
        {"{\"header\":" H_OK ",\"content\":\"{}\"}", GW_EJMSG_NOTJSON}, /* Jupyter Server would relay a string as raw bytes */
        {"{\"header\":" H_OK ",\"content\":{}", GW_EJMSG_NOTJSON},
        {"{\"header\":" H_OK ",\"content\":{\"a\":\"\xc3\"}}", GW_EJMSG_NOTJSON},
        {"{\"header\":" H_OK ",\"content\":{\"a\":\"\\ud800\"}}", GW_EJMSG_NOTJSON},
        {"{\"header\":" H_OK ",\"content\":{\"a\":NaN}}", GW_EJMSG_NOTJSON},
        {"{\"header\":" H_OK ",\"buffers\":[\"AAAA\"]}", GW_EJMSG_TEXTBUFFERS},
        {"{\"header\":" H_OK ",\"buffers\":{}}", GW_EJMSG_TEXTBUFFERS},
        {"{\"header\":" H_OK ",\"buffers\":\"\"}", GW_EJMSG_TEXTBUFFERS},
        {"{\"header\":{\"msg_id\":\"i\"}}", GW_EJMSG_HEADER},
        {"{\"header\":{\"msg_type\":\"t\",\"msg_id\":[]}}", GW_EJMSG_HEADER},
        {"{\"header\":" H_OK ",\"channel\":\"iopub\"}", GW_EJMSG_CHANNEL},
        {"{\"header\":" H_OK ",\"channel\":\"hb\"}", GW_EJMSG_CHANNEL},
        {"{\"header\":" H_OK ",\"channel\":1}", GW_EJMSG_CHANNEL},
        {"{\"header\":" H_OK ",\"channel\":\"shell\\u0000\"}", GW_EJMSG_CHANNEL},
        {"{\"header\":" H_OK ",\"channel\":\"iopub\",\"content\":[]}", GW_EJMSG_NOTJSON},
        {"{\"header\":" H_OK ",\"channel\":\"stdin\",\"buffers\":[]}", 0},
    };
    for (size_t i = 0; i != sizeof(cases) / sizeof(cases[0]); ++i) {
        char what[64];
        snprintf(what, sizeof(what), "case %zu: %s", i, cases[i].text);
        expect_decode_error(GW_JFRAMING_LEGACY, 0, cases[i].text, strlen(cases[i].text), cases[i].want, what);
    }
    /* a raw NUL is no JSON */
    expect_decode_error(GW_JFRAMING_LEGACY, 0, LIT("{\"header\":" H_OK "}\0"), GW_EJMSG_NOTJSON, "raw NUL");
}

static void put_be32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

Test(jframing, legacy_binary_malformed)
{
    static const char good[] = JFV_PY_LEGACY_CLIENT_COMM;
    size_t len = sizeof(good) - 1;
    char *bad = malloc(len);

    expect_decode_error(GW_JFRAMING_LEGACY, 1, "", 0, GW_EJMSG_TRUNCATED, "empty");
    expect_decode_error(GW_JFRAMING_LEGACY, 1, "\0\0\0", 3, GW_EJMSG_TRUNCATED, "3 bytes");
    expect_decode_error(GW_JFRAMING_LEGACY, 1, "\0\0\0\x01", 4, GW_EJMSG_TRUNCATED, "a count alone");
    expect_decode_error(GW_JFRAMING_LEGACY, 1, "\0\0\0\x01\0\0\0\x08", 8, GW_EJMSG_NOTJSON, "one empty part");
    /* a JSON object alone (no buffers): Jupyter Server reads it, JupyterLab would not send it */
    expect_decode_error(GW_JFRAMING_LEGACY, 1, LIT("\0\0\0\x01\0\0\0\x08{\"header\":" H_OK "}"), 0, "JSON alone");

    static const struct {
        uint32_t count;
        int want;
    } counts[] = {
        {0, GW_EJMSG_PARTCOUNT},
        {GW_JMSG_MAX_BUFFERS + 2, GW_EJMSG_TOOMANYBUFFERS},
        {0x80000000u, GW_EJMSG_TOOMANYBUFFERS}, /* negative for Python's "!i" */
        {UINT32_MAX, GW_EJMSG_TOOMANYBUFFERS},
        {GW_JMSG_MAX_BUFFERS + 1, GW_EJMSG_TRUNCATED},
        {5, GW_EJMSG_OFFSETS}, /* the first offset is then not the table's end */
        {3, GW_EJMSG_OFFSETS},
    };
    for (size_t i = 0; i != sizeof(counts) / sizeof(counts[0]); ++i) {
        memcpy(bad, good, len);
        put_be32(bad, counts[i].count);
        expect_decode_error(GW_JFRAMING_LEGACY, 1, bad, len, counts[i].want, "count");
    }
    static const struct {
        size_t index;
        uint32_t value;
        int want;
    } offsets[] = {
        {0, 21, GW_EJMSG_OFFSETS},     {0, 19, GW_EJMSG_OFFSETS},     {1, 19, GW_EJMSG_OFFSETS},
        {2, 0x0100, GW_EJMSG_OFFSETS}, {3, 0xffff, GW_EJMSG_OFFSETS}, {3, UINT32_MAX, GW_EJMSG_OFFSETS},
        {1, 0x0158, GW_EJMSG_NOTJSON}, /* the JSON object one byte short */
    };
    for (size_t i = 0; i != sizeof(offsets) / sizeof(offsets[0]); ++i) {
        memcpy(bad, good, len);
        put_be32(bad + 4 * (offsets[i].index + 1), offsets[i].value);
        expect_decode_error(GW_JFRAMING_LEGACY, 1, bad, len, offsets[i].want, "offset");
    }
    free(bad);
}

/* ---- robustness: every prefix and byte flip of valid messages decodes or fails cleanly, and what decodes round-trips ---- */

static void decode_anything(gw_jframing_t framing, int is_binary, const char *data, size_t len)
{
    decoded_t d;

    if (decode(framing, is_binary, data, len, &d) == 0) {
        round_trip(framing, &d.msg);
        round_trip(framing == GW_JFRAMING_V1 ? GW_JFRAMING_LEGACY : GW_JFRAMING_V1, &d.msg);
        decoded_dispose(&d);
    } else {
        free(d.data);
    }
}

Test(jframing, prefixes_and_byte_flips, .timeout = 60)
{
    static const struct {
        gw_jframing_t framing;
        int is_binary;
        const char *data;
        size_t len;
    } inputs[] = {
        {GW_JFRAMING_V1, 1, LIT(JFV_PY_V1_CLIENT_COMM)},
        {GW_JFRAMING_LEGACY, 1, LIT(JFV_PY_LEGACY_CLIENT_COMM)},
        {GW_JFRAMING_LEGACY, 0, LIT("{\"channel\":\"control\",\"header\":" H_OK ",\"content\":{\"a\":[1,\"\xc3\xa9\"]}}")},
    };
    static const unsigned char flips[] = {0x01, 0x20, 0x80, 0xff};
    for (size_t i = 0; i != sizeof(inputs) / sizeof(inputs[0]); ++i) {
        char *copy = malloc(inputs[i].len);
        for (size_t n = 0; n <= inputs[i].len; ++n)
            decode_anything(inputs[i].framing, inputs[i].is_binary, inputs[i].data, n);
        for (size_t at = 0; at != inputs[i].len; ++at) {
            for (size_t f = 0; f != sizeof(flips); ++f) {
                memcpy(copy, inputs[i].data, inputs[i].len);
                copy[at] = (char)(copy[at] ^ flips[f]);
                decode_anything(inputs[i].framing, inputs[i].is_binary, copy, inputs[i].len);
            }
        }
        free(copy);
    }
}

Test(jframing, error_messages_fit_a_close_reason)
{
    static const int codes[] = {GW_EJMSG_NOTBINARY, GW_EJMSG_TRUNCATED, GW_EJMSG_PARTCOUNT,   GW_EJMSG_TOOMANYBUFFERS,
                                GW_EJMSG_OFFSETS,   GW_EJMSG_NOTJSON,   GW_EJMSG_TEXTBUFFERS, GW_EJMSG_HEADER,
                                GW_EJMSG_CHANNEL,   GW_EJMSG_TOOBIG};
    for (size_t i = 0; i != sizeof(codes) / sizeof(codes[0]); ++i) {
        const char *s = gw_strerror(codes[i]);
        cr_expect(strlen(s) > 0 && strlen(s) <= 123 && strcmp(s, "unknown error") != 0, "%d: %s", codes[i], s);
    }
}
