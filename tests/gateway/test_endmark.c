/* tests/gateway/test_endmark.c: the isolated session's end-of-run marker (procs/endmark.h) in a pipe's stream, whole, split at
 * every byte offset and in 1-byte pieces; look-alikes are output; the kept-back tail is bounded. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include "procs/endmark.h"

#define NONCE "0123456789abcdef0123456789abcdef"

/* What a pipe's reader makes of a stream: the output before the marker, the marker's status, and what came after it. */
typedef struct st_reading_t {
    char out[4096], after[4096];
    size_t out_len, after_len, max_kept;
    int found, status;
} reading_t;

/* Feeds `len` bytes in pieces of the sizes in `cuts` (offsets where a read stops), as process_pipe does: the bytes not
 * consumed stay in the pipe's buffer and are scanned again with the next read; end of file after the last. */
static void read_stream(const gw_endmark_t *m, const char *stream, size_t len, const size_t *cuts, size_t ncuts, reading_t *r)
{
    char buf[4096];
    size_t have = 0, fed = 0;

    memset(r, 0, sizeof(*r));
    for (size_t i = 0; i <= ncuts; ++i) {
        size_t upto = i < ncuts ? cuts[i] : len;
        int final = i == ncuts;
        memcpy(buf + have, stream + fed, upto - fed);
        have += upto - fed;
        fed = upto;
        size_t consumed = 0;
        for (;;) {
            gw_endmark_hit_t hit = {have - consumed, 0, 0, 0};
            if (!r->found)
                gw_endmark_scan(m, buf + consumed, have - consumed, final, &hit);
            char *to = r->found ? r->after + r->after_len : r->out + r->out_len;
            memcpy(to, buf + consumed, hit.data_len);
            *(r->found ? &r->after_len : &r->out_len) += hit.data_len;
            consumed += hit.data_len;
            if (!hit.found)
                break;
            cr_assert_leq(hit.marker_len, GW_ENDMARK_MAX_LEN);
            consumed += hit.marker_len;
            r->found = 1;
            r->status = hit.status;
        }
        if (have - consumed > r->max_kept)
            r->max_kept = have - consumed;
        memmove(buf, buf + consumed, have - consumed);
        have -= consumed;
    }
    cr_assert_eq(have, 0, "end of file leaves nothing kept back");
}

static void expect_same(const reading_t *a, const reading_t *b, const char *how)
{
    cr_assert_eq(a->found, b->found, "%s", how);
    cr_assert_eq(a->status, b->status, "%s", how);
    cr_assert_eq(a->out_len, b->out_len, "%s", how);
    cr_assert(memcmp(a->out, b->out, a->out_len) == 0, "%s", how);
    cr_assert_eq(a->after_len, b->after_len, "%s", how);
    cr_assert(memcmp(a->after, b->after, a->after_len) == 0, "%s", how);
    cr_assert_lt(b->max_kept, GW_ENDMARK_MAX_LEN, "%s: kept back %zu bytes", how, b->max_kept);
}

/* The stream read whole, split in two at every offset, and in 1-byte pieces, all read the same. */
static void check_splits(const gw_endmark_t *m, const char *stream, size_t len, reading_t *whole)
{
    size_t cuts[4096];
    reading_t r;
    char how[64];

    read_stream(m, stream, len, NULL, 0, whole);
    for (size_t at = 0; at <= len; ++at) {
        snprintf(how, sizeof(how), "split at %zu of %zu", at, len);
        read_stream(m, stream, len, &at, 1, &r);
        expect_same(whole, &r, how);
    }
    for (size_t i = 0; i != len; ++i)
        cuts[i] = i + 1;
    read_stream(m, stream, len, cuts, len, &r);
    expect_same(whole, &r, "1-byte pieces");
}

