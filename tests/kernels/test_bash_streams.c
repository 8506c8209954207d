/* tests/kernels/test_bash_streams.c: batching of bash's stdout and stderr into stream texts (kernels/bash/src/streams.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include "streams.h"

/* What the streams emitted, in order. */
typedef struct {
    struct {
        int which;
        char *text;
        size_t len;
    } e[16];
    size_t n;
} emitted_t;

static void record(void *ctx, int which, const char *text, size_t len)
{
    emitted_t *out = ctx;

    cr_assert_lt(out->n, 16, "more texts than the test expects");
    cr_assert_eq(text[len], '\0', "an emitted text is not NUL-terminated");
    out->e[out->n].which = which;
    out->e[out->n].text = malloc(len + 1);
    memcpy(out->e[out->n].text, text, len + 1);
    out->e[out->n].len = len;
    ++out->n;
}

static void emitted_dispose(emitted_t *out)
{
    for (size_t i = 0; i != out->n; ++i)
        free(out->e[i].text);
}

static void expect_text(const emitted_t *out, size_t i, int which, const char *text)
{
    cr_assert_gt(out->n, i, "text %zu (\"%s\" on %s) was not emitted", i, text, bk_stream_name(which));
    cr_expect_eq(out->e[i].which, which, "text %zu went to %s, not %s", i, bk_stream_name(out->e[i].which), bk_stream_name(which));
    cr_expect_eq(out->e[i].len, strlen(text));
    cr_expect_str_eq(out->e[i].text, text);
}

Test(bash_streams, a_small_write_waits_for_its_timer_which_the_first_byte_arms)
{
    emitted_t out = {0};
    bk_streams_t st;

    bk_streams_init(&st, record, &out);
    cr_expect_eq(bk_streams_next_flush(&st), -1);
    bk_streams_push(&st, BK_STDOUT, "hello ", 6, 1000);
    bk_streams_push(&st, BK_STDOUT, "world\n", 6, 1015);
    cr_expect_eq(out.n, 0, "a write below the batch size was published at once");
    cr_expect_eq(bk_streams_next_flush(&st), 1000 + BK_STREAM_FLUSH_MS, "the timer runs from the first pending byte");
    bk_streams_flush_due(&st, 1000 + BK_STREAM_FLUSH_MS - 1);
    cr_expect_eq(out.n, 0, "published before its timer");
    bk_streams_flush_due(&st, 1000 + BK_STREAM_FLUSH_MS);
    cr_assert_eq(out.n, 1, "the two writes are not one text when the timer fires");
    expect_text(&out, 0, BK_STDOUT, "hello world\n");
    cr_expect_eq(bk_streams_next_flush(&st), -1, "a flushed stream keeps its timer armed");
    bk_streams_dispose(&st);
    emitted_dispose(&out);
}

Test(bash_streams, a_write_on_one_stream_publishes_the_other_first)
{
    emitted_t out = {0};
    bk_streams_t st;

    bk_streams_init(&st, record, &out);
    bk_streams_push(&st, BK_STDOUT, "before\n", 7, 0);
    bk_streams_push(&st, BK_STDERR, "oops\n", 5, 1);
    cr_assert_eq(out.n, 1, "stdout written before stderr was not published ahead of it");
    expect_text(&out, 0, BK_STDOUT, "before\n");
    bk_streams_push(&st, BK_STDOUT, "after\n", 6, 2);
    bk_streams_flush_all(&st, 1);
    cr_assert_eq(out.n, 3);
    expect_text(&out, 1, BK_STDERR, "oops\n");
    expect_text(&out, 2, BK_STDOUT, "after\n");
    bk_streams_dispose(&st);
    emitted_dispose(&out);
}

Test(bash_streams, a_full_batch_is_published_at_once)
{
    emitted_t out = {0};
    bk_streams_t st;
    char *chunk = malloc(BK_STREAM_CHUNK);

    memset(chunk, 'x', BK_STREAM_CHUNK);
    bk_streams_init(&st, record, &out);
    bk_streams_push(&st, BK_STDERR, chunk, 10, 0);
    bk_streams_push(&st, BK_STDERR, chunk, BK_STREAM_CHUNK, 0);
    cr_assert_eq(out.n, 1, "%d bytes waited for the timer", 10 + BK_STREAM_CHUNK);
    cr_expect_eq(out.e[0].which, BK_STDERR);
    cr_expect_eq(out.e[0].len, (size_t)10 + BK_STREAM_CHUNK, "the batch was cut (%zu bytes)", out.e[0].len);
    cr_expect_eq(bk_streams_next_flush(&st), -1);
    bk_streams_dispose(&st);
    emitted_dispose(&out);
    free(chunk);
}

Test(bash_streams, a_character_split_between_reads_survives_and_a_final_flush_replaces_a_cut_one)
{
    emitted_t out = {0};
    bk_streams_t st;

    bk_streams_init(&st, record, &out);
    bk_streams_push(&st, BK_STDOUT, "caf\xc3", 4, 0);
    bk_streams_flush(&st, BK_STDOUT, 0);
    expect_text(&out, 0, BK_STDOUT, "caf");
    bk_streams_push(&st, BK_STDOUT, "\xa9!", 2, 5);
    bk_streams_flush(&st, BK_STDOUT, 0);
    expect_text(&out, 1, BK_STDOUT, "\xc3\xa9!");
    /* The writer is done: the first byte of a character it never finished is U+FFFD, not dropped or held. */
    bk_streams_push(&st, BK_STDOUT, "\xe2\x82", 2, 10);
    bk_streams_flush(&st, BK_STDOUT, 0);
    cr_expect_eq(out.n, 2, "an incomplete character alone was published");
    bk_streams_flush_all(&st, 1);
    cr_assert_eq(out.n, 3);
    cr_expect_eq(out.e[2].which, BK_STDOUT);
    cr_expect(out.e[2].len >= 3 && memcmp(out.e[2].text, "\xef\xbf\xbd", 3) == 0, "a cut character is not U+FFFD: \"%s\"",
              out.e[2].text);
    cr_expect_eq(st.s[BK_STDOUT].len, 0, "a final flush kept %zu bytes", st.s[BK_STDOUT].len);
    bk_streams_dispose(&st);
    emitted_dispose(&out);
}
