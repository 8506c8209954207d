/* tests/fuzz/fuzz_endmark.c: the isolated session's end-of-run marker (procs/endmark.h) in a stream read in pieces: any
 * pieces give what a scan of the whole stream gives, that is the first real marker, and the kept-back tail stays bounded. */
#include "fuzz.h"
#include "procs/endmark.h"

/* A short nonce, so that the fuzzer writes whole markers (tests/fuzz/dict/endmark.dict has their parts). */
#define NONCE "n0"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

typedef struct st_reading_t {
    size_t out_len; /* output before the marker */
    int found, status;
} reading_t;

/* Reads `stream` in pieces whose sizes come from `sizes` (cycled; 0 stands for 1), as process_pipe does. */
static void read_stream(const gw_endmark_t *m, const char *stream, size_t len, const uint8_t *sizes, size_t nsizes, reading_t *r)
{
    char *buf = fuzz_copy(stream, len);
    size_t have = 0, fed = 0, consumed = 0, k = 0;

    memset(r, 0, sizeof(*r));
    for (;;) {
        size_t piece = nsizes != 0 ? sizes[k++ % nsizes] : len;
        int final;
        piece = piece != 0 ? piece : 1;
        fed = len - fed < piece ? len : fed + piece;
        final = fed == len;
        have = fed;
        while (!r->found) {
            gw_endmark_hit_t hit;
            /* an exact-size copy of what the pipe's buffer holds, so that ASan sees a read past it */
            char *view = fuzz_copy(buf + consumed, have - consumed);
            gw_endmark_scan(m, view, have - consumed, final, &hit);
            free(view);
            FUZZ_CHECK(hit.data_len <= have - consumed, "data %zu of %zu", hit.data_len, have - consumed);
            consumed += hit.data_len;
            r->out_len += hit.data_len;
            if (!hit.found)
                break;
            FUZZ_CHECK(hit.marker_len <= GW_ENDMARK_MAX_LEN && hit.marker_len <= have - consumed, "marker of %zu", hit.marker_len);
            FUZZ_CHECK(m->with_status || hit.status == 0, "stderr's marker has no status");
            consumed += hit.marker_len;
            r->found = 1;
            r->status = hit.status;
        }
        if (r->found)
            break;
        FUZZ_CHECK(have - consumed < GW_ENDMARK_MAX_LEN, "kept back %zu bytes", have - consumed);
        if (final) {
            FUZZ_CHECK(consumed == len, "end of file keeps %zu bytes back", len - consumed);
            break;
        }
    }
    free(buf);
}

/* The first real marker by brute force: "\036KGATE:" NONCE, [":" 1-3 digits], "\036". */
static void reference(int with_status, const char *s, size_t len, reading_t *r)
{
    static const char prefix[] = "\036KGATE:" NONCE;
    size_t plen = sizeof(prefix) - 1;

    memset(r, 0, sizeof(*r));
    for (size_t i = 0; i < len; ++i) {
        size_t p = i + plen, d = 0;
        int code = 0;
        if (len - i < plen || memcmp(s + i, prefix, plen) != 0)
            continue;
        if (with_status) {
            if (p >= len || s[p] != ':')
                continue;
            for (++p; p < len && d < 4 && s[p] >= '0' && s[p] <= '9'; ++p, ++d)
                code = code * 10 + (s[p] - '0');
            if (d == 0 || d > 3)
                continue;
        }
        if (p >= len || s[p] != '\036')
            continue;
        r->out_len = i;
        r->found = 1;
        r->status = code;
        return;
    }
    r->out_len = len;
}

/* The input: a flags byte (bit 0: stdout's marker, with a status), a count n, n piece sizes, then the stream. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    gw_endmark_t m;
    reading_t whole, pieces, ones, ref;
    static const uint8_t one = 1;
    size_t nsizes;

    if (size < 2)
        return 0;
    gw_endmark_init(&m, NONCE, data[0] & 1);
    nsizes = data[1] < size - 2 ? data[1] : size - 2;
    const uint8_t *sizes = data + 2;
    const char *stream = (const char *)data + 2 + nsizes;
    size_t len = size - 2 - nsizes;

    read_stream(&m, stream, len, NULL, 0, &whole);
    read_stream(&m, stream, len, sizes, nsizes, &pieces);
    read_stream(&m, stream, len, &one, 1, &ones);
    reference(data[0] & 1, stream, len, &ref);
    FUZZ_CHECK(whole.found == ref.found && whole.out_len == ref.out_len && whole.status == ref.status,
               "whole: found %d at %zu status %d; reference: %d at %zu status %d", whole.found, whole.out_len, whole.status,
               ref.found, ref.out_len, ref.status);
    FUZZ_CHECK(memcmp(&whole, &pieces, sizeof(whole)) == 0, "pieces read otherwise");
    FUZZ_CHECK(memcmp(&whole, &ones, sizeof(whole)) == 0, "1-byte pieces read otherwise");
    return 0;
}
