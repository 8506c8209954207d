/* tests/wire/test_zmtp_reader.c: the ZMTP stream parser fed one valid stream whole, split at every byte, and in 1-byte pieces. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "wire/codec.h"
#include "wire/zmtp.h"
#include "wire/zmtp_reader.h"
#include "wire_test.h"

TestSuite(zmtp_reader, .init = wire_test_init);

#define MAX_MESSAGE 2000
#define MAX_FRAMES 8

typedef struct {
    uint8_t *p;
    size_t len, cap;
} bytes_t;

static void put(bytes_t *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

static void put_frame(bytes_t *b, const void *body, size_t n, unsigned flags)
{
    uint8_t head[WIRE_ZMTP_HEAD_MAX];
    put(b, head, wire_zmtp_write_head(head, n, flags));
    put(b, body, n);
}

/* A message of `n` frames (bodies given), the last without MORE. */
static void put_message(bytes_t *b, const char *const *frames, const size_t *lens, size_t n)
{
    for (size_t i = 0; i != n; ++i)
        put_frame(b, frames[i], lens[i], i + 1 != n ? WIRE_ZMTP_MORE : 0);
}

/* The stream a kernel's socket sends: greeting, READY, messages small and big, a PING, one over the size cap (after its parent
 * header), one over the frame cap, an empty one. */
static bytes_t valid_stream(void)
{
    bytes_t b = {0};
    uint8_t g[WIRE_ZMTP_GREETING_LEN], ready[512];
    static char big[MAX_MESSAGE - 10], over[MAX_MESSAGE + 500];
    int n;

    memset(big, 'b', sizeof(big));
    memset(over, 'o', sizeof(over));
    wire_zmtp_greeting(g);
    put(&b, g, sizeof(g));
    n = wire_zmtp_ready(ready, sizeof(ready), "ROUTER", NULL);
    cr_assert_gt(n, 0);
    put(&b, ready, (size_t)n);
    const char *m1[] = {"topic", WIRE_DELIMITER, "sig", "{\"h\":1}", "{\"msg_id\":\"p1\"}", "{}", "{\"text\":\"hi\"}"};
    size_t l1[] = {5, strlen(WIRE_DELIMITER), 3, 7, 15, 2, 13};
    put_message(&b, m1, l1, 7);
    put_frame(&b, "\4PING\0\1", 7, WIRE_ZMTP_COMMAND);
    const char *m2[] = {big};
    size_t l2[] = {sizeof(big)};
    put_message(&b, m2, l2, 1); /* a long head (over 255 bytes) */
    /* its frames after the one over the cap are skipped, not given as pieces */
    const char *m3[] = {WIRE_DELIMITER, "sig", "{\"h\":3}", "{\"msg_id\":\"p3\"}", "{}", over, "buffer"};
    size_t l3[] = {strlen(WIRE_DELIMITER), 3, 7, 15, 2, sizeof(over), 6};
    put_message(&b, m3, l3, 7);
    const char *m4[MAX_FRAMES + 2];
    size_t l4[MAX_FRAMES + 2];
    for (size_t i = 0; i != MAX_FRAMES + 2; ++i) {
        m4[i] = "f";
        l4[i] = 1;
    }
    put_message(&b, m4, l4, MAX_FRAMES + 2);
    const char *m5[] = {""};
    size_t l5[] = {0};
    put_message(&b, m5, l5, 1);
    const char *m6[] = {"after", "all"};
    size_t l6[] = {5, 3};
    put_message(&b, m6, l6, 2);
    return b;
}

/* The bytes of the frame over the cap that OVER_PIECE items gave since the last OVER_START (all 'o' in valid_stream). */
static size_t piece_bytes;

/* What the items say, as text: enough to tell any two different results apart. */
static void record(char *out, size_t cap, const wire_zmtp_item_t *it)
{
    size_t at = strlen(out);
    switch (it->kind) {
    case WIRE_ZMTP_OVER_START:
        at += (size_t)snprintf(out + at, cap - at, "S%zu/%zu", it->nframes, it->bytes);
        for (size_t i = 0; i != it->nframes; ++i)
            at += (size_t)snprintf(out + at, cap - at, ",%.*s", (int)(it->frames[i].len > 8 ? 8 : it->frames[i].len),
                                   (const char *)it->frames[i].base);
        snprintf(out + at, cap - at, ";");
        piece_bytes = 0;
        break;
    case WIRE_ZMTP_OVER_PIECE:
        cr_assert_gt(it->len, 0, "an empty piece");
        for (size_t i = 0; i != it->len; ++i)
            cr_assert_eq(it->body[i], 'o', "piece byte %zu of the frame over the cap is not its own", piece_bytes + i);
        piece_bytes += it->len;
        break;
    case WIRE_ZMTP_GREETED:
        snprintf(out + at, cap - at, "G;");
        break;
    case WIRE_ZMTP_CMD:
        snprintf(out + at, cap - at, "C%zu:%.*s;", it->len, (int)(it->len > 5 ? 5 : it->len), (const char *)it->body);
        break;
    case WIRE_ZMTP_MESSAGE:
        at += (size_t)snprintf(out + at, cap - at, "M%zu/%zu", it->nframes, it->bytes);
        for (size_t i = 0; i != it->nframes; ++i)
            at += (size_t)snprintf(out + at, cap - at, ",%.*s", (int)(it->frames[i].len > 8 ? 8 : it->frames[i].len),
                                   (const char *)it->frames[i].base);
        snprintf(out + at, cap - at, ";");
        break;
    case WIRE_ZMTP_OVERSIZED:
        snprintf(out + at, cap - at, "P%zu;O:%.*s;", piece_bytes, (int)it->parent_len, it->parent != NULL ? it->parent : "");
        break;
    case WIRE_ZMTP_TOO_MANY_FRAMES:
        snprintf(out + at, cap - at, "T;");
        break;
    case WIRE_ZMTP_BROKEN:
        snprintf(out + at, cap - at, "B:%s;", it->why);
        break;
    case WIRE_ZMTP_NEED:
        break;
    }
}