Test(endmark, stdout_marker_at_every_split)
{
    static const char stream[] = "line 1\nno newline\036KGATE:" NONCE ":17\036after";
    gw_endmark_t m;
    reading_t r;

    gw_endmark_init(&m, NONCE, 1);
    check_splits(&m, stream, sizeof(stream) - 1, &r);
    cr_assert(r.found);
    cr_assert_eq(r.status, 17);
    cr_assert_eq(r.out_len, strlen("line 1\nno newline"));
    cr_assert(memcmp(r.out, "line 1\nno newline", r.out_len) == 0);
    cr_assert_eq(r.after_len, 5);
}

Test(endmark, stderr_marker_at_every_split)
{
    static const char stream[] = "err\036\036KGATE:" NONCE "\036";
    gw_endmark_t m;
    reading_t r;

    gw_endmark_init(&m, NONCE, 0);
    check_splits(&m, stream, sizeof(stream) - 1, &r);
    cr_assert(r.found);
    cr_assert_eq(r.out_len, 4, "a lone \\036 is output");
    cr_assert(memcmp(r.out, "err\036", 4) == 0);
}

/* Text that begins like a marker and is not one is output, at every split, and the real marker after it is found. */
Test(endmark, look_alikes_are_output)
{
    static const char *const fakes[] = {
        "\036KGATE:ffffffffffffffffffffffffffffffff:0\036", /* another nonce */
        "\036KGATE:" NONCE ":\036",                         /* no status */
        "\036KGATE:" NONCE ":1234\036",                     /* more digits than an exit status has */
        "\036KGATE:" NONCE ":12x\036",                      /* a wrong byte after the digits */
        "\036KGATE:" NONCE "\036",                          /* stderr's marker on stdout */
        "\036KGATE",                                        /* a prefix, then text */
    };
    gw_endmark_t m;
    reading_t r;
    char stream[512];

    gw_endmark_init(&m, NONCE, 1);
    for (size_t i = 0; i != sizeof(fakes) / sizeof(fakes[0]); ++i) {
        int n = snprintf(stream, sizeof(stream), "a%sb\036KGATE:" NONCE ":0\036", fakes[i]);
        check_splits(&m, stream, (size_t)n, &r);
        cr_assert(r.found, "fake %zu", i);
        cr_assert_eq(r.status, 0);
        cr_assert_eq(r.out_len, strlen(fakes[i]) + 2, "fake %zu is output", i);
        cr_assert(memcmp(r.out + 1, fakes[i], strlen(fakes[i])) == 0);
    }
}

/* A marker cut by the end of the stream (bash died mid-printf) is output, and nothing stays kept back. */
Test(endmark, partial_marker_at_end_of_file_is_output)
{
    static const char stream[] = "x\036KGATE:" NONCE ":2";
    gw_endmark_t m;
    reading_t r;

    gw_endmark_init(&m, NONCE, 1);
    check_splits(&m, stream, sizeof(stream) - 1, &r);
    cr_assert_not(r.found);
    cr_assert_eq(r.out_len, sizeof(stream) - 1);
}

/* The tail kept back while a marker may be forming never reaches GW_ENDMARK_MAX_LEN, and goes out once it cannot be one. */
Test(endmark, kept_tail_is_bounded)
{
    static const char stream[] = "\036KGATE:" NONCE ":255";
    gw_endmark_t m;
    gw_endmark_hit_t hit;

    gw_endmark_init(&m, NONCE, 1);
    gw_endmark_scan(&m, stream, sizeof(stream) - 1, 0, &hit);
    cr_assert_not(hit.found);
    cr_assert_eq(hit.data_len, 0, "the whole marker-to-be is kept");
    cr_assert_eq(sizeof(stream) - 1, GW_ENDMARK_MAX_LEN - 1);
    gw_endmark_scan(&m, "\036KGATE:" NONCE ":2555", sizeof(stream), 0, &hit);
    cr_assert_not(hit.found);
    cr_assert_eq(hit.data_len, sizeof(stream), "four digits: output");
}
