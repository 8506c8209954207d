/* tests/fuzz/fuzz_multipart.c: multipart/form-data parsing (files/multipart.h): structure of the parts, and searching in small
 * windows changes nothing.
 */
#include <sanitizer/asan_interface.h>
#include "fuzz.h"
#include "files/multipart.h"
#include "wire/alloc.h"

/* The search window of the small parses: short bodies cross window edges and report progress as a large one does. */
#define SMALL_WINDOW 7

#define MAX_PARTS 4

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_global_init();
    return 0;
}

/* What progress reports said; every byte before `upto` is poisoned, so that reading it again is an ASan error. */
typedef struct st_progress_t {
    char *body;
    size_t len, upto, calls;
} progress_t;

static void on_progress(void *ctx, size_t upto)
{
    progress_t *p = ctx;

    FUZZ_CHECK(upto >= p->upto && upto <= p->len, "progress went from %zu to %zu of %zu", p->upto, upto, p->len);
    p->upto = upto;
    ++p->calls;
    ASAN_POISON_MEMORY_REGION(p->body, upto);
}

/* The first delimiter at or after `from` that the parser must take: "\r\n--" boundary, then "--" or blanks and CRLF. */
static size_t next_delimiter(const char *body, size_t len, size_t from, const char *delim, size_t dlen)
{
    for (size_t at = from; at + dlen <= len; ++at) {
        size_t p = at + dlen;
        if (memcmp(body + at, delim, dlen) != 0)
            continue;
        if (len - p >= 2 && memcmp(body + p, "--", 2) == 0)
            return at;
        while (p < len && (body[p] == ' ' || body[p] == '\t'))
            ++p;
        if (len - p >= 2 && memcmp(body + p, "\r\n", 2) == 0)
            return at;
    }
    return SIZE_MAX;
}

static void check_parts(const char *body, size_t len, const char *boundary, const gw_multipart_part_t *parts, size_t n)
{
    char delim[GW_MULTIPART_BOUNDARY_MAX + 5];
    size_t dlen = (size_t)snprintf(delim, sizeof(delim), "\r\n--%s", boundary), end = 0;

    FUZZ_CHECK(n <= MAX_PARTS, "%zu parts", n);
    for (size_t i = 0; i != n; ++i) {
        const gw_multipart_part_t *part = &parts[i];
        FUZZ_CHECK(part->data_off >= end && part->data_off <= len && part->data_len <= len - part->data_off,
                   "part %zu out of order", i);
        /* a part's data ends at the first real delimiter after it starts */
        FUZZ_CHECK(next_delimiter(body, len, part->data_off, delim, dlen) == part->data_off + part->data_len,
                   "part %zu does not end at the next delimiter", i);
        FUZZ_CHECK(memchr(part->name, '\0', sizeof(part->name)) != NULL &&
                       memchr(part->filename, '\0', sizeof(part->filename)) != NULL,
                   "part %zu: unterminated name", i);
        FUZZ_CHECK(part->has_filename == 0 || part->has_filename == 1, "part %zu: has_filename %d", i, part->has_filename);
        FUZZ_CHECK(part->has_filename || part->filename[0] == '\0', "part %zu: a filename without has_filename", i);
        end = part->data_off + part->data_len + dlen;
    }
}

/* One parse in SMALL_WINDOW windows, in one step. */
static int parse_small(const char *body, size_t len, const char *boundary, gw_multipart_part_t *parts, size_t *n,
                       progress_t *progress)
{
    gw_multipart_parser_t p;
    int ret;

    *n = 0;
    if ((ret = gw_multipart_parser_init(&p, body, len, boundary, parts, MAX_PARTS, on_progress, progress)) != 0)
        return ret;
    p.window = SMALL_WINDOW;
    if ((ret = gw_multipart_parser_step(&p, SIZE_MAX)) == 0)
        *n = p.num_parts;
    return ret;
}

/*
 * The input: a Content-Type line, then the body. With a boundary, the body is parsed twice, in
 * 8 MiB windows (one, here) and in SMALL_WINDOW-byte windows: the results must be the same, progress must go
 * forward and never come back to a byte it released (poisoned), and on success each part must
 * end exactly at the first delimiter after its start.
 */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *rest = (const char *)data, *line;
    size_t len = size, line_len, n_big = 0, n_small = 0;
    char boundary[GW_MULTIPART_BOUNDARY_MAX + 1], again[GW_MULTIPART_BOUNDARY_MAX + 1];
    gw_multipart_part_t big[MAX_PARTS], small[MAX_PARTS];
    char *content_type, *body;
    progress_t progress_big, progress_small;
    int ret, ret_small;

    fuzz_take_line(&rest, &len, &line, &line_len);
    content_type = fuzz_copy(line, line_len);
    ret = gw_multipart_boundary(content_type, line_len, boundary);
    FUZZ_CHECK(ret == gw_multipart_boundary(content_type, line_len, again), "boundary differs");
    free(content_type);
    if (ret != 0) {
        FUZZ_CHECK(ret == GW_EMULTIPART_NOBOUNDARY, "gw_multipart_boundary returned %d", ret);
        return 0;
    }
    FUZZ_CHECK(strcmp(boundary, again) == 0 && boundary[0] != '\0', "boundary \"%s\" or \"%s\"", boundary, again);

    body = fuzz_copy(rest, len);
    progress_big = (progress_t){body, len, 0, 0};
    ret = gw_multipart_parse(body, len, boundary, big, MAX_PARTS, &n_big, on_progress, &progress_big);
    ASAN_UNPOISON_MEMORY_REGION(body, len);
    progress_small = (progress_t){body, len, 0, 0};
    ret_small = parse_small(body, len, boundary, small, &n_small, &progress_small);
    ASAN_UNPOISON_MEMORY_REGION(body, len);

    FUZZ_CHECK(ret == ret_small && n_big == n_small, "windows change the result: %d (%zu parts) and %d (%zu parts)", ret, n_big,
               ret_small, n_small);
    /* in steps of one window each, as an upload is parsed between loop iterations */
    {
        gw_multipart_part_t stepped[MAX_PARTS];
        gw_multipart_parser_t p;
        int ret_step = gw_multipart_parser_init(&p, body, len, boundary, stepped, MAX_PARTS, NULL, NULL);
        p.window = SMALL_WINDOW;
        if (ret_step == 0)
            while ((ret_step = gw_multipart_parser_step(&p, 1)) == 1)
                ;
        FUZZ_CHECK(ret_step == ret, "steps change the result: %d and %d", ret, ret_step);
        FUZZ_CHECK(ret != 0 || (p.num_parts == n_big && memcmp(big, stepped, n_big * sizeof(big[0])) == 0),
                   "steps change the parts");
    }
    FUZZ_CHECK(ret == 0 || ret == GW_EMULTIPART_MALFORMED || ret == GW_EMULTIPART_TOOMANYPARTS || ret == GW_EMULTIPART_NOBOUNDARY,
               "gw_multipart_parse returned %d", ret);
    if (ret == 0) {
        FUZZ_CHECK(progress_big.upto == len && progress_small.upto == len, "success without reporting the whole body");
        FUZZ_CHECK(memcmp(big, small, n_big * sizeof(big[0])) == 0, "windows change the parts");
        check_parts(body, len, boundary, big, n_big);
    }
    free(body);
    return 0;
}