/*
 * Feeds `b` in pieces of the sizes `pieces` gives (the last repeats) as a connection would: what is pending is an exact-size
 * heap copy (ASan sees a read past it), items are taken until NEED, what they consumed is dropped. The items' text in `out`.
 */
static void feed(const bytes_t *b, const size_t *pieces, size_t npieces, char *out, size_t cap)
{
    wire_zmtp_reader_t r;
    size_t start = 0, end = 0, k = 0;

    out[0] = '\0';
    wire_zmtp_reader_init(&r, MAX_MESSAGE, MAX_FRAMES);
    while (end < b->len) {
        size_t piece = pieces[k < npieces ? k : npieces - 1];
        ++k;
        end = end + piece < b->len ? end + piece : b->len;
        for (;;) {
            uint8_t *copy = wire_test_exact_copy(b->p + start, end - start);
            wire_zmtp_item_t it;
            wire_zmtp_reader_next(&r, copy, end - start, 1, &it);
            record(out, cap, &it);
            cr_assert_leq(it.consumed, end - start, "an item consumed more than it was given");
            free(copy);
            start += it.consumed;
            if (it.kind == WIRE_ZMTP_NEED || it.kind == WIRE_ZMTP_BROKEN)
                break;
        }
    }
    cr_assert_eq(start, b->len, "%zu bytes of the stream were left unparsed", b->len - start);
    wire_zmtp_reader_dispose(&r);
}

Test(zmtp_reader, the_same_items_at_every_split_point_and_in_one_byte_pieces)
{
    bytes_t b = valid_stream();
    static char whole[8192], split[8192];
    size_t all = b.len, one = 1;

    feed(&b, &all, 1, whole, sizeof(whole));
    cr_assert_str_eq(
        whole, "G;C28:\x05READ;M7/54,topic,<IDS|MSG,sig,{\"h\":1},{\"msg_id,{},{\"text\":;C7:\x04PING;"
               "M1/1990,bbbbbbbb;S5/2500,<IDS|MSG,sig,{\"h\":3},{\"msg_id,{};P2500;O:{\"msg_id\":\"p3\"};T;M1/0,;M2/8,after,all;");
    for (size_t at = 1; at < b.len; ++at) {
        size_t pieces[2] = {at, b.len};
        feed(&b, pieces, 2, split, sizeof(split));
        cr_assert_str_eq(split, whole, "split at byte %zu of %zu", at, b.len);
    }
    feed(&b, &one, 1, split, sizeof(split));
    cr_assert_str_eq(split, whole, "in 1-byte pieces");
    free(b.p);
}

Test(zmtp_reader, a_message_before_the_handshake_and_a_command_inside_a_message_break_the_stream)
{
    wire_zmtp_reader_t r;
    wire_zmtp_item_t it;
    bytes_t b = {0};
    uint8_t g[WIRE_ZMTP_GREETING_LEN];

    wire_zmtp_greeting(g);
    put(&b, g, sizeof(g));
    put_frame(&b, "x", 1, WIRE_ZMTP_MORE);
    put_frame(&b, "\4PING\0\1", 7, WIRE_ZMTP_COMMAND);
    wire_zmtp_reader_init(&r, MAX_MESSAGE, MAX_FRAMES);
    wire_zmtp_reader_next(&r, b.p, b.len, 0, &it);
    cr_assert_eq(it.kind, WIRE_ZMTP_GREETED);
    wire_zmtp_reader_next(&r, b.p + it.consumed, b.len - it.consumed, 0, &it);
    cr_assert_eq(it.kind, WIRE_ZMTP_BROKEN);
    cr_assert_str_eq(it.why, "a message before the ZMTP handshake ended");
    wire_zmtp_reader_next(&r, b.p + WIRE_ZMTP_GREETING_LEN, b.len - WIRE_ZMTP_GREETING_LEN, 1, &it);
    cr_assert_eq(it.kind, WIRE_ZMTP_BROKEN);
    cr_assert_str_eq(it.why, "a ZMTP command inside a message");
    b.p[0] = 0;
    wire_zmtp_reader_reset(&r);
    wire_zmtp_reader_next(&r, b.p, b.len, 1, &it);
    cr_assert_eq(it.kind, WIRE_ZMTP_BROKEN, "a broken greeting");
    wire_zmtp_reader_dispose(&r);
    free(b.p);
}
