/* tests/wire/test_text_scan.c: the streaming scan of stream content fed whole, split at every byte, and byte by byte. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include "wire/text_scan.h"
#include "wire_test.h"

TestSuite(text_scan, .init = wire_test_init);

/* A valid content: `before` "text" token `inner` `after`, the name it says. */
typedef struct {
    const char *before, *inner, *after, *name;
} good_case_t;

static const good_case_t good[] = {
    /* ipykernel's json.dumps */
    {"{\"name\": \"stdout\", \"text\": \"", "hello world\\n", "\"}", "stdout"},
    /* compact (orjson), text first */
    {"{\"text\":\"", "abc", "\",\"name\":\"stderr\"}", "stderr"},
    /* every escape, raw multi-byte characters, \u escapes of 1 to 3 bytes, a surrogate pair, NUL */
    {"{\"name\":\"stdout\",\"text\":\"",
     "\\\"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \\u0000\\u00e9\\u20AC\\ud83d\\ude00!", "\"}",
     "stdout"},
    /* escaped keys, other members of every kind around, nested values with strings that hold brackets and quotes */
    {" \r\n{ \"n\\u0061me\" : \"std\\u006fut\" , \"x\": {\"a\": [1, -2.5e+3, true, null, {\"}\": \"]\\\"\"}]}, \"te\\u0078t\": \"",
     "\xe2\x82\xac\xe2\x82\xac\\n", "\", \"y\": false, \"z\": [] , \"w\": {} } \n", "stdout"},
    /* a repeated name: the last counts; an empty text */
    {"{\"name\":\"stderr\",\"text\":\"", "", "\",\"name\":\"stdout\"}", "stdout"},
    /* a name longer than kept */
    {"{\"name\":\"nnnnnnnnnnnnnnnnn\",\"text\":\"", "xy", "\"}", NULL},
};

typedef struct {
    wire_text_scan_status_t end;
    char head[256];
    size_t head_len, head_decoded;
    uint64_t rest;
    wire_text_scan_t s;
} result_t;

/* Scans `json` in pieces cut at `cuts` (ascending, ncuts of them); every piece an exact-size copy. */
static void scan_pieces(const char *json, size_t len, const size_t *cuts, size_t ncuts, size_t budget, result_t *r)
{
    size_t from = 0;

    memset(r, 0, sizeof(*r));
    wire_text_scan_init(&r->s, r->head, budget);
    for (size_t i = 0; i <= ncuts; ++i) {
        size_t to = i < ncuts ? cuts[i] : len;
        void *piece = wire_test_exact_copy(json + from, to - from);
        wire_text_scan_feed(&r->s, piece, to - from);
        free(piece);
        from = to;
    }
    r->end = wire_text_scan_end(&r->s);
    r->head_len = r->s.head_len;
    r->head_decoded = r->s.head_decoded;
    r->rest = r->s.rest_decoded;
}

/* The length of the character at the start of the inside of a token (an escape, a pair, a UTF-8 sequence). */
static size_t char_len(const char *p)
{
    if (p[0] == '\\')
        return p[1] != 'u' ? 2
               : (strncmp(p + 2, "d8", 2) == 0 || strncmp(p + 2, "d9", 2) == 0 || strncmp(p + 2, "da", 2) == 0 ||
                  strncmp(p + 2, "db", 2) == 0)
                   ? 12
                   : 6;
    unsigned char c = (unsigned char)p[0];
    return c < 0x80 ? 1 : c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
}

/* What a result must be for case `c` and `budget`: the head is the longest whole-character prefix of `inner` within the budget,
 * it decodes to the start of the text, and head and rest together are the text's decoded length. */
