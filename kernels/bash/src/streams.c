/* kernels/bash/src/streams.c: stdout and stderr bytes batched into valid UTF-8 texts, in the order they were read. */
#include <stdlib.h>
#include <string.h>
#include "wire/alloc.h"
#include "wire/text.h"
#include "streams.h"

const char *bk_stream_name(int which)
{
    return which == BK_STDOUT ? "stdout" : "stderr";
}

void bk_streams_init(bk_streams_t *st, bk_streams_emit_cb emit, void *ctx)
{
    memset(st, 0, sizeof(*st));
    for (int i = 0; i != BK_STREAM_COUNT; ++i)
        st->s[i].buf = wire_malloc(BK_STREAM_FLUSH_BYTES + BK_STREAM_CHUNK);
    st->emit = emit;
    st->ctx = ctx;
}

void bk_streams_dispose(bk_streams_t *st)
{
    for (int i = 0; i != BK_STREAM_COUNT; ++i) {
        free(st->s[i].buf);
        st->s[i].buf = NULL;
        st->s[i].len = 0;
    }
}

void bk_streams_flush(bk_streams_t *st, int which, int final)
{
    bk_stream_t *s = &st->s[which];
    char *text;
    size_t text_len, used;

    s->flush_at = 0;
    if (s->len == 0)
        return;
    used = wire_utf8_sanitize(s->buf, s->len, final, &text, &text_len);
    if (text_len != 0)
        st->emit(st->ctx, which, text, text_len);
    free(text);
    memmove(s->buf, s->buf + used, s->len - used);
    s->len -= used;
}

void bk_streams_flush_all(bk_streams_t *st, int final)
{
    for (int i = 0; i != BK_STREAM_COUNT; ++i)
        bk_streams_flush(st, i, final);
}

void bk_streams_push(bk_streams_t *st, int which, const char *data, size_t len, long long now_ms)
{
    bk_stream_t *s = &st->s[which];

    if (st->s[!which].len != 0)
        bk_streams_flush(st, !which, 0);
    memcpy(s->buf + s->len, data, len);
    s->len += len;
    if (s->len >= BK_STREAM_FLUSH_BYTES)
        bk_streams_flush(st, which, 0);
    else if (s->flush_at == 0)
        s->flush_at = now_ms + BK_STREAM_FLUSH_MS;
}

void bk_streams_flush_due(bk_streams_t *st, long long now_ms)
{
    for (int i = 0; i != BK_STREAM_COUNT; ++i)
        if (st->s[i].flush_at != 0 && st->s[i].flush_at <= now_ms)
            bk_streams_flush(st, i, 0);
}

long long bk_streams_next_flush(const bk_streams_t *st)
{
    long long next = -1;

    for (int i = 0; i != BK_STREAM_COUNT; ++i)
        if (st->s[i].flush_at != 0 && (next < 0 || st->s[i].flush_at < next))
            next = st->s[i].flush_at;
    return next;
}
