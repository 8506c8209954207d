/* tests/kernelmgr/test_overcap.c: a message over the cap read in pieces (kernelmgr/src/overcap.h): a signed stream message gives
 * the head of its text and the exact count of the rest; a forged one, another type, an unfinished one or big headers give none. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "wire/codec.h"
#include "wire/json_in.h"
#include "wire/message.h"
#include "overcap.h"

#define KEY "the key"

typedef struct st_msg_t {
    char *header, *content;
    wire_frame_t frames[6]; /* delimiter, signature, header, parent_header, metadata, content */
    char sig[WIRE_SIG_HEX_LEN + 1];
} msg_t;

/* A message of `type` whose content is `content` (taken), signed with `key`; its header padded to `header_pad` bytes or so. */
static void make(msg_t *m, const char *key, const char *type, char *content, size_t header_pad)
{
    static const char parent[] = "{\"msg_id\":\"req-1\",\"msg_type\":\"execute_request\"}";
    wire_signer_t signer = {0};

    m->header = malloc(header_pad + 200);
    snprintf(m->header, header_pad + 200, "{\"msg_id\":\"m-1\",\"msg_type\":\"%s\",\"pad\":\"%*s\"}", type, (int)header_pad, "");
    m->content = content;
    m->frames[0] = (wire_frame_t){WIRE_DELIMITER, strlen(WIRE_DELIMITER)};
    m->frames[2] = (wire_frame_t){m->header, strlen(m->header)};
    m->frames[3] = (wire_frame_t){(void *)parent, strlen(parent)};
    m->frames[4] = (wire_frame_t){"{}", 2};
    m->frames[5] = (wire_frame_t){content, strlen(content)};
    wire_signer_init(&signer, key, strlen(key));
    wire_frame_t parts[4] = {m->frames[2], m->frames[3], m->frames[4], m->frames[5]};
    wire_signer_sign(&signer, parts, m->sig);
    wire_signer_dispose(&signer);
    m->frames[1] = (wire_frame_t){m->sig, strlen(m->sig)};
}

static void dispose(msg_t *m)
{
    free(m->header);
    free(m->content);
}

/* "{...,"text": <n times unit>}" with `name` */
static char *stream_content(const char *name, const char *unit, size_t n)
{
    size_t ulen = strlen(unit), len = 64 + strlen(name) + ulen * n;
    char *c = malloc(len), *p = c;

    p += sprintf(p, "{\"name\":\"%s\",\"text\":\"", name);
    for (size_t i = 0; i != n; ++i, p += ulen)
        memcpy(p, unit, ulen);
    strcpy(p, "\"}");
    return c;
}

/* The message read as kernelmgr reads one over `cap`: its first five frames whole, its content in `piece`-byte pieces (all of
 * it, or `content_len` bytes of it). Returns what kmgr_overcap_end gives; `*started`, `*forged` as they said. */
static wire_msg_t *read_over(const msg_t *m, uint64_t cap, uint64_t room, size_t piece, size_t content_len, int *started,
                             int *forged)
{
    wire_signer_t signer = {0};
    kmgr_overcap_t oc = {0};
    const wire_frame_t *content = &m->frames[5];

    wire_signer_init(&signer, KEY, strlen(KEY));
    *started = kmgr_overcap_start(&oc, &signer, m->frames, 5, content->len, cap, room);
    for (size_t at = 0; at < content_len; at += piece)
        kmgr_overcap_piece(&oc, (const char *)content->base + at, content_len - at < piece ? content_len - at : piece);
    wire_msg_t *msg = kmgr_overcap_end(&oc, forged);
    kmgr_overcap_dispose(&oc);
    wire_signer_dispose(&signer);
    return msg;
}

Test(overcap, a_signed_stream_gives_the_head_of_its_text_and_counts_the_rest_decoded)
{
    enum { N = 200000, CAP = 300 * 1024 }; /* the head: the cap less 64 KiB */
    const size_t head_max = CAP - 64 * 1024;
    msg_t m;
    int started, forged;

    /* "é\n" escaped as the kernel may send it: 8 bytes encoded, 3 decoded */
    make(&m, KEY, "stream", stream_content("stderr", "\\u00e9\\n", N), 0);
    for (size_t piece = 1; piece <= 4096; piece *= 64) {
        wire_msg_t *msg = read_over(&m, CAP, UINT64_MAX, piece, m.frames[5].len, &started, &forged);
        cr_assert(started && !forged);
        cr_assert_not_null(msg, "pieces of %zu bytes: no head", piece);
        cr_assert(msg->content_cut && msg->content_raw);
        cr_assert_str_eq(wire_msg_type(msg), "stream");
        cr_assert_str_eq(wire_msg_parent_id(msg), "req-1");
        json_t *content = wire_json_parse(msg->raw_content.base, msg->raw_content.len);
        cr_assert_not_null(content, "the head's content is not JSON");
        cr_assert_str_eq(json_string_value(json_object_get(content, "name")), "stderr");
        size_t head = json_string_length(json_object_get(content, "text"));
        /* whole escapes only, as many as fit: 8 encoded bytes each */
        cr_assert_eq(head, head_max / 8 * 3, "pieces of %zu bytes: a head of %zu decoded bytes", piece, head);
        cr_assert_eq(memcmp(json_string_value(json_object_get(content, "text")), "\xc3\xa9\n", 3), 0);
        cr_assert_eq(head + msg->text_dropped, (uint64_t)N * 3, "head %zu + dropped %llu", head,
                     (unsigned long long)msg->text_dropped);
        json_decref(content);
        wire_msg_destroy(msg);
    }
    dispose(&m);
}

