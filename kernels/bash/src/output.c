/* kernels/bash/src/output.c: reading bash's output pipes and publishing their text as stream messages. */
#include "proc.h"
#include "output.h"

static void publish_stream(void *ctx, int which, const char *text, size_t len)
{
    bk_output_t *out = ctx;

    if (!out->silent)
        bk_channels_publish(out->channels, out->parent, "stream",
                            json_pack("{s:s,s:s%}", "name", bk_stream_name(which), "text", text, len));
}

void bk_output_init(bk_output_t *out, bk_channels_t *channels)
{
    bk_streams_init(&out->streams, publish_stream, out);
    out->channels = channels;
    out->parent = NULL;
    out->silent = 0;
}

void bk_output_dispose(bk_output_t *out)
{
    bk_streams_dispose(&out->streams);
    json_decref(out->parent);
    out->parent = NULL;
}

void bk_output_direct(bk_output_t *out, json_t *parent_header, int silent)
{
    json_decref(out->parent);
    out->parent = json_incref(parent_header);
    out->silent = silent;
}

int bk_output_read(bk_output_t *out, bk_shell_t *sh, int which)
{
    /* One buffer for both pipes: the kernel has one thread, and a chunk is pushed before the next read. */
    static char chunk[BK_STREAM_CHUNK];
    ssize_t n = bk_shell_read_output(sh, which, chunk, sizeof(chunk));

    if (n <= 0)
        return 0;
    if (sh->ready)
        bk_streams_push(&out->streams, which, chunk, (size_t)n, bk_now_ms());
    return 1;
}

void bk_output_drain(bk_output_t *out, bk_shell_t *sh)
{
    for (int i = 0; i != BK_STREAM_COUNT; ++i)
        while (bk_output_read(out, sh, i))
            ;
}