static void check_good(const good_case_t *c, size_t budget, const result_t *r, const char *how)
{
    char json[512], token[256];
    size_t inner_len = strlen(c->inner), want = 0;
    json_error_t err;

    snprintf(json, sizeof(json), "%s%s%s", c->before, c->inner, c->after);
    json_t *whole = json_loads(json, JSON_ALLOW_NUL, &err);
    cr_assert_not_null(whole, "%s", err.text);
    json_t *text = json_object_get(whole, "text");
    while (want < inner_len && want + char_len(c->inner + want) <= budget)
        want += char_len(c->inner + want);

    cr_assert_eq(r->end, WIRE_TEXT_SCAN_DONE, "%s: %s", how, json);
    cr_assert_eq(r->head_len, want, "%s, budget %zu: head of %zu bytes, want %zu", how, budget, r->head_len, want);
    cr_assert(memcmp(r->head, c->inner, want) == 0, "%s, budget %zu: the head is not the token's start: %.*s", how, budget,
              (int)want, r->head);
    snprintf(token, sizeof(token), "\"%.*s\"", (int)r->head_len, r->head);
    json_t *head = json_loads(token, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    cr_assert_not_null(head, "%s: head %s: %s", how, token, err.text);
    cr_assert_eq(json_string_length(head), r->head_decoded, "%s", how);
    cr_assert(memcmp(json_string_value(head), json_string_value(text), r->head_decoded) == 0, "%s", how);
    cr_assert_eq(r->head_decoded + r->rest, json_string_length(text), "%s, budget %zu: %zu + %llu != %zu", how, budget,
                 r->head_decoded, (unsigned long long)r->rest, json_string_length(text));
    if (c->name != NULL) {
        cr_assert(!r->s.name_long && r->s.name_len == strlen(c->name) && memcmp(r->s.name, c->name, r->s.name_len) == 0,
                  "%s: name %.*s", how, (int)r->s.name_len, r->s.name);
    } else {
        cr_assert(r->s.name_long, "%s", how);
    }
    json_decref(head);
    json_decref(whole);
}

Test(text_scan, finds_the_head_and_counts_the_rest_at_every_split_and_budget)
{
    for (size_t k = 0; k != sizeof(good) / sizeof(good[0]); ++k) {
        const good_case_t c = good[k];
        char json[512], how[64];
        snprintf(json, sizeof(json), "%s%s%s", c.before, c.inner, c.after);
        size_t len = strlen(json), inner_len = strlen(c.inner);
        for (size_t budget = 0; budget <= inner_len + 1; ++budget) {
            result_t r;
            scan_pieces(json, len, NULL, 0, budget, &r);
            snprintf(how, sizeof(how), "case %zu whole", k);
            check_good(&c, budget, &r, how);
            for (size_t cut = 0; cut <= len; ++cut) {
                scan_pieces(json, len, &cut, 1, budget, &r);
                snprintf(how, sizeof(how), "case %zu split at %zu", k, cut);
                check_good(&c, budget, &r, how);
            }
            size_t *cuts = malloc(len * sizeof(*cuts));
            for (size_t i = 0; i != len; ++i)
                cuts[i] = i;
            scan_pieces(json, len, cuts, len, budget, &r);
            free(cuts);
            snprintf(how, sizeof(how), "case %zu byte by byte", k);
            check_good(&c, budget, &r, how);
        }
    }
}

Test(text_scan, counts_a_text_far_beyond_its_budget_exactly)
{
    enum { N = 3000000 };
    static const char open[] = "{\"name\": \"stdout\", \"text\": \"";
    char *json = malloc(sizeof(open) + N * 2 + 8), head[1000];
    size_t len = sizeof(open) - 1;
    wire_text_scan_t s;

    memcpy(json, open, len);
    for (size_t i = 0; i != N / 3; ++i) {
        memcpy(json + len, "ab\\n", 4); /* 3 decoded bytes in 4 */
        len += 4;
    }
    memcpy(json + len, "\"}", 2);
    len += 2;
    wire_text_scan_init(&s, head, sizeof(head));
    for (size_t off = 0; off < len; off += 4093)
        cr_assert_eq(wire_text_scan_feed(&s, json + off, len - off < 4093 ? len - off : 4093), WIRE_TEXT_SCAN_MORE);
    cr_assert_eq(wire_text_scan_end(&s), WIRE_TEXT_SCAN_DONE);
    /* 1000 bytes: 250 whole "ab\n", never half an escape */
    cr_assert_eq(s.head_len, 1000);
    cr_assert_eq(s.head_decoded, 750);
    cr_assert_eq(s.rest_decoded, (uint64_t)N - 750);
    free(json);
}

/* Contents that are not a stream's: each refused at every split, with nothing after the bad byte in the head. */
static const char *const bad[] = {
    "",
    "[]",
    "{}",
    "{\"name\":\"stdout\"}",
    "{\"text\":\"a\"}",
    "{\"name\":\"stdout\",\"text\":1}",
    "{\"name\":1,\"text\":\"a\"}",
    "{\"name\":\"stdout\",\"text\":\"a\",\"text\":\"b\"}",
    "{\"name\":\"stdout\",\"text\":\"\\x\"}",
    "{\"name\":\"stdout\",\"text\":\"\\ud800\"}",
    "{\"name\":\"stdout\",\"text\":\"\\udc00\"}",
    "{\"name\":\"stdout\",\"text\":\"\\ud800\\u0041\"}",
    "{\"name\":\"stdout\",\"text\":\"\\u12g4\"}",
    "{\"name\":\"stdout\",\"text\":\"a\tb\"}",
    "{\"name\":\"stdout\",\"text\":\"\xc0\x80\"}",
    "{\"name\":\"stdout\",\"text\":\"\xed\xa0\x80\"}",
    "{\"name\":\"stdout\",\"text\":\"\xe2\x82\"}",
    "{\"name\":\"stdout\",\"text\":\"\xff\"}",
    "{\"name\":\"stdout\",\"text\":\"open",
    "{\"name\":\"stdout\",\"text\":\"a\"} x",
    "{\"name\":\"stdout\",\"text\":\"a\",\"x\":[}]}",
    "{\"name\":\"stdout\",\"text\":\"a\",\"x\":]}",
    "{\"name\":\"stdout\",\"text\":\"a\",}",
    "{\"name\":\"stdout\" \"text\":\"a\"}",
    "{\"name\":\"stdout\",\"text\":\"a\",\"x\":\"\x01\"}",
    /* a key holding U+0000, which wire_json_parse (and jansson) refuse in a key though not in a value */
    "{\"name\":\"stdout\",\"text\":\"a\",\"x\\u0000\":1}",
    "{\"te\\u0000\":\"b\",\"name\":\"stdout\",\"text\":\"a\"}",
};

Test(text_scan, refuses_what_is_not_a_stream_content_at_every_split)
{
    for (size_t k = 0; k != sizeof(bad) / sizeof(bad[0]); ++k) {
        size_t len = strlen(bad[k]);
        for (size_t cut = 0; cut <= len; ++cut) {
            result_t r;
            scan_pieces(bad[k], len, &cut, 1, 64, &r);
            cr_assert_eq(r.end, WIRE_TEXT_SCAN_BAD, "bad case %zu (%s) split at %zu was accepted", k, bad[k], cut);
        }
    }
}

Test(text_scan, refuses_nesting_past_its_depth)
{
    char json[512];
    size_t len = (size_t)snprintf(json, sizeof(json), "{\"name\":\"stdout\",\"text\":\"a\",\"x\":");
    wire_text_scan_t s;

    for (int i = 0; i <= WIRE_TEXT_SCAN_MAX_DEPTH; ++i)
        json[len++] = '[';
    wire_text_scan_init(&s, NULL, 0);
    cr_assert_eq(wire_text_scan_feed(&s, json, len), WIRE_TEXT_SCAN_BAD);
    /* one level less is fine */
    len -= 1;
    for (int i = 0; i != WIRE_TEXT_SCAN_MAX_DEPTH; ++i)
        json[len++] = ']';
    json[len++] = '}';
    wire_text_scan_init(&s, NULL, 0);
    cr_assert_eq(wire_text_scan_feed(&s, json, len), WIRE_TEXT_SCAN_MORE);
    cr_assert_eq(wire_text_scan_end(&s), WIRE_TEXT_SCAN_DONE);
    cr_assert_eq(s.rest_decoded, 1);
}

Test(text_scan, string_prefix_cuts_between_characters)
{
    static const char inner[] = "a\xc3\xa9\\n\\u20ac\\ud83d\\ude00\xf0\x9f\x98\x80z";
    /* characters: a(1/1) é(2/2) \n(2/1) €(6/3) pair(12/4) raw emoji(4/4) z(1/1) */
    static const size_t budgets[] = {0, 1, 2, 3, 4, 6, 7, 10, 11, 14, 15, 16, 100};
    static const size_t want_raw[] = {0, 1, 1, 3, 5, 5, 11, 11, 23, 23, 27, 28, 28};
    static const size_t want_dec[] = {0, 1, 1, 3, 4, 4, 7, 7, 11, 11, 15, 16, 16};
    for (size_t i = 0; i != sizeof(budgets) / sizeof(budgets[0]); ++i) {
        size_t dec, raw = wire_json_string_prefix(inner, sizeof(inner) - 1, budgets[i], &dec);
        cr_assert_eq(raw, want_raw[i], "budget %zu: %zu bytes, want %zu", budgets[i], raw, want_raw[i]);
        cr_assert_eq(dec, want_dec[i], "budget %zu: decodes to %zu, want %zu", budgets[i], dec, want_dec[i]);
    }
}
