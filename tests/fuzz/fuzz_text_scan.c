/* tests/fuzz/fuzz_text_scan.c: the streaming scan of stream content (wire/text_scan.h) on any bytes, whole and in pieces: the same
 * result however split, a head that is valid JSON string text within its budgets (bytes, and decoded bytes as kernelmgr's
 * overcap.c sets them), and the same text as the whole-content scan, of which the head is the longest prefix in budget. */
#include <jansson.h>
#include "fuzz.h"
#include "wire/alloc.h"
#include "wire/json_scan.h"
#include "wire/text_scan.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    wire_global_init();
    return 0;
}

typedef struct {
    wire_text_scan_status_t status;
    wire_text_scan_t s;
    char *head;
} scan_t;

/* Scans `data` in pieces of `piece` bytes (0: whole), each an exact-size copy. */
static void scan(const uint8_t *data, size_t size, size_t budget, size_t decoded_max, size_t piece, scan_t *out)
{
    out->head = malloc(budget != 0 ? budget : 1);
    wire_text_scan_init(&out->s, out->head, budget);
    out->s.head_decoded_max = decoded_max;
    for (size_t off = 0; off < size;) {
        size_t n = piece == 0 || size - off < piece ? size - off : piece;
        char *copy = fuzz_copy(data + off, n);
        wire_text_scan_feed(&out->s, copy, n);
        free(copy);
        off += n;
    }
    out->status = wire_text_scan_end(&out->s);
}

static void same(const scan_t *a, const scan_t *b, size_t piece)
{
    FUZZ_CHECK(a->status == b->status, "status %d whole, %d in pieces of %zu", a->status, b->status, piece);
    if (a->status != WIRE_TEXT_SCAN_DONE)
        return;
    FUZZ_CHECK(a->s.head_len == b->s.head_len && memcmp(a->head, b->head, a->s.head_len) == 0, "head differs (pieces %zu)", piece);
    FUZZ_CHECK(a->s.head_decoded == b->s.head_decoded && a->s.rest_decoded == b->s.rest_decoded, "counts differ (pieces %zu)",
               piece);
    FUZZ_CHECK(a->s.name_len == b->s.name_len && a->s.name_long == b->s.name_long &&
                   memcmp(a->s.name, b->s.name, a->s.name_len) == 0,
               "name differs (pieces %zu)", piece);
}

/* The longest prefix of the inside of a valid string token within `raw_max` bytes that decodes to at most `dec_max`, whole
 * characters only (plain reference code: a valid token's escapes and UTF-8 sequences are whole). */
static size_t longest_head(const char *inner, size_t len, size_t raw_max, size_t dec_max, size_t *decoded)
{
    size_t i = 0, n = 0;

    while (i < len) {
        unsigned char c = (unsigned char)inner[i];
        size_t raw = 1, dec = 1;
        if (c == '\\' && inner[i + 1] == 'u') {
            char hex[5] = {inner[i + 2], inner[i + 3], inner[i + 4], inner[i + 5], '\0'};
            unsigned long cp = strtoul(hex, NULL, 16);
            raw = cp >= 0xd800 && cp <= 0xdbff ? 12 : 6;
            dec = raw == 12 ? 4 : cp < 0x80 ? 1 : cp < 0x800 ? 2 : 3;
        } else if (c == '\\') {
            raw = 2;
        } else if (c >= 0x80) {
            raw = dec = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
        }
        if (raw > raw_max - i || dec > dec_max - n)
            break;
        i += raw;
        n += dec;
    }
    *decoded = n;
    return i;
}

/* The input: a byte for the budgets (below 200: that many bytes; 200 to 254: 64 bytes that decode to at most the byte less
 * 200, as overcap.c bounds a head by a reader's room; 255: 1 MiB), then the content. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const size_t pieces[] = {1, 2, 3, 7, 64};
    scan_t whole, split;
    size_t budget, decoded_max = SIZE_MAX;

    if (size < 1)
        return 0;
    budget = data[0] < 200 ? data[0] : data[0] < 255 ? 64 : 1u << 20;
    if (data[0] >= 200 && data[0] < 255)
        decoded_max = data[0] - 200u;
    ++data, --size;
    scan(data, size, budget, decoded_max, 0, &whole);
    for (size_t i = 0; i != sizeof(pieces) / sizeof(pieces[0]); ++i) {
        scan(data, size, budget, decoded_max, pieces[i], &split);
        same(&whole, &split, pieces[i]);
        free(split.head);
    }
    if (whole.status == WIRE_TEXT_SCAN_DONE) {
        size_t dec;
        char *token = malloc(whole.s.head_len + 2);
        json_error_t err;
        FUZZ_CHECK(whole.s.head_len <= budget && whole.s.head_decoded <= whole.s.head_len && whole.s.head_decoded <= decoded_max,
                   "head %zu (%zu decoded) over budget %zu (%zu decoded)", whole.s.head_len, whole.s.head_decoded, budget,
                   decoded_max);
        token[0] = '"';
        memcpy(token + 1, whole.head, whole.s.head_len);
        token[whole.s.head_len + 1] = '"';
        json_t *head = json_loadb(token, whole.s.head_len + 2, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
        FUZZ_CHECK(head != NULL, "the head is not JSON string text: %s", err.text);
        FUZZ_CHECK(json_string_length(head) == whole.s.head_decoded, "head decodes to %zu, not %zu", json_string_length(head),
                   whole.s.head_decoded);
        FUZZ_CHECK(wire_json_string_prefix(whole.head, whole.s.head_len, whole.s.head_decoded, &dec) == whole.s.head_len &&
                       dec == whole.s.head_decoded,
                   "wire_json_string_prefix disagrees on the head");
        json_decref(head);
        free(token);
    }
    /* content the whole-message scan finds simple is a stream content: same text length, the head its token's start */
    wire_stream_fields_t f;
    char *copy = fuzz_copy(data, size);
    if (wire_json_scan_stream(copy, size, &f)) {
        FUZZ_CHECK(whole.status == WIRE_TEXT_SCAN_DONE, "a simple content was refused");
        FUZZ_CHECK(whole.s.head_decoded + whole.s.rest_decoded == f.text_decoded_len, "text of %zu + %llu bytes, not %zu",
                   whole.s.head_decoded, (unsigned long long)whole.s.rest_decoded, f.text_decoded_len);
        FUZZ_CHECK(whole.s.head_len <= f.text_len - 2 && memcmp(whole.head, f.text + 1, whole.s.head_len) == 0,
                   "the head is not the start of the text token");
        size_t want_decoded, want = longest_head(f.text + 1, f.text_len - 2, budget, decoded_max, &want_decoded);
        FUZZ_CHECK(whole.s.head_len == want && whole.s.head_decoded == want_decoded,
                   "a head of %zu bytes (%zu decoded), not the longest in budget: %zu (%zu)", whole.s.head_len,
                   whole.s.head_decoded, want, want_decoded);
    }
    free(copy);
    free(whole.head);
    return 0;
}