Test(overcap, a_forged_message_gives_nothing_and_says_so)
{
    msg_t m;
    int started, forged;

    make(&m, "another key", "stream", stream_content("stdout", "f", 300000), 0);
    wire_msg_t *msg = read_over(&m, 256 * 1024, UINT64_MAX, 4096, m.frames[5].len, &started, &forged);
    cr_assert(started);
    cr_assert_null(msg);
    cr_assert(forged, "a bad signature over the whole message is not told");
    dispose(&m);
}

Test(overcap, other_types_unfinished_messages_and_big_headers_give_nothing)
{
    msg_t m;
    int started, forged;

    /* a result is not cut: its type, and a content with no text */
    make(&m, KEY, "display_data", strdup("{\"data\":{\"text/plain\":\"big\"},\"metadata\":{}}"), 0);
    cr_assert_null(read_over(&m, 16, UINT64_MAX, 3, m.frames[5].len, &started, &forged));
    cr_assert(started && !forged);
    dispose(&m);
    /* a stream type with another name, signed */
    make(&m, KEY, "stream", stream_content("stdlog", "a", 1000), 0);
    cr_assert_null(read_over(&m, 512, UINT64_MAX, 100, m.frames[5].len, &started, &forged));
    cr_assert(!forged);
    dispose(&m);
    /* the connection was lost before its end: nothing, and nothing forged */
    make(&m, KEY, "stream", stream_content("stdout", "a", 100000), 0);
    cr_assert_null(read_over(&m, 4096, UINT64_MAX, 1000, m.frames[5].len / 2, &started, &forged));
    cr_assert(started && !forged);
    dispose(&m);
    /* headers over KMGR_OVERCAP_HEADERS_MAX: passed over unread */
    make(&m, KEY, "stream", stream_content("stdout", "a", 100), KMGR_OVERCAP_HEADERS_MAX);
    cr_assert_null(read_over(&m, 1024, UINT64_MAX, 10, m.frames[5].len, &started, &forged));
    cr_assert(!started && !forged);
    dispose(&m);
}

Test(overcap, the_head_leaves_room_for_the_other_frames_within_the_cap)
{
    cr_assert_eq(kmgr_overcap_head_max((uint64_t)64 << 20), ((size_t)64 << 20) - KMGR_OVERCAP_HEADERS_MAX);
    cr_assert_eq(kmgr_overcap_head_max(100 * 1024), 50 * 1024, "a small cap keeps half for its head");
}

/* A head no longer than its reader keeps: a run with 1000 bytes of output budget left gets 1000 bytes, not the cap's head, and
 * the count of the rest stays exact; with nobody to read it (0), only the count. The buffer follows the room, not the cap. */
Test(overcap, the_head_is_no_longer_than_its_reader_keeps)
{
    enum { N = 300000, CAP = 1 << 20 };
    msg_t m;
    int started, forged;
    const uint64_t rooms[] = {1000, 0, 7};

    make(&m, KEY, "stream", stream_content("stdout", "a", N), 0);
    for (size_t k = 0; k != 2; ++k) {
        wire_msg_t *msg = read_over(&m, CAP, rooms[k], 4096, m.frames[5].len, &started, &forged);
        cr_assert(started && !forged);
        cr_assert_not_null(msg);
        json_t *content = wire_json_parse(msg->raw_content.base, msg->raw_content.len);
        size_t head = json_string_length(json_object_get(content, "text"));
        cr_expect_eq(head, rooms[k], "room %llu: a head of %zu bytes", (unsigned long long)rooms[k], head);
        cr_expect_eq(head + msg->text_dropped, (uint64_t)N);
        cr_expect_leq(msg->raw_storage->cap, 64 + KMGR_OVERCAP_ESCAPE_MAX * rooms[k], "room %llu: a buffer of %zu bytes",
                      (unsigned long long)rooms[k], msg->raw_storage->cap);
        json_decref(content);
        wire_msg_destroy(msg);
    }
    dispose(&m);
    /* escapes: whole ones within the room, decoded ("é\n" is 3 bytes decoded, 8 as sent) */
    make(&m, KEY, "stream", stream_content("stdout", "\\u00e9\\n", 1000), 0);
    wire_msg_t *msg = read_over(&m, CAP, rooms[2], 7, m.frames[5].len, &started, &forged);
    cr_assert_not_null(msg);
    json_t *content = wire_json_parse(msg->raw_content.base, msg->raw_content.len);
    size_t head = json_string_length(json_object_get(content, "text"));
    cr_expect_eq(head, 6, "a head of %zu decoded bytes for a room of 7 (whole characters: é, \\n, é, \\n)", head);
    cr_expect_eq(head + msg->text_dropped, 3000);
    json_decref(content);
    wire_msg_destroy(msg);
    dispose(&m);
}
